"""The maths: IGEL's embedding layer e_n = x_nᵀ W (paper Eq. SimpleModel) and the skip-gram loss."""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn.functional as F
from torch import nn

from igel_exp.errors import ConfigError
from igel_exp.walks import positive_pairs, widest_window

# torch's notices on the CSR matrices this module builds (from CSR arrays already in order, so unchecked on purpose):
# CSR support in beta, and (torch 2.11 on CUDA, on every matrix, even with check_invariants=False) unchecked invariants
warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
warnings.filterwarnings("ignore", message="Sparse invariant checks are implicitly disabled")


# trainer.precision → the dtype of the products of X's dense columns with W and with W's gradient, the arithmetic of
# a step's two largest products (Facebook: 4,039 × 364 by 364 × 256, each way). bfloat16 multiplies at 2.2-3× the
# speed of float32 on CPUs with AVX512-BF16 (and GPUs' tensor cores), accumulating in float32; X's entries and the
# products keep 8 bits of mantissa (relative error 0.4 %). W, its gradient's sum with the sparse part, Adam and
# every other product stay float32. float32, the default, is what the tables were made with. The supervised trainer's
# MLP (NodeClassifier) runs under autocast at that dtype.
PRECISIONS = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def precision_dtype(precision: str) -> torch.dtype:
    """The dtype of trainer.precision; an unknown one is a one-line ConfigError naming the key."""
    if precision not in PRECISIONS:
        raise ConfigError(f"trainer.precision={precision!r} is not one of {', '.join(PRECISIONS)}")
    return PRECISIONS[precision]


# torch's fused Adam on the CPU updates a tensor 16 floats at a time (AVX-512; 8 with AVX2) and its last numel mod 16
# in a scalar loop, which now and then rounds differently: only rows of whole vectors keep each element in the same
# loop when rows are dropped (IGELEmbedding.over_columns_in_use).
ADAM_LANES = 16


