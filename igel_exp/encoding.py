"""IGEL structural encoding (paper Section 3.2).

Node n is described by the counts of (distance c, degree δ) pairs over the nodes u of its α-ego graph
G_α(n), δ being u's degree inside G_α(n). The work is a breadth-first search from every node at once:
a chunk of source nodes is a sparse frontier matrix F_c (sources × vertices) and one sparse product
F_c @ A per layer finds, for each (source, u), how many of u's neighbours lie in layer c. Read at layer
c+1 that count is u's "closer" degree, at layer c its "same" degree, at layer c-1 its "further"
degree; a node's degree inside the ego graph is their sum (the outer shell has no further
neighbours inside the ball). The products run in scipy's C code, which releases the GIL, so chunks
run on a thread pool; memory is bounded by the chunk size. On a large graph a chunk works on the subgraph
its sources' balls span (`local_ball`), so that its cost does not grow with |V|.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import igraph as ig
import numpy as np
import scipy.sparse as sp
from tqdm.auto import tqdm

from igel_exp.errors import ConfigError, DataError

TRANSFORMS = ("log", "none")
NORMALISATIONS = ("sum", "max", "l2", "none")
PLAIN_BLOCKS = ("degree",)  # the column blocks of the features: each ego-graph node's degree,
RELATIVE_BLOCKS = ("closer", "further", "degree")  # and with relative_degrees its neighbours closer and further

# Per-entry bookkeeping is packed into one int64 so that a single sparse addition aligns it with the
# product: bits 60-61 tag the entry's layer relative to the frontier, three 20-bit fields hold counts.
_FIELD = 20
_MASK = (1 << _FIELD) - 1
_TAG_SHIFT = 60
_PREVIOUS_LAYER = 1 << _TAG_SHIFT
_CURRENT_LAYER = 2 << _TAG_SHIFT
MAX_SUPPORTED_DEGREE = _MASK
_DENSE_CHUNK_CELLS = 1 << 22  # per-chunk count histograms up to 32 MiB are built densely
# A chunk works on the subgraph spanned by its sources' balls when the graph has more than 16 times as many
# nodes as the chunk has sources and the balls span at most a quarter of it: there scipy's per-call arrays of
# |V| entries outweigh the chunk's work, elsewhere building the subgraph would be the overhead.
_LOCAL_ABOVE = 16
_LOCAL_SHARE = 0.25
# Where the balls are local, a chunk grows (up to 8 times encoder.chunk_size) until they span 2^17 nodes or a
# sixth of the graph: each chunk pays a fixed cost in Python, with the GIL held, that larger chunks share out
# between threads. Erdős–Rényi, 2^20 nodes, degree 8, 16 threads: 10.6 s against 31.8 s at α = 2, 6.5 against 19.5 s
# at α = 1; 2 threads: 25.6 against 35.8 s at α = 2; the same counts (docs/experiments.md, "The encoder on many cores").
_GROWN_SPAN = 1 << 17
_GROWN_SHARE = 6
_MAX_GROWTH = 8


@dataclass(frozen=True)
class Shell:
    """The nodes at exactly `distance` hops from each source of a chunk, with their ego-graph degrees.

    All arrays have one entry per (source, node) pair; `rows` indexes the chunk's sources.
    """

    distance: int
    rows: np.ndarray
    nodes: np.ndarray
    closer: np.ndarray  # neighbours one hop closer to the source
    same: np.ndarray  # neighbours at the same distance
    further: np.ndarray  # neighbours one hop further, inside the ego graph

    @property
    def degree(self) -> np.ndarray:
        """Degree of each node inside the source's ego graph."""
        return self.closer + self.same + self.further


def adjacency(graph: ig.Graph, multiplicity: bool = False) -> sp.csr_matrix:
    """Symmetric adjacency as int64 CSR (|V| × |V|): 0/1, or with `multiplicity` the number of parallel edges."""
    edges = np.asarray(graph.get_edgelist(), dtype=np.int64).reshape(-1, 2)
    rows = np.concatenate([edges[:, 0], edges[:, 1]])
    cols = np.concatenate([edges[:, 1], edges[:, 0]])
    n = graph.vcount()
    matrix = sp.csr_matrix((np.ones(len(rows), dtype=np.int64), (rows, cols)), shape=(n, n))
    matrix.sum_duplicates()
    if not multiplicity:
        matrix.data[:] = 1
    return matrix


