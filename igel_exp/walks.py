"""Random walks and skip-gram pairs, all walkers advancing together over the graph's CSR arrays."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

import igraph as ig
import numpy as np

from igel_exp.errors import ConfigError

END = -1  # fills a walk after a node without neighbours
WALKS_PER_CHUNK = 65536  # walks drawn together: bounds the memory of a chunk of walks


@dataclass(frozen=True)
class CSRGraph:
    """Neighbour lists as CSR arrays (indices sorted within each row)."""

    indptr: np.ndarray
    indices: np.ndarray

    @classmethod
    def from_igraph(cls, graph: ig.Graph) -> CSRGraph:
        edges = np.asarray(graph.get_edgelist(), dtype=np.int64).reshape(-1, 2)
        heads = np.concatenate([edges[:, 0], edges[:, 1]])
        tails = np.concatenate([edges[:, 1], edges[:, 0]])
        order = np.lexsort((tails, heads))
        indptr = np.zeros(graph.vcount() + 1, dtype=np.int64)
        np.cumsum(np.bincount(heads, minlength=graph.vcount()), out=indptr[1:])
        return cls(indptr, tails[order])

    @property
    def degree(self) -> np.ndarray:
        return np.diff(self.indptr)

    @property
    def n_nodes(self) -> int:
        return len(self.indptr) - 1

    @cached_property
    def _edge_keys(self) -> np.ndarray:
        """head·|V| + tail of every directed edge, sorted (rows, then sorted indices)."""
        return np.repeat(np.arange(self.n_nodes), self.degree) * self.n_nodes + self.indices

    def has_edges(self, heads: np.ndarray, tails: np.ndarray) -> np.ndarray:
        """Vectorised membership test of (head, tail) pairs."""
        keys = self._edge_keys
        if not len(keys):
            return np.zeros(len(heads), dtype=bool)
        probe = heads * self.n_nodes + tails
        found = np.minimum(np.searchsorted(keys, probe), len(keys) - 1)
        return keys[found] == probe


def _uniform_neighbour(graph: CSRGraph, current: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A uniformly chosen neighbour of each node, END where there is none (or the walk already ended)."""
    alive = current != END
    nodes = np.where(alive, current, 0)
    degree = graph.degree[nodes]
    offset = np.floor(rng.random(len(current)) * degree).astype(np.int64)
    step = (
        graph.indices[np.minimum(graph.indptr[nodes] + offset, len(graph.indices) - 1)] if len(graph.indices) else nodes
    )
    return np.where(alive & (degree > 0), step, END)


def random_walks(
    graph: CSRGraph,
    starts: np.ndarray,
    walk_length: int,
    rng: np.random.Generator,
    return_p: float = 1.0,
    inout_q: float = 1.0,
) -> np.ndarray:
    """One walk (len(starts) × walk_length) from each start node, END-padded after dead ends.

    With p = q = 1 walks are uniform (DeepWalk, IGEL); otherwise node2vec's second-order walks, drawn by
    rejection: a uniform proposal x is kept with probability w(x)/max w, w = 1/p to return to the previous
    node, 1 for a neighbour of it, 1/q otherwise.
    """
    if walk_length < 1:
        raise ConfigError(f"trainer.walk_length must be a positive integer, got {walk_length}")
    if return_p <= 0 or inout_q <= 0:
        raise ConfigError(f"trainer.return_p and trainer.inout_q must be positive, got {return_p}, {inout_q}")
    walks = np.empty((len(starts), walk_length), dtype=np.int64)
    walks[:, 0] = starts
    biased = return_p != 1.0 or inout_q != 1.0
    for t in range(1, walk_length):
        if biased and t > 1:
            walks[:, t] = _biased_step(graph, walks[:, t - 2], walks[:, t - 1], rng, return_p, inout_q)
        else:
            walks[:, t] = _uniform_neighbour(graph, walks[:, t - 1], rng)
    return walks


def _biased_step(
    graph: CSRGraph, previous: np.ndarray, current: np.ndarray, rng: np.random.Generator, p: float, q: float
) -> np.ndarray:
    weights = np.array([1.0 / p, 1.0, 1.0 / q])
    ceiling = weights.max()
    step = np.full(len(current), END)
    pending = np.flatnonzero(current != END)
    while len(pending):
        proposal = _uniform_neighbour(graph, current[pending], rng)
        back = proposal == previous[pending]
        near = graph.has_edges(previous[pending], np.maximum(proposal, 0))
        weight = np.where(back, weights[0], np.where(near, weights[1], weights[2]))
        keep = (proposal == END) | (rng.random(len(pending)) * ceiling < weight)
        step[pending[keep]] = proposal[keep]
        pending = pending[~keep]
    return step


def positive_pairs(walk_length: int, window: int) -> int:
    """Skip-gram pairs (both orders) in one walk without dead ends: 2 Σ_{k=1..window} (s − k)."""
    return 2 * sum(walk_length - k for k in range(1, min(window, walk_length - 1) + 1))


def epoch_walks(
    graph: CSRGraph,
    walks_per_node: int,
    walk_length: int,
    rng: np.random.Generator,
    return_p: float = 1.0,
    inout_q: float = 1.0,
    walks_per_chunk: int = WALKS_PER_CHUNK,
) -> Iterator[np.ndarray]:
    """One epoch of walks: walks_per_node from every node, in shuffled order, a chunk of walks at a time
    so that memory stays bounded by `walks_per_chunk` walks."""
    if walks_per_node < 1:
        raise ConfigError(f"trainer.walks_per_node must be a positive integer, got {walks_per_node}")
    starts = rng.permutation(np.tile(np.arange(graph.n_nodes), walks_per_node))
    for begin in range(0, len(starts), walks_per_chunk):
        yield random_walks(graph, starts[begin : begin + walks_per_chunk], walk_length, rng, return_p, inout_q)