class IGELEmbedding(nn.Module):
    """Embeds nodes as the weighted sum of the rows of W selected by their sparse IGEL features.

    The features (|V| × ℓ, already transformed and normalised) are fixed buffers; only W (ℓ × d) learns.
    They are kept dense when there are few (ℓ ≤ DENSE_WIDTH) and at least one in DENSE_FILL is nonzero, as
    for Erdős–Rényi graphs: a batch is then a gather of rows and one matrix product each way, faster than
    gathering sparse rows entry by entry. Otherwise only the columns that at least one node in HOT_FILL has are
    dense — as dense they take no more memory than in the two sparse copies below (24 bytes a nonzero) — and the
    rest is CSR (with its transpose, for X @ W's gradient). Those few columns hold most entries (Facebook: 364
    of 9,414 columns, 83% of the entries) and made the sparse products 2× (Facebook) to 3.5× (AstroPh, α = 3)
    slower than they are split; all-dense products of Facebook's features were 5× slower still.
    """

    DENSE_WIDTH = 256
    DENSE_FILL = 32
    HOT_FILL = 6
    # A sparse batch of at least |V| / REPEATS ids repeats many: each distinct node is embedded once. With
    # AstroPh's α = 3 features (385 per node) a batch of 13,000 ids holds 9,200 distinct, 28% less work for one
    # sort; smaller batches repeat too few ids to pay for the sort.
    REPEATS = 4

    def __init__(
        self, features: sp.csr_matrix, dim: int, precision: str = "float32", weight: nn.Parameter | None = None
    ):
        """`weight`: a W (ℓ × d) to share, e.g. with a layer over other rows of the same features; by default a new
        one, drawn from torch's generator."""
        super().__init__()
        dtype = precision_dtype(precision)
        features = sp.csr_matrix(features, dtype=np.float32)
        self.precision = precision
        n_nodes, width = features.shape
        dense = self.keeps_dense(n_nodes, width, features.nnz)
        hot = np.bincount(features.indices, minlength=width) * self.HOT_FILL >= max(n_nodes, 1)
        hot |= dense
        # the dense columns, in the dtype of their products with W (see PRECISIONS)
        self.register_buffer("rows", torch.as_tensor(features[:, hot].toarray()).to(dtype))
        self.register_buffer("hot", None if dense else torch.as_tensor(np.flatnonzero(hot)))  # None: all of them
        if not dense:
            sparse = features.copy()
            sparse.data[hot[sparse.indices]] = 0.0
            sparse.eliminate_zeros()
            for name, matrix in [("", sparse), ("t_", sparse.T.tocsr())]:
                self.register_buffer(f"{name}indptr", torch.as_tensor(matrix.indptr, dtype=torch.int64))
                self.register_buffer(f"{name}indices", torch.as_tensor(matrix.indices, dtype=torch.int64))
                self.register_buffer(f"{name}values", torch.as_tensor(matrix.data, dtype=torch.float32))
        if weight is not None:
            if weight.shape[0] != width:
                raise ValueError(f"a shared W has {weight.shape[0]} rows, the features {width} columns")
            self.weight = weight
            return
        self.weight = nn.Parameter(normal_weight(width, dim))
        # Structures never seen in training get no gradient; a zero row keeps them out of unseen graphs.
        with torch.no_grad():
            seen = torch.zeros(width, dtype=torch.bool)
            seen[torch.as_tensor(features.indices, dtype=torch.int64)] = True
            self.weight[~seen] = 0.0

    def by_distinct_rows(self) -> tuple[IGELEmbedding, np.ndarray]:
        """This layer over each distinct row of X once, sharing W (on W's device), and each node's row in it (|V|,
        int64, rows numbered by their first node). Nodes with equal features have equal embeddings: the authors'
        batches (trainer.batching=buckets) score pairs of these rows, 785 for Sister Cities' 11,618 nodes at α = 1,
        and each step embeds them instead of every node. Equal in value to the per-node layer, not in float
        rounding: the gradients of a row's nodes are summed before Xᵀ multiplies them."""
        features = self.feature_matrix()
        first: dict[bytes, int] = {}
        rows = np.empty(features.shape[0], dtype=np.int64)
        for node, (start, end) in enumerate(itertools.pairwise(features.indptr)):
            key = features.indices[start:end].tobytes() + features.data[start:end].tobytes()
            rows[node] = first.setdefault(key, len(first))
        representatives = np.unique(rows, return_index=True)[1]  # each row's first node, in row order
        distinct = IGELEmbedding(features[representatives], self.weight.shape[1], self.precision, self.weight)
        return distinct.to(self.weight.device), rows

    @contextlib.contextmanager
    def over_columns_in_use(self) -> Iterator[IGELEmbedding]:
        """A layer over only the columns of X that some node has, with a W of its own holding their rows, which go back
        into this layer's W when the block is left, however it is left; this layer itself where every column is in use,
        X is all dense (whose products would change with its width) or d is not a multiple of ADAM_LANES.

        An encoding's layout has a column for every (distance, degree) up to the largest degree, most of which no node
        has (Facebook: 1,904 of 9,414; AstroPh at α = 3: 2,641 of 6,060). Their rows of W never change: zero, and zero
        gradients leave Adam's update zero. Yet every step summed Xᵀ's empty bags into W's gradient and ran Adam over
        them: 70 MB of memory traffic a Facebook step. The layer over the columns in use makes the same sums in the
        same order (its CSR part keeps each row's entries in order) and the same updates: training it gives the same
        bits."""
        width, dim = self.weight.shape
        in_use = None
        if not self.dense and dim % ADAM_LANES == 0:
            in_use = self.t_indptr[1:] > self.t_indptr[:-1]  # the columns with entries in the CSR part, and the dense
            in_use[self.hot] = True
        if in_use is None or bool(in_use.all()):
            yield self
            return
        used = in_use.nonzero().view(-1)
        position = torch.cumsum(in_use, 0) - 1  # each column in use's number among them
        layer = IGELEmbedding.__new__(IGELEmbedding)
        nn.Module.__init__(layer)
        layer.precision = self.precision
        for name, buffer in self.named_buffers(recurse=False):
            layer.register_buffer(name, buffer)
        layer.hot, layer.indices = position[self.hot], position[self.indices]
        layer.t_indptr = self.t_indptr[torch.cat([used, used.new_tensor([width])])]  # the unused bags are empty
        layer.weight = nn.Parameter(self.weight.detach()[used].clone())
        try:
            yield layer
        finally:
            with torch.no_grad():
                self.weight.index_copy_(0, used, layer.weight)

    def feature_matrix(self) -> sp.csr_matrix:
        """X (|V| × ℓ, float32 CSR, each row's columns sorted) from the layer's buffers: its dense columns, with the
        values their precision keeps, and its CSR part."""
        dense = sp.csr_matrix(self.rows.float().cpu().numpy())
        if self.dense:
            return dense
        shape = (self.n_nodes, self.weight.shape[0])
        dense = sp.csr_matrix((dense.data, self.hot.cpu().numpy()[dense.indices], dense.indptr), shape=shape)
        parts = (self.values, self.indices, self.indptr)
        matrix = dense + sp.csr_matrix(tuple(part.cpu().numpy() for part in parts), shape=shape)
        matrix.sum_duplicates()  # sorts each row's columns
        return matrix

    @classmethod
    def keeps_dense(cls, n_nodes: int, width: int, nonzeros: float) -> bool:
        """Whether features of this shape and number of nonzeros are kept dense."""
        return width <= cls.DENSE_WIDTH and n_nodes * width <= cls.DENSE_FILL * nonzeros

    @property
    def dense(self) -> bool:
        """Whether all of X is dense (no CSR part)."""
        return self.hot is None

    def negatives_as_features(self, n_ids: int) -> bool:
        """Whether the negatives of a batch of n_ids ids stay rows of X (FeatureNegatives): when all of X is dense
        and the batch would be embedded id by id."""
        return self.dense and n_ids < self.n_nodes

    def looks_up_whole(self, n_ids: int) -> bool:
        """Whether `lookup` of n_ids ids gives every node's table (the same table whatever the ids): at least as many
        ids as nodes or, on a GPU, X with a CSR part, whose rows would be gathered with a host synchronisation."""
        return n_ids >= self.n_nodes or (self.rows.is_cuda and not self.dense)

    @property
    def n_nodes(self) -> int:
        return len(self.rows)

    def all_nodes(self) -> torch.Tensor:
        """Embeddings of every node (|V| × d) as one product X @ W."""
        return _Lookup.apply(self.weight, self, None)

    def forward(self, nodes: torch.Tensor) -> torch.Tensor:
        """Embeddings (len(nodes) × d) of the given node ids."""
        return _Lookup.apply(self.weight, self, nodes)

    @torch.no_grad()
    def lookup(self, nodes: torch.Tensor | None) -> tuple[torch.Tensor, Lookup]:
        """A table of embeddings that holds those of `nodes` (every node for None), without autograd, and the
        lookup: each id's row in the table (`index`, None when the table has one row per id) and what
        `weight_gradient` needs.

        The table is every node's, one product X @ W, where `looks_up_whole`; each distinct id's when the ids of a
        sparse batch repeat many; otherwise the ids' own rows.
        """
        n_ids = self.n_nodes if nodes is None else len(nodes)
        if nodes is None or self.looks_up_whole(n_ids):
            rows, index = None, nodes
        elif not self.dense and not self.rows.is_cuda and self.REPEATS * n_ids >= self.n_nodes:
            rows, index = distinct_ids(nodes, self.n_nodes)
        else:
            rows, index = nodes, None
        dense_rows = self.rows if rows is None else self.feature_rows(rows)
        embeddings = _product(dense_rows, self._dense_weight())
        sparse = None
        if not self.dense:
            sparse = self._csr(rows, as_matrices=self.rows.is_cuda)
            embeddings += sparse.embed(self.weight.detach())
        return embeddings, Lookup(index, dense_rows, sparse)

    @torch.no_grad()
    def embed_rows(self, rows: torch.Tensor) -> tuple[torch.Tensor, Lookup]:
        """The embeddings of rows of an all-dense X (feature_rows, n × ℓ), and their lookup: what `lookup` gives for
        their ids where it embeds them one by one."""
        return _product(rows, self.weight), Lookup(None, rows, None)

    def feature_rows(self, nodes: torch.Tensor) -> torch.Tensor:
        """X's dense columns of `nodes` (nodes' shape × their number). Where all of X is dense, on the CPU, they are
        read as bags of one row: embedding_bag prefetches the rows it reads, 1.4× faster than index_select from an X
        that no cache holds (2^20 × 78), and the same values. Otherwise index_select gathers them (on a GPU,
        capturable)."""
        if self.dense and self.rows.device.type == "cpu":
            rows = F.embedding_bag(nodes.reshape(-1, 1), self.rows, mode="sum")
        else:
            rows = self.rows.index_select(0, nodes.reshape(-1))
        return rows.view(*nodes.shape, -1)

    @torch.no_grad()
    def weight_gradient(self, lookup: Lookup, grad: torch.Tensor) -> torch.Tensor:
        """dL/dW (ℓ × d) from dL/d(table) of a `lookup` (a gradient per row of its table): Xᵀ @ grad."""
        dense = _product(lookup.dense_rows.T, grad)
        if self.dense:
            return dense
        return lookup.sparse.transposed_product(grad, self.weight.shape[0]).index_add_(0, self.hot, dense)

    def _dense_weight(self) -> torch.Tensor:
        return self.weight if self.dense else self.weight.index_select(0, self.hot)

    def _csr(self, nodes: torch.Tensor | None, as_matrices: bool = False) -> _SparseRows:
        """The CSR part of the rows of `nodes` (every node for None; with `as_matrices`, as torch CSR matrices)."""
        if nodes is None:
            matrices = None
            if as_matrices:
                shape = (self.n_nodes, self.weight.shape[0])
                matrices = (
                    torch.sparse_csr_tensor(self.indptr, self.indices, self.values, shape, check_invariants=False),
                    torch.sparse_csr_tensor(
                        self.t_indptr, self.t_indices, self.t_values, shape[::-1], check_invariants=False
                    ),
                )
            transposed = (self.t_indices, self.t_values, self.t_indptr[:-1])
            return _SparseRows(self.indices, self.values, self.indptr[:-1], transposed, matrices=matrices)
        starts = self.indptr.index_select(0, nodes)
        lengths = self.indptr.index_select(0, nodes + 1) - starts
        offsets = torch.cumsum(lengths, 0) - lengths
        owner = torch.repeat_interleave(torch.arange(len(nodes), device=nodes.device), lengths)
        # positions of every selected row's entries in the CSR arrays, row after row
        flat = torch.arange(len(owner), device=nodes.device) + (starts - offsets).index_select(0, owner)
        columns, values = self.indices.index_select(0, flat), self.values.index_select(0, flat)
        return _SparseRows(columns, values, offsets, owner=owner)


