import gzip
import random
import threading
import time

import igraph as ig
import numpy as np
import pytest
import torch

from igel_exp import walks as walks_module
from igel_exp.data import DataContext, load_dataset
from igel_exp.errors import ConfigError
from igel_exp.walks import (
    END,
    AuthorsPairs,
    AuthorsWalker,
    CSRGraph,
    DeviceWalker,
    drawn_ahead,
    epoch_walks,
    positive_pairs,
    random_walks,
)

from conftest import shared_data_root, small_graphs


@pytest.fixture(
    params=[
        "numpy",
        "torch-cpu",
        pytest.param("torch-cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU")),
    ]
)
def walker(request):
    """Walks from numpy's generator on the host (the CPU trainer's), or from torch's on a device (a GPU's):
    draws differ, the law must not."""

    def draw(graph: CSRGraph, starts: np.ndarray, length: int, seed: int, p: float = 1.0, q: float = 1.0):
        if request.param == "numpy":
            return random_walks(graph, starts, length, np.random.default_rng(seed), p, q)
        device = torch.device(request.param.removeprefix("torch-"))
        on_device = DeviceWalker(graph, device, seed).walks(torch.as_tensor(starts, device=device), length, p, q)
        return on_device.cpu().numpy()

    return draw


def test_csr_graph_matches_igraph_neighbours():
    graph = small_graphs()["disconnected"]
    csr = CSRGraph.from_igraph(graph)
    for v in range(graph.vcount()):
        assert csr.indices[csr.indptr[v] : csr.indptr[v + 1]].tolist() == sorted(graph.neighbors(v))
    heads, tails = np.array([0, 0, 6, 13]), np.array([1, 3, 7, 14])
    expected = [graph.are_adjacent(int(h), int(t)) for h, t in zip(heads, tails, strict=True)]
    assert csr.has_edges(heads, tails).tolist() == expected


@pytest.mark.parametrize("p, q", [(1.0, 1.0), (0.25, 4.0), (4.0, 0.25)])
def test_every_step_follows_an_edge_and_dead_ends_pad(p, q, walker):
    graph = small_graphs()["with_isolated"]
    csr = CSRGraph.from_igraph(graph)
    walks = walker(csr, np.arange(graph.vcount()), 12, 0, p, q)
    assert walks.shape == (graph.vcount(), 12)
    np.testing.assert_array_equal(walks[:, 0], np.arange(graph.vcount()))
    for walk in walks:
        steps = walk[walk != END]
        assert all(graph.are_adjacent(int(a), int(b)) for a, b in zip(steps[:-1], steps[1:], strict=True))
        assert (walk[len(steps) :] == END).all()
    isolated = np.flatnonzero(np.asarray(graph.degree()) == 0)
    assert (walks[isolated, 1:] == END).all()


def test_uniform_walks_choose_neighbours_uniformly(walker):
    star = ig.Graph.Star(5)  # from the centre, each of 4 leaves with probability 1/4
    walks = walker(CSRGraph.from_igraph(star), np.zeros(40000, dtype=np.int64), 2, 1)
    shares = np.bincount(walks[:, 1], minlength=5)[1:] / 40000
    np.testing.assert_allclose(shares, 0.25, atol=0.01)


def test_node2vec_return_parameter_biases_going_back(walker):
    # path 0-1-2: from 1 having come from 0, going back has weight 1/p, going on to 2 weight 1/q
    path = CSRGraph.from_igraph(ig.Graph([(0, 1), (1, 2)]))
    walks = walker(path, np.zeros(20000, dtype=np.int64), 3, 2, p=0.25, q=1.0)
    back = np.mean(walks[:, 2] == 0)
    assert back == pytest.approx(4 / 5, abs=0.02)  # weights 4 (back) vs 1 (on)
    # a triangle 0-1-2 with a tail 2-3: from 2 having come from 1, 0 is a neighbour of 1 (weight 1), 3 is not (1/q)
    tailed = CSRGraph.from_igraph(ig.Graph([(0, 1), (1, 2), (2, 0), (2, 3)]))
    starts = np.ones(30000, dtype=np.int64)
    walks = walker(tailed, starts, 3, 3, p=1.0, q=4.0)
    from_two = walks[walks[:, 1] == 2, 2]
    shares = np.bincount(from_two, minlength=4)[[0, 1, 3]] / len(from_two)
    np.testing.assert_allclose(shares, np.array([1, 1, 0.25]) / 2.25, atol=0.02)


