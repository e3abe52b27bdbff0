"""The maths: IGEL's embedding layer e_n = x_nᵀ W (paper Eq. SimpleModel) and the skip-gram loss."""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn.functional as F
from torch import nn

from igel_exp.errors import ConfigError

warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")


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

    def __init__(self, features: sp.csr_matrix, dim: int):
        super().__init__()
        features = sp.csr_matrix(features, dtype=np.float32)
        n_nodes, width = features.shape
        dense = self.keeps_dense(n_nodes, width, features.nnz)
        hot = np.bincount(features.indices, minlength=width) * self.HOT_FILL >= max(n_nodes, 1)
        hot |= dense
        self.register_buffer("rows", torch.as_tensor(features[:, hot].toarray()))  # the dense columns
        self.register_buffer("hot", None if dense else torch.as_tensor(np.flatnonzero(hot)))  # None: all of them
        if not dense:
            sparse = features.copy()
            sparse.data[hot[sparse.indices]] = 0.0
            sparse.eliminate_zeros()
            for name, matrix in [("", sparse), ("t_", sparse.T.tocsr())]:
                self.register_buffer(f"{name}indptr", torch.as_tensor(matrix.indptr, dtype=torch.int64))
                self.register_buffer(f"{name}indices", torch.as_tensor(matrix.indices, dtype=torch.int64))
                self.register_buffer(f"{name}values", torch.as_tensor(matrix.data, dtype=torch.float32))
        self.weight = nn.Parameter(torch.empty(width, dim))
        nn.init.normal_(self.weight, std=1.0 / math.sqrt(dim))
        # Structures never seen in training get no gradient; a zero row keeps them out of unseen graphs.
        with torch.no_grad():
            seen = torch.zeros(width, dtype=torch.bool)
            seen[torch.as_tensor(features.indices, dtype=torch.int64)] = True
            self.weight[~seen] = 0.0

    @classmethod
    def keeps_dense(cls, n_nodes: int, width: int, nonzeros: float) -> bool:
        """Whether features of this shape and number of nonzeros are kept dense."""
        return width <= cls.DENSE_WIDTH and n_nodes * width <= cls.DENSE_FILL * nonzeros

    @property
    def dense(self) -> bool:
        """Whether all of X is dense (no CSR part)."""
        return self.hot is None

    @property
    def n_nodes(self) -> int:
        return len(self.rows)

    def all_nodes(self) -> torch.Tensor:
        """Embeddings of every node (|V| × d) as one product X @ W."""
        embeddings = self.rows @ self._dense_weight()
        if self.dense:
            return embeddings
        size = (self.n_nodes, self.weight.shape[0])
        matrix = torch.sparse_csr_tensor(self.indptr, self.indices, self.values, size, check_invariants=False)
        transposed = torch.sparse_csr_tensor(
            self.t_indptr, self.t_indices, self.t_values, size[::-1], check_invariants=False
        )
        return embeddings + _SparseProduct.apply(self.weight, matrix, transposed)

    def forward(self, nodes: torch.Tensor) -> torch.Tensor:
        """Embeddings (len(nodes) × d) of the given node ids."""
        if not self.dense and self.REPEATS * len(nodes) >= self.n_nodes:
            distinct, rows = torch.unique(nodes, return_inverse=True)
            return self._embed(distinct).index_select(0, rows)
        return self._embed(nodes)

    def _embed(self, nodes: torch.Tensor) -> torch.Tensor:
        embeddings = self.rows.index_select(0, nodes) @ self._dense_weight()
        return embeddings if self.dense else embeddings + self._sparse_rows(nodes)

    def _dense_weight(self) -> torch.Tensor:
        return self.weight if self.dense else self.weight.index_select(0, self.hot)

    def _sparse_rows(self, nodes: torch.Tensor) -> torch.Tensor:
        starts = self.indptr.index_select(0, nodes)
        lengths = self.indptr.index_select(0, nodes + 1) - starts
        offsets = torch.cumsum(lengths, 0) - lengths
        owner = torch.repeat_interleave(torch.arange(len(nodes), device=nodes.device), lengths)
        # positions of every selected row's entries in the CSR arrays, row after row
        flat = torch.arange(len(owner), device=nodes.device) + (starts - offsets).index_select(0, owner)
        columns, values = self.indices.index_select(0, flat), self.values.index_select(0, flat)
        return _SelectedRows.apply(self.weight, columns, values, offsets, owner)


