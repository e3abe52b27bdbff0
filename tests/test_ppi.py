"""PPI / GraphSAGE-format node classification: loader, evaluator, supervised model and trainer, pipeline.

The format fixtures are written with networkx's own node-link writer (not ours), with shuffled node ids,
shuffled node order and permuted feature rows, so that every alignment the loader does is exercised.
"""

import hashlib
import json
import zipfile
from pathlib import Path

import igraph as ig
import mlflow
import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
import torch
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf
from sklearn.metrics import accuracy_score, f1_score, precision_recall_fscore_support
from test_cli import igel_run, runs
from test_embed import embed_config

from igel_exp import pipelines
from igel_exp.data import DataContext, igraph_seed, load_dataset
from igel_exp.data import ppi as ppi_module
from igel_exp.data.ppi import SPLITS, structural_labels, write_graphsage, write_structure_check
from igel_exp.encoding import IGELEncoder
from igel_exp.errors import ConfigError, DataError
from igel_exp.models import IGELEmbedding, NodeClassifier, mlp, predict_labels, restrict_to_seen
from igel_exp.pipelines.embed import embed
from igel_exp.tasks.node_classification import micro_f1, multilabel_scores
from igel_exp.training import SupervisedTrainer

from conftest import REPO

SPLIT_GRAPHS = {"train": 4, "valid": 1, "test": 1}
QUICK = [
    "dataset=graphsage",
    "dataset.prefix=toy",
    "trainer.epochs=15",
    "trainer.patience=5",
    "trainer.hidden=32",
    "trainer.dim=16",
    "trainer.batch_size=64",
    "trainer.lr=0.02",
    "trainer.device=cpu",
    "progress=false",
]


def graphsage_files(folder: Path, prefix: str = "toy", seed: int = 0, test_seed: int = 0) -> dict:
    """Small graphs in GraphSAGE's format, and the truth by node id: split, edges, self loops, features,
    labels. Training graphs come from `seed`, the test graph (with a hub above the training δmax) from
    `test_seed`, so two fixtures can differ in their test graph only."""
    graphs = []
    for split, count in SPLIT_GRAPHS.items():
        for k in range(count):
            graph_seed = [test_seed if split == "test" else seed, k, SPLITS.index(split)]
            with igraph_seed(int(np.random.default_rng(graph_seed).integers(2**31))):
                graph = ig.Graph.Barabasi(30, m=1 + k % 3)
            if split == "test":  # a hub whose degree exceeds every training degree: clipped into the δmax bin
                graph.add_vertex()
                graph.add_edges([(30, v) for v in range(30) if not graph.are_adjacent(30, v)])
            graphs.append((split, graph))
    rng = np.random.default_rng(seed)
    n = sum(graph.vcount() for _, graph in graphs)
    ids = (rng.permutation(n) + 1000).tolist()  # node ids differ from positions and from feature rows
    rows = rng.permutation(n).tolist()
    truth = {"split": {}, "edges": set(), "loops": dict.fromkeys(SPLITS, 0), "features": {}, "labels": {}}
    nx_graph = nx.Graph()
    offset = 0
    for split, graph in graphs:
        names = ids[offset : offset + graph.vcount()]
        degree = np.asarray(graph.degree())
        labels = np.stack([degree >= 2, degree >= 3, degree >= 5, degree >= 8], axis=1).astype(int)
        for v, node in enumerate(names):
            truth["split"][node] = split
            truth["features"][node] = rng.normal(size=6)
            truth["labels"][node] = labels[v]
        for u, v in graph.get_edgelist():
            truth["edges"].add(frozenset((str(names[u]), str(names[v]))))
        for node in names[:3]:  # GraphSAGE's files keep self loops: they must be dropped and counted
            nx_graph.add_edge(node, node)
            truth["loops"][split] += 1
        nx_graph.add_edges_from((names[u], names[v]) for u, v in graph.get_edgelist())
        offset += graph.vcount()
    order = rng.permutation(n)
    shuffled = nx.Graph()
    for position in order:  # the node list in another order than ids and rows
        node = ids[position]
        shuffled.add_node(node, val=truth["split"][node] == "valid", test=truth["split"][node] == "test")
    shuffled.add_edges_from(nx_graph.edges)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{prefix}-G.json").write_text(json.dumps(nx.node_link_data(shuffled, edges="links")))
    (folder / f"{prefix}-id_map.json").write_text(json.dumps({str(i): r for i, r in zip(ids, rows, strict=True)}))
    features = np.zeros((n, 6))
    for node, row in zip(ids, rows, strict=True):
        features[row] = truth["features"][node]
    np.save(folder / f"{prefix}-feats.npy", features)
    class_map = {str(node): truth["labels"][node].tolist() for node in ids}
    (folder / f"{prefix}-class_map.json").write_text(json.dumps(class_map))
    truth["rows"] = {str(i): r for i, r in zip(ids, rows, strict=True)}
    return truth