@pytest.mark.parametrize("rounds", [0, 1])
def test_node2vec_steps_left_after_the_rejection_rounds_follow_the_exact_law(walker, monkeypatch, rounds):
    """Walkers the rejection leaves pending draw from the exact law (every neighbour weighed): with no rounds every
    step does, with one some steps are rejection's and the rest exact; either way the law of the rejection test
    above."""
    monkeypatch.setattr(walks_module, "EXACT_AFTER_ROUNDS", rounds)
    tailed = CSRGraph.from_igraph(ig.Graph([(0, 1), (1, 2), (2, 0), (2, 3)]))
    walks = walker(tailed, np.ones(30000, dtype=np.int64), 3, 3, p=0.5, q=4.0)
    from_two = walks[walks[:, 1] == 2, 2]
    shares = np.bincount(from_two, minlength=4)[[0, 1, 3]] / len(from_two)
    np.testing.assert_allclose(shares, np.array([1, 2, 0.25]) / 3.25, atol=0.02)  # 0: near, 1: back (1/p), 3: 1/q
    assert all(tailed.has_edges(walks[:, 1], walks[:, 2]))


class _CountingGenerator:
    """numpy's generator, counting the calls of `random`: one per uniform step, two per round of rejection (the
    proposal, its acceptance), one for the exact law's steps."""

    def __init__(self, seed: int):
        self.rng, self.calls = np.random.default_rng(seed), 0

    def random(self, size):
        self.calls += 1
        return self.rng.random(size)


def test_node2vec_walks_from_leaves_end_at_extreme_settings():
    """p = 99, q = 0.01 (both allowed) keep a leaf's only step, back, once in 10^4 proposals: 5,001 walks of 10 steps
    over a star took 50 s, walks of 80 hours. The rejection now stops after EXACT_AFTER_ROUNDS rounds a step."""
    star = CSRGraph.from_igraph(ig.Graph.Star(2001))
    rng = _CountingGenerator(0)
    walks = random_walks(star, np.zeros(2000, dtype=np.int64), 3, rng, 99.0, 0.01)
    assert (walks[:, 1] >= 1).all() and (walks[:, 2] == 0).all()  # the hub, a leaf, back to the hub
    assert rng.calls <= 1 + 2 * walks_module.EXACT_AFTER_ROUNDS + 1  # before: 189,737


def test_positive_pairs_per_walk():
    # a walk of 4 nodes with window 2: offsets 1 (3 pairs) and 2 (2 pairs), both orders
    assert positive_pairs(4, 2) == 10
    assert positive_pairs(4, 10) == 2 * (3 + 2 + 1)
    assert positive_pairs(1, 3) == 0


def test_epoch_walks_are_reproducible_shuffled_and_chunked():
    graph = small_graphs()["zachary"]
    csr = CSRGraph.from_igraph(graph)

    def draw(seed):
        return list(epoch_walks(csr, 3, 10, np.random.default_rng(seed), walks_per_chunk=16))

    first, second, other = draw(5), draw(5), draw(6)
    assert [len(c) for c in first] == [16] * 6 + [6]
    starts = np.concatenate([c[:, 0] for c in first])
    assert sorted(starts.tolist()) == sorted(list(range(34)) * 3)
    assert not np.array_equal(starts, np.tile(np.arange(34), 3))
    np.testing.assert_array_equal(np.concatenate(first), np.concatenate(second))
    assert not np.array_equal(np.concatenate(first), np.concatenate(other))


