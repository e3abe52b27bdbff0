"""Random walks and skip-gram pairs, all walkers advancing together over the graph's CSR arrays."""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from typing import TypeVar

import igraph as ig
import numpy as np
import torch
import torch.nn.functional as F

from igel_exp.errors import ConfigError

T = TypeVar("T")

END = -1  # fills a walk after a node without neighbours
WALKS_PER_CHUNK = 65536  # walks drawn together: bounds the memory of a chunk of walks
# Rounds of node2vec's rejection after which the walkers still pending draw their step from its exact law. A leaf
# whose one step back weighs 1/p against a ceiling of 1/q keeps a proposal once in p/q tries (10^4 at p = 99, q =
# 0.01: 5,001 walks of 10 steps over a star took 50 s, and walks of 80 hours); node2vec's grid (p, q in 1/4..4) keeps
# one in 16 at worst, so a walker is still pending here once in 10^28, and its draws are those of pure rejection.
EXACT_AFTER_ROUNDS = 1000


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
    def edge_keys(self) -> np.ndarray:
        """head·|V| + tail of every directed edge, sorted (rows, then sorted indices)."""
        return np.repeat(np.arange(self.n_nodes), self.degree) * self.n_nodes + self.indices

    def has_edges(self, heads: np.ndarray, tails: np.ndarray) -> np.ndarray:
        """Vectorised membership test of (head, tail) pairs."""
        keys = self.edge_keys
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
    _check_walk_settings(walk_length, return_p, inout_q)
    walks = np.empty((len(starts), walk_length), dtype=np.int64)
    walks[:, 0] = starts
    biased = return_p != 1.0 or inout_q != 1.0
    for t in range(1, walk_length):
        if biased and t > 1:
            walks[:, t] = _biased_step(graph, walks[:, t - 2], walks[:, t - 1], rng, return_p, inout_q)
        else:
            walks[:, t] = _uniform_neighbour(graph, walks[:, t - 1], rng)
    return walks


def _check_walk_settings(walk_length: int, return_p: float, inout_q: float) -> None:
    if walk_length < 1:
        raise ConfigError(f"trainer.walk_length must be a positive integer, got {walk_length}")
    if return_p <= 0 or inout_q <= 0:
        raise ConfigError(f"trainer.return_p and trainer.inout_q must be positive, got {return_p}, {inout_q}")


def _biased_step(
    graph: CSRGraph, previous: np.ndarray, current: np.ndarray, rng: np.random.Generator, p: float, q: float
) -> np.ndarray:
    weights = np.array([1.0 / p, 1.0, 1.0 / q])
    ceiling = weights.max()
    step = np.full(len(current), END)
    pending = np.flatnonzero(current != END)
    for _ in range(EXACT_AFTER_ROUNDS):
        if not len(pending):
            return step
        proposal = _uniform_neighbour(graph, current[pending], rng)
        weight = weights[_kinds(graph, previous[pending], proposal)]
        keep = (proposal == END) | (rng.random(len(pending)) * ceiling < weight)
        step[pending[keep]] = proposal[keep]
        pending = pending[~keep]
    if len(pending):
        step[pending] = _exact_biased_step(graph, previous[pending], current[pending], rng, weights)
    return step


def _kinds(graph: CSRGraph, previous: np.ndarray, proposal: np.ndarray) -> np.ndarray:
    """Per proposal: 0 back to `previous`, 1 a neighbour of it, 2 further (node2vec's weights' order; END, which the
    rejection keeps whatever its weight, reads as node 0)."""
    back = proposal == previous
    near = graph.has_edges(previous, np.maximum(proposal, 0))
    return np.where(back, 0, np.where(near, 1, 2))


def _exact_biased_step(
    graph: CSRGraph, previous: np.ndarray, current: np.ndarray, rng: np.random.Generator, weights: np.ndarray
) -> np.ndarray:
    """node2vec's step from each `current` node (none END, each with a neighbour) drawn from its exact law: every
    neighbour weighed (back to `previous`, a neighbour of it, or further), one uniform draw per walker."""
    starts, lengths = graph.indptr[current], graph.degree[current]
    firsts = np.cumsum(lengths) - lengths  # each walker's first entry among all the walkers' neighbours
    walker = np.repeat(np.arange(len(current)), lengths)
    neighbour = graph.indices[np.arange(lengths.sum()) + np.repeat(starts - firsts, lengths)]
    totals = np.cumsum(weights[_kinds(graph, previous[walker], neighbour)])
    before = np.concatenate([[0.0], totals])[firsts]
    target = before + rng.random(len(current)) * (totals[firsts + lengths - 1] - before)
    chosen = np.minimum(np.searchsorted(totals, target, side="right"), firsts + lengths - 1)
    return neighbour[chosen]