def graphsage(folder: Path, prefix: str = "toy", **flags) -> ppi_module.NodeDataset:
    config = {"name": "graphsage", "path": str(folder), "prefix": prefix, "features": True, "labels": True, **flags}
    return load_dataset(config, DataContext(folder, download=False, seed=0))


def names(graph: ig.Graph) -> list[str]:
    return graph.vs["name"]


def edges_by_name(graph: ig.Graph) -> set[frozenset]:
    return {frozenset((graph.vs[u]["name"], graph.vs[v]["name"])) for u, v in graph.get_edgelist()}


# --- loader -------------------------------------------------------------------------------------------


def test_graphsage_files_load_aligned_by_id(tmp_path):
    truth = graphsage_files(tmp_path)
    dataset = graphsage(tmp_path)
    graph = dataset.graph
    assert edges_by_name(graph) == truth["edges"] and graph.is_simple()
    rows = [truth["rows"][name] for name in names(graph)]
    assert rows == sorted(rows)  # vertices in feature-row order
    for split in SPLITS:
        part = dataset.splits[split]
        expected = {str(node) for node, s in truth["split"].items() if s == split}
        assert set(names(part.graph)) == expected == {names(graph)[v] for v in part.vertices}
        assert names(part.graph) == [names(graph)[v] for v in part.vertices]  # vertex i of the split = vertices[i]
        assert edges_by_name(part.graph) == {e for e in truth["edges"] if e <= expected}
        assert part.self_loops_removed == truth["loops"][split] == dataset.report.extra[f"{split}_self_loops_removed"]
        assert dataset.report.extra[f"{split}_nodes"] == len(expected)
    assert dataset.report.self_loops_removed == sum(truth["loops"].values())
    assert dataset.report.extra["edges_across_splits"] == 0
    for v, name in enumerate(names(graph)):
        np.testing.assert_allclose(dataset.features[v], truth["features"][int(name)], rtol=1e-6)
        np.testing.assert_array_equal(dataset.labels[v], truth["labels"][int(name)])
    assert dataset.features.dtype == np.float32 and dataset.labels.dtype == np.uint8


def test_structure_only_when_features_and_labels_are_not_asked(tmp_path):
    graphsage_files(tmp_path)
    (tmp_path / "toy-feats.npy").unlink()
    (tmp_path / "toy-class_map.json").unlink()
    dataset = graphsage(tmp_path, features=False, labels=False)
    assert dataset.features is None and dataset.labels is None and dataset.graph.vcount() == 181


def test_missing_files_are_named_in_one_line(tmp_path):
    graphsage_files(tmp_path)
    (tmp_path / "toy-feats.npy").unlink()
    (tmp_path / "toy-class_map.json").unlink()
    with pytest.raises(DataError, match="missing toy-feats.npy, toy-class_map.json") as error:
        graphsage(tmp_path)
    assert "\n" not in str(error.value)


def test_ppi_missing_files_name_each_file_the_url_and_the_folder(tmp_path):
    context = DataContext(tmp_path, download=False, seed=0)
    with pytest.raises(DataError) as error:
        load_dataset({"name": "ppi", "features": True, "labels": True}, context)
    message = str(error.value)
    assert message == (
        f"{tmp_path / 'PPI'}: missing ppi-G.json, ppi-id_map.json, ppi-feats.npy, ppi-class_map.json; get them"
        f" from {ppi_module.PPI_URL} (inside its ppi/ folder) and put them in {tmp_path / 'PPI'}/"
        " (or set data.download=true)"
    )


def ppi_archive(tmp_path: Path, monkeypatch) -> Path:
    """A ppi.zip like GraphSAGE's (files under ppi/) built from a fixture, served from a file:// URL, with
    the loader's checksums pointed at the fixture's files."""
    source = tmp_path / "source"
    graphsage_files(source, prefix="ppi")
    archive = tmp_path / "ppi.zip"
    hashes = {}
    with zipfile.ZipFile(archive, "w") as bundle:
        for path in sorted(source.iterdir()):
            bundle.write(path, f"ppi/{path.name}")
            hashes[path.name] = hashlib.sha256(path.read_bytes()).hexdigest()
        bundle.writestr("ppi/ppi-walks.txt", "not needed\n")
    monkeypatch.setattr(ppi_module, "PPI_URL", archive.as_uri())
    monkeypatch.setattr(ppi_module, "PPI_FILES", {**ppi_module.PPI_FILES, **hashes})
    return archive