def test_walks_drawn_ahead_are_the_same_chunks_the_next_drawn_on_another_thread_meanwhile():
    """drawn_ahead (epoch_walks draws through it): the same chunks in the same order from the same generator; when the
    caller holds a chunk, the next is drawn (or being drawn) on the drawer's thread, without being asked for."""
    csr = CSRGraph.from_igraph(small_graphs()["zachary"])
    drawn = []  # the thread each chunk was drawn on

    def chunks():
        rng = np.random.default_rng(5)
        for _ in range(4):
            drawn.append(threading.current_thread())
            yield random_walks(csr, np.arange(34), 10, rng)

    ahead = drawn_ahead(chunks())
    first = next(ahead)
    deadline = time.monotonic() + 10
    while len(drawn) < 2 and time.monotonic() < deadline:  # the second chunk, drawn while the caller holds the first
        time.sleep(0.01)
    assert len(drawn) == 2 and threading.main_thread() not in drawn
    for got, want in zip([first, *ahead], list(chunks()), strict=True):
        np.testing.assert_array_equal(got, want)


def test_walks_drawn_ahead_raise_the_drawers_error_and_stop_drawing_when_left():
    def failing():
        yield np.zeros((2, 3), dtype=np.int64)
        raise ConfigError("trainer.walk_length must be a positive integer, got 0")

    with pytest.raises(ConfigError, match="walk_length"):
        list(drawn_ahead(failing()))
    drawn = []

    def endless():
        while True:
            drawn.append(len(drawn))
            yield np.zeros((2, 3), dtype=np.int64)

    ahead = drawn_ahead(endless())
    next(ahead)
    ahead.close()  # the training stopped: the chunk in hand is waited for, no other drawn
    settled = len(drawn)
    time.sleep(0.1)
    assert settled == len(drawn) <= 2


def test_device_walks_are_reproducible_shuffled_and_chunked(device):
    csr = CSRGraph.from_igraph(small_graphs()["zachary"])

    def draw(seed):
        return [chunk.cpu().numpy() for chunk in DeviceWalker(csr, device, seed).epoch(3, 10, walks_per_chunk=16)]

    first, second, other = draw(5), draw(5), draw(6)
    assert [len(c) for c in first] == [16] * 6 + [6]
    assert sorted(np.concatenate([c[:, 0] for c in first]).tolist()) == sorted(list(range(34)) * 3)
    np.testing.assert_array_equal(np.concatenate(first), np.concatenate(second))
    assert not np.array_equal(np.concatenate(first), np.concatenate(other))


@pytest.mark.parametrize(
    "kwargs, key",
    [({"walks_per_node": 0}, "walks_per_node"), ({"walk_length": 0}, "walk_length")],
)
def test_bad_walk_settings_name_their_key(kwargs, key):
    csr = CSRGraph.from_igraph(ig.Graph.Ring(5))
    settings = {"walks_per_node": 1, "walk_length": 5, **kwargs}
    with pytest.raises(ConfigError, match=key):
        list(epoch_walks(csr, rng=np.random.default_rng(0), **settings))


def _authors_stream(walks: np.ndarray, window: int, negatives: np.ndarray) -> list[tuple[int, int, int]]:
    """nur-ag/IGEL src/batching.py negative_sample_walk, line by line, with the negatives drawn beforehand."""
    stream, positive = [], 0
    for walk in walks:
        walk = [int(node) for node in walk if node != END]
        for i, node in enumerate(walk):
            for index in range(max(0, i - window), min(len(walk), i + window + 1)):
                if index == i:
                    continue
                stream.append((node, walk[index], 1))
                stream.extend((node, int(negative), 0) for negative in negatives[positive])
                positive += 1
    return stream


def _authors_batcher(stream: list, batch_size: int, cache_scale: int) -> list[list]:
    """src/batching.py negative_sampling_batcher: round-robin buckets, full ones yielded, the rest joined at the end."""
    buckets, batches = [[] for _ in range(cache_scale)], []
    for i, pair in enumerate(stream):
        buckets[i % cache_scale].append(pair)
        if len(buckets[i % cache_scale]) == batch_size:
            batches.append(buckets[i % cache_scale])
            buckets[i % cache_scale] = []
    rest = [pair for bucket in buckets for pair in bucket]
    return batches + [rest[start : start + batch_size] for start in range(0, len(rest), batch_size)]


