from collections import Counter

import igraph as ig
import mlflow
import numpy as np
import pandas as pd
import pytest

from igel_exp import pipelines
from igel_exp.data import DataContext, Dataset, GraphReport, load_dataset
from igel_exp.data.edgelist import read_edgelist
from igel_exp.errors import ConfigError, DataError
from igel_exp.pipelines.link_prediction import cached_split
from igel_exp.tasks.link_prediction import (
    CLASSIFIERS,
    EdgeSplit,
    check_scorable,
    check_split,
    hadamard_features,
    link_prediction_scores,
    pair_keys,
    read_back_split,
    split_edges,
)

from conftest import small_graphs


def edge_set(pairs) -> set[frozenset]:
    return {frozenset(map(int, pair)) for pair in pairs}


def assert_leak_free(graph: ig.Graph, split: EdgeSplit, fraction: float = 0.5) -> None:
    full = edge_set(graph.get_edgelist())
    residual, positives, negatives = edge_set(split.residual), edge_set(split.positives), edge_set(split.negatives)
    assert len(split.positives) == len(positives) == round(fraction * len(full))
    assert len(split.negatives) == len(negatives) == len(positives)
    assert residual | positives == full and not residual & positives
    assert not negatives & full  # in either orientation: pairs are unordered sets
    assert all(len(pair) == 2 for pair in negatives)  # no self pairs
    kept = split.residual_graph([str(i) for i in range(graph.vcount())])
    assert kept.connected_components().membership == graph.connected_components().membership


SPLITTABLE = {
    "miserables": small_graphs()["miserables"],
    "zachary": small_graphs()["zachary"],
    "erdos_renyi": ig.Graph.Erdos_Renyi(n=120, m=600),
    "disconnected": ig.Graph.Full(8) + ig.Graph.Erdos_Renyi(n=40, m=150) + ig.Graph(2),  # isolated nodes too
}


@pytest.mark.parametrize("name", sorted(SPLITTABLE))
def test_split_is_leak_free_and_keeps_components(name):
    graph = SPLITTABLE[name]
    split = split_edges(graph, 0.5, seed=3)
    assert_leak_free(graph, split)
    check_split(split, graph)


def test_a_split_of_a_graph_with_parallel_edges_removes_every_copy_of_a_pair():
    """dataset.parallel_edges=true on the leak-free split: a pair listed twice lost one copy and kept the other, so 35%
    of a multigraph's positives were edges the embeddings learned on (a FINISHED run, its AUC inflated), and the next
    run's cache check rejected the split it had written ("a positive is an edge of the residual graph")."""
    simple = ig.Graph.Erdos_Renyi(n=120, m=600)
    graph = simple.copy()
    graph.add_edges(simple.get_edgelist()[::2])  # every other pair twice
    split = split_edges(graph, 0.5, seed=3)
    assert_leak_free(simple, split)
    residual = edge_set(split.residual)
    copies = Counter(map(frozenset, graph.get_edgelist()))
    assert Counter(frozenset(map(int, pair)) for pair in split.residual) == {pair: copies[pair] for pair in residual}
    check_split(split, graph)
    assert split.sizes()["split_positives_in_residual"] == 0


def test_split_depends_only_on_the_seed():
    graph = small_graphs()["miserables"]
    first, again, other = split_edges(graph, 0.5, 1), split_edges(graph, 0.5, 1), split_edges(graph, 0.5, 2)
    for part in ("residual", "positives", "negatives"):
        np.testing.assert_array_equal(getattr(first, part), getattr(again, part))
    assert edge_set(first.positives) != edge_set(other.positives)


def test_too_sparse_graphs_are_refused():
    with pytest.raises(DataError, match="too small or too sparse"):
        split_edges(ig.Graph.Tree(30, 2), 0.5, seed=0)  # every edge of a tree is a bridge
    with pytest.raises(DataError, match="50% of its 1 edges rounds to none to remove and predict"):
        split_edges(ig.Graph([(0, 1)]), 0.5, seed=0)  # it said "0 needed, it has 0"
    with pytest.raises(DataError, match="too dense for the link-prediction protocol: its 14 removed edges .* it has 0"):
        split_edges(ig.Graph.Full(8), 0.5, seed=0)  # it said "the graph has only 0 non-adjacent pairs", of no protocol