class FreeEmbedding(nn.Module):
    """A free vector per node (the transductive DeepWalk / node2vec model)."""

    def __init__(self, n_nodes: int, dim: int):
        super().__init__()
        self.table = nn.Embedding(n_nodes, dim)
        nn.init.normal_(self.table.weight, std=1.0 / math.sqrt(dim))

    @property
    def n_nodes(self) -> int:
        return self.table.num_embeddings

    def forward(self, nodes: torch.Tensor) -> torch.Tensor:
        return self.table(nodes)

    def all_nodes(self) -> torch.Tensor:
        return self.table.weight


class _SparseProduct(torch.autograd.Function):
    """X @ W for a fixed sparse X, whose gradient with respect to W is Xᵀ @ grad (both CSR products)."""

    @staticmethod
    def forward(ctx, weight: torch.Tensor, matrix: torch.Tensor, transposed: torch.Tensor) -> torch.Tensor:
        ctx.transposed = transposed
        return matrix @ weight

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return ctx.transposed @ grad, None, None


class _SelectedRows(torch.autograd.Function):
    """Rows of X @ W for a fixed sparse X, given as the selected rows' entries: their columns and values,
    where each row starts (offsets) and the row of each entry (owner).

    The gradient with respect to W is Sᵀ @ grad for the selection S (rows × ℓ) as one sparse product:
    embedding_bag's own backward, or scaled gradient rows summed into W with index_add, write a d-vector per
    entry first (gigabytes for a batch of AstroPh's IGEL features, and 15× slower).
    """

    @staticmethod
    def forward(ctx, weight, columns, values, offsets, owner) -> torch.Tensor:
        ctx.save_for_backward(columns, values, owner)
        ctx.weight_shape = weight.shape
        return F.embedding_bag(columns, weight, offsets, mode="sum", per_sample_weights=values)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        columns, values, owner = ctx.saved_tensors
        size = (ctx.weight_shape[0], len(grad))
        transposed = torch.sparse_coo_tensor(torch.stack([columns, owner]), values, size, check_invariants=False)
        return torch.sparse.mm(transposed, grad), None, None, None, None