def test_ppi_download_extracts_verifies_and_discards_the_archive(tmp_path, monkeypatch):
    ppi_archive(tmp_path, monkeypatch)
    root = tmp_path / "root"
    config = {"name": "ppi", "features": True, "labels": True}
    dataset = load_dataset(config, DataContext(root, download=True, seed=0))
    assert dataset.graph.vcount() == 181 and dataset.labels.shape == (181, 4)
    assert sorted(p.name for p in (root / "PPI").iterdir()) == [
        "ppi-G.json",
        "ppi-class_map.json",
        "ppi-feats.npy",
        "ppi-id_map.json",
    ]
    again = load_dataset(config, DataContext(root, download=False, seed=0))  # the verified copies are reused
    np.testing.assert_array_equal(again.features, dataset.features)


def test_ppi_corrupted_archive_member_is_refused_and_not_kept(tmp_path, monkeypatch):
    ppi_archive(tmp_path, monkeypatch)
    monkeypatch.setitem(ppi_module.PPI_FILES, "ppi-feats.npy", "0" * 64)
    with pytest.raises(DataError, match="ppi-feats.npy extracted from .* failed its checksum"):
        load_dataset({"name": "ppi", "features": True}, DataContext(tmp_path / "root", download=True, seed=0))
    assert not (tmp_path / "root" / "PPI" / "ppi-feats.npy").exists()


def test_ppi_failed_download_still_names_the_missing_files(tmp_path, monkeypatch):
    monkeypatch.setattr(ppi_module, "PPI_URL", (tmp_path / "nowhere.zip").as_uri())
    with pytest.raises(DataError, match=r"missing ppi-G.json, ppi-id_map.json; get them .* \(download failed: "):
        load_dataset({"name": "ppi"}, DataContext(tmp_path, download=True, seed=0))


def test_features_whose_rows_do_not_match_the_graph(tmp_path):
    graphsage_files(tmp_path)
    np.save(tmp_path / "toy-feats.npy", np.load(tmp_path / "toy-feats.npy")[:-1])
    with pytest.raises(DataError, match=r"toy-feats.npy: 180 rows, but toy-id_map.json maps 181 nodes"):
        graphsage(tmp_path)


def test_features_that_are_no_finite_numbers_and_negative_rows_are_refused(tmp_path):
    """A NaN was blamed on W after training (a FAILED run with a test micro-F1 of 0), text was a traceback, and a
    negative row read a row from the end (two nodes with one row's features, FINISHED)."""
    graphsage_files(tmp_path)
    features = np.load(tmp_path / "toy-feats.npy")
    for bad, message in [
        (np.where(np.arange(len(features))[:, None] == 3, np.nan, features), "toy-feats.npy: row 3 holds values that"),
        (features.astype(str), "toy-feats.npy: expected numbers, got an array of <U"),
        # finite in float64, infinite in float32: blamed on W after training, a FAILED run with a NaN loss logged
        (
            np.where(np.arange(len(features))[:, None] == 5, 1e39, features.astype(np.float64)),
            "row 5 holds values beyond",
        ),
    ]:
        np.save(tmp_path / "toy-feats.npy", bad)
        with pytest.raises(DataError, match=message):
            graphsage(tmp_path)
    np.save(tmp_path / "toy-feats.npy", features)
    path = tmp_path / "toy-id_map.json"
    id_map = json.loads(path.read_text())
    first = next(iter(id_map))
    path.write_text(json.dumps({**id_map, first: -1}))
    with pytest.raises(DataError, match=f"toy-id_map.json: node {first} maps to row -1; feature rows are numbered"):
        graphsage(tmp_path)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda labels, first: labels[first].pop(), r"label vectors of different lengths: node \d+ has 4 labels"),
        (lambda labels, first: labels.pop(first), r"no labels for node \d+ \(1 graph nodes have none\)"),
        (lambda labels, first: labels.update({first: 3}), r"expected a list of binary labels"),
        (lambda labels, first: labels[first].__setitem__(0, 2), r"labels other than 0 and 1"),
        # both ran to a test micro-F1 of 0 on no labels, or on the lists flattened
        (lambda labels, first: [labels.update({node: []}) for node in labels], r"every node's label list is empty"),
        (
            lambda labels, first: [labels.update({node: [[v] for v in vector]}) for node, vector in labels.items()],
            r"expected a flat list of 0s and 1s",
        ),
    ],
)
def test_bad_label_vectors(tmp_path, edit, message):
    graphsage_files(tmp_path)
    path = tmp_path / "toy-class_map.json"
    labels = json.loads(path.read_text())
    edit(labels, next(iter(labels)))
    path.write_text(json.dumps(labels))
    with pytest.raises(DataError, match=message):
        graphsage(tmp_path)


def test_nodes_without_split_flags_are_dropped_with_their_links(tmp_path):
    graphsage_files(tmp_path)
    path = tmp_path / "toy-G.json"
    document = json.loads(path.read_text())
    broken = document["nodes"][0]
    del broken["val"]
    path.write_text(json.dumps(document))
    dataset = graphsage(tmp_path)
    assert dataset.report.extra["nodes_without_split_flags_dropped"] == 1
    assert str(broken["id"]) not in names(dataset.graph) and dataset.graph.vcount() == 180


