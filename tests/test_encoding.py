import igraph as ig
import numpy as np
import pytest
import scipy.sparse as sp

from igel_exp import encoding
from igel_exp.data import DataContext, load_dataset
from igel_exp.encoding import IGELEncoder, adjacency, local_ball, normalise_rows
from igel_exp.errors import ConfigError, DataError

from conftest import reference_counts, small_graphs


@pytest.mark.parametrize("name", sorted(small_graphs()))
@pytest.mark.parametrize("distance", [0, 1, 2, 3])
@pytest.mark.parametrize("relative", [False, True])
def test_counts_equal_plain_bfs_on_every_node(name, distance, relative):
    graph = small_graphs()[name]
    encoder = IGELEncoder(distance, relative_degrees=relative, chunk_size=7).fit(graph)
    counts = encoder.counts(graph)
    assert isinstance(counts, sp.csr_matrix)
    assert counts.shape == (graph.vcount(), encoder.n_features)
    np.testing.assert_array_equal(counts.toarray(), reference_counts(graph, encoder))


@pytest.mark.parametrize("name", sorted(small_graphs()))
def test_a_distance_past_the_diameter_stops_where_the_ego_graphs_are_whole(name):
    """A huge encoder.distance once looped over empty shells up to it: hours, deaf to Ctrl-C, in a worker thread."""
    graph = small_graphs()[name]
    diameter = graph.diameter(unconn=True)
    far = diameter + 50
    shells = encoding.ego_shells(adjacency(graph), np.arange(graph.vcount()), far)
    assert max(shell.distance for shell in shells) == diameter and len(shells) == diameter + 1
    encoder = IGELEncoder(far, relative_degrees=True).fit(graph)
    np.testing.assert_array_equal(encoder.counts(graph).toarray(), reference_counts(graph, encoder))


