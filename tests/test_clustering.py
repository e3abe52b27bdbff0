import math
import shutil

import igraph as ig
import numpy as np
import pytest
from scipy.stats import spearmanr

from igel_exp import plots
from igel_exp.errors import ConfigError
from igel_exp.pipelines.common import method
from igel_exp.reference import ego_distances
from igel_exp.tasks import clustering
from igel_exp.tasks.clustering import (
    CENTRALITIES,
    NotebookKMeans,
    centralities,
    centrality_correlations,
    closeness,
    kmeans_by_modularity,
    kmeans_plusplus_022,
    louvain,
    neighbour_similarity,
)

from conftest import small_graphs


def planted(groups: int = 4, size: int = 12) -> tuple[ig.Graph, np.ndarray]:
    """Dense groups joined in a ring by single edges; the planted labels."""
    graph = ig.Graph.Full(size)
    for _ in range(groups - 1):
        graph = graph + ig.Graph.Full(size)
    graph.add_edges([(g * size, ((g + 1) % groups) * size + 1) for g in range(groups)])
    return graph, np.repeat(np.arange(groups), size)


def test_kmeans_picks_the_planted_number_of_clusters():
    graph, labels = planted()
    embeddings = np.eye(4)[labels] + np.random.default_rng(0).normal(scale=0.05, size=(len(labels), 4))
    selection = kmeans_by_modularity(graph, embeddings, list(range(2, 8)), seed=0)
    assert selection.best_k == 4
    assert max(selection.modularity) == pytest.approx(graph.modularity(labels.tolist()))
    assert len(set(zip(selection.best_labels, labels, strict=True))) == 4  # the same partition


def test_kmeans_makes_no_more_clusters_than_distinct_embeddings(recwarn, caplog):
    graph, labels = planted()
    embeddings = np.eye(4)[labels % 3]  # three distinct points: KMeans at k > 3 would leave clusters empty
    assert kmeans_by_modularity(graph, embeddings, list(range(2, 8)), seed=0).ks == [2, 3]
    assert not [warning for warning in recwarn if "distinct clusters" in str(warning.message)]
    assert caplog.messages == ["KMeans: the embeddings hold 3 distinct points, so k goes up to 3 only"]
    with pytest.raises(ConfigError, match="task.k_min=5: the embeddings hold 3 distinct points"):
        kmeans_by_modularity(graph, embeddings, [5, 6], seed=0)


def plain_kmeans_plusplus(points: np.ndarray, k: int, stream: np.random.RandomState) -> np.ndarray:
    """scikit-learn 0.22's k-means++ (sklearn/cluster/_k_means.py, _k_init) spelt out point by point: the reference."""
    n = len(points)
    squared = lambda i, j: float(np.sum((points[i].astype(float) - points[j].astype(float)) ** 2))  # noqa: E731
    chosen = [stream.randint(n)]
    nearest = [squared(i, chosen[0]) for i in range(n)]
    for _ in range(1, k):
        candidates = []
        for wanted in stream.random_sample(2 + int(math.log(k))) * sum(nearest):
            index, total = 0, nearest[0]  # the first point whose running total of squared distances reaches `wanted`
            while index < n - 1 and total < wanted:
                index += 1
                total += nearest[index]
            candidates.append(index)
        left = [sum(min(nearest[i], squared(i, c)) for i in range(n)) for c in candidates]
        best = candidates[left.index(min(left))]
        chosen.append(best)
        nearest = [min(nearest[i], squared(i, best)) for i in range(n)]
    return points[chosen]


@pytest.mark.parametrize("k", [1, 2, 5, 9])
def test_kmeans_plusplus_022_draws_the_references_centres(k):
    points = np.random.default_rng(k).normal(size=(80, 3)).astype(np.float32)
    for seed in range(4):
        expected = plain_kmeans_plusplus(points, k, np.random.RandomState(seed))
        np.testing.assert_array_equal(kmeans_plusplus_022(points, k, np.random.RandomState(seed)), expected)