def local_ball(
    adj: sp.csr_matrix, sources: np.ndarray, distance: int, max_share: float = 1.0, marks: np.ndarray | None = None
) -> tuple[np.ndarray, sp.csr_matrix] | None:
    """The nodes within `distance` hops of any of `sources` and the adjacency among them; None as soon as they are
    more than `max_share` of the graph's nodes. The nodes come in breadth-first order, the sources first (sorted, each
    once): in that order the ball's neighbours lie close together, and a chunk (its ball and ego_shells on it) takes
    48-54 ms against 60-66 ms with the nodes sorted by vertex id (Erdős–Rényi, 2^20 nodes, α = 3, 256 sources).

    Every path of at most `distance` hops from a source stays among these nodes, so the ego graphs of the
    sources, and ego_shells on this smaller graph, are the same as on the whole one. scipy's sparse products
    and sums allocate arrays as long as a matrix has columns, each call: on a large graph a chunk of sources
    would pay |V| per call for a few hundred nodes of work. `marks` (|V| int32, all -1) is scratch space that
    a caller reuses across chunks and gets back all -1: allocating or scanning |V| entries per chunk would
    bring that cost back.
    """
    limit = max_share * adj.shape[0]
    marks = np.full(adj.shape[0], -1, dtype=np.int32) if marks is None else marks
    frontier = np.unique(sources)
    layers = [frontier]
    marks[frontier] = 0
    for _ in range(distance):
        if not len(frontier) or sum(map(len, layers)) > limit:
            break
        neighbours = adj[frontier].indices  # scipy copies the rows in C
        fresh = neighbours[marks[neighbours] < 0]
        # one copy of each fresh node, without sorting: the last write of a repeated node wins
        order = np.arange(len(fresh), dtype=marks.dtype)
        marks[fresh] = order
        frontier = fresh[marks[fresh] == order]
        layers.append(frontier)
    nodes = np.concatenate(layers)
    try:
        if len(nodes) > limit:
            return None
        marks[nodes] = np.arange(len(nodes))
        rows = adj[nodes]
        local = marks[rows.indices]
        inside = local >= 0  # edges that leave the ball lead nowhere within `distance` hops: dropped
        kept = np.zeros(len(inside) + 1, dtype=rows.indptr.dtype)  # entries kept before each one
        np.cumsum(inside, out=kept[1:])
        ball = sp.csr_matrix((rows.data[inside], local[inside], kept[rows.indptr]), shape=(len(nodes),) * 2)
        return nodes, ball
    finally:
        marks[nodes] = -1


def grown_chunk(chunk_size: int, n: int, spanned: int) -> int:
    """Sources a chunk of a graph of `n` nodes encodes when `chunk_size` of them span `spanned` nodes with their
    balls: chunk_size, times as many as fit in _GROWN_SPAN nodes and a sixth of the graph (8 at most), while the
    chunk's balls stay local (n > _LOCAL_ABOVE sources a chunk)."""
    room = min(_GROWN_SPAN, n // _GROWN_SHARE) // max(spanned, 1)
    local = (n - 1) // max(_LOCAL_ABOVE * chunk_size, 1)
    return chunk_size * max(1, min(_MAX_GROWTH, room, local))


def _csr(data: np.ndarray, rows: np.ndarray, cols: np.ndarray, shape: tuple[int, int]) -> sp.csr_matrix:
    """CSR from entries already grouped by row, keeping their order (data stays aligned with cols)."""
    indptr = np.zeros(shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=shape[0]), out=indptr[1:])
    return sp.csr_matrix((data, cols, indptr), shape=shape)