def test_split_flags_that_are_no_booleans_are_refused(tmp_path):
    graphsage_files(tmp_path)
    path = tmp_path / "toy-G.json"
    document = json.loads(path.read_text())
    document["nodes"][0]["val"] = "false"  # true to Python: every such node was a validation node
    path.write_text(json.dumps(document))
    with pytest.raises(DataError, match=r"toy-G.json: node .*: 'val' must be true or false, got 'false'"):
        graphsage(tmp_path)


def test_edges_across_splits_are_counted_and_left_out_of_the_split_graphs(tmp_path):
    truth = graphsage_files(tmp_path)
    path = tmp_path / "toy-G.json"
    document = json.loads(path.read_text())
    train = next(node for node, split in truth["split"].items() if split == "train")
    test = next(node for node, split in truth["split"].items() if split == "test")
    document["links"].append({"source": train, "target": test})
    path.write_text(json.dumps(document))
    dataset = graphsage(tmp_path)
    assert dataset.report.extra["edges_across_splits"] == 1
    assert sum(dataset.splits[s].graph.ecount() for s in SPLITS) == dataset.graph.ecount() - 1


def test_config_errors_name_the_key(tmp_path):
    context = DataContext(tmp_path, download=False, seed=0)
    with pytest.raises(ConfigError, match="dataset.layout='csv' is not one of auto, graphsage, edgelists"):
        load_dataset({"name": "ppi", "layout": "csv"}, context)
    with pytest.raises(ConfigError, match="dataset.path is required"):
        load_dataset({"name": "graphsage", "prefix": "toy"}, context)
    with pytest.raises(ConfigError, match="dataset.features must be true or false"):
        load_dataset({"name": "graphsage", "path": str(tmp_path), "prefix": "toy", "features": "yes"}, context)


def test_write_graphsage_round_trips(tmp_path):
    graph = ig.Graph.Famous("Zachary")
    graph.vs["name"] = [str(i) for i in range(graph.vcount())]
    codes = np.arange(graph.vcount()) % 3
    labels, label_names = structural_labels(graph)
    features = np.arange(graph.vcount() * 2, dtype=float).reshape(-1, 2)
    write_graphsage(tmp_path, "z", graph, codes, features, labels)
    dataset = graphsage(tmp_path, prefix="z")
    assert sorted(dataset.graph.get_edgelist()) == sorted(graph.get_edgelist())
    assert [list(dataset.splits[s].vertices) for s in SPLITS] == [list(np.flatnonzero(codes == c)) for c in range(3)]
    np.testing.assert_array_equal(dataset.labels, labels)
    np.testing.assert_array_equal(dataset.features, features)
    assert label_names[0] == "degree>=5" and labels[0, 0] == (graph.degree(0) >= 5)


def test_structural_labels_against_a_per_node_reference():
    graph = ig.Graph.Famous("Zachary") + ig.Graph.Full(3)
    labels, label_names = structural_labels(graph)
    for v in range(graph.vcount()):
        neighbours = graph.neighbors(v)
        clustering = graph.transitivity_local_undirected(vertices=[v], mode="zero")[0]
        largest = max((graph.degree(u) for u in neighbours), default=0)
        values = {"degree": graph.degree(v), "clustering": clustering, "max_neighbour_degree": largest}
        for column, name in enumerate(label_names):
            kind, threshold = name.split(">=")
            assert labels[v, column] == (values[kind] >= float(threshold)), (v, name)


# --- evaluator ----------------------------------------------------------------------------------------


def test_scores_of_a_hand_worked_example():
    y_true = np.array([[1, 0, 0], [1, 1, 0]])
    y_pred = np.array([[1, 1, 0], [0, 1, 0]])  # tp 2, fp 1, fn 1
    scores = multilabel_scores(y_true, y_pred)
    assert scores["micro_f1"] == pytest.approx(2 / 3) and micro_f1(y_true, y_pred) == pytest.approx(2 / 3)
    assert scores["precision"] == pytest.approx(2 / 3) and scores["recall"] == pytest.approx(2 / 3)
    assert scores["macro_f1"] == pytest.approx((2 / 3 + 2 / 3 + 0) / 3)  # label 3: nothing to find, scores 0
    assert scores["accuracy"] == 0.0