def test_notebook_kmeans_takes_each_fits_starts_after_the_earlier_fits_draws():
    """The notebook's loop (α = 1..4, then k = 1..15), each fit one draw of 10 start seeds from the stream."""
    stream, drawn = np.random.RandomState(1), {}
    for alpha in range(1, 5):
        for k in range(1, 16):
            drawn[alpha, k] = stream.randint(2**31 - 1, size=10)
    for (alpha, k), seeds in drawn.items():
        np.testing.assert_array_equal(NotebookKMeans(alpha, 1).start_seeds(k), seeds)
    for alpha, k in [(5, 5), (2, 16), (0, 3)]:
        with pytest.raises(ConfigError, match=rf"α = 1..4 with k = 1..15: encoder.distance={alpha}, k={k} was none"):
            NotebookKMeans(alpha, 1).start_seeds(k)


def test_notebook_kmeans_finds_the_planted_groups_whatever_the_runs_seed():
    graph, labels = planted()
    embeddings = np.eye(4)[labels] + np.random.default_rng(0).normal(scale=0.05, size=(len(labels), 4))
    notebook = NotebookKMeans(2, 1)
    chosen = [kmeans_by_modularity(graph, embeddings, [4], seed, notebook=notebook).labels[4] for seed in (0, 9)]
    np.testing.assert_array_equal(chosen[0], chosen[1])
    assert len(set(zip(chosen[0], labels, strict=True))) == 4  # the planted partition


def test_louvain_finds_the_planted_groups():
    graph, labels = planted()
    membership, modularity = louvain(graph)
    assert modularity == pytest.approx(graph.modularity(labels.tolist()))
    assert len(set(membership)) == 4


def test_neighbour_similarity_is_the_sum_of_dot_products():
    graph = small_graphs()["zachary"]
    embeddings = np.random.default_rng(1).normal(size=(graph.vcount(), 3))
    expected = [sum(embeddings[v] @ embeddings[u] for u in graph.neighbors(v)) for v in range(graph.vcount())]
    np.testing.assert_allclose(neighbour_similarity(graph, embeddings), expected)


def test_the_closed_neighbourhood_score_is_the_authors_sum_over_neighborhood():
    """task.score_neighbourhood=closed: e_v · Σ e_u over igraph's neighborhood(v, 1), v included, each neighbour
    once however many parallel edges (the authors' notebook, compute_corr_dataframe)."""
    graph = small_graphs()["zachary"]
    graph.add_edges(graph.get_edgelist()[:20])  # parallel edges
    embeddings = np.random.default_rng(2).normal(size=(graph.vcount(), 3))
    expected = [embeddings[v] @ embeddings[graph.neighborhood(v, 1)].T.sum(axis=1) for v in range(graph.vcount())]
    np.testing.assert_allclose(neighbour_similarity(graph, embeddings, "closed"), expected)
    with pytest.raises(ConfigError, match="task.score_neighbourhood='self' is not one of open, closed"):
        neighbour_similarity(graph, embeddings, "self")


def test_identical_embeddings_rank_nodes_by_degree():
    graph = small_graphs()["miserables"]
    result = centrality_correlations(graph, np.ones((graph.vcount(), 2)))
    assert result["spearman_degree"] == pytest.approx(1.0)
    values = centralities(graph)
    ties = np.round(values["pagerank"], 10)  # PageRank's exact ties, not its rounding noise (see below)
    assert result["spearman_pagerank"] == pytest.approx(spearmanr(values["degree"], ties)[0])
    assert result["spearman_degree_p"] < 1e-20