def test_check_split_catches_leaks():
    graph = small_graphs()["zachary"]
    split = split_edges(graph, 0.5, seed=0)
    leaky = EdgeSplit(
        split.n_nodes, split.residual, np.concatenate([split.positives[1:], split.residual[:1]]), split.negatives
    )
    with pytest.raises(DataError, match="a positive is an edge of the residual graph"):
        check_split(leaky, graph)
    reversed_edge = split.positives[:1, ::-1]  # a real edge, written the other way round
    wrong = EdgeSplit(
        split.n_nodes, split.residual, split.positives, np.concatenate([split.negatives[1:], reversed_edge])
    )
    with pytest.raises(DataError, match="a negative is an edge of the graph"):
        check_split(wrong, graph)
    unnamed = split.negatives.copy()
    unnamed[0, 0] = -1  # a cached negative whose name the graph lacks
    with pytest.raises(DataError, match="^link-prediction split does not fit the graph: a pair names a node that"):
        check_split(EdgeSplit(split.n_nodes, split.residual, split.positives, unnamed), graph)


def test_a_cached_negative_of_a_name_the_graph_lacks_is_split_again(tmp_path):
    """A hand-edited or another graph's cache entry: the unknown name read as vertex -1 made a negative of the last
    vertex, and the split was taken."""
    dataset = named(small_graphs()["zachary"])
    split, key, _ = cached_split(dataset, 0.5, 0, tmp_path)
    stored = dict(np.load(tmp_path / key))
    stored["negatives"][0, 0] = "nobody"
    np.savez_compressed(tmp_path / key, **stored)
    again, _, hit = cached_split(dataset, 0.5, 0, tmp_path)
    assert not hit
    np.testing.assert_array_equal(again.negatives, split.negatives)


def named(graph: ig.Graph, order: np.ndarray | None = None) -> Dataset:
    """The graph with names, optionally with its vertices renumbered by `order` (same graph, other ids)."""
    graph = graph.copy()
    graph.vs["name"] = [f"v{i}" for i in range(graph.vcount())]
    if order is not None:
        graph = graph.permute_vertices(order.tolist())
    return Dataset("toy", graph, GraphReport("toy"))


def test_split_cache_survives_another_vertex_order(tmp_path):
    base = small_graphs()["miserables"]
    split, key, hit = cached_split(named(base), 0.5, 4, tmp_path)
    assert not hit and (tmp_path / key).exists()
    again, key_again, hit_again = cached_split(named(base), 0.5, 4, tmp_path)
    assert hit_again and key_again == key
    np.testing.assert_array_equal(np.sort(pair_keys(again.positives, 77)), np.sort(pair_keys(split.positives, 77)))
    permutation = np.random.default_rng(0).permutation(base.vcount())
    shuffled = named(base, permutation)
    moved, key_moved, hit_moved = cached_split(shuffled, 0.5, 4, tmp_path)
    assert hit_moved and key_moved == key  # the fingerprint ignores vertex order
    check_split(moved, shuffled.graph)
    names = np.asarray(shuffled.graph.vs["name"])
    original = np.asarray(named(base).graph.vs["name"])
    assert {frozenset(p) for p in names[moved.positives]} == {frozenset(p) for p in original[split.positives]}