def test_scores_match_scikit_learn():
    rng = np.random.default_rng(3)
    y_true = rng.random((200, 12)) < 0.3
    y_pred = rng.random((200, 12)) < 0.4
    y_true[:, 0] = y_pred[:, 0] = False  # a label never present nor predicted
    y_pred[:, 1] = y_true[:, 1]
    scores = multilabel_scores(y_true, y_pred)
    precision, recall, f1, _ = precision_recall_fscore_support(y_true, y_pred, average="micro", zero_division=0)
    assert scores["precision"] == pytest.approx(precision) and scores["recall"] == pytest.approx(recall)
    assert scores["micro_f1"] == pytest.approx(f1) == micro_f1(y_true, y_pred)
    assert scores["macro_f1"] == pytest.approx(f1_score(y_true, y_pred, average="macro", zero_division=0))
    assert scores["accuracy"] == pytest.approx(accuracy_score(y_true, y_pred))
    # the authors' swapped call: their "precision" is our recall, their F1 is ours
    swapped = precision_recall_fscore_support(y_pred, y_true, average="micro", zero_division=0)
    assert swapped[0] == pytest.approx(recall) and swapped[2] == pytest.approx(f1)


def test_evaluator_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="one shape"):
        multilabel_scores(np.zeros((3, 2)), np.zeros((3, 3)))


# --- model and trainer ----------------------------------------------------------------------------------


def test_mlp_depth_counts_linear_layers():
    layers = mlp(10, 4, hidden=8, depth=3, activation="elu", dropout=0.5)
    kinds = [type(layer).__name__ for layer in layers]
    assert kinds == ["Linear", "ELU", "Dropout", "Linear", "ELU", "Dropout", "Linear"]
    assert [type(layer).__name__ for layer in mlp(10, 4, hidden=8, depth=1)] == ["Linear"]
    assert type(mlp(10, 4, 8, 2, activation="tanh")[1]).__name__ == "Tanh"
    with pytest.raises(ConfigError, match="trainer.activation='gelu' is not one of"):
        mlp(10, 4, 8, 2, activation="gelu")
    with pytest.raises(ConfigError, match="trainer.depth"):
        mlp(10, 4, 8, 0)


def test_classifier_is_the_mlp_of_igel_embedding_and_features():
    graph = ig.Graph.Famous("Zachary")
    encoded = IGELEncoder(1).fit_transform(graph)
    features = np.random.default_rng(0).normal(size=(graph.vcount(), 3))
    model = NodeClassifier(IGELEmbedding(encoded, 5), features, n_labels=2, hidden=7, depth=2)
    nodes = torch.tensor([4, 0, 33, 4])
    embedding = torch.as_tensor(encoded[nodes.numpy()].toarray()) @ model.structure.weight
    inputs = torch.cat([embedding, torch.as_tensor(features[nodes.numpy()], dtype=torch.float32)], dim=1)
    torch.testing.assert_close(model(nodes), model.mlp(inputs))
    only_features = NodeClassifier(None, features, n_labels=2, hidden=7, depth=2)
    assert only_features.mlp[0].in_features == 3 and only_features.n_nodes == 34
    np.testing.assert_array_equal(predict_labels(model, nodes).numpy(), (model(nodes) > 0).numpy())
    with pytest.raises(ConfigError, match="task.use_igel, task.use_features"):
        NodeClassifier(None, None, n_labels=2, hidden=7, depth=2)


def test_bfloat16_precision_runs_the_mlp_in_bfloat16_and_keeps_weights_and_logits_float32():
    graph = ig.Graph.Famous("Zachary")
    encoded = IGELEncoder(1).fit_transform(graph)
    features = np.random.default_rng(0).normal(size=(graph.vcount(), 3))
    torch.manual_seed(0)
    exact = NodeClassifier(IGELEmbedding(encoded, 5), features, n_labels=2, hidden=16, depth=3)
    fast = NodeClassifier(IGELEmbedding(encoded, 5, "bfloat16"), features, 2, 16, 3, precision="bfloat16")
    fast.load_state_dict(exact.state_dict())  # the same W and MLP (X's dense columns copied into bfloat16)
    nodes = torch.tensor([4, 0, 33, 4, 12])
    reference, logits = exact(nodes), fast(nodes)
    assert logits.dtype == torch.float32 and not torch.equal(logits, reference)
    torch.testing.assert_close(logits, reference, rtol=0, atol=0.05 * float(reference.detach().abs().max()))
    logits.sum().backward()
    assert all(p.dtype == p.grad.dtype == torch.float32 for p in fast.parameters())
    with pytest.raises(ConfigError, match=r"trainer.precision='float16' is not one of float32, bfloat16"):
        NodeClassifier(None, features, 2, 4, 2, precision="float16")


def test_ppi_runs_at_bfloat16_precision(compose_config, shared_store, tmp_path):
    graphsage_files(tmp_path / "data")
    metrics, run_id = run_ppi(compose_config, tmp_path / "data", "trainer.precision=bfloat16")
    assert mlflow.get_run(run_id).data.params["trainer.precision"] == "bfloat16"
    assert metrics["test_micro_f1"] > 0.8  # as at float32 (test_ppi_experiment_end_to_end)