def ego_shells(adj: sp.csr_matrix, sources: np.ndarray, distance: int) -> list[Shell]:
    """Shells 0..distance of the ego graphs of `sources` (a chunk of vertex ids), exact."""
    n_sources, n_vertices = len(sources), adj.shape[0]
    shape = (n_sources, n_vertices)
    local = np.arange(n_sources)
    frontier = _csr(np.ones(n_sources, dtype=np.int64), local, np.asarray(sources), shape)
    current = _csr(np.full(n_sources, _CURRENT_LAYER), local, np.asarray(sources), shape)
    previous = None
    shells = []
    for c in range(distance + 1):
        known = current if previous is None else current + previous
        product = frontier @ adj
        if c == distance:  # only counts on known nodes are needed: drop the next layer before decoding
            pattern = known.copy()
            pattern.data = np.ones_like(pattern.data)
            product = product.multiply(pattern).tocsr()
        merged = product + known
        data, cols = merged.data, merged.indices
        rows = np.repeat(local, np.diff(merged.indptr))
        tag = data & (3 << _TAG_SHIFT)

        if c > 0:  # layer c-1 is complete: its "further" counts just arrived
            done = tag == _PREVIOUS_LAYER
            packed, done_rows, done_cols = data[done], rows[done], cols[done]
            closer, same, further = packed >> (2 * _FIELD) & _MASK, packed >> _FIELD & _MASK, packed & _MASK
            shells.append(Shell(c - 1, done_rows, done_cols, closer, same, further))

        here = tag == _CURRENT_LAYER
        packed, here_rows, here_cols = data[here], rows[here], cols[here]
        closer, same = packed >> (2 * _FIELD) & _MASK, packed & _MASK
        new = tag == 0
        # the outer shell, or every ego graph is whole (no node further out: the shells past c are empty, and a huge
        # distance costs no more than the graph's diameter)
        if c == distance or not new.any():
            shells.append(Shell(c, here_rows, here_cols, closer, same, np.zeros_like(same)))
            break
        previous = _csr(_PREVIOUS_LAYER | closer << (2 * _FIELD) | same << _FIELD, here_rows, here_cols, shape)
        new_rows, new_cols = rows[new], cols[new]
        frontier = _csr(np.ones(len(new_cols), dtype=np.int64), new_rows, new_cols, shape)
        current = _csr(_CURRENT_LAYER | data[new] << (2 * _FIELD), new_rows, new_cols, shape)
    return shells


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(f"encoder.{name}={value!r} is not one of {', '.join(choices)}")