def test_worked_example_of_the_design_notes():
    graph = ig.Graph.Tree(28, 3)
    encoder = IGELEncoder(2).fit(graph)
    row = encoder.counts(graph)[0].toarray().ravel()
    width = encoder.max_degree_ + 1
    found = {(int(col) // width, int(col) % width): int(row[col]) for col in np.flatnonzero(row)}
    assert found == {(0, 3): 1, (1, 4): 3, (2, 1): 9}


def test_chunk_size_and_threads_do_not_change_the_result():
    graph = ig.Graph.Erdos_Renyi(n=300, m=900)
    expected = IGELEncoder(2, chunk_size=1000, n_jobs=1).fit(graph).counts(graph)
    for chunk_size, n_jobs in [(1, 2), (13, 2), (64, 3)]:
        got = IGELEncoder(2, chunk_size=chunk_size, n_jobs=n_jobs).fit(graph).counts(graph)
        assert (got != expected).nnz == 0


def test_a_chunk_grows_where_its_balls_span_little_of_a_large_graph_and_the_counts_stay_the_same():
    graph = ig.Graph.Erdos_Renyi(n=2**15, m=2**15)  # average degree 2: 256 sources' balls span some 800 nodes
    encoder = IGELEncoder(1, chunk_size=256, n_jobs=2).fit(graph)
    assert encoder._chunk(adjacency(graph, multiplicity=True)) > 256
    expected = IGELEncoder(1, chunk_size=2**15, n_jobs=1).fit(graph).counts(graph)  # one chunk: the whole graph
    assert (encoder.counts(graph) != expected).nnz == 0


def test_the_widest_of_the_probed_chunks_sets_the_growth():
    n = 2**15
    graph = ig.Graph.Ring(n)  # 256 sources' balls at α = 1: 258 nodes, room for 7 times as many
    hubs = [(n - 256 + i, 1000 + 8 * i + j) for i in range(256) for j in range(8)]
    graph.add_edges(hubs)  # the last 256 sources' balls: 256 + 2 + 2,048 nodes, room for 2 such chunks
    encoder = IGELEncoder(1, chunk_size=256, n_jobs=2).fit(graph)
    assert encoder._chunk(adjacency(graph, multiplicity=True)) == 512
    expected = IGELEncoder(1, chunk_size=n, n_jobs=1).fit(graph).counts(graph)
    assert (encoder.counts(graph) != expected).nnz == 0


def test_the_chunk_rule_stops_at_eight_times_at_the_span_and_where_balls_would_not_be_local():
    assert encoding.grown_chunk(256, 2**20, 2_000) == 256 * 8  # at most eight times
    assert encoding.grown_chunk(256, 2**20, 18_000) == 256 * 7  # 2^17 nodes hold seven such spans
    assert encoding.grown_chunk(256, 2**20, 200_000) == 256  # past the span: never smaller than asked
    assert encoding.grown_chunk(256, 2**14, 100) == 256 * 3  # 2^14 nodes are local below 1,024 sources a chunk
    assert encoding.grown_chunk(256, 4096, 10) == 256  # a small graph: every chunk works on the whole graph


def test_unseen_graph_degrees_above_max_fall_into_the_last_bin():
    encoder = IGELEncoder(1).fit(ig.Graph.Ring(10))  # δmax = 2
    star = ig.Graph.Star(6)  # centre has degree 5
    counts = encoder.counts(star).toarray()
    assert counts.shape == (6, 2 * 3)
    # centre: itself (0, 5→2) and five leaves at distance 1 with degree 1
    np.testing.assert_array_equal(counts[0], [0, 0, 1, 0, 5, 0])
    np.testing.assert_array_equal(counts, reference_counts(star, encoder))


def test_transform_is_log_then_normalised_per_row():
    graph = small_graphs()["zachary"]
    raw = IGELEncoder(2, transform="none", normalise="none").fit(graph).transform(graph).toarray()
    logged = np.log2(1 + raw)
    by_sum = IGELEncoder(2, normalise="sum").fit(graph).transform(graph).toarray()
    by_max = IGELEncoder(2, normalise="max").fit(graph).transform(graph).toarray()
    by_l2 = IGELEncoder(2, normalise="l2").fit(graph).transform(graph).toarray()
    np.testing.assert_allclose(by_sum, logged / logged.sum(1, keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(by_max, logged / logged.max(1, keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(by_l2, logged / np.linalg.norm(logged, axis=1, keepdims=True), rtol=1e-6)
    assert by_max.max() == pytest.approx(1.0) and by_max.min() == 0.0


def test_all_zero_rows_stay_zero_when_normalised():
    features = sp.csr_matrix(np.array([[0.0, 0.0], [1.0, 3.0]], dtype=np.float32))
    np.testing.assert_allclose(normalise_rows(features, "sum").toarray(), [[0, 0], [0.25, 0.75]])


@pytest.mark.parametrize("bad", [-1, 1.5, "2", True, None])
def test_bad_distance_names_the_key(bad):
    with pytest.raises(ConfigError, match="encoder.distance"):
        IGELEncoder(bad)


@pytest.mark.parametrize(
    "key, kwargs",
    [("transform", {"transform": "sqrt"}), ("normalise", {"normalise": "minmax"}), ("chunk_size", {"chunk_size": 0})],
)
def test_bad_options_name_their_key(key, kwargs):
    with pytest.raises(ConfigError, match=f"encoder.{key}"):
        IGELEncoder(1, **kwargs)


def test_counts_before_fit_is_an_error():
    with pytest.raises(RuntimeError, match="not fitted"):
        IGELEncoder(1).counts(ig.Graph.Ring(4))


@pytest.mark.parametrize("graph", [ig.Graph([(0, 1), (1, 1)]), ig.Graph([(0, 1)], directed=True)])
def test_rejects_directed_graphs_and_self_loops(graph):
    """Parallel edges are counted (tests/test_protocol.py); self loops and directions have no ego-graph meaning, and
    the advice fits the fault (a directed graph was told to simplify itself)."""
    advice = "make it undirected" if graph.is_directed() else "drop them"
    with pytest.raises(ValueError, match=f"undirected graphs without self loops: {advice}"):
        IGELEncoder(1).fit(graph).counts(graph)


def test_a_graph_of_another_library_is_named():
    networkx = pytest.importorskip("networkx")
    with pytest.raises(TypeError, match="IGEL encodes igraph graphs, not a Graph \\(ig.Graph.from_networkx\\)"):
        IGELEncoder(1).fit(ig.Graph.Ring(4)).counts(networkx.path_graph(4))
    with pytest.raises(TypeError, match="IGEL encodes igraph graphs, not a Graph"):
        IGELEncoder(1).fit(networkx.path_graph(4))


def test_a_degree_beyond_the_counts_bit_fields_names_the_node():
    """Counts are packed in 20-bit fields: a hub of more neighbours is the data's one-line error, when fitting and when
    encoding another graph with a fitted encoder (whose δmax clamps degrees, not the counts)."""
    hub = ig.Graph.Star(encoding.MAX_SUPPORTED_DEGREE + 2, center=3)
    hub.vs["name"] = [f"n{vertex}" for vertex in range(hub.vcount())]
    message = f"node n3 has {encoding.MAX_SUPPORTED_DEGREE + 1:,} neighbours: IGEL's encoder counts degrees up to"
    with pytest.raises(DataError, match=message):
        IGELEncoder(1).fit(hub)
    with pytest.raises(DataError, match=message):
        IGELEncoder(1).fit(ig.Graph.Ring(4)).counts(hub)


@pytest.mark.data
@pytest.mark.parametrize(
    "dataset, distance, sample", [("facebook", 1, 300), ("facebook", 2, 80), ("facebook", 3, 12), ("astroph", 2, 80)]
)
def test_counts_equal_plain_bfs_on_real_graphs(data_root, dataset, distance, sample):
    graph = load_dataset({"name": dataset}, DataContext(data_root, download=False, seed=0)).graph
    encoder = IGELEncoder(distance).fit(graph)
    counts = encoder.counts(graph)
    nodes = np.random.default_rng(distance).choice(graph.vcount(), size=sample, replace=False).tolist()
    np.testing.assert_array_equal(counts[nodes].toarray(), reference_counts(graph, encoder, nodes))


def test_the_ball_of_a_chunk_is_the_union_of_neighbourhoods_and_its_induced_subgraph():
    graph = small_graphs()["with_isolated"]
    sources = np.array([0, 5, 61, 17])
    for distance in [0, 1, 2, 3]:
        nodes, ball = local_ball(adjacency(graph), sources, distance)
        expected = sorted(set().union(*graph.neighborhood(sources.tolist(), order=distance)))
        assert sorted(nodes.tolist()) == expected and nodes[: len(sources)].tolist() == sorted(sources)
        edges = graph.induced_subgraph(expected).get_edgelist()  # numbered by their place in `expected`
        assert sorted((nodes[u], nodes[v]) for u, v in zip(*ball.nonzero(), strict=True)) == sorted(
            [(expected[u], expected[v]) for u, v in edges] + [(expected[v], expected[u]) for u, v in edges]
        )
        share = len(expected) / graph.vcount()
        assert local_ball(adjacency(graph), sources, distance, max_share=share) is not None
        assert local_ball(adjacency(graph), sources, distance, max_share=share - 0.01) is None


def test_the_ball_hands_its_scratch_marks_back_unmarked():
    adj = adjacency(small_graphs()["with_isolated"])
    marks = np.full(adj.shape[0], -1, dtype=np.int32)
    nodes, ball = local_ball(adj, np.array([0, 5, 0]), 2, marks=marks)
    assert (marks == -1).all()
    assert local_ball(adj, np.array([0, 5]), 2, max_share=0.01, marks=marks) is None
    assert (marks == -1).all()
    again, ball_again = local_ball(adj, np.array([5, 0]), 2, marks=marks)
    np.testing.assert_array_equal(again, nodes)
    assert (ball_again != ball).nnz == 0


@pytest.mark.parametrize("name", sorted(small_graphs()))
@pytest.mark.parametrize("distance", [1, 2, 3])
def test_chunks_on_their_ball_equal_the_plain_bfs(name, distance, monkeypatch):
    monkeypatch.setattr(encoding, "_LOCAL_ABOVE", 0)  # every chunk works on the subgraph of its balls
    monkeypatch.setattr(encoding, "_LOCAL_SHARE", 1.0)
    graph = small_graphs()[name]
    encoder = IGELEncoder(distance, relative_degrees=True, chunk_size=5).fit(graph)
    np.testing.assert_array_equal(encoder.counts(graph).toarray(), reference_counts(graph, encoder))
