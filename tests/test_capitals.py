"""The capital-cluster evaluators of Table SisterCitiesF1Scores, on hand-made cases."""

import itertools

import igraph as ig
import networkx as nx
import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import f1_score

from igel_exp.errors import ConfigError, DataError
from igel_exp.tasks.capitals import capital_cluster, capital_scores, f1, rankings, top_n_f1

# Ten cities in three clusters; capitals 0, 3, 4 and 7. Cluster 1 = {3, 4, 5, 6} holds two capitals: C.
LABELS = np.array([0, 0, 0, 1, 1, 1, 1, 2, 2, 2])
CAPITALS = np.array([1, 0, 0, 1, 1, 0, 0, 1, 0, 0], dtype=bool)
# top 4 by degree: 0 (5), 3 (4), 7 (3), then one of 4, 5, 6, 8 (all 2), of which only 4 is a capital
DEGREE = np.array([5, 1, 1, 4, 2, 2, 2, 3, 2, 1], dtype=float)
# top 4 by PageRank, no ties: 2, 3, 8, 0, of which 3 and 0 are capitals
PAGERANK = np.array([0.12, 0.05, 0.30, 0.20, 0.01, 0.02, 0.03, 0.04, 0.15, 0.08])


def test_the_cluster_with_most_capitals_and_its_f1():
    assert capital_cluster(LABELS, CAPITALS) == 1
    members = LABELS == 1
    assert f1(members, CAPITALS) == pytest.approx(0.5)  # TP 2, |C| 4, 4 capitals: 2·2 / (4 + 4)
    assert f1(members, CAPITALS) == pytest.approx(f1_score(CAPITALS, members))


def test_ties_between_clusters_go_to_the_lowest_id():
    labels = np.array([2, 2, 0, 0, 1])
    assert capital_cluster(labels, np.array([1, 0, 1, 0, 1], dtype=bool)) == 0


def test_top_n_without_ties_is_the_plain_f1():
    top = np.isin(np.arange(10), [2, 3, 8, 0])
    assert top_n_f1(PAGERANK, CAPITALS, 4) == pytest.approx(0.5)
    assert top_n_f1(PAGERANK, CAPITALS, 4) == pytest.approx(f1_score(CAPITALS, top))


def test_top_n_ties_are_averaged_over_every_order():
    # by hand: 3 sure capitals + 1 place among 4 tied nodes holding 1 capital → TP 3.25, F1 = 6.5 / 8
    assert top_n_f1(DEGREE, CAPITALS, 4) == pytest.approx(0.8125)
    tied = [4, 5, 6, 8]
    scores = []
    for order in itertools.permutations(tied):  # break the tie every possible way, then a plain F1
        chosen = np.isin(np.arange(10), [0, 3, 7, order[0]])
        scores.append(f1_score(CAPITALS, chosen))
    assert top_n_f1(DEGREE, CAPITALS, 4) == pytest.approx(np.mean(scores))


def test_top_n_does_not_depend_on_vertex_order():
    permutation = np.random.default_rng(0).permutation(10)
    for n in range(11):
        assert top_n_f1(DEGREE[permutation], CAPITALS[permutation], n) == pytest.approx(top_n_f1(DEGREE, CAPITALS, n))
    assert top_n_f1(DEGREE, CAPITALS, 10) == pytest.approx(f1_score(CAPITALS, np.ones(10, bool)))
    assert top_n_f1(DEGREE, CAPITALS, 0) == 0.0


def test_top_n_ties_up_to_rounding_are_ties():
    """Les Misérables' PageRanks that tie exactly differ in igraph's last bits (61 distinct values, 52 at 10
    decimals), and PRPACK's bits are not ARPACK's: the nodes taken at the cut were those of the noise."""
    graph = nx_to_igraph(nx.les_miserables_graph())
    truth = np.random.default_rng(0).random(graph.vcount()) < 0.3
    prpack, arpack = (np.asarray(graph.pagerank(implementation=name)) for name in ("prpack", "arpack"))
    exact = np.round(prpack, 10)  # the exact ties, far above the noise, far below the gaps
    assert len(np.unique(prpack)) > len(np.unique(exact))
    for n in range(graph.vcount() + 1):
        assert top_n_f1(prpack, truth, n) == pytest.approx(top_n_f1(exact, truth, n), abs=1e-12), n
        assert top_n_f1(arpack, truth, n) == pytest.approx(top_n_f1(exact, truth, n), abs=1e-12), n


def nx_to_igraph(graph: nx.Graph) -> ig.Graph:
    index = {name: i for i, name in enumerate(graph.nodes)}
    return ig.Graph(n=len(index), edges=[(index[u], index[v]) for u, v in graph.edges])


def test_capital_scores_row():
    row = capital_scores(LABELS, CAPITALS, {"degree": DEGREE, "pagerank": PAGERANK})
    assert row == pytest.approx(
        {
            "cluster_size": 4,
            "cluster_capitals": 2,
            "f1_cluster": 0.5,
            "f1_top_degree": 0.8125,
            "f1_top_pagerank": 0.5,
            "gain_vs_degree": 100 * (0.5 - 0.8125) / 0.8125,
        }
    )