def test_a_corrupted_cache_is_split_again(tmp_path):
    dataset = named(small_graphs()["zachary"])
    split, key, _ = cached_split(dataset, 0.5, 0, tmp_path)
    names = np.asarray(dataset.graph.vs["name"])
    leak = {
        "residual": names[split.residual],
        "positives": names[np.concatenate([split.positives[1:], split.residual[:1]])],
        "negatives": names[split.negatives],
    }
    np.savez_compressed(tmp_path / key, **leak)
    again, _, hit = cached_split(dataset, 0.5, 0, tmp_path)
    assert not hit
    np.testing.assert_array_equal(again.positives, split.positives)
    whole = (tmp_path / key).read_bytes()  # written anew
    flipped = bytearray(whole)
    flipped[len(whole) // 2] ^= 0xFF
    other_seed = (tmp_path / cached_split(dataset, 0.5, 1, tmp_path)[1]).read_bytes()  # copied under this one's name
    for damage in (b"", whole[:300], bytes(flipped), other_seed):  # a crash mid-write, a bad disk, a copy
        (tmp_path / key).write_bytes(damage)
        again, _, hit = cached_split(dataset, 0.5, 0, tmp_path)
        assert not hit
        np.testing.assert_array_equal(again.positives, split.positives)
        assert (tmp_path / key).read_bytes() == whole


def test_an_edge_list_of_a_long_file_name_is_cached_under_a_name_the_file_system_takes(tmp_path):
    """An edge list's dataset is named by its file: a 250-byte name (the file system's limit is 255) made the split's
    cache file name too long, a FAILED run."""
    dataset = named(small_graphs()["zachary"])
    long = Dataset("g" * 246 + ".txt", dataset.graph, dataset.report)
    split, key, hit = cached_split(long, 0.5, 0, tmp_path)
    assert not hit and len(key) < 128
    again, _, hit = cached_split(long, 0.5, 0, tmp_path)
    assert hit
    np.testing.assert_array_equal(again.positives, split.positives)


@pytest.mark.parametrize("classifier", sorted(CLASSIFIERS))
def test_scores_on_known_embeddings(classifier):
    graph = small_graphs()["miserables"]
    split = split_edges(graph, 0.5, seed=0)
    rng = np.random.default_rng(0)
    # an embedding whose Hadamard product reveals edges: one coordinate per node, pairs multiply to 1 on edges
    oracle = np.zeros((graph.vcount(), graph.vcount() + 1))
    oracle[:, -1] = rng.normal(size=graph.vcount())
    edges = np.asarray(graph.get_edgelist())
    features = hadamard_features(oracle, edges)
    assert features.shape == (len(edges), graph.vcount() + 1)
    # the element-wise product of the ends' embeddings, on known ones
    known = hadamard_features(np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]), np.array([[0, 2], [1, 1]]))
    np.testing.assert_array_equal(known, [[5.0, 12.0], [9.0, 16.0]])
    adjacency = np.asarray(graph.get_adjacency().data, dtype=float)
    scores = link_prediction_scores(np.hstack([adjacency, np.eye(graph.vcount())]), split, 0, classifier=classifier)
    assert scores["auc"] > 0.8 and scores["val_auc"] > 0.8  # common neighbours in the Hadamard product
    noise = link_prediction_scores(rng.normal(size=(graph.vcount(), 8)), split, 0, classifier=classifier)
    assert abs(noise["auc"] - 0.5) < 0.15
    assert noise["test_pairs"] == len(split.positives)


def test_the_authors_classifier_learns_a_linear_rule_from_raw_features_and_its_seed():
    """adam_linear (protocol=authors): a linear layer trained by Adam on unscaled features recovers the direction of
    a known logistic rule, as the paper's logistic regression does; its initial weights come from the seed."""
    rng = np.random.default_rng(0)
    rule = rng.normal(size=8)
    features = rng.normal(size=(6000, 8)) * np.linspace(0.2, 5, 8)  # columns of unequal scales: nothing standardised
    labels = (rng.random(6000) < 1 / (1 + np.exp(-features @ rule))).astype(float)
    score = CLASSIFIERS["adam_linear"](features[:4000], labels[:4000], 0)
    learned = CLASSIFIERS["logistic_regression"](features[:4000], labels[:4000], 0)
    held_out = features[4000:]
    assert np.corrcoef(score(held_out), held_out @ rule)[0, 1] > 0.99
    assert np.corrcoef(score(held_out), learned(held_out))[0, 1] > 0.99
    again, other = (CLASSIFIERS["adam_linear"](features[:500], labels[:500], seed) for seed in (0, 1))
    np.testing.assert_array_equal(
        again(held_out), CLASSIFIERS["adam_linear"](features[:500], labels[:500], 0)(held_out)
    )
    assert not np.array_equal(again(held_out), other(held_out))
    with pytest.raises(ConfigError, match="^task.classifier='svm' is not one of logistic_regression, adam_linear$"):
        link_prediction_scores(held_out, split_edges(small_graphs()["miserables"], 0.5, seed=0), 0, classifier="svm")