def test_nodes_whose_centralities_tie_share_their_rank():
    """Les Misérables' leaves of one character tie in PageRank, but igraph's values differ in the last bits (61
    distinct values, 52 at 10 decimals): ρ ranked those nodes by rounding noise (0.0085 off at this seed)."""
    graph = small_graphs()["miserables"]
    embeddings = np.random.default_rng(0).normal(size=(graph.vcount(), 4))
    score = neighbour_similarity(graph, embeddings)
    result = centrality_correlations(graph, embeddings)
    for name in ("pagerank", "betweenness"):
        values = np.round(centralities(graph)[name], 10)  # the exact ties, far above the noise, far below the gaps
        assert result[f"spearman_{name}"] == pytest.approx(spearmanr(score, values)[0], abs=1e-12)
    assert len(np.unique(centralities(graph)["pagerank"])) > len(np.unique(np.round(graph.pagerank(), 10)))
    # task.centrality_ties=bits: ranked as computed, their last bits deciding, as the authors' spearmanr ranked them
    raw = centrality_correlations(graph, embeddings, ties="bits")
    assert raw["spearman_pagerank"] == pytest.approx(spearmanr(score, centralities(graph)["pagerank"])[0], abs=1e-12)
    assert raw["spearman_pagerank"] != pytest.approx(result["spearman_pagerank"], abs=1e-3)
    assert raw["spearman_degree"] == result["spearman_degree"]  # integers: exact ties either way
    with pytest.raises(ConfigError, match="task.centrality_ties='noise' is not one of rounding, bits"):
        centrality_correlations(graph, embeddings, ties="noise")


def test_a_centrality_that_ranks_nothing_is_not_correlated(caplog):
    ring = ig.Graph.Ring(10)  # every node alike: PageRank equal but for rounding, the others exactly
    embeddings = np.random.default_rng(0).normal(size=(10, 4))
    assert np.ptp(centralities(ring)["pagerank"]) > 0  # rounding noise, which spearmanr would rank
    assert centrality_correlations(ring, embeddings) == {}  # was ρ 0.49 on the noise, NaN for the others
    assert "spearman_pagerank is not logged: every node has the same pagerank" in caplog.text
    path = ig.Graph(n=4, edges=[(0, 1), (1, 2), (2, 3)])
    assert set(centrality_correlations(path, embeddings[:4])) >= {"spearman_degree", "spearman_pagerank"}
    assert centrality_correlations(path, np.zeros((4, 4))) == {}  # every score 0: nothing to rank them by


def test_centralities_are_remembered_by_the_graphs_edges():
    """A sweep's runs on one graph share its centralities; a graph with other edges (one fewer, or parallel ones: the
    authors' Sister Cities graph) gets its own, and what a caller does to them stays with that caller."""
    graph = small_graphs()["zachary"]
    centralities(graph)["betweenness"][:] = -1
    np.testing.assert_allclose(centralities(graph.copy())["betweenness"], graph.betweenness())
    fewer, doubled = graph.copy(), graph.copy()
    fewer.delete_edges([0])
    doubled.add_edges(graph.get_edgelist()[:5])
    for other in (fewer, doubled):
        values = centralities(other)
        np.testing.assert_allclose(values["betweenness"], other.betweenness())
        np.testing.assert_allclose(values["degree"], other.degree())
        assert not np.allclose(values["degree"], graph.degree())