def test_cluster_members_in_the_node_table_are_the_authors_size(tmp_path):
    """task.cluster_members=in_table against output/analyze_sister_capitals.py (nur-ag/IGEL@f1fd43d, lines 12-40,
    `.idxmax()` for current pandas) run on its input's layout: cities without a node-table row have no `iscapital`."""
    in_table = np.array([1, 1, 1, 1, 1, 0, 0, 1, 1, 1], dtype=bool)  # 5 and 6 (in C) have no row
    frame = pd.DataFrame(
        {
            "Id": range(10),
            "config": LABELS,
            "iscapital": np.where(in_table, CAPITALS.astype(float), np.nan),
            "Degree": PAGERANK,  # distinct scores: the script's sort has no ties to break
        }
    )
    grouped = frame.groupby(["iscapital", "config"]).count()["Id"].to_frame().reset_index()
    capital_rows = grouped.loc[grouped.iscapital == 1]
    cluster_id = capital_rows.loc[capital_rows["Id"].idxmax()]["config"]
    in_cluster = frame.loc[frame["config"] == cluster_id]
    capital_set = in_cluster.groupby(in_cluster.iscapital).count()["Id"].to_frame().reset_index()
    total_values = capital_set["Id"].sum()
    cluster_capitals = capital_set.loc[capital_set.iscapital == 1]["Id"].iloc[0]
    degree_capitals = frame.sort_values("Degree", ascending=False)[:total_values].iscapital.sum()
    f1_score_of = lambda hits: 2 * hits / (total_values + CAPITALS.sum())  # noqa: E731
    row = capital_scores(LABELS, CAPITALS, {"degree": PAGERANK}, counted=in_table)
    assert total_values == 2 and row["cluster_size"] == 2  # C = {3, 4, 5, 6}, of which 5 and 6 have no row
    assert row["f1_cluster"] == pytest.approx(f1_score_of(cluster_capitals))
    assert row["f1_top_degree"] == pytest.approx(f1_score_of(degree_capitals))
    with pytest.raises(ValueError, match="includes every capital"):
        capital_scores(LABELS, CAPITALS, {}, counted=~CAPITALS)


def test_gain_is_relative_in_percent():
    # as the paper's "%vs Degree F1" column: α = 2, k = 6 has F1 0.258 against 0.201 and reads 28.02
    labels = np.array([0] * 2 + [1] * 8)
    capitals = np.array([1, 1] + [0] * 8, dtype=bool)
    degree = np.array([9, 0, 8, 0, 0, 0, 0, 0, 0, 0], dtype=float)  # top-2 by degree finds one of two capitals
    row = capital_scores(labels, capitals, {"degree": degree})
    assert (row["f1_cluster"], row["f1_top_degree"], row["gain_vs_degree"]) == pytest.approx((1.0, 0.5, 100.0))


def test_evaluator_errors():
    with pytest.raises(DataError, match="no node is flagged as a capital"):
        capital_scores(LABELS, np.zeros(10, bool), {})
    with pytest.raises(ValueError, match="one length"):
        capital_cluster(LABELS[:5], CAPITALS)
    with pytest.raises(ValueError, match="ranking 'degree' scores 3 nodes"):
        capital_scores(LABELS, CAPITALS, {"degree": DEGREE[:3]})


def test_rankings_on_the_directed_pairs_and_the_simple_graph():
    pairs = np.array([[0, 1], [1, 0], [1, 2], [3, 1]])  # 0 ↔ 1 listed both ways; 2 only receives
    graph = ig.Graph(n=4, edges=[(0, 1), (1, 2), (1, 3)])
    directed = rankings(graph, pairs, "directed")
    np.testing.assert_array_equal(directed["degree"], [2, 4, 1, 1])  # in + out: the reciprocal pair twice
    expected = nx.pagerank(nx.DiGraph(pairs.tolist()))  # networkx as the independent reference
    np.testing.assert_allclose(directed["pagerank"], [expected[v] for v in range(4)], atol=1e-6)
    undirected = rankings(graph, pairs, "undirected")
    np.testing.assert_array_equal(undirected["degree"], [1, 3, 1, 1])
    expected = nx.pagerank(nx.Graph(graph.get_edgelist()))
    np.testing.assert_allclose(undirected["pagerank"], [expected[v] for v in range(4)], atol=1e-6)


def test_rankings_errors_name_the_config_key():
    graph = ig.Graph(n=2, edges=[(0, 1)])
    with pytest.raises(ConfigError, match="task.ranking_graph=directed needs a dataset that lists directed pairs"):
        rankings(graph, None, "directed")
    with pytest.raises(ConfigError, match="task.ranking_graph='both' is not one of directed, undirected"):
        rankings(graph, None, "both")