def test_a_validation_fraction_that_leaves_one_class_is_one_line_before_training(compose_config, tracking_uri):
    split = split_edges(small_graphs()["miserables"], 0.5, seed=0)  # 254 labelled pairs, 127 in the training half
    check_scorable(split, 0, 0.25)
    with pytest.raises(
        ConfigError, match=r"^task.validation_fraction=0.99: the classifier's fit pairs \(1 of .* lower"
    ):
        check_scorable(split, 0, 0.99)  # was scikit-learn's traceback after training
    with pytest.raises(
        ConfigError, match=r"^task.validation_fraction=0.001: the classifier's validation pairs .* raise"
    ):
        check_scorable(split, 0, 0.001)  # was a FINISHED run with val_auc NaN, its objective
    config = compose_config("experiment=link_prediction", "dataset=miserables", "task.validation_fraction=0.99")
    with pytest.raises(ConfigError, match="^task.validation_fraction=0.99"):
        pipelines.run(config)
    (run,) = mlflow.search_runs(search_all_experiments=True).itertuples()
    assert run.status == "FAILED" and not any(name.startswith("metrics.time_train") for name in run._fields)


def test_link_prediction_end_to_end_with_igel_and_baselines(compose_config, tracking_uri, tmp_path):
    quick = [
        "experiment=link_prediction",
        "dataset=erdos_renyi",
        "dataset.num_nodes=300",
        "dataset.average_degree=8",
        "trainer.epochs=1",
        "trainer.walk_length=20",
        "trainer.walks_per_node=1",
        "trainer.dim=16",
        "progress=false",
        f"task.split_cache={tmp_path / 'splits'}",
    ]
    results = {
        encoder: pipelines.run(compose_config(*quick, f"encoder={encoder}"))
        for encoder in ("igel", "deepwalk", "node2vec")
    }
    runs = mlflow.search_runs(experiment_names=["link_prediction"])
    assert set(runs.status) == {"FINISHED"} and len(runs) == 3
    assert runs["tags.split"].nunique() == 1  # every method saw the same split
    assert sorted(runs["tags.split_cache"]) == ["hit", "hit", "miss"]
    assert set(runs["metrics.split_positives"]) == {600.0}
    for metrics in results.values():
        assert 0.0 <= metrics["auc"] <= 1.0 and "time_split_s" in metrics and "time_train_s" in metrics