def test_centralities_being_computed_show_their_progress_read_back_do_not(tmp_path, monkeypatch, capsys):
    """igel-run's bars (progress=true) while betweenness and closeness are computed, fed by igraph's core, both at
    100% when done; none when the centralities are read back, nor afterwards from igraph's other work."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(clustering, "_REMEMBERED", {})
    graph = ig.Graph.Erdos_Renyi(300, m=900)
    np.testing.assert_allclose(centralities(graph, progress=True)["closeness"], closeness(graph))
    shown = capsys.readouterr().err
    assert "betweenness: 100%" in shown and "closeness: 100%" in shown
    monkeypatch.setattr(clustering, "_REMEMBERED", {})
    centralities(graph, progress=True)  # from the user's cache
    graph.betweenness()
    assert capsys.readouterr().err == ""


def test_centralities_are_kept_in_the_users_cache_for_other_processes(tmp_path, monkeypatch, caplog):
    """Each igel-run (each job of a cluster sweep) is a process of its own: a graph's centralities are read back from
    the user's cache, by the graph's edges; a damaged, misshapen or unwritable entry only costs computing them again."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))

    def forget():  # as a new process starts
        monkeypatch.setattr(clustering, "_REMEMBERED", {})

    graph = small_graphs()["zachary"]
    forget()
    computed = centralities(graph)
    np.testing.assert_allclose(computed["betweenness"], graph.betweenness())
    [entry] = (tmp_path / "cache" / "igel-exp" / "centralities").iterdir()
    planted = {name: np.arange(graph.vcount(), dtype=float) + index for index, name in enumerate(CENTRALITIES)}
    np.savez(entry, key=entry.stem, **planted)
    forget()
    for name, values in centralities(graph).items():  # what the entry holds, not computed
        np.testing.assert_array_equal(values, planted[name])
    for damage in (b"", b"not an npz", entry.read_bytes()[:-40], None):
        if damage is None:  # an entry of another graph's size
            np.savez(entry, key=entry.stem, **{name: values[:-1] for name, values in planted.items()})
        else:
            entry.write_bytes(damage)
        forget()
        for name, values in centralities(graph).items():
            np.testing.assert_array_equal(values, computed[name])
        assert entry.stat().st_size > 1000  # written anew
    fewer = graph.copy()
    fewer.delete_edges([0])
    forget()
    np.testing.assert_allclose(centralities(fewer)["betweenness"], fewer.betweenness())
    assert len(list(entry.parent.iterdir())) == 2
    [other] = set(entry.parent.iterdir()) - {entry}
    shutil.copy(other, entry)  # another graph's entry of the same size under this graph's name
    forget()
    for name, values in centralities(graph).items():
        np.testing.assert_array_equal(values, computed[name])
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))  # no folder can be made there
    forget()
    np.testing.assert_array_equal(centralities(graph)["closeness"], computed["closeness"])
    assert f"could not keep the centralities in {tmp_path / 'file'}" in caplog.text  # each run pays them: said


def test_pagerank_is_the_random_surfers_with_damping_0_85():
    """PageRank as the paper's baselines use it (igraph's default, the authors' too): the stationary distribution of a
    surfer who follows a random edge with probability 0.85 and jumps to a random node otherwise, by power iteration."""
    graph = small_graphs()["zachary"]  # connected: no dangling node
    n, adjacency = graph.vcount(), np.asarray(graph.get_adjacency().data, dtype=float)
    step = adjacency / adjacency.sum(1, keepdims=True)  # row u: where the surfer goes from u
    rank = np.full(n, 1 / n)
    for _ in range(200):
        rank = 0.15 / n + 0.85 * rank @ step
    np.testing.assert_allclose(centralities(graph)["pagerank"], rank, rtol=1e-6)


@pytest.mark.parametrize("name", ["disconnected", "with_isolated", "zachary", "tree"])
def test_closeness_counts_unreachable_nodes_at_distance_n_as_igraph_0_7_did(name):
    graph = small_graphs()[name]
    n, neighbours = graph.vcount(), graph.get_adjlist()
    expected = []
    for v in range(n):  # plain BFS; every unreachable node at distance n (the authors' igraph 0.7)
        reached = ego_distances(neighbours, v, n)
        expected.append((n - 1) / (sum(reached.values()) + (n - len(reached)) * n))
    np.testing.assert_allclose(closeness(graph), expected)
    if graph.is_connected():
        np.testing.assert_allclose(closeness(graph), graph.closeness())


def test_figures_name_the_method_that_made_the_embeddings(compose_config):
    deepwalk, igel = compose_config("encoder=deepwalk").encoder, compose_config("encoder.distance=2").encoder
    assert (method(deepwalk), method(igel)) == ("deepwalk", "IGEL α=2")  # a DeepWalk run's figures said IGEL
    figure = plots.modularity_by_k([2, 3], [0.1, 0.3], 0.35, "miserables", method(deepwalk))
    axes = figure.axes[0]
    assert axes.get_title() == "miserables, deepwalk"
    assert [text.get_text() for text in axes.get_legend().get_texts()][0] == "deepwalk + KMeans"