@pytest.mark.parametrize("isolated", [True, False])
@pytest.mark.parametrize("buckets, batch_size, full_rounds", [(3, 7, True), (5, 4, True), (777, 50, False)])
def test_authors_pairs_are_the_authors_stream_dealt_into_their_buckets(
    monkeypatch, buckets, batch_size, full_rounds, isolated
):
    monkeypatch.setattr(walks_module, "BUCKETS", buckets)
    graph = small_graphs()["miserables"]
    if isolated:
        graph.add_vertices(1)  # its walk ends at once
    walks = random_walks(CSRGraph.from_igraph(graph), np.arange(graph.vcount()), 6, np.random.default_rng(0))
    pairs = AuthorsPairs.of_walks(walks, 2, 3, graph.vcount(), np.random.default_rng(1))
    expected = _authors_batcher(_authors_stream(walks, 2, pairs.negatives), batch_size, buckets)
    ours = [list(zip(*(part.tolist() for part in batch), strict=True)) for batch in pairs.batches(batch_size)]
    assert [[(t, o, int(label)) for t, o, label in batch] for batch in ours] == expected
    assert (len(expected) > buckets) == full_rounds  # rounds of full buckets, then the joined rest


@pytest.mark.parametrize("buckets, batch_size", [(3, 7), (5, 4), (777, 50)])
def test_authors_pairs_counted_per_cell_are_each_dealt_batchs_pairs(monkeypatch, buckets, batch_size):
    """by_cell: each batch's pairs and positive pairs per cell of a table's every two rows, counted for the epoch at
    once, are those of the batch that `batches` deals, in rounds of full buckets and in the joined rest (an isolated
    node's walk ends at once)."""
    monkeypatch.setattr(walks_module, "BUCKETS", buckets)
    graph = small_graphs()["miserables"]
    graph.add_vertices(1)
    walks = random_walks(CSRGraph.from_igraph(graph), np.arange(78), 6, np.random.default_rng(0))
    rows = np.random.default_rng(2).integers(0, 9, 78)
    pairs = AuthorsPairs.of_walks(walks, 2, 3, 78, np.random.default_rng(1), labels=rows)
    count, positives = (part.numpy() for part in pairs.by_cell(batch_size, 9))
    dealt = list(pairs.batches(batch_size))
    assert count.shape == positives.shape == (len(dealt), 81) == (pairs.n_batches(batch_size), 81)
    for batch, (targets, others, labels) in enumerate(dealt):
        cells = targets * 9 + others
        np.testing.assert_array_equal(count[batch], np.bincount(cells, minlength=81))
        np.testing.assert_array_equal(positives[batch], np.bincount(cells[labels == 1], minlength=81))


def test_authors_negatives_drawn_part_by_part_are_those_of_one_draw(monkeypatch):
    walks = random_walks(CSRGraph.from_igraph(small_graphs()["miserables"]), np.arange(77), 9, np.random.default_rng(0))
    whole = AuthorsPairs.of_walks(walks, 2, 3, 77, np.random.default_rng(1))
    monkeypatch.setattr(AuthorsPairs, "DRAWN_TOGETHER", 7)
    parts = AuthorsPairs.of_walks(walks, 2, 3, 77, np.random.default_rng(1))
    np.testing.assert_array_equal(parts.others, whole.others)
    assert len(whole.targets) > 7 and whole.others.dtype == np.int32
    # numpy's one draw of them all as int64 (as the authors' stream was drawn before the draws were kept as int32:
    # runs of a seed keep their results)
    drawn = np.random.default_rng(1).integers(76, size=(len(whole.targets), 3))
    np.testing.assert_array_equal(whole.negatives, drawn + (drawn >= whole.targets[:, None]))


def test_authors_pairs_with_labels_are_the_stream_relabelled():
    """labels=rows (the feature row of each node, for a model that scores pairs of rows) relabels every node of the
    stream, negatives included, and draws the same negatives: among the other nodes, not the other rows."""
    walks = random_walks(CSRGraph.from_igraph(small_graphs()["miserables"]), np.arange(77), 9, np.random.default_rng(0))
    rows = np.random.default_rng(2).integers(0, 5, 77)
    nodes = AuthorsPairs.of_walks(walks, 2, 3, 77, np.random.default_rng(1))
    labelled = AuthorsPairs.of_walks(walks, 2, 3, 77, np.random.default_rng(1), labels=rows)
    np.testing.assert_array_equal(labelled.targets, rows[nodes.targets])
    np.testing.assert_array_equal(labelled.others, rows[nodes.others])
    assert labelled.others.max() < 5