def test_the_runs_embeddings_are_scored_again_from_its_artifacts_and_cached_split(compose_config, store_uri, tmp_path):
    """embeddings.npy's rows are the residual graph's vertices, in the order the file lists nodes, not by id: the run's
    nodes.csv names them, so its AUC follows from its artifacts and the cached split (pairs of node names) alone."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.preprocessing import StandardScaler

    graph = ig.Graph.Barabasi(150, 6)  # hubs: degrees tell edges from non-edges, an AUC well above 0.5
    ids = np.random.default_rng(0).permutation(1000)[: graph.vcount()]  # the file's first nodes are not 0, 1, 2, ...
    path = tmp_path / "g.txt"
    path.write_text("".join(f"{ids[v]} {ids[u]}\n" for u, v in graph.get_edgelist()))
    splits = tmp_path / "splits"
    tiny = ["trainer.epochs=1", "trainer.walk_length=10", "trainer.dim=8", "progress=false", "threads=1"]
    pipelines.run(
        compose_config(
            "experiment=link_prediction",
            "dataset=edgelist",
            f"dataset.path={path}",
            *tiny,
            f"task.split_cache={splits}",
        )
    )
    runs = mlflow.search_runs(experiment_names=["link_prediction"])
    assert len(runs) == 1
    run = runs.iloc[0]
    artifact = f"runs:/{run.run_id}/"
    embeddings = np.load(mlflow.artifacts.download_artifacts(artifact + "embeddings.npy"))
    nodes = pd.read_csv(mlflow.artifacts.download_artifacts(artifact + "nodes.csv"), dtype={"name": str})
    assert list(nodes.vertex) == list(range(len(embeddings))) and sorted(nodes.name) == sorted(map(str, ids))
    row = dict(zip(nodes.name, nodes.vertex, strict=True))
    stored = np.load(splits / run["tags.split"])
    pairs = np.vectorize(row.get)(np.concatenate([stored["positives"], stored["negatives"]]))
    labels = np.repeat([1.0, 0.0], [len(stored["positives"]), len(stored["negatives"])])
    features = embeddings[pairs[:, 0]] * embeddings[pairs[:, 1]]  # Hadamard, as the paper's §4.2
    order = np.random.default_rng(0).permutation(len(labels))  # the seed's shuffle, halved: train, then test
    train, test = np.split(order, [len(order) // 2])
    scaler = StandardScaler().fit(features[train])
    fitted = LogisticRegression(max_iter=2000).fit(scaler.transform(features[train]), labels[train])
    auc = roc_auc_score(labels[test], fitted.decision_function(scaler.transform(features[test])))
    assert auc == pytest.approx(run["metrics.auc"], abs=1e-9)


@pytest.mark.data
@pytest.mark.parametrize("name", ["facebook", "astroph"])
def test_real_splits_are_leak_free(data_root, name):
    graph = load_dataset({"name": name}, DataContext(data_root, download=False, seed=0)).graph
    split = split_edges(graph, 0.5, seed=0)
    assert_leak_free(graph, split)


@pytest.mark.parametrize(
    "overrides, expected",
    [
        (
            [],
            {
                "dataset.name": "facebook",
                "trainer.epochs": 10,
                "trainer.walk_length": 150,
                "trainer.batch_size": 250000,
                "trainer.dim": 256,
                "encoder.distance": 2,
                "encoder.relative_degrees": True,
            },
        ),
        (
            ["dataset=astroph"],
            {
                "trainer.epochs": 8,  # IGEL's on AstroPh (specialise/pair): the baselines keep their one epoch
                "encoder.distance": 3,
                "trainer.walk_length": 100,
                "trainer.batch_size": 200000,
                "trainer.window": 8,
                "trainer.negatives": 9,
            },
        ),
        (
            ["encoder=deepwalk"],
            {"trainer.dim": 128, "trainer.walks_per_node": 10, "trainer.walk_length": 80, "trainer.window": 10},
        ),
        (["encoder=node2vec", "dataset=astroph", "trainer.dim=64"], {"trainer.dim": 64, "encoder.inout_q": 0.5}),
        (["encoder=deepwalk", "dataset=astroph"], {"trainer.epochs": 1, "trainer.walk_length": 80}),
        (["dataset=astroph", "trainer.epochs=3"], {"trainer.epochs": 3}),  # the command line still wins
        # the authors' path keeps the authors' replication settings: α = 3 and 8 epochs were tuned on the faithful one;
        # and the plain encoding of the paper's runs (relative degrees came to their code two years later)
        (
            ["dataset=astroph", "protocol=authors"],
            {"trainer.epochs": 2, "encoder.distance": 2, "task.split": "read_back", "encoder.relative_degrees": False},
        ),
    ],
)
def test_settings_follow_the_dataset_and_the_encoder(compose_config, overrides, expected):
    config = compose_config("experiment=link_prediction", *overrides)
    for key, value in expected.items():
        node = config
        for part in key.split("."):
            node = node[part]
        assert node == value, key
    if config.encoder.name != "igel":
        assert "distance" not in config.encoder  # no IGEL settings on the baselines' runs


def edge_set_by_name(graph: ig.Graph, pairs) -> set[frozenset]:
    names = np.asarray(graph.vs["name"])
    return {frozenset(pair) for pair in names[np.asarray(pairs, dtype=np.int64).reshape(-1, 2)]}


def test_the_authors_data_path_matches_igraph_file_round_trips(tmp_path):
    """task.split=read_back against the real thing: the file read with igraph's Read_Ncol, the residual graph written
    and read back with its ncol functions, positives and negatives found by (id, id) tuples in one orientation, as
    the authors' `edge_difference` and `generate_negative_edges` did."""
    miserables = small_graphs()["miserables"].get_edgelist()
    order = np.random.default_rng(1).permutation(len(miserables))  # any file order, either orientation
    lines = [miserables[i][:: 1 if i % 2 else -1] for i in order]
    path = tmp_path / "full.ncol"
    path.write_text("".join(f"{u + 100} {v + 100}\n" for u, v in lines))
    base, _ = read_edgelist(path, parallel_edges=True)  # the edges in file order, as Read_Ncol keeps them
    split = read_back_split(base, 0.5, seed=2)
    residual = split.residual_graph(base.vs["name"])
    full = ig.Graph.Read_Ncol(str(path), directed=False)
    assert full.vs["name"] == base.vs["name"]  # our loader numbers vertices as Read_Ncol does
    kept = edge_set_by_name(residual, residual.get_edgelist())
    train = full.copy()
    train.delete_edges([e.index for e in full.es if frozenset(full.vs[e.tuple]["name"]) not in kept])
    train.write_ncol(str(tmp_path / "residual.ncol"), weights=None)
    read_back = ig.Graph.Read_Ncol(str(tmp_path / "residual.ncol"), directed=False)
    assert read_back.vs["name"] == residual.vs["name"]  # the same renumbering
    oriented = {tuple(read_back.vs[e.tuple]["name"]) for e in read_back.es}
    expected = [tuple(full.vs[e.tuple]["name"]) for e in full.es if tuple(full.vs[e.tuple]["name"]) not in oriented]
    names = np.asarray(residual.vs["name"])
    assert sorted(map(frozenset, names[split.positives])) == sorted(map(frozenset, expected))
    leaked = edge_set_by_name(residual, split.positives) & kept
    assert leaked  # some residual edges swap orientation: the leak is there to see
    assert len(split.positives) == len(base.es) // 2 + len(leaked)
    assert split.sizes()["split_positives_in_residual"] == len(leaked)
    assert not {tuple(pair) for pair in names[split.negatives]} & oriented
    assert len(split.negatives) == len(split.positives)
    assert residual.is_connected()