def widest_window(window: int, walk_length: int) -> int:
    """The window as wide as a walk of `walk_length` positions can use: a wider one holds no more pairs, only
    padding (trainer.window=1000000 over walks of 20 trains as window 19)."""
    return min(window, max(walk_length - 1, 1))


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
    so that memory stays bounded by `walks_per_chunk` walks (two chunks: each is drawn while the caller works on the
    one before, drawn_ahead)."""
    if walks_per_node < 1:
        raise ConfigError(f"trainer.walks_per_node must be a positive integer, got {walks_per_node}")
    _check_walk_settings(walk_length, return_p, inout_q)
    starts = rng.permutation(np.tile(np.arange(graph.n_nodes), walks_per_node))
    return drawn_ahead(
        random_walks(graph, starts[begin : begin + walks_per_chunk], walk_length, rng, return_p, inout_q)
        for begin in range(0, len(starts), walks_per_chunk)
    )


def drawn_ahead(chunks: Iterable[T]) -> Iterator[T]:
    """Yield from `chunks` (walks, or the trainer's steps prepared from them), drawing the next on another thread while
    the caller works on this one: the same chunks in the same order from the same generator. numpy leaves Python's
    lock while it draws, and torch while it computes, so the drawing takes a core the trainer leaves idle (the
    scalability runs train on one thread: at 2^20 nodes their 12 s of walks are hidden in 270 s of training). Left
    early, it waits for the chunk being drawn."""
    iterator = iter(chunks)
    with ThreadPoolExecutor(1, thread_name_prefix="walks") as drawer:
        coming = drawer.submit(next, iterator, None)
        while (chunk := coming.result()) is not None:  # the drawer's error, if any, is raised here
            coming = drawer.submit(next, iterator, None)
            yield chunk


def walk_seed(seed: int) -> int:
    """The seed of DeviceWalker's generator, derived from the run's `seed`: the trainer draws the negatives from a
    generator of that seed on the same device, and two generators of one seed give the same bits (a batch's negatives
    read the very draws that chose its walks' steps)."""
    return int(np.random.SeedSequence([seed % 2**64, 1]).generate_state(1, np.uint64)[0])  # [seed, 1]: the walks'


class DeviceWalker:
    """Random walks drawn where training runs (a GPU): the graph's CSR arrays on the device, every walker of a chunk
    advanced by a few kernels per step, with torch's generator — so walks never cross the host link.

    The same walks in law as `epoch_walks` (uniform steps; node2vec's second-order steps by rejection), not the
    same draws: numpy's generator stays the CPU's, whose runs it keeps bit-identical to earlier versions.
    """

    def __init__(self, graph: CSRGraph, device: torch.device, seed: int):
        self.indptr = torch.as_tensor(graph.indptr, device=device)
        self.indices = torch.as_tensor(graph.indices, device=device)
        self.degree = torch.as_tensor(graph.degree, device=device)
        self.keys = torch.as_tensor(graph.edge_keys, device=device)
        self.n_nodes = graph.n_nodes
        self.generator = torch.Generator(device=device).manual_seed(walk_seed(seed))

    def epoch(
        self,
        walks_per_node: int,
        walk_length: int,
        return_p: float = 1.0,
        inout_q: float = 1.0,
        walks_per_chunk: int = WALKS_PER_CHUNK,
    ) -> Iterator[torch.Tensor]:
        """One epoch of walks (as `epoch_walks`): walks_per_node from every node in shuffled order, by chunks."""
        if walks_per_node < 1:
            raise ConfigError(f"trainer.walks_per_node must be a positive integer, got {walks_per_node}")
        order = torch.randperm(self.n_nodes * walks_per_node, generator=self.generator, device=self.indptr.device)
        starts = order % self.n_nodes
        for begin in range(0, len(starts), walks_per_chunk):
            yield self.walks(starts[begin : begin + walks_per_chunk], walk_length, return_p, inout_q)

    def walks(
        self, starts: torch.Tensor, walk_length: int, return_p: float = 1.0, inout_q: float = 1.0
    ) -> torch.Tensor:
        """One walk (len(starts) × walk_length) from each start node, END-padded after dead ends."""
        _check_walk_settings(walk_length, return_p, inout_q)
        walks = torch.empty((len(starts), walk_length), dtype=torch.int64, device=starts.device)
        walks[:, 0] = starts
        biased = return_p != 1.0 or inout_q != 1.0
        for t in range(1, walk_length):
            if biased and t > 1:
                walks[:, t] = self._biased_step(walks[:, t - 2], walks[:, t - 1], return_p, inout_q)
            else:
                walks[:, t] = self._uniform_neighbour(walks[:, t - 1])
        return walks

    def _uniform_neighbour(self, current: torch.Tensor) -> torch.Tensor:
        nodes = current.clamp(min=0)
        degree = self.degree.index_select(0, nodes)
        uniform = torch.rand(len(current), generator=self.generator, device=current.device, dtype=torch.float64)
        offset = (uniform * degree).long()
        position = (self.indptr.index_select(0, nodes) + offset).clamp_(max=max(len(self.indices) - 1, 0))
        step = self.indices.index_select(0, position) if len(self.indices) else nodes
        return torch.where((current != END) & (degree > 0), step, END)

    def _biased_step(self, previous: torch.Tensor, current: torch.Tensor, p: float, q: float) -> torch.Tensor:
        weights = torch.tensor([1.0 / p, 1.0, 1.0 / q], dtype=torch.float64, device=current.device)
        ceiling = float(weights.max())
        step = torch.full_like(current, END)
        pending = torch.nonzero(current != END).squeeze(1)
        for _ in range(EXACT_AFTER_ROUNDS):
            if not len(pending):  # one host read per round of rejection
                return step
            proposal = self._uniform_neighbour(current[pending])
            weight = weights[self._kinds(previous[pending], proposal)]
            uniform = torch.rand(len(pending), generator=self.generator, device=current.device, dtype=torch.float64)
            keep = (proposal == END) | (uniform * ceiling < weight)
            step[pending[keep]] = proposal[keep]
            pending = pending[~keep]
        if len(pending):
            step[pending] = self._exact_biased_step(previous[pending], current[pending], weights)
        return step

    def _kinds(self, previous: torch.Tensor, proposal: torch.Tensor) -> torch.Tensor:
        """Per proposal: 0 back to `previous`, 1 a neighbour of it, 2 further (node2vec's weights' order)."""
        back = proposal == previous
        probe = previous * self.n_nodes + proposal.clamp(min=0)
        found = torch.searchsorted(self.keys, probe).clamp_(max=max(len(self.keys) - 1, 0))
        near = (self.keys[found] == probe) if len(self.keys) else torch.zeros_like(back)
        return torch.where(back, 0, torch.where(near, 1, 2))

    def _exact_biased_step(self, previous: torch.Tensor, current: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """As the CPU walker's _exact_biased_step: the exact law, every neighbour weighed, for walkers still pending."""
        starts, lengths = self.indptr[current], self.degree[current]
        firsts = torch.cumsum(lengths, 0) - lengths
        walker = torch.repeat_interleave(torch.arange(len(current), device=current.device), lengths)
        entries = torch.arange(len(walker), device=current.device) + torch.repeat_interleave(starts - firsts, lengths)
        neighbour = self.indices[entries]
        totals = torch.cumsum(weights[self._kinds(previous[walker], neighbour)], 0)
        before = torch.cat([totals.new_zeros(1), totals])[firsts]
        uniform = torch.rand(len(current), generator=self.generator, device=current.device, dtype=torch.float64)
        target = before + uniform * (totals[firsts + lengths - 1] - before)
        chosen = torch.minimum(torch.searchsorted(totals, target, right=True), firsts + lengths - 1)
        return neighbour[chosen]


class AuthorsWalker:
    """The walks the authors' main process drew (nur-ag/IGEL src/batching.py, for trainer.walk_stream): Python's
    `random` seeded once with `seed` (their set_seed before each α's training), then each epoch a shuffle of the
    nodes (`uniformly_random_samples`) and from each node in that order a walk of `random.choice` steps among its
    neighbours, one per parallel edge (`random_walk`, `G.neighbors`: sorted, as the CSR rows are), to its full length
    or a node without any. Every draw is theirs where the graph's vertices are numbered as theirs were (Read_Ncol's
    order of first appearance) — CPython's Mersenne Twister, shuffle and choice have drawn alike since 3.2."""

    def __init__(self, graph: CSRGraph, seed: int):
        self.neighbours = [row.tolist() for row in np.split(graph.indices, graph.indptr[1:-1])]
        self.stream = random.Random(seed)

    def epoch(self, walk_length: int) -> Iterator[np.ndarray]:
        """One epoch's walks (as `epoch_walks`), a walk from every node, END-padded after a node without neighbours:
        one chunk (|V| × walk_length), drawn when asked for."""
        order = list(range(len(self.neighbours)))
        self.stream.shuffle(order)
        walks = np.full((len(order), walk_length), END, dtype=np.int64)
        choice = self.stream.choice
        for row, node in enumerate(order):
            walk = [node]
            while len(walk) < walk_length and (around := self.neighbours[walk[-1]]):
                walk.append(choice(around))
            walks[row, : len(walk)] = walk
        yield walks


BUCKETS = 777  # nur-ag/IGEL src/batching.py negative_sampling_batcher's cache_scale


@dataclass(frozen=True)
class AuthorsPairs:
    """An epoch's training pairs as the authors' code streamed them (nur-ag/IGEL src/batching.py), for
    trainer.batching=buckets: walk by walk, position by position, each positive pair (the target, then each node up
    to `window` steps away, in walk order) followed by its own z negatives, drawn uniformly among the other nodes
    (`negative_sample_walk`; its distance filter keeps only the target itself out: `neighbours_at_dist` adds no
    neighbour). Pair k of the stream goes to bucket k mod 777, and a bucket that holds `batch_size` pairs is a batch
    (`negative_sampling_batcher`); the part-filled buckets left at the end are joined bucket by bucket and cut into
    batches. A batch thus samples pairs 777 apart across a stretch of some 777 · batch_size pairs."""

    targets: np.ndarray  # per positive pair
    others: np.ndarray  # positive pairs × (1 + z): the context, then the z negatives, in the stream's order

    DRAWN_TOGETHER = 65536  # positive pairs whose negatives are drawn at once (numpy draws them as one call would)

    @classmethod
    def of_walks(
        cls,
        walks: np.ndarray,
        window: int,
        negatives: int,
        n_nodes: int,
        rng: np.random.Generator,
        labels: np.ndarray | None = None,
    ) -> AuthorsPairs:
        """The stream of `walks`' pairs; with `labels`, each node n in it replaced by labels[n] (its feature row, for
        a model that scores pairs of rows), the negatives drawn among the other nodes all the same."""
        length = walks.shape[1]
        window = widest_window(window, length)
        offsets = np.concatenate([np.arange(-window, 0), np.arange(1, window + 1)])
        around = np.arange(length)[:, None] + offsets  # [position, offset]: the context's position
        position, offset = np.nonzero((around >= 0) & (around < length))  # a walk's pairs, in the stream's order
        kept = np.int32 if n_nodes < 2**31 else np.int64  # half the memory to write and to read batches from
        # [walk, pair]: whole columns of the walks, 4-8× faster than gathering pair by pair
        targets, contexts = walks[:, position].astype(kept), walks[:, around[position, offset]].astype(kept)
        real = (targets != END) & (contexts != END)  # the pairs of walks that ended early are not
        targets, contexts = (targets.ravel(), contexts.ravel()) if real.all() else (targets[real], contexts[real])
        relabel = None if labels is None else labels.astype(kept)

        def label(nodes: np.ndarray) -> np.ndarray:
            return nodes if relabel is None else relabel[nodes]

        others = np.empty((len(targets), 1 + negatives), dtype=kept)
        others[:, 0] = label(contexts)
        for start in range(0, len(targets), cls.DRAWN_TOGETHER):  # the draws of one call, a cache-sized part at a time
            part = slice(start, start + cls.DRAWN_TOGETHER)
            # as `kept`: numpy draws any range under 2^32 from 32 bits, so int32 holds the numbers int64 would
            drawn = rng.integers(max(n_nodes - 1, 1), size=(len(targets[part]), negatives), dtype=kept)
            drawn += drawn >= targets[part, None]  # uniform among the other nodes
            others[part, 1:] = label(drawn)
        return cls(label(targets), others)

    @property
    def negatives(self) -> np.ndarray:
        return self.others[:, 1:]

    def n_batches(self, batch_size: int) -> int:
        return max(-(-self.others.size // batch_size), 1)

    def batches(self, batch_size: int) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """(targets, others, labels) of each batch, in the order the buckets fill."""
        total = self.others.size
        full, depth, short = _rest(total, batch_size)
        for start in range(0, full, BUCKETS * batch_size):  # a round: every bucket fills once, in turn
            yield from zip(*self._dealt(start, batch_size), strict=True)
        if full == total:
            return
        # the rest, bucket after bucket, joined and cut into batches
        targets, others, labels = (
            np.concatenate([part[:short].ravel(), part[short:, :-1].ravel()]) for part in self._dealt(full, depth)
        )
        for start in range(0, len(others), batch_size):
            batch = slice(start, start + batch_size)
            yield targets[batch], others[batch], labels[batch]

    def by_cell(self, batch_size: int, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
        """For a stream of pairs of a table's `rows` rows (of_walks with labels): each batch's pairs and positive pairs
        (`batches`) counted per cell of every two rows (int64, batches × rows², the pair of rows i and j in cell
        i·rows + j). They are all that a step from the table's Gram matrix takes of a batch (models.RowPairs), counted
        for the epoch at once, in one pass over the stream: its pairs are never dealt."""
        cells = rows * rows
        n_batches = self.n_batches(batch_size)
        kept = np.int32 if n_batches * 2 * cells < 2**31 else np.int64  # 3× faster arithmetic than int64
        keys = _batch_keys(self.others.size, batch_size, 2 * cells, kept).reshape(self.others.shape)
        keys += self.targets[:, None] * rows  # a batch's 2 · cells: its pairs'
        keys += self.others
        keys[:, 0] += cells  # then its positive pairs' (a pair's context)
        counts = torch.bincount(torch.from_numpy(keys.reshape(-1)), minlength=n_batches * 2 * cells)
        counts = counts.view(n_batches, 2, cells)
        return counts.sum(1), counts[:, 1]

    def _dealt(self, start: int, depth: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(targets, others, labels), 777 rows of depth pairs each: what the buckets receive of the stream's pairs from
        `start` on, bucket b's j'th pair being pair start + b + 777·j (targets and others 0 past the stream's end).
        They are the stretch of the stream as depth rows of 777, transposed: one copy, no gather per pair."""
        width, stretch = self.others.shape[1], BUCKETS * depth
        first, skip = divmod(start, width)
        last = -(-(start + stretch) // width)
        each_target = torch.from_numpy(self.targets[first:last, None]).expand(-1, width).reshape(-1)  # per pair
        others = torch.from_numpy(self.others.reshape(-1)[start : start + stretch])
        dealt = []
        for part in (each_target[skip : skip + stretch], others):
            if len(part) < stretch:  # the rest: its last row part-filled
                part = F.pad(part, (0, stretch - len(part)))
            dealt.append(part.view(depth, BUCKETS).T.contiguous().numpy())
        # a pair's label (a context, not a negative) repeats every `width` pairs along a bucket: a row per remainder
        remainders = ((np.arange(width)[:, None] + BUCKETS * np.arange(depth)) % width == 0).astype(np.float32)
        return *dealt, remainders[(start + np.arange(BUCKETS)) % width]


def _rest(total: int, batch_size: int) -> tuple[int, int, int]:
    """How a stream of `total` pairs is dealt (AuthorsPairs.batches): the pairs of its rounds of full buckets, the
    depth of the rest's buckets, and the first of them to end a pair short of it (the ones after it do too)."""
    full = total // (BUCKETS * batch_size) * BUCKETS * batch_size
    depth = -(-(total - full) // BUCKETS)
    return full, depth, total - full - BUCKETS * (depth - 1)


def _batch_keys(total: int, batch_size: int, stride: int, kept: type) -> np.ndarray:
    """Each pair of a stream of `total` pairs: the batch that `AuthorsPairs.batches` deals it into, times `stride`, as
    `kept` (an integer dtype that holds the products). Computed in place in one array: on first touch, each array of
    an epoch's pairs (26 MB for Les Misérables) faulted in took 65 ms."""
    full, depth, short = _rest(total, batch_size)
    keys = np.empty(full + depth * BUCKETS, dtype=kept)
    pair = np.arange(full, dtype=kept)  # in a round, bucket b gets pairs b + 777·j and is a batch
    keys[:full] = pair % kept(BUCKETS) + pair // kept(BUCKETS * batch_size) * kept(BUCKETS)
    # the rest as depth rows of 777 pairs: bucket b's j'th pair comes j after the buckets' before it, in the joined rest
    rest = keys[full:].reshape(depth, BUCKETS)
    lengths = np.where(np.arange(BUCKETS) < short, depth, depth - 1)
    np.add(np.cumsum(lengths) - lengths, np.arange(depth)[:, None], out=rest, casting="unsafe")
    rest //= kept(batch_size)
    rest += kept(full // batch_size)
    keys *= kept(stride)
    return keys[:total]