def test_authors_negatives_are_uniform_among_the_other_nodes():
    walks = np.array([[0, 1, 2, 3, 4, 0, 1, 2]] * 200)
    pairs = AuthorsPairs.of_walks(walks, 1, 5, 5, np.random.default_rng(0))
    assert not (pairs.negatives == pairs.targets[:, None]).any()
    for node in range(5):
        drawn = (
            np.bincount(pairs.negatives[pairs.targets == node].ravel(), minlength=5) / (pairs.targets == node).sum() / 5
        )
        others = np.delete(drawn, node)
        assert drawn[node] == 0 and np.allclose(others, 0.25, atol=0.02)


def _authors_epochs(graph: ig.Graph, walk_length: int, seed: int, epochs: int) -> list[list[list[int]]]:
    """nur-ag/IGEL src/batching.py as their notebook ran it, line by line: random.seed (set_seed), then per epoch
    uniformly_random_samples' shuffle of the vertices and random_walk from each, over igraph's own neighbours."""
    random.seed(seed)
    drawn = []
    for _ in range(epochs):
        indices = [vertex.index for vertex in graph.vs]
        random.shuffle(indices)
        epoch = []
        for node in indices:
            walk, last = [node], node
            while len(walk) < walk_length:
                choices = graph.neighbors(last)
                if not choices:
                    break
                last = random.choice(choices)
                walk.append(last)
            epoch.append(walk)
        drawn.append(epoch)
    return drawn


def _multigraph(tmp_path) -> ig.Graph:
    """Sister Cities as the authors read it (Read_Ncol: every line an edge) where the data is here, else Zachary's
    club with every tenth edge listed again reversed and an isolated vertex: parallel edges, a dead end."""
    root = shared_data_root()
    if root is not None and (root / "SisterCity" / "SisterCity.edgelist.gz").is_file():
        path = tmp_path / "SisterCity.edgelist"
        path.write_bytes(gzip.decompress((root / "SisterCity" / "SisterCity.edgelist.gz").read_bytes()))
        graph = ig.Graph.Read_Ncol(str(path), names=True, directed=False)
        ours = load_dataset({"name": "sister_cities", "parallel_edges": True}, DataContext(root, False, 0)).graph
        theirs, mine = CSRGraph.from_igraph(graph), CSRGraph.from_igraph(ours)  # the same neighbours, in one numbering
        assert (theirs.indptr == mine.indptr).all() and (theirs.indices == mine.indices).all()
        return graph
    graph = ig.Graph.Famous("Zachary")
    graph.add_edges([(v, u) for u, v in graph.get_edgelist()[::10]])
    graph.add_vertices(1)
    return graph


def test_authors_walks_are_the_draws_of_their_code(tmp_path):
    graph = _multigraph(tmp_path)
    assert not graph.is_simple()
    walker = AuthorsWalker(CSRGraph.from_igraph(graph), 1)
    state = random.getstate()
    expected = _authors_epochs(graph, 30, seed=1, epochs=2)
    random.setstate(state)
    for epoch in expected:  # the second epoch goes on from the first's stream, as theirs did
        (ours,) = walker.epoch(30)
        assert [[int(node) for node in walk if node != END] for walk in ours] == epoch
    assert any(len(walk) == 1 for walk in expected[0]) == (min(graph.degree()) == 0)  # a dead end, where one is


def test_authors_walks_are_one_seeds_whatever_the_runs():
    """trainer.walk_stream: the walks of every run alike (their notebook's), the run's seed drawing the negatives."""
    graph = small_graphs()["zachary"]
    csr = CSRGraph.from_igraph(graph)
    (first,), (again,), (other,) = (AuthorsWalker(csr, seed).epoch(8) for seed in (1, 1, 2))
    assert (first == again).all() and not (first == other).all()
    assert sorted(first[:, 0].tolist()) == list(range(graph.vcount()))  # a walk from every node, shuffled