def test_structures_unseen_in_training_get_zero_rows():
    seen = sp.csr_matrix(np.array([[0.5, 0.0, 0.5, 0.0]], dtype=np.float32))
    everything = sp.csr_matrix(np.array([[0.5, 0.0, 0.5, 0.0], [0.0, 1.0, 0.0, 0.0]], dtype=np.float32))
    embedding = restrict_to_seen(IGELEmbedding(everything, 3), seen)
    assert torch.all(embedding.weight[[1, 3]] == 0) and torch.all(embedding.weight[[0, 2]] != 0)
    assert torch.all(embedding(torch.tensor([1])) == 0)  # an unseen-only node embeds to zero


def test_early_stopping_restores_the_best_epoch():
    torch.manual_seed(0)
    model = NodeClassifier(None, np.eye(6, dtype=np.float32), n_labels=2, hidden=4, depth=2)
    scores = iter([0.1, 0.5, 0.3, 0.5, 0.2, 0.9])  # epoch 2 is best; ties do not count; patience 3 ends at 5
    seen = {}

    def validate(m):
        seen[len(seen) + 1] = {k: v.clone() for k, v in m.state_dict().items()}
        return next(scores)

    trainer = SupervisedTrainer(50, 4, 0.1, patience=3, device=torch.device("cpu"), seed=0, progress=False)
    result = trainer.fit(model, np.arange(6), np.eye(6)[:, :2], validate, score_name="score")
    assert (result.best_epoch, result.best_score, result.epochs, result.stopped_early) == (2, 0.5, 5, True)
    assert [h["score"] for h in result.history] == [0.1, 0.5, 0.3, 0.5, 0.2]
    for key, value in model.state_dict().items():
        torch.testing.assert_close(value, seen[2][key])
    assert not torch.equal(seen[2]["mlp.0.weight"], seen[5]["mlp.0.weight"])  # it did train on


def test_trainer_rejects_bad_settings():
    with pytest.raises(ConfigError, match="trainer.patience"):
        SupervisedTrainer(10, 4, 0.1, patience=0, device=torch.device("cpu"), seed=0)


# --- pipeline -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory):
    """One MLflow store for this module's pipeline runs (creating a sqlite store takes seconds), and one torch
    thread: the tiny models here spend more time synchronising threads than computing on a busy machine."""
    folder = tmp_path_factory.mktemp("mlflow")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        patch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{folder / 'mlflow.db'}")
        yield
    torch.set_num_threads(threads)


def run_ppi(compose_config, folder: Path, *overrides: str) -> tuple[dict, str]:
    metrics = pipelines.run(compose_config("experiment=ppi", *QUICK, f"dataset.path={folder}", *overrides))
    return metrics, mlflow.last_active_run().info.run_id


def checkpoint(run_id: str) -> dict:
    return torch.load(mlflow.artifacts.download_artifacts(f"runs:/{run_id}/model.pt"), weights_only=False)


def test_ppi_experiment_end_to_end(compose_config, shared_store, tmp_path):
    graphsage_files(tmp_path / "data")
    metrics, run_id = run_ppi(compose_config, tmp_path / "data")
    run = mlflow.get_run(run_id)
    assert run.info.status == "FINISHED" and run.data.params["task.use_features"] == "True"
    assert run.info.run_name == "toy α=1 features seed=0"  # dataset=graphsage: its prefix
    logged = run.data.metrics
    for key in ("test_micro_f1", "test_precision", "test_recall", "best_epoch", "valid_micro_f1", "time_encode_test_s"):
        assert logged[key] == pytest.approx(metrics[key]), key
    history = mlflow.MlflowClient().get_metric_history(run_id, "valid_micro_f1_by_epoch")
    best = max(history, key=lambda m: (m.value, -m.step))
    assert metrics["best_epoch"] == best.step and metrics["valid_micro_f1"] == pytest.approx(best.value)
    assert metrics["test_micro_f1"] > 0.8  # degree thresholds transfer from the training graphs to the test graph
    assert logged["test_nodes_above_max_degree"] == 1  # the hub, clipped into the δmax bin
    saved = checkpoint(run_id)
    train_degree = graphsage(tmp_path / "data").splits["train"].graph.maxdegree()  # δmax from training alone
    assert saved["encoder"]["distance"] == 1 and saved["encoder"]["max_degree"] == logged["max_degree"] == train_degree
    assert saved["parameters"]["structure.weight"].shape == (logged["features"], 16)
    assert saved["parameters"]["mlp.4.weight"].shape == (4, 32)  # depth 3: Linear, ELU, Linear, ELU, Linear