class IGELEncoder:
    """Sparse IGEL features of every node: fit fixes δmax, transform encodes any graph with it.

    With `relative_degrees` each ego-graph node adds three pairs instead of one: (c, closer degree),
    (c, further degree) and (c, degree), in three column blocks of (α+1)(δmax+1) columns each.
    """

    def __init__(
        self,
        distance: int = 1,
        transform: str = "log",
        normalise: str = "sum",
        relative_degrees: bool = False,
        chunk_size: int = 256,
        n_jobs: int | None = None,
        progress: bool = False,
    ):
        if isinstance(distance, bool) or not isinstance(distance, (int, np.integer)) or distance < 0:
            raise ConfigError(f"encoder.distance must be a non-negative integer, got {distance!r}")
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) or chunk_size < 1:
            raise ConfigError(f"encoder.chunk_size must be a positive integer, got {chunk_size!r}")
        _check_choice("transform", transform, TRANSFORMS)
        _check_choice("normalise", normalise, NORMALISATIONS)
        self.distance = int(distance)
        self.transform_name = transform
        self.normalise = normalise
        self.relative_degrees = relative_degrees
        self.chunk_size = chunk_size
        self.n_jobs = n_jobs or len(os.sched_getaffinity(0))
        self.progress = progress
        self.max_degree_: int | None = None

    def fit(self, graph: ig.Graph) -> IGELEncoder:
        """Fix δmax to the graph's largest degree."""
        _check_igraph(graph)
        self.max_degree_ = _max_degree(graph)
        return self

    def frozen(self) -> dict:
        """What the features of any graph depend on once fitted: α, δmax, transform, normalisation, relative
        degrees, and the column layout they give (`blocks` of (α+1)(δmax+1) columns, column
        block·(α+1)(δmax+1) + distance·(δmax+1) + min(degree, δmax))."""
        self._check_fitted()
        return {
            "distance": self.distance,
            "max_degree": self.max_degree_,
            "transform": self.transform_name,
            "normalise": self.normalise,
            "relative_degrees": bool(self.relative_degrees),
            "blocks": list(RELATIVE_BLOCKS if self.relative_degrees else PLAIN_BLOCKS),
            "n_features": self.n_features,
        }

    @classmethod
    def from_frozen(cls, settings: dict, chunk_size: int = 256, n_jobs: int | None = None) -> IGELEncoder:
        """The fitted encoder that `frozen()` described: it encodes any graph as the original one did."""
        encoder = cls(
            distance=settings["distance"],
            transform=settings["transform"],
            normalise=settings["normalise"],
            relative_degrees=settings["relative_degrees"],
            chunk_size=chunk_size,
            n_jobs=n_jobs,
        )
        encoder.max_degree_ = int(settings["max_degree"])
        if encoder.max_degree_ < 0:
            raise ValueError(f"max_degree is {encoder.max_degree_}, a degree: at least 0")
        if encoder.frozen() != settings:
            raise ValueError(f"inconsistent encoder settings {settings} (they give {encoder.frozen()})")
        return encoder

    @property
    def n_features(self) -> int:
        """Number of columns: (α+1)(δmax+1), three times that with relative degrees."""
        self._check_fitted()
        block = (self.distance + 1) * (self.max_degree_ + 1)
        return 3 * block if self.relative_degrees else block

    def counts(self, graph: ig.Graph) -> sp.csr_matrix:
        """Raw pair counts, CSR (|V| × n_features) int64, rows in the graph's vertex order."""
        self._check_fitted()
        _check_igraph(graph)
        if graph.is_directed():
            raise ValueError("IGEL encodes undirected graphs without self loops: make it undirected (as_undirected())")
        if any(graph.is_loop()):
            raise ValueError("IGEL encodes undirected graphs without self loops: drop them (simplify(multiple=False))")
        _max_degree(graph)  # degrees above δmax are clamped, but the counts must fit their bit fields
        # parallel edges count in the ego graphs' degrees, as in the authors' induced subgraphs (dataset.parallel_edges)
        adj = adjacency(graph, multiplicity=True)
        n = graph.vcount()
        chunk = self._chunk(adj)
        starts = range(0, n, chunk)
        scratch = threading.local()  # local_ball's marks, one array per thread

        def encode(start: int) -> sp.csr_matrix:
            sources = np.arange(start, min(start + chunk, n))
            graph, local, ball = adj, sources, None
            # where the chunk's balls are a small part of the graph, work on the subgraph they span
            if n > _LOCAL_ABOVE * len(sources):
                if not hasattr(scratch, "marks"):
                    scratch.marks = np.full(n, -1, dtype=np.int32)
                ball = local_ball(adj, sources, self.distance, _LOCAL_SHARE, scratch.marks)
            if ball is not None:
                graph = ball[1]
                local = np.arange(len(sources))  # the ball's first nodes: the (sorted, distinct) sources
            return self._chunk_counts(ego_shells(graph, local, self.distance), len(sources))

        with ThreadPoolExecutor(self.n_jobs) as pool:
            try:
                chunks = pool.map(encode, starts)
                bar = tqdm(chunks, total=len(starts), desc=f"encode α={self.distance}", disable=not self.progress)
                blocks = list(bar)
            except BaseException:
                # interrupted (Ctrl-C, a memory budget): leaving the pool would first run every queued chunk
                pool.shutdown(cancel_futures=True)
                raise
        if not blocks:
            return sp.csr_matrix((0, self.n_features), dtype=np.int64)
        return sp.vstack(blocks, format="csr")

    def transform(self, graph: ig.Graph) -> sp.csr_matrix:
        """Model inputs: counts transformed (log2(1+z) by default) then normalised per node, float32."""
        features = self.counts(graph).astype(np.float32)
        if self.transform_name == "log":
            features.data = np.log2(1.0 + features.data)
        return normalise_rows(features, self.normalise)

    def fit_transform(self, graph: ig.Graph) -> sp.csr_matrix:
        return self.fit(graph).transform(graph)

    def _chunk(self, adj: sp.csr_matrix) -> int:
        """The chunk size: encoder.chunk_size, grown where the balls of such chunks span little of a large graph. The
        widest of three chunks' balls (the first, middle and last sources) stands for all: a graph's numbering can put
        its hubs at either end."""
        n, size = adj.shape[0], min(self.chunk_size, adj.shape[0])
        if n <= _LOCAL_ABOVE * self.chunk_size:
            return self.chunk_size
        spans = []
        for start in (0, (n - size) // 2, n - size):
            ball = local_ball(adj, np.arange(start, start + size), self.distance, _LOCAL_SHARE)
            if ball is None:
                return self.chunk_size
            spans.append(len(ball[0]))
        return grown_chunk(self.chunk_size, n, max(spans))

    def _chunk_counts(self, shells: list[Shell], n_rows: int) -> sp.csr_matrix:
        delta = self.max_degree_ + 1
        block = (self.distance + 1) * delta
        values = [(s.degree,) for s in shells]
        if self.relative_degrees:
            values = [(s.closer, s.further, s.degree) for s in shells]
        rows, cols = [], []
        for shell, per_block in zip(shells, values, strict=True):
            for b, value in enumerate(per_block):
                rows.append(shell.rows)
                cols.append(b * block + shell.distance * delta + np.minimum(value, self.max_degree_))
        rows, cols = np.concatenate(rows), np.concatenate(cols)
        if n_rows * self.n_features <= _DENSE_CHUNK_CELLS:  # a histogram beats sorting entries
            dense = np.bincount(rows * self.n_features + cols, minlength=n_rows * self.n_features)
            return sp.csr_matrix(dense.reshape(n_rows, self.n_features))
        matrix = sp.coo_matrix((np.ones(len(rows), dtype=np.int64), (rows, cols)), shape=(n_rows, self.n_features))
        return matrix.tocsr()

    def _check_fitted(self) -> None:
        if self.max_degree_ is None:
            raise RuntimeError("IGELEncoder is not fitted: call fit(graph) first")


def _check_igraph(graph: ig.Graph) -> None:
    """A networkx graph (or any other) failed deep in igraph's calls, an AttributeError or a TypeError of tuples."""
    if not isinstance(graph, ig.Graph):
        raise TypeError(f"IGEL encodes igraph graphs, not a {type(graph).__name__} (ig.Graph.from_networkx)")


def _max_degree(graph: ig.Graph) -> int:
    degrees = graph.degree()
    degree = int(max(degrees, default=0))
    if degree > MAX_SUPPORTED_DEGREE:
        hub = degrees.index(degree)
        name = graph.vs[hub]["name"] if "name" in graph.vs.attributes() else hub
        raise DataError(
            f"node {name} has {degree:,} neighbours: IGEL's encoder counts degrees up to {MAX_SUPPORTED_DEGREE:,}"
        )
    return degree


def normalise_rows(features: sp.csr_matrix, how: str) -> sp.csr_matrix:
    """Scale each row by its sum, max or L2 norm ('none' leaves it); all-zero rows stay zero."""
    _check_choice("normalise", how, NORMALISATIONS)
    if how == "none":
        return features
    if how == "sum":
        scale = np.asarray(abs(features).sum(axis=1)).ravel()
    elif how == "max":
        scale = abs(features).max(axis=1).toarray().ravel()
    else:
        scale = np.sqrt(np.asarray(features.multiply(features).sum(axis=1)).ravel())
    scale[scale == 0] = 1.0
    return sp.csr_matrix(sp.diags((1.0 / scale).astype(features.dtype)) @ features)