def test_the_authors_data_path_with_every_pair_listed_twice(tmp_path):
    """SNAP's layout read with parallel edges: removing half of the copies leaves three quarters of the pairs, and a
    pair is a positive, twice, when both of its copies went or when it swapped orientation."""
    pairs = ig.Graph.Erdos_Renyi(n=300, m=3000).get_edgelist()
    lines = [*pairs, *((v, u) for u, v in pairs)]
    path = tmp_path / "both.txt"
    path.write_text("".join(f"{u} {v}\n" for u, v in (lines[i] for i in np.random.default_rng(0).permutation(6000))))
    base, report = read_edgelist(path, parallel_edges=True)
    assert (base.ecount(), report.duplicates_removed) == (6000, 0)
    split = read_back_split(base, 0.5, seed=5)
    residual = split.residual_graph(base.vs["name"])
    full, kept = edge_set_by_name(base, base.get_edgelist()), edge_set_by_name(residual, residual.get_edgelist())
    positives = edge_set_by_name(residual, split.positives)
    assert residual.ecount() == 3000 and not residual.is_simple() and residual.is_connected()
    assert kept < full and 0.7 < len(kept) / len(full) < 0.8
    assert full - kept <= positives <= full
    assert len(split.positives) == 2 * len(positives)  # each copy of a positive pair is listed
    assert len(split.negatives) == len(split.positives)


@pytest.mark.slow
def test_the_read_back_split_runs_through_the_pipeline(compose_config, store_uri, tmp_path):
    """protocol=authors on link prediction: parallel edges kept, the read-back split, its leak logged; the same
    graph under the faithful protocol keeps its leak-free split."""
    path = tmp_path / "g.txt"
    graph = ig.Graph.Erdos_Renyi(n=150, m=900)
    path.write_text("".join(f"{u} {v}\n" for u, v in graph.get_edgelist()))
    tiny = ["trainer.epochs=1", "trainer.walk_length=10", "trainer.dim=8", "trainer.batch_size=20000", "progress=false"]
    base = ["experiment=link_prediction", "dataset=edgelist", f"dataset.path={path}", *tiny]
    with pytest.raises(ConfigError, match="protocol=authors is not defined for task=link_prediction on dataset=edge"):
        pipelines.run(compose_config(*base, "protocol=authors"))
    pipelines.run(compose_config(*base, "task.split=read_back", "dataset.parallel_edges=true"))
    pipelines.run(compose_config(*base))
    runs = mlflow.search_runs(experiment_names=["link_prediction"], order_by=["attributes.start_time ASC"])
    leaky, clean = (runs.iloc[i] for i in (0, 1))
    assert leaky["metrics.split_positives_in_residual"] > 0 and clean["metrics.split_positives_in_residual"] == 0
    assert leaky["metrics.split_positives"] > clean["metrics.split_positives"] == 450
    assert list(runs["params.task.split"]) == ["read_back", "leak_free"]