def test_the_test_graph_never_reaches_training(compose_config, shared_store, tmp_path):
    graphsage_files(tmp_path / "a", test_seed=1)
    graphsage_files(tmp_path / "b", test_seed=2)  # same training and validation graphs, another test graph
    first, first_id = run_ppi(compose_config, tmp_path / "a")
    second, second_id = run_ppi(compose_config, tmp_path / "b")
    for key, value in checkpoint(first_id)["parameters"].items():
        torch.testing.assert_close(value, checkpoint(second_id)["parameters"][key], rtol=0, atol=0)
    logged = [mlflow.get_run(run_id).data.metrics for run_id in (first_id, second_id)]
    same = ("best_epoch", "valid_micro_f1", "train_micro_f1", "max_degree", "features")
    assert [logged[0][k] for k in same] == [logged[1][k] for k in same]
    assert first["test_micro_f1"] != second["test_micro_f1"]


def test_embedding_a_ppi_models_dataset_asks_for_no_setting_that_leaves_its_graph_alone(
    compose_config, shared_store, tmp_path, caplog
):
    """igel-embed of a PPI run's model on its dataset told the user to add dataset.features=true and
    dataset.labels=true "to embed the graph it was trained on": neither shapes the graph IGEL reads."""
    graphsage_files(tmp_path / "data")
    _, run_id = run_ppi(compose_config, tmp_path / "data")
    dataset = ["dataset=graphsage", "dataset.prefix=toy", f"dataset.path={tmp_path / 'data'}"]
    embed(embed_config(f"source_run={run_id}", *dataset))
    assert "the model's run read" not in caplog.text
    assert mlflow.last_active_run().info.status == "FINISHED"


def test_features_only_row(compose_config, shared_store, tmp_path):
    graphsage_files(tmp_path / "data")
    metrics, run_id = run_ppi(compose_config, tmp_path / "data", "experiment=ppi_features")
    assert mlflow.get_run(run_id).info.run_name == "toy features seed=0"  # its α = 0 is not used
    saved = checkpoint(run_id)
    assert (
        "time_encode_train_s" not in metrics
        and saved["encoder"] is None
        and "structure.weight" not in saved["parameters"]
    )
    assert saved["parameters"]["mlp.0.weight"].shape == (32, 6)  # the features alone feed the MLP


def test_pretraining_then_frozen_or_fine_tuned(compose_config, shared_store, tmp_path):
    graphsage_files(tmp_path / "data")

    def weights(*overrides: str) -> dict:
        _, run_id = run_ppi(compose_config, tmp_path / "data", *overrides)
        return checkpoint(run_id)["parameters"] | {"metrics": mlflow.get_run(run_id).data.metrics}

    pretrain = ("trainer.pretrain.epochs=1", "trainer.pretrain.walk_length=10")
    frozen_short = weights(*pretrain, "trainer.pretrain.freeze=true", "trainer.epochs=2")
    frozen_long = weights(*pretrain, "trainer.pretrain.freeze=true", "trainer.epochs=5")
    barely_tuned = weights(*pretrain, "trainer.lr=1e-9", "trainer.epochs=2")
    no_pretraining = weights("trainer.epochs=2")
    assert "pretrain_loss" in frozen_short["metrics"] and "pretrain_loss" not in no_pretraining["metrics"]
    pretrained = frozen_short["structure.weight"]
    torch.testing.assert_close(frozen_long["structure.weight"], pretrained, rtol=0, atol=0)  # frozen: W never moves
    assert not torch.equal(frozen_short["mlp.0.weight"], frozen_long["mlp.0.weight"])  # while the MLP trains
    # fine-tuning starts from the pre-trained W: a negligible learning rate leaves it (almost) there
    torch.testing.assert_close(barely_tuned["structure.weight"], pretrained, rtol=0, atol=1e-6)
    assert not torch.equal(barely_tuned["structure.weight"], pretrained)
    assert (no_pretraining["structure.weight"] - pretrained).abs().max() > 0.1


def test_datasets_without_splits_are_refused(compose_config, shared_store, tmp_path):
    with pytest.raises(ConfigError, match="dataset=miserables has no train/valid/test node splits"):
        pipelines.run(compose_config("experiment=ppi", "dataset=miserables", "progress=false"))
    with pytest.raises(ConfigError, match="task.use_igel and task.use_features are both false"):
        pipelines.run(compose_config("experiment=ppi", "task.use_igel=false", "task.use_features=false"))
    with pytest.raises(ConfigError, match="task=node_classification needs trainer=supervised"):
        pipelines.run(compose_config("task=node_classification"))  # under the default (skip-gram) experiment
    with pytest.raises(ConfigCompositionException, match="'experiment/ppi'"):  # it sets the supervised trainer's keys
        compose_config("experiment=ppi", "trainer=skipgram")