def _product(left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
    """left @ right in left's dtype (X's dense columns: float32, or bfloat16 by trainer.precision), returned in
    right's; as (rightᵀ @ leftᵀ)ᵀ when the result is narrow: MKL multiplies into few columns (d = 8, 25) at a third
    to a half of its speed into many, and the transposed product is the same arithmetic. Not when the sums are short
    (X @ W with Sister Cities' 2-7 dense columns): then the transposed product is 3-4× slower (and gives the same bits
    at d = 25 and 30)."""
    dtype, right = right.dtype, right.to(left.dtype)
    if right.shape[1] >= 32 or left.shape[1] < 16:
        return (left @ right).to(dtype)
    return (right.T @ left.T).T.to(dtype).contiguous()


class FreeEmbedding(nn.Module):
    """A free vector per node (the transductive DeepWalk / node2vec model)."""

    def __init__(self, n_nodes: int, dim: int):
        super().__init__()
        self.table = nn.Embedding(n_nodes, dim)
        nn.init.normal_(self.table.weight, std=1.0 / math.sqrt(dim))

    @property
    def n_nodes(self) -> int:
        return self.table.num_embeddings

    @property
    def weight(self) -> nn.Parameter:
        return self.table.weight

    def forward(self, nodes: torch.Tensor) -> torch.Tensor:
        return self.table(nodes)

    def all_nodes(self) -> torch.Tensor:
        return self.table.weight

    def negatives_as_features(self, n_ids: int) -> bool:
        """Never: free embeddings have no features."""
        return False

    def looks_up_whole(self, n_ids: int) -> bool:
        """Always: the table is the parameter."""
        return True

    @torch.no_grad()
    def lookup(self, nodes: torch.Tensor | None) -> tuple[torch.Tensor, Lookup]:
        """The table of embeddings (all of them, in place) and each id's row in it (as IGELEmbedding.lookup)."""
        return self.weight.detach(), Lookup(nodes, None, None)

    @torch.no_grad()
    def weight_gradient(self, lookup: Lookup, grad: torch.Tensor) -> torch.Tensor:
        """dL/d(table) (|V| × d): the table is the parameter."""
        return grad


@dataclass
class Lookup:
    """How a batch of ids was embedded: a table of rows of X @ W (every node's, the distinct ids' or one per id),
    each id's row in it (`index`; None: one row per id, in order), the rows' dense columns and their CSR part."""

    index: torch.Tensor | None
    dense_rows: torch.Tensor | None
    sparse: _SparseRows | None


@dataclass
class _SparseRows:
    """The CSR part of some rows of X as embedding_bag's bags: each row's entries (their columns and values) and
    where each row starts (offsets). For the whole of X, Xᵀ's bags too (each column's rows and values, where each
    column starts); for selected rows, the row of each entry (owner). Both serve the gradient Xᵀ @ grad.

    embedding_bag reads each row of W (or of grad) where it lies: 2.3× (X @ W) and 2.7× (Xᵀ @ grad) faster than
    torch's CSR products for Facebook's features. The gradient of selected rows is Sᵀ @ grad for the selection S
    (rows × ℓ): its entries sorted by column are bags too (sum_rows_by), 1.3-1.7× faster than torch's sparse product
    for AstroPh's batches (462,000 entries; the same sums in the same order, so the same bits), which was 1.4× faster
    than Xᵀ's bags over their gradients among zeros. embedding_bag's own backward, or scaled gradient rows summed into
    W with index_add, write a d-vector per entry first (gigabytes for a batch of AstroPh's features, and 15× slower).

    On a GPU the whole of X's CSR part is held as torch CSR matrices too, X's and Xᵀ's (`matrices`), and cuSPARSE
    multiplies them: embedding_bag's CUDA kernel sums each bag in one thread block, and Xᵀ's bags are as long as its
    most common columns. An H200 trained an epoch of AstroPh's walks (α = 3) 2.2× faster, Facebook's 1.3× faster.
    """

    columns: torch.Tensor
    values: torch.Tensor
    offsets: torch.Tensor
    transposed: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None
    owner: torch.Tensor | None = None
    matrices: tuple[torch.Tensor, torch.Tensor] | None = None

    def embed(self, weight: torch.Tensor) -> torch.Tensor:
        if self.matrices is not None:
            return self.matrices[0] @ weight
        return F.embedding_bag(self.columns, weight, self.offsets, mode="sum", per_sample_weights=self.values)

    def transposed_product(self, grad: torch.Tensor, width: int) -> torch.Tensor:
        if self.matrices is not None:
            return self.matrices[1] @ grad
        if self.transposed is not None:
            rows, values, offsets = self.transposed
            return F.embedding_bag(rows, grad, offsets, mode="sum", per_sample_weights=values)
        return sum_rows_by(self.columns, width, grad, self.owner, self.values)


class _Lookup(torch.autograd.Function):
    """IGEL's embedding as an autograd function over the closed forms of `lookup` and `weight_gradient`."""

    @staticmethod
    def forward(ctx, weight: torch.Tensor, model: IGELEmbedding, nodes: torch.Tensor | None) -> torch.Tensor:
        table, ctx.lookup = model.lookup(nodes)
        ctx.model, ctx.rows = model, len(table)
        return table if ctx.lookup.index is None else table.index_select(0, ctx.lookup.index)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        index = ctx.lookup.index
        per_row = grad if index is None else grad.new_zeros(ctx.rows, grad.shape[1]).index_add_(0, index, grad)
        return ctx.model.weight_gradient(ctx.lookup, per_row.contiguous()), None, None


@torch.no_grad()
def walk_skipgram_gradients(
    walks: torch.Tensor,
    valid: torch.Tensor | None,
    negatives: GatheredNegatives | TableNegatives | FeatureNegatives,
    window: int,
    affine: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor | int, torch.Tensor, torch.Tensor]:
    """The negative-sampling loss of walks (paper Eq. negsamp, negated) and its gradients, in closed form:
    d/dx −log σ(x) = σ(x) − 1 and d/dx −log σ(−x) = σ(x). Nothing is read back to the host.

    walks: embeddings of w walks (w × s × d), `valid` (w × s) false on the padding after a dead end (None: no
    dead ends); negatives: z noise embeddings per walk position, shared by the positive pairs whose target sits
    at that position (their gradients go where `negatives` says). The positive pairs are the (target, context)
    pairs at most `window` steps apart, in both orders. A pair's logit is a · e_t·e_o + b with affine = (a, b)
    (the authors' model; (1, 0) is the paper's σ(e_t·e_o)).

    A position's dot products with the 2·window positions around it are the band of its walk's Gram matrix,
    computed by blocks: each block of b = 2·window positions (or the whole walk, when shorter) against the
    positions from `window` before it to `window` after it (4·window columns per position, against s for a whole
    Gram matrix: 4.7× less arithmetic for Facebook's walks of 150). Both orders of a pair are read from the band,
    so the gradient of each position is twice its share as the first of the pair.

    Returns (the loss summed over the positive pairs, their number, the gradient of the loss averaged over them
    with respect to the walks' embeddings (w × s × d), and with respect to (a, b)).
    """
    w, s, dim = walks.shape
    window = widest_window(window, s)
    size = min(s, 2 * window)
    blocks = -(-s // size)
    padded = F.pad(walks, (0, 0, window, blocks * size - s + window))  # zeros around the walk
    length = padded.shape[1]
    queries = padded[:, window : window + blocks * size].reshape(-1, size, dim)
    keys = padded.as_strided((w, blocks, size + 2 * window, dim), (length * dim, size * dim, dim, 1))
    keys = keys.reshape(-1, size + 2 * window, dim)  # a copy, unless the walk is one block
    products = torch.bmm(queries, keys.transpose(1, 2))  # [block, r, c]: e_t · e_(t − window + c), t = its r'th
    band = _band(products, w, window).reshape(w, blocks * size, -1)  # [walk, t, k]: e_t · e_(t + k − window)
    flat = walks.view(w * s, dim)
    # per position: its dot products with the 2·window + 1 positions around it (itself weighted 0), then with its
    # z negatives
    dot = torch.cat([band[:, :s], negatives.dots(flat).view(w, s, -1)], -1)
    span, z = 2 * window + 1, dot.shape[-1] - 2 * window - 1
    if valid is None:
        weight, pairs = _full_walk_weights(s, window, z, walks.dtype, walks.device)
        count = w * pairs
        per_pair = 1.0 / count  # the loss is a mean over the positive pairs
    else:
        weight = _dead_end_weights(valid, window, z, walks.dtype)
        count = weight[..., :span].sum()
        per_pair = 1.0 / count.clamp(min=1)
    label = _labels(span, z, walks.dtype, walks.device)
    logit = torch.addcmul(affine[1], dot, affine[0])
    loss = F.binary_cross_entropy_with_logits(logit, label.expand_as(logit), weight, reduction="sum")
    grad = torch.sigmoid(logit).sub_(label).mul_(weight)
    d_affine = torch.stack([(grad * dot).sum(), grad.sum()]) * per_pair
    grad = grad.mul_(affine[0] * per_pair)
    # positive pairs: back through the band (e_t·e_u = e_u·e_t, both orders weighted alike: twice t's share)
    products_grad = torch.zeros_like(products)
    around = F.pad(grad[..., :span], (0, 0, 0, blocks * size - s)).view(w, blocks, size, span)
    _band(products_grad, w, window).copy_(around)
    d_walks = torch.bmm(products_grad, keys).view(w, -1, dim)[:, :s].mul(2)
    negatives.backward(grad[..., span:].reshape(w * s, z).contiguous(), flat, d_walks)
    return loss, count, d_walks, d_affine


@torch.no_grad()
def feature_walk_gradients(
    model: IGELEmbedding,
    positions: torch.Tensor,
    valid: torch.Tensor | None,
    negatives: torch.Tensor,
    window: int,
    affine: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | int]:
    """A step's gradients for a batch of walks whose negatives stay rows of X (FeatureNegatives;
    IGELEmbedding.negatives_as_features), given the rows (IGELEmbedding.feature_rows) of its positions (w × s × ℓ;
    END read as any node, weighted 0 by `valid`) and of its negatives (w × s × z × ℓ): W's gradient, the logit's
    scale and bias's, the loss summed over the positive pairs and their number. Everything of the step but Adam's
    update, as one function of tensors: what trainer.compile compiles."""
    w, s, z, _ = negatives.shape
    table, lookup = model.embed_rows(positions.view(w * s, -1))
    sampled = FeatureNegatives(negatives.view(w * s, z, -1), model.weight.detach())
    loss, count, d_walks, d_affine = walk_skipgram_gradients(table.view(w, s, -1), valid, sampled, window, affine)
    weight_grad = model.weight_gradient(lookup, d_walks.view(w * s, -1)).add_(sampled.weight_grad)
    return weight_grad, d_affine, loss, count


class GatheredNegatives:
    """Negatives whose embeddings were gathered one per draw (w × s × z × d); their gradients are written to
    `grad` (the same shape)."""

    def __init__(self, embeddings: torch.Tensor, grad: torch.Tensor):
        self.embeddings, self.grad = embeddings, grad

    def dots(self, walks: torch.Tensor) -> torch.Tensor:
        """Each walk position's dot products with its z negatives (w·s × z), walks given as (w·s × d)."""
        # as (z × d) @ (d × 1) per position, which MKL runs 3.5× faster than (1 × d) @ (d × z) at d = 256
        positions, dim = walks.shape
        return torch.bmm(self.embeddings.view(positions, -1, dim), walks.unsqueeze(-1)).squeeze(-1)

    def backward(self, grad: torch.Tensor, walks: torch.Tensor, d_walks: torch.Tensor) -> None:
        """Given dL/d(dots) (w·s × z): add the positions' share to d_walks (w × s × d), write the negatives'."""
        positions, dim = walks.shape
        embeddings = self.embeddings.view(positions, -1, dim)
        if dim >= 64:
            d_walks.view(positions, 1, dim).baddbmm_(grad.unsqueeze(1), embeddings)
        else:  # MKL's batches of tiny products cost more than the arithmetic: 2× slower at d = 25
            d_walks.view(positions, dim).add_((grad.unsqueeze(-1) * embeddings).sum(1))
        torch.mul(grad.unsqueeze(-1), walks.unsqueeze(1), out=self.grad.view(embeddings.shape))


class TableNegatives:
    """Negatives as rows of a table of embeddings (every node's, or each distinct id's; m × d), read in place:
    (w × s × z) row numbers. Their gradients, summed per row, are the table's gradient `table_grad` (m × d): a new
    tensor, not a zeroed one added to (zeroing Facebook's 4,039 × 256 took 1.1 ms of a 19 ms step).

    A batch of Facebook's walks draws 14,850 negatives among 4,039 nodes: gathering a d-vector per draw, then its
    gradient, moved 60 MB a step. On the CPU the dot products are a sampled product (only the drawn pairs of
    walks × table, each row read where it lies; 11× faster) and both gradients are weighted sums of rows
    (embedding_bag: to the positions, and to the table once the draws are sorted by row; 3.5× faster than
    writing a gradient per draw and summing it with index_add). On a GPU, whose cuSPARSE sampled product wants
    sorted, unrepeated columns, the rows are gathered (memory bandwidth is what it has).
    """

    SAMPLED_PRODUCT_ON = ("cpu",)  # devices whose sampled product takes rows as drawn

    def __init__(self, table: torch.Tensor, rows: torch.Tensor):
        self.table, self.rows = table, rows.reshape(-1, rows.shape[-1])
        self.table_grad: torch.Tensor | None = None

    def dots(self, walks: torch.Tensor) -> torch.Tensor:
        positions, z = self.rows.shape
        # a sampled product holds at most a row's columns per row: a table of fewer rows than z (a triangle's) gathers
        if self.table.device.type not in self.SAMPLED_PRODUCT_ON or len(self.table) < z:
            gathered = self.table.index_select(0, self.rows.view(-1)).view(positions, z, -1)
            return torch.bmm(gathered, walks.unsqueeze(-1)).squeeze(-1)
        starts = torch.arange(0, positions * z + 1, z, device=walks.device)
        pattern = torch.sparse_csr_tensor(
            starts, self.rows.view(-1), walks.new_zeros(positions * z), (positions, len(self.table)),
            check_invariants=False,
        )  # fmt: skip
        return torch.sparse.sampled_addmm(pattern, walks, self.table.T, beta=0.0).values().view(positions, z)

    def backward(self, grad: torch.Tensor, walks: torch.Tensor, d_walks: torch.Tensor) -> None:
        positions, z = self.rows.shape
        d_walks += F.embedding_bag(self.rows, self.table, mode="sum", per_sample_weights=grad).view(d_walks.shape)
        position = torch.arange(positions, device=walks.device).repeat_interleave(z)
        self.table_grad = sum_rows_by(self.rows.view(-1), len(self.table), walks, position, grad.view(-1))


def sum_rows_by(rows: torch.Tensor, n_rows: int, source: torch.Tensor, picks: torch.Tensor, weights: torch.Tensor):
    """A gradient scattered by row (n_rows × d): entry k adds weights[k] · source[picks[k]] to row rows[k]. The entries
    sorted by row are embedding_bag's bags, which read each source row where it lies and write no row per entry: 3.5×
    (TableNegatives) and 1.7× (the authors' pairs, 50,000 entries a step) faster than writing each entry's row, then
    summing them with index_add. Each row sums its entries in their order, as index_add would."""
    # torch sorts integers by radix: as int32 1.8× faster than int64, as int16 (up to 32,768 rows) 1.6× faster again
    key = torch.int16 if n_rows <= 1 << 15 else torch.int32
    drawn, order = _stable_sort(rows.to(key))
    if rows.device.type == "cpu":  # where each row's bag starts, by counting: 10× faster than binary searches
        counts = torch.bincount(drawn, minlength=n_rows)
        starts = counts.cumsum(0) - counts
    else:  # bincount reads its maximum back to the host, which a CUDA graph cannot hold
        starts = torch.searchsorted(drawn, torch.arange(n_rows, device=rows.device, dtype=key))
    picked = picks.index_select(0, order)
    return F.embedding_bag(picked, source, starts, mode="sum", per_sample_weights=weights.index_select(0, order))


def distinct_ids(ids: torch.Tensor, n_ids: int) -> tuple[torch.Tensor, torch.Tensor]:
    """torch.unique(ids, return_inverse=True) of ids in [0, n_ids), the same tensors, from a mask of the ids present
    instead of a sort: on the CPU 4-7× faster (AstroPh's 13,000 ids a step among 18,772 nodes: 0.3 against 2.3 ms)."""
    present = torch.zeros(n_ids, dtype=torch.bool, device=ids.device)
    present[ids] = True
    position = torch.cumsum(present, 0) - 1  # each present id's rank among them
    return present.nonzero().squeeze(1).to(ids.dtype), position.index_select(0, ids)


# On the CPU torch sorts integers by radix from this many on (at::internal::GRAIN_SIZE) and by comparison below it,
# 6× slower for Facebook's 14,850 negatives a step (0.83 against 0.14 ms padded to it)
RADIX_SORT_FROM = 32768


def _stable_sort(keys: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """torch.sort(keys, stable=True) of integer keys; on the CPU, fewer than RADIX_SORT_FROM (but enough to pay for it)
    are padded to it with their dtype's largest value, which sorts after them (a stable sort keeps equal keys in
    order), so that torch sorts them by radix."""
    n_keys = len(keys)
    if keys.device.type != "cpu" or not RADIX_SORT_FROM // 8 <= n_keys < RADIX_SORT_FROM:
        return torch.sort(keys, stable=True)
    padded = torch.cat([keys, keys.new_full((RADIX_SORT_FROM - n_keys,), torch.iinfo(keys.dtype).max)])
    drawn, order = torch.sort(padded, stable=True)
    return drawn[:n_keys], order[:n_keys]


class RowPairs:
    """Pairs of rows of a table of embeddings (m × d), the authors' batches (trainer.batching=buckets): `ends` holds
    each pair's first row, then each pair's second. `gradients` gives the batch's binary cross-entropy of σ(a·dot + b)
    against the pairs' labels and the gradients of its mean (nur-ag/IGEL src/model_utils.py train_negative_sampling,
    nn.BCEWithLogitsLoss): the logit's scale and bias's, and the table's, where each end of a pair gets its partner's
    row times dL/d(dot). Three ways to them:

    - **The Gram matrix**: a table of at most GRAM_DOTS times as many rows squared as the batch has pairs (Les
      Misérables' 38 distinct rows against 50,000 pairs). A pair's loss depends only on its cell of the matrix of every
      two rows and its label, so the pairs are counted per cell, all of them and the positives, and the loss and
      dL/d(logit) taken per cell from the Gram matrix (one product); the table's gradient is then (S + Sᵀ) · table for S
      the cells' dL/d(dot). Les Misérables' step took 1.1 against 2.5 ms scoring every pair from the same matrix. An
      epoch whose every batch takes this way has the counts made for it at once, the pairs never dealt
      (`cell_gradients`, walks.AuthorsPairs.by_cell).
    - **A block of hot rows** (`hot`, HotRows): a pair with a hot end takes its dot from the block of the hot rows'
      products with every row (k × m, one product), and its dL/d(dot), summed per cell of that block, sends the
      gradient both ways (two more products); the few pairs of two cold rows are gathered. Sister Cities' 785 distinct
      rows at α = 1 have 27 hot rows, an end of 94 % of a batch's 25,000 pairs (one row alone is 38 % of the ends):
      1.6 against 2.8 ms a batch on two threads, 1.7 against 5.0 ms on one, for their dots and gradients from the Gram
      matrix (a run's first 200 batches, best of 3), on the first-generation AMD EPYC whose 128-bit FMA units made
      that matrix the authors' runs' cost.
    - **Gathered**: otherwise the pairs' rows are gathered for the dots, and their gradients summed by row
      (sum_rows_by)."""

    GRAM_DOTS = 32

    def __init__(self, table: torch.Tensor, ends: torch.Tensor, hot: HotRows | None = None):
        self.table, self.ends, self.pairs = table, ends, len(ends) // 2
        self.first, self.second = ends[: self.pairs], ends[self.pairs :]
        self.block = None if hot is None else _HotBlock(table, self.first, self.second, hot)
        self.cells = None  # Gram: each pair's cell of the matrix of every two rows
        rows = len(table)
        if hot is None and self.by_gram(rows, self.pairs):
            self.cells = self.first * rows + self.second

    @classmethod
    def by_gram(cls, rows: int, pairs: int) -> bool:
        """Whether a batch of `pairs` pairs of a table's `rows` rows, none hot, is scored from its Gram matrix."""
        return rows**2 <= cls.GRAM_DOTS * pairs

    def gradients(self, labels: torch.Tensor, affine: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The batch's loss summed over its pairs, and the gradients of its mean: dL/d(scale, bias) and dL/d(table)."""
        if self.cells is not None:
            return self._by_cell(labels, affine)
        dot = self.block.dots() if self.block is not None else self._gathered_dots()
        logit = dot * affine[0] + affine[1]
        loss = F.binary_cross_entropy_with_logits(logit, labels, reduction="sum")
        grad = (torch.sigmoid(logit) - labels) / self.pairs  # d(mean loss)/d(logit)
        d_affine = torch.stack([(grad * dot).sum(), grad.sum()])
        scaled = grad * affine[0]  # d(mean loss)/d(dot)
        table_grad = self.block.table_gradient(scaled) if self.block is not None else self._gathered_gradient(scaled)
        return loss, d_affine, table_grad

    def _by_cell(self, labels: torch.Tensor, affine: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        rows = len(self.table)
        count, positives = _pairs_by_cell(self.cells, labels, rows * rows)
        return self.cell_gradients(self.table, count, positives, self.pairs, affine)

    @staticmethod
    def cell_gradients(
        table: torch.Tensor, count: torch.Tensor, positives: torch.Tensor, pairs: int, affine: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """`gradients` from the Gram matrix, for a batch of `pairs` pairs given as each cell's pairs and positive pairs
        (rows² each, pair (i, j) in cell i·rows + j, as float counts)."""
        rows = len(table)
        dot = (table @ table.T).view(-1)
        logit = dot * affine[0] + affine[1]
        loss = (count * F.softplus(logit) - positives * logit).sum()  # each pair's −log σ(±logit), summed per cell
        grad = (count * torch.sigmoid(logit) - positives) / pairs  # d(mean loss)/d(each cell's logit)
        d_affine = torch.stack([(grad * dot).sum(), grad.sum()])
        scaled = (grad * affine[0]).view(rows, rows)  # a cell (i, j) sends row j's times it to row i, and back
        return loss, d_affine, (scaled + scaled.T) @ table

    def _gathered_dots(self) -> torch.Tensor:
        return torch.linalg.vecdot(self.table.index_select(0, self.first), self.table.index_select(0, self.second))

    def _gathered_gradient(self, grad: torch.Tensor) -> torch.Tensor:
        partners = torch.cat([self.second, self.first])
        both = torch.cat([grad, grad])  # 4× faster than repeat
        return sum_rows_by(self.ends, len(self.table), self.table, partners, both)


def _pairs_by_cell(cells: torch.Tensor, labels: torch.Tensor, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Each of `size` cells' pairs and positive pairs: counted with bincount on the CPU (summing in the entries' order,
    as index_add would, 2× faster), with index_put's deterministic accumulation on a GPU."""
    if not cells.is_cuda:
        count = torch.bincount(cells, minlength=size).to(labels.dtype)
        return count, torch.bincount(cells, weights=labels, minlength=size)
    count = labels.new_zeros(size).index_put_((cells,), torch.ones_like(labels), accumulate=True)
    return count, labels.new_zeros(size).index_put_((cells,), labels, accumulate=True)


class HotRows:
    """The rows of a table (m rows) that at least m / SHARE of a batch's pair ends name, for RowPairs' block, with
    each one's first cell in the block (k × m; a cold row's: past the block). Which rows are hot changes a step's
    speed, never its result beyond float rounding."""

    SHARE = 8

    def __init__(self, hot: torch.Tensor, rows: int):
        self.hot, self.size = hot, len(hot) * rows
        self.start = torch.full((rows,), self.size, dtype=hot.dtype)
        self.start[hot] = torch.arange(0, self.size, rows, dtype=hot.dtype)

    @classmethod
    def of(cls, ends: torch.Tensor, rows: int) -> HotRows | None:
        """The hot rows of a batch's ends, where they are at most half the table (a block of them costs less than the
        Gram matrix or gathering); None where none is, or more, and off the CPU (a GPU's count reads back to the host,
        and its Gram products are cheap)."""
        if ends.device.type != "cpu":
            return None
        return cls.counted(torch.bincount(ends, minlength=rows), ends.dtype)

    @classmethod
    def counted(cls, ends_per_row: torch.Tensor, dtype: torch.dtype = torch.int64) -> HotRows | None:
        """`of` from each row's count of ends (on the CPU)."""
        rows = len(ends_per_row)
        hot = (ends_per_row * cls.SHARE >= rows).nonzero().view(-1).to(dtype)
        return cls(hot, rows) if 0 < 2 * len(hot) <= rows else None


class _HotBlock:
    """RowPairs' block of hot rows: the hot rows' products with every row (k × m). A pair's cell is its hot end's row
    of the block (its first end's where both are hot) and its other end's column; the pairs of two cold rows have none
    and are gathered (their gradients added row by row: few, which index_add sums faster than a sort would)."""

    def __init__(self, table: torch.Tensor, first: torch.Tensor, second: torch.Tensor, hot: HotRows):
        self.table, self.hot, self.hot_table = table, hot.hot, table.index_select(0, hot.hot)
        start = hot.start
        cells = torch.minimum(start.index_select(0, first) + second, start.index_select(0, second) + first)
        self.cold = (cells >= hot.size).nonzero().view(-1)
        self.cells = cells.clamp_(max=hot.size - 1)  # a cold pair's stands in (its dL/d(dot) is zeroed there)
        # as int64: index_add of rows takes 3× longer with int32 indices
        self.cold_ends = first.index_select(0, self.cold).long(), second.index_select(0, self.cold).long()
        self.cold_rows = tuple(table.index_select(0, end) for end in self.cold_ends)

    def dots(self) -> torch.Tensor:
        dots = (self.hot_table @ self.table.T).view(-1).index_select(0, self.cells)
        return dots.index_copy_(0, self.cold, torch.linalg.vecdot(*self.cold_rows))

    def table_gradient(self, grad: torch.Tensor) -> torch.Tensor:
        k, rows = len(self.hot), len(self.table)
        summed = grad.new_zeros(k * rows).index_add_(0, self.cells, grad.index_fill(0, self.cold, 0.0)).view(k, rows)
        table_grad = summed.T @ self.hot_table  # each column's row: its cells' dL/d(dot) times their hot rows
        table_grad.index_add_(0, self.hot, summed @ self.table)  # each hot row: its cells' times their columns' rows
        cold = grad.index_select(0, self.cold).unsqueeze(1)
        (first, second), (first_rows, second_rows) = self.cold_ends, self.cold_rows
        return table_grad.index_add_(0, first, second_rows * cold).index_add_(0, second, first_rows * cold)


class FeatureNegatives:
    """Negatives of a dense IGEL model as their rows of X (w·s × z × ℓ), never embedded: e_n·e_t = x_nᵀ (W e_t), so a
    position's dots are its negatives' rows times its projection W e_t (ℓ), and the negatives' share of the gradients
    is their rows weighted by dL/d(dot), summed per position (m_t, ℓ): W e_t's gradient, which gives m_t W to the
    position and m_t ⊗ e_t to W (`weight_grad`, ℓ × d).

    A position costs ℓ·(3d + 2z) multiply-adds instead of embedding its z negatives and back (2·z·ℓ·d): 2.9× less
    arithmetic for the scalability runs (ℓ = 78, d = 25, z = 5), whose batches embed more negatives than positions.
    """

    def __init__(self, rows: torch.Tensor, weight: torch.Tensor):
        self.rows, self.weight = rows, weight
        self.weight_grad: torch.Tensor | None = None

    def dots(self, walks: torch.Tensor) -> torch.Tensor:
        projected = walks @ self.weight.T  # W e_t per position (w·s × ℓ)
        return (self.rows * projected.to(self.rows.dtype).unsqueeze(1)).sum(-1, dtype=walks.dtype)

    def backward(self, grad: torch.Tensor, walks: torch.Tensor, d_walks: torch.Tensor) -> None:
        mixed = (self.rows * grad.to(self.rows.dtype).unsqueeze(-1)).sum(1, dtype=walks.dtype)  # m_t (w·s × ℓ)
        d_walks.view(walks.shape).addmm_(mixed, self.weight)
        self.weight_grad = mixed.T @ walks


def _band(products: torch.Tensor, w: int, window: int) -> torch.Tensor:
    """The view [walk, block, r, k] = products[walk·blocks + block, r, r + k] (k = 0..2·window) of the blocks'
    products (walks·blocks × size × (size + 2·window)): position t = block·size + r's dot products with its
    positions t − window .. t + window."""
    n_blocks, size, columns = products.shape
    strides = (n_blocks // w * size * columns, size * columns, columns + 1, 1)
    return products.as_strided((w, n_blocks // w, size, 2 * window + 1), strides)


@functools.lru_cache(maxsize=16)
def _labels(span: int, z: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """1 for the positions around, 0 for the negatives."""
    return torch.cat([torch.ones(span, dtype=dtype, device=device), torch.zeros(z, dtype=dtype, device=device)])


@functools.lru_cache(maxsize=16)
def _full_walk_weights(s: int, window: int, z: int, dtype: torch.dtype, device: torch.device):
    """The weights of walks without dead ends (computed once per shape), and their positive pairs per walk (counted
    from the shape, not read back from the weights: a compiled step traces this)."""
    weight = _dead_end_weights(torch.ones(1, s, dtype=torch.bool, device=device), window, z, dtype)
    return weight, positive_pairs(s, window)


def _dead_end_weights(valid: torch.Tensor, window: int, z: int, dtype: torch.dtype) -> torch.Tensor:
    """Per walk position (w × s × (2·window + 1 + z)): 1 for each position around it in the walk (0 for itself and
    past the walk's ends); then, for each of its z negatives, its number of positive pairs as target."""
    w, s = valid.shape
    pairs = F.pad(valid, (window, window)).unfold(1, 2 * window + 1, 1) & valid.unsqueeze(-1)
    pairs[..., window] = False
    pairs = pairs.to(dtype)
    return torch.cat([pairs, pairs.sum(-1, keepdim=True).expand(w, s, z)], -1)


@torch.no_grad()
def embed_all(model: nn.Module, device: torch.device, batch_size: int = 65536) -> np.ndarray:
    """Embeddings of every node (|V| × d) as float32 numpy."""
    model.eval()
    parts = [
        model(torch.arange(start, min(start + batch_size, model.n_nodes), device=device)).cpu()
        for start in range(0, model.n_nodes, batch_size)
    ]
    model.train()
    return torch.cat(parts).numpy() if parts else np.zeros((0, model.weight.shape[1]), dtype=np.float32)


# --- Supervised setting (paper §3.4.2, Eq. supervised): IGEL as the input layer of an MLP -----------------

ACTIVATIONS = {"elu": nn.ELU, "relu": nn.ReLU, "tanh": nn.Tanh, "linear": nn.Identity}


def mlp(
    n_inputs: int, n_outputs: int, hidden: int, depth: int, activation: str = "elu", dropout: float = 0.0
) -> nn.Sequential:
    """`depth` linear layers: depth - 1 hidden layers of `hidden` units, each followed by the activation and
    dropout, then the output layer. The authors' code counts depth the same way (their "3-layer MLP")."""
    if activation not in ACTIVATIONS:
        raise ConfigError(f"trainer.activation={activation!r} is not one of {', '.join(ACTIVATIONS)}")
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1 or hidden < 1:
        raise ConfigError(f"trainer.depth and trainer.hidden must be positive integers, got {depth!r}, {hidden!r}")
    if not 0.0 <= dropout < 1.0:
        raise ConfigError(f"trainer.dropout must be in [0, 1), got {dropout!r}")
    layers: list[nn.Module] = []
    width = n_inputs
    for _ in range(depth - 1):
        layers += [nn.Linear(width, hidden), ACTIVATIONS[activation]()]
        if dropout > 0:
            layers.append(nn.Dropout(dropout))
        width = hidden
    layers.append(nn.Linear(width, n_outputs))
    return nn.Sequential(*layers)


def restrict_to_seen(embedding: IGELEmbedding, seen: sp.csr_matrix) -> IGELEmbedding:
    """Zero the rows of W of the structures absent from `seen` (the training nodes' IGEL features).

    Inductive runs embed the nodes of every graph in one IGELEmbedding, but only the training nodes are ever
    in a batch: structures that occur only in unseen graphs get no gradient, and a zero row keeps an untrained
    random vector out of their embeddings.
    """
    with torch.no_grad():
        unseen = torch.ones(embedding.weight.shape[0], dtype=torch.bool, device=embedding.weight.device)
        unseen[torch.as_tensor(np.unique(sp.csr_matrix(seen).indices), device=unseen.device)] = False
        embedding.weight[unseen] = 0.0
    return embedding


class NodeClassifier(nn.Module):
    """Logits of M labels per node: [e_n = x_nᵀ W ‖ F_n] → MLP (paper Figure GraphSupervisedLearning).

    `structure` is an IGELEmbedding (W is learned jointly with the MLP) and `features` the nodes' attributes
    (|V| × f, kept as a buffer so that they move to the model's device); either may be None, not both.
    Node ids index both. With `precision` bfloat16 the MLP runs under autocast: its products in bfloat16,
    accumulating in float32 (2× faster on CPUs with AVX512-BF16, tensor cores on GPUs), its weights, their
    gradients, Adam and the logits it returns float32.
    """

    def __init__(
        self,
        structure: IGELEmbedding | None,
        features: np.ndarray | torch.Tensor | None,
        n_labels: int,
        hidden: int,
        depth: int,
        activation: str = "elu",
        dropout: float = 0.0,
        precision: str = "float32",
    ):
        super().__init__()
        if structure is None and features is None:
            raise ConfigError(
                "the classifier needs IGEL embeddings, node features or both (task.use_igel, task.use_features)"
            )
        self.precision = precision_dtype(precision)
        self.structure = structure
        features = None if features is None else torch.as_tensor(features, dtype=torch.float32)
        if structure is not None and features is not None and structure.n_nodes != len(features):
            raise ValueError(f"{structure.n_nodes} nodes have IGEL features but {len(features)} have attributes")
        self.register_buffer("features", features)
        width = (0 if structure is None else structure.weight.shape[1]) + (0 if features is None else features.shape[1])
        self.mlp = mlp(width, n_labels, hidden, depth, activation, dropout)

    @property
    def n_nodes(self) -> int:
        return self.structure.n_nodes if self.structure is not None else len(self.features)

    def forward(self, nodes: torch.Tensor) -> torch.Tensor:
        """Logits (len(nodes) × M) of the given node ids."""
        inputs = []
        if self.structure is not None:
            inputs.append(self.structure(nodes))
        if self.features is not None:
            inputs.append(self.features[nodes])
        joined = torch.cat(inputs, dim=1) if len(inputs) > 1 else inputs[0]
        if self.precision == torch.float32:
            return self.mlp(joined)
        with torch.autocast(nodes.device.type, dtype=self.precision):
            return self.mlp(joined).float()


def multilabel_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Binary cross-entropy of the logits against 0/1 targets (paper Eq. supervised), averaged over nodes and
    labels as the authors' MultiLabelSoftMarginLoss does (the paper's sum only rescales the gradient)."""
    return F.binary_cross_entropy_with_logits(logits, targets)


@torch.no_grad()
def predict_labels(model: nn.Module, nodes: torch.Tensor, batch_size: int = 65536) -> torch.Tensor:
    """0/1 predictions (len(nodes) × M, bool, on the nodes' device): σ(logit) > 0.5, i.e. logit > 0."""
    training = model.training
    model.eval()
    parts = [model(nodes[start : start + batch_size]) > 0 for start in range(0, len(nodes), batch_size)]
    model.train(training)
    return torch.cat(parts)


def normal_weight(width: int, dim: int) -> torch.Tensor:
    """IGEL's own initial W (width × dim): normal, std 1/√dim, from torch's generator."""
    return torch.nn.init.normal_(torch.empty(width, dim), std=1.0 / math.sqrt(dim))


def distance_scaled_weight(
    distance: int, max_degree: int, dim: int, encoded_distance: int | None = None, blocks: int = 1
) -> torch.Tensor:
    """The authors' initial W (nur-ag/IGEL src/structural.py, StructuralMapper.mapping_matrix), for
    encoder.weight_init=distance_scaled: ((α+1)(δmax+1)·blocks) × d uniform in ±0.5/√d, row (c, δ) scaled by
    e^c / ln(δ + 1) (0 for δ = 0; their loop skips row 0), then every column standardised (mean 0, sample std 1).

    The matrix has `distance`'s size and scale; the rows returned are those of the layout the features were encoded
    at (`encoded_distance`, default `distance`): with α = 1 features under a larger α, the columns' standardisation
    over the larger matrix shrinks them (the authors' notebook reused α = 1 encodings for every α).
    """
    encoded = distance if encoded_distance is None else encoded_distance
    if encoded > distance:
        raise ConfigError(
            f"encoder.weight_init=distance_scaled needs encoder.encoded_distance ({encoded}) ≤ encoder.distance"
            f" ({distance})"
        )
    delta = max_degree + 1
    block = (distance + 1) * delta
    matrix = (torch.rand(blocks * block, dim) - 0.5) / math.sqrt(dim)
    within = torch.arange(blocks * block) % block
    degree, layer = within % delta, within // delta
    scale = torch.exp(layer.double()) / torch.log(degree.double() + 1).clamp(min=1e-300)
    scale = torch.where(degree > 0, scale, torch.zeros_like(scale))
    scale[0] = 1.0
    matrix = matrix * scale.to(matrix.dtype)[:, None]
    matrix = (matrix - matrix.mean(dim=0)) / matrix.std(dim=0)
    columns = torch.arange(blocks * (encoded + 1) * delta)
    encoded_block = (encoded + 1) * delta
    return matrix[(columns // encoded_block) * block + columns % encoded_block]