@torch.no_grad()
def walk_skipgram_gradients(
    walks: torch.Tensor,
    valid: torch.Tensor,
    negatives: torch.Tensor,
    window: int,
    scale: float = 1.0,
    bias: float = 0.0,
) -> tuple[float, int, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The negative-sampling loss of walks (paper Eq. negsamp, negated and averaged over positive pairs) and
    its gradients, in closed form: d/dx −log σ(x) = σ(x) − 1 and d/dx −log σ(−x) = σ(x).

    walks: embeddings of w walks (w × s × d), `valid` (w × s) false on the padding after a dead end;
    negatives: z noise embeddings per walk position (w × s × z × d), shared by the positive pairs whose
    target sits at that position. The positive pairs are the (target, context) pairs at most `window`
    steps apart, in both orders. A pair's logit is scale · e_t·e_o + bias (the authors' model; scale 1,
    bias 0 is the paper's σ(e_t·e_o)). A walk's positive dot products are the band of its Gram matrix (one
    batched product, read through a strided view of its diagonals), its negatives' one batched product more;
    the gradients come back through the same band: each position's embedding is read once, and nothing of size
    window × d is written per position (44 MB a batch with Facebook's d = 256).

    Returns (loss, number of positive pairs, d/d walks, d/d negatives, d/d (scale, bias)).
    """
    w, s, z, dim = negatives.shape
    span, wide = 2 * window + 1, s + 2 * window
    gram = F.pad(torch.bmm(walks, walks.transpose(1, 2)), (window, window))  # w × s × wide, zero-padded columns
    band = (w, s, span), (s * wide, wide + 1, 1)  # a view of the diagonals: [b, t, k] = gram[b, t, t + k − window]
    flat_negatives, flat_walks = negatives.view(w * s, z, dim), walks.view(w * s, 1, dim)
    # each position's z dots: as (z × d) @ (1 × d)ᵀ, which MKL runs 3.5× faster than @ (d × 1) at d = 256
    negative_dot = torch.bmm(flat_negatives, flat_walks.transpose(1, 2)).view(w * s, z)
    dot = torch.cat([gram.as_strided(*band).reshape(w * s, span), negative_dot], 1)  # w·s × (span + z)
    if bool(valid.all()):  # walks end early only from isolated nodes: the weights of full walks are reused
        weight, label, count = _full_walk_weights(w, s, window, z, walks.dtype, walks.device)
    else:
        weight, label, count = _walk_weights(valid, window, z, walks.dtype)
    logit = dot * scale + bias
    loss = F.binary_cross_entropy_with_logits(logit, label.expand_as(logit), weight, reduction="sum")
    g = torch.sigmoid(logit).sub_(label).mul_(weight)
    d_affine = torch.stack([(g * dot).sum(), g.sum()])
    normalise = 1.0 / max(count, 1)
    g = g.mul_(scale * normalise)  # the loss is a mean over the positive pairs
    g_gram = torch.zeros_like(gram)
    g_gram.as_strided(*band).copy_(g[:, :span].view(w, s, span))
    # symmetric (e_t·e_c = e_c·e_t, both orders weighted alike): each pair reaches both ends, as target and context
    d_walks = torch.bmm(g_gram[:, :, window : window + s], walks).mul_(2)
    g_negative = g[:, span:]
    d_walks += torch.bmm(g_negative.unsqueeze(1), flat_negatives).view(w, s, dim)
    d_negatives = (g_negative.unsqueeze(-1) * flat_walks).view(w, s, z, dim)
    return float(loss) * normalise, count, d_walks, d_negatives, d_affine * normalise


def _walk_weights(
    valid: torch.Tensor, window: int, z: int, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Per walk position, the weights of its 2·window + 1 neighbours (1 for a positive pair, 0 for itself and
    for padding) and of its z negatives (its number of positive pairs); the labels (1, then 0); the pair count."""
    w, s = valid.shape
    span = 2 * window + 1
    pairs = F.pad(valid, (window, window)).unfold(1, span, 1) & valid.unsqueeze(-1)  # w × s × span
    pairs[..., window] = False
    pairs = pairs.to(dtype).reshape(w * s, span)
    targets_at = pairs.sum(-1, keepdim=True)
    weight = torch.cat([pairs, targets_at.expand(-1, z)], 1)
    label = torch.cat([pairs.new_ones(span), pairs.new_zeros(z)])
    return weight, label, int(targets_at.sum())


@functools.lru_cache(maxsize=8)
def _full_walk_weights(w: int, s: int, window: int, z: int, dtype: torch.dtype, device: torch.device):
    return _walk_weights(torch.ones(w, s, dtype=torch.bool, device=device), window, z, dtype)


@torch.no_grad()
def embed_all(model: nn.Module, device: torch.device, batch_size: int = 65536) -> np.ndarray:
    """Embeddings of every node (|V| × d) as float32 numpy."""
    model.eval()
    parts = [
        model(torch.arange(start, min(start + batch_size, model.n_nodes), device=device)).cpu()
        for start in range(0, model.n_nodes, batch_size)
    ]
    model.train()
    return torch.cat(parts).numpy() if parts else np.zeros((0, 0), dtype=np.float32)


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
    Node ids index both.
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
    ):
        super().__init__()
        if structure is None and features is None:
            raise ConfigError(
                "the classifier needs IGEL embeddings, node features or both (task.use_igel, task.use_features)"
            )
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
        return self.mlp(torch.cat(inputs, dim=1) if len(inputs) > 1 else inputs[0])


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