@pytest.mark.slow
def test_igel_run_without_the_data_fails_in_one_line(tmp_path):
    root = tmp_path / "empty"
    result = igel_run("experiment=ppi", f"data.root={root}", "data.download=false", cwd=tmp_path)
    assert result.returncode != 0
    assert result.stderr.strip().splitlines()[-1] == (
        f"igel-run: error: {root / 'PPI'}: missing ppi-G.json, ppi-id_map.json, ppi-feats.npy,"
        f" ppi-class_map.json; get them from {ppi_module.PPI_URL} (inside its ppi/ folder) and put them in"
        f" {root / 'PPI'}/ (or set data.download=true)"
    )
    assert list(runs(tmp_path).status) == ["FAILED"]


def test_reproduction_plan_has_one_paper_value_per_swept_row():
    with initialize_config_dir(config_dir=str(REPO / "experiments"), version_base="1.3"):
        search = "hydra.searchpath=[pkg://igel_exp.conf]"
        plan = compose(config_name="ppi", overrides=[search], return_hydra_config=True)
        rows = plan.hydra.sweeper.params.experiment.split(",")
        keys = list(plan.reproduce.rows)
        index = {tuple(entry[key] for key in keys): entry["Micro-F1"] for entry in plan.reproduce.paper}
        found = {}
        for row in rows:
            config = compose(config_name="ppi", overrides=[search, f"experiment={row}"])
            assert config.name == "ppi" and config.task.name == "node_classification"
            found[row] = index[tuple(OmegaConf.select(config, key) for key in keys)]
    assert plan.hydra.sweeper.params.seed == "range(5)"
    assert found == {
        "ppi_features": 0.558,
        "ppi_graph_a1": 0.736,
        "ppi_graph_features_a1": 0.850,
        "ppi_graph_a2": 0.506,
        "ppi_graph_features_a2": 0.741,
    }


# --- real PPI structure -------------------------------------------------------------------------------


@pytest.mark.data
def test_real_ppi_structure(data_root):
    if not (data_root / "PPI").is_dir():
        pytest.skip("PPI absent from the data root")
    dataset = load_dataset({"name": "ppi"}, DataContext(data_root, download=False, seed=0))
    expected = {  # manifest section 5: nodes, undirected edges, self loops per split
        "train": (44906, 613184, 20014, 0),
        "valid": (6514, 99460, 2727, 44906),
        "test": (5524, 80988, 2343, 51420),
    }
    for name, (nodes, edges, loops, first) in expected.items():
        part = dataset.splits[name]
        assert (part.graph.vcount(), part.graph.ecount(), part.self_loops_removed) == (nodes, edges, loops)
        np.testing.assert_array_equal(part.vertices, np.arange(first, first + nodes))  # contiguous id ranges
        assert names(part.graph)[0] == str(first) and part.graph.is_simple()
    assert (dataset.graph.vcount(), dataset.graph.ecount()) == (56944, 793632)
    assert dataset.report.self_loops_removed == 25084 and dataset.report.extra["edges_across_splits"] == 0
    components = sorted(len(c) for c in dataset.splits["train"].graph.connected_components())
    assert len([size for size in components if size > 2]) == 20  # the 20 training tissue graphs


@pytest.mark.data
@pytest.mark.slow
def test_real_ppi_structure_transfers_to_unseen_graphs(data_root, compose_config, shared_store, tmp_path):
    """The inductive check in small (scripts/ppi_inductive_check.py runs it in full): structural labels learned
    on the first real training tissue graph are predicted on the two unseen test graphs, far above what noise
    features reach."""
    if not (data_root / "PPI").is_dir():
        pytest.skip("PPI absent from the data root")
    structure = load_dataset({"name": "ppi"}, DataContext(data_root, download=False, seed=0))
    codes, labels = write_structure_check(structure, tmp_path / "check", train_graphs=1)
    assert [int((codes == code).sum()) for code in range(3)] == [1554, 6514, 5524]  # manifest: graph 0..1553
    test = labels[codes == 2]
    every_label = micro_f1(test, np.ones_like(test))
    overrides = [
        "dataset=graphsage",
        f"dataset.path={tmp_path / 'check'}",
        "dataset.prefix=ppi",
        "trainer.epochs=20",
        "trainer.patience=5",
        "trainer.batch_size=256",
        "trainer.lr=0.01",
        "trainer.device=cpu",
        "progress=false",
    ]
    graph = pipelines.run(compose_config("experiment=ppi_graph_a1", *overrides))
    noise = pipelines.run(compose_config("experiment=ppi_features", *overrides))
    print(f"every label {every_label:.4f}, noise {noise['test_micro_f1']:.4f}, IGEL α=1 {graph['test_micro_f1']:.4f}")
    assert graph["test_micro_f1"] > 0.85
    assert noise["test_micro_f1"] < every_label + 0.02 < graph["test_micro_f1"] - 0.1
