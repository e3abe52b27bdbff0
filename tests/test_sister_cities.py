"""Sister Cities: the loader (synthetic files and the real ones), the experiment's configs and its pipeline."""

import gzip
from pathlib import Path

import igraph as ig
import mlflow
import numpy as np
import pandas as pd
import pytest
from hydra import compose, initialize_config_dir

from igel_exp import pipelines
from igel_exp.data import DataContext, RemoteFile, igraph_seed, load_dataset
from igel_exp.data import sister_cities as module
from igel_exp.errors import ConfigError, DataError
from igel_exp.identity import embedding_key, source_fingerprint
from igel_exp.pipelines import reuse
from igel_exp.tasks.capitals import rankings, top_n_f1

from conftest import REPO

HEADER = "Id\tLabel\tCountry\tLat\tLng\tIsCapital\n"
EVALUATION = ("cluster_", "f1_", "gain_", "modularity", "spearman_")
TINY = ["trainer.epochs=1", "trainer.walk_length=8", "trainer.window=3", "trainer.batch_size=2200", "progress=false"]


def write_root(root: Path, pairs: list[tuple[int, int]], rows: list[str]) -> Path:
    folder = root / "SisterCity"
    folder.mkdir(parents=True, exist_ok=True)
    with gzip.open(folder / "SisterCity.edgelist.gz", "wt") as handle:
        handle.writelines(f"{u} {v}\n" for u, v in pairs)
    with gzip.open(folder / "GraphNodeTable.csv.gz", "wt") as handle:
        handle.write(HEADER + "".join(rows))
    return root


@pytest.fixture
def unchecked(monkeypatch):
    """Synthetic files in the real layout: drop the checksums of the real files."""
    for key, spec in module.FILES.items():
        monkeypatch.setitem(module.FILES, key, RemoteFile(path=spec.path, url=spec.url))


def load(root: Path):
    return load_dataset({"name": "sister_cities"}, DataContext(root, download=False, seed=0))


# --- loader on synthetic files ---------------------------------------------------------------------------


def test_pairs_become_a_simple_graph_with_its_aligned_node_table(tmp_path, unchecked):
    rows = [
        "2\tParis\tFrance\t48.85\t2.35\t1\n",
        "0\tAachen\tGermany\t50.77\t6.08\t0\n",
        "3\tXian\tChina\t34.34\t108.94\t0\n",
        "3\tXian\tChina\t34.26\t108.94\t0\n",  # same id, other coordinates: the first row is kept
        "0\tAachen\tGermany\t50.77\t6.08\t0\n",  # exact duplicate
        "4\tNA\tNamibia\t-22.56\t17.08\t1\n",  # "NA" is a name, not a missing value
    ]
    dataset = load(write_root(tmp_path, [(0, 1), (1, 0), (1, 2), (2, 3), (3, 4), (4, 3)], rows))
    graph, nodes = dataset.graph, dataset.nodes
    assert (graph.vcount(), graph.ecount()) == (5, 4)
    assert sorted(graph.get_edgelist()) == [(0, 1), (1, 2), (2, 3), (3, 4)]
    assert graph.vs["name"] == ["0", "1", "2", "3", "4"]
    assert graph["directed_pairs"].tolist() == [[0, 1], [1, 0], [1, 2], [2, 3], [3, 4], [4, 3]]
    assert nodes["label"].tolist() == ["Aachen", "", "Paris", "Xian", "NA"]
    assert nodes["capital"].tolist() == [False, False, True, False, True]
    assert nodes["in_table"].tolist() == [True, False, True, True, True]
    assert nodes.loc[3, "lat"] == 34.34 and np.isnan(nodes.loc[1, "lat"])
    assert dataset.report.extra == {
        "directed_pairs": 6,
        "capitals": 2,
        "nodes_without_table_row": 1,
        "node_table_duplicate_rows": 2,
    }


@pytest.mark.parametrize(
    "rows, message",
    [
        (["1\tX\tY\t1\t1\t0\n", "1\tX\tY\t1\t1\t1\n"], "id 1 appears twice with a different label, country or flag"),
        (["7\tX\tY\t1\t1\t0\n"], "id 7 is not a vertex of the 3-node graph"),
        (["1\tX\tY\t1\t1\t2\n"], "IsCapital must be 0 or 1"),
        (["1\tX\tY\tnorth\t1\t0\n"], "unreadable node table"),
    ],
)
def test_bad_node_tables_name_the_file(tmp_path, unchecked, rows, message):
    root = write_root(tmp_path, [(0, 1), (1, 2)], rows)
    with pytest.raises(DataError, match=message) as error:
        load(root)
    assert str(error.value).startswith(str(root / "SisterCity" / "GraphNodeTable.csv.gz"))


def test_a_table_with_other_columns_is_refused(tmp_path, unchecked):
    root = write_root(tmp_path, [(0, 1)], [])
    with gzip.open(root / "SisterCity" / "GraphNodeTable.csv.gz", "wt") as handle:
        handle.write("Id\tName\n0\tX\n")
    with pytest.raises(DataError, match="expected the columns Id, Label, Country, Lat, Lng, IsCapital, found Id, Name"):
        load(root)


def test_missing_files_name_the_origin_and_the_folder(tmp_path):
    with pytest.raises(DataError, match=r"SisterCity.edgelist.gz is missing: download https://raw\.githubusercontent"):
        load(tmp_path)


def test_the_real_checksums_refuse_other_files(tmp_path):
    root = write_root(tmp_path, [(0, 1)], ["0\tX\tY\t1\t1\t1\n"])
    with pytest.raises(DataError, match="content sha256 does not match fa60bdd9"):
        load(root)


# --- the real data ---------------------------------------------------------------------------------------


@pytest.mark.data
def test_real_sister_cities(data_root):
    dataset = load(data_root)
    graph, nodes = dataset.graph, dataset.nodes
    assert (graph.vcount(), graph.ecount(), graph.is_simple(), graph.is_directed()) == (11618, 15225, True, False)
    assert graph["directed_pairs"].shape == (19761, 2)
    assert dataset.report.duplicates_removed == 4536  # pairs listed in both directions
    assert len(nodes) == 11618 and int(nodes["capital"].sum()) == 179
    assert dataset.report.extra["nodes_without_table_row"] == 204
    assert dataset.report.extra["node_table_duplicate_rows"] == 4  # ids 2209, 4575, 5981, 10284
    assert nodes.loc[3, "label"] == "Cape_Town" and nodes.loc[3, "capital"]
    assert nodes.loc[4575, ["label", "lat"]].tolist() == ["Xian", 34.341568]  # the first of its two rows
    # Washington, D.C. is 140, 2012 (no row) and 10284 (flag 0): the authors' labels as they are (MANIFEST §2)
    assert not nodes.loc[[140, 2012], "in_table"].any() and not nodes.loc[[140, 2012, 10284], "capital"].any()
    assert nodes.loc[~nodes["in_table"], ["lat", "lng"]].isna().all().all()


@pytest.mark.data
def test_real_baselines_reproduce_the_paper_columns(data_root):
    """Top-|C| F1 for the paper's |C| values: the directed PageRank column to the printed digit, degree within
    the spread its ties allow (the authors broke them by an unstable sort)."""
    dataset = load(data_root)
    capitals = dataset.nodes["capital"].to_numpy()
    scores = rankings(dataset.graph, dataset.graph["directed_pairs"], "directed")
    paper = {854: (0.174, 0.070), 566: (0.201, 0.097), 1892: (0.116, 0.075), 2181: (0.105, 0.074), 872: (0.173, 0.069)}
    for size, (degree, pagerank) in paper.items():
        assert round(top_n_f1(scores["pagerank"], capitals, size), 3) == pagerank
        assert top_n_f1(scores["degree"], capitals, size) == pytest.approx(degree, abs=0.005)
    # PageRank on the undirected graph is a different baseline, far from the paper's column
    undirected = rankings(dataset.graph, None, "undirected")
    assert top_n_f1(undirected["pagerank"], capitals, 566) > 0.15


# --- configs ---------------------------------------------------------------------------------------------


def test_experiment_has_the_appendix_settings(compose_config):
    config = compose_config("experiment=sister_cities")
    assert (config.name, config.dataset.name, config.task.name) == ("sister_cities", "sister_cities", "sister_cities")
    trainer = config.trainer
    settings = (trainer.epochs, trainer.batch_size, trainer.lr, trainer.walk_length, trainer.window)
    assert settings == (2, 25000, 0.01, 30, 7)
    assert (trainer.negatives, trainer.dim, config.task.k, config.task.ranking_graph) == (10, 30, 6, "directed")


@pytest.mark.parametrize(
    "name, rows, cells",
    [("sister_cities_f1", ["encoder.distance", "task.k"], 12), ("sister_cities_correlations", ["encoder.distance"], 4)],
)
def test_reproduction_files_sweep_every_paper_cell(name, rows, cells):
    with initialize_config_dir(config_dir=str(REPO / "experiments"), version_base="1.3"):
        plan = compose(config_name=name, overrides=["hydra.searchpath=[pkg://igel_exp.conf]"], return_hydra_config=True)
    params = plan.hydra.sweeper.params
    assert plan.name == "sister_cities" and plan.task.name == "sister_cities" and params.seed == "range(5)"
    assert list(plan.reproduce.rows) == rows
    grid = {(int(a),) for a in params["encoder.distance"].split(",")}
    assert list(params)[0] == "protocol" and params.protocol == "faithful,authors"  # both paths, one after the other
    if "task.k" in params:
        assert list(params)[1] == "task.k"  # then k: (α, seed) trained before k=6, 7 reuse it
        grid = {(a, int(k)) for (a,) in grid for k in params["task.k"].split(",")}
    paper = {tuple(entry[key] for key in rows) for entry in plan.reproduce.paper}
    assert paper == grid and len(paper) == cells
    for entry in plan.reproduce.paper:
        assert set(entry) == {*rows, *plan.reproduce.columns}


# --- the pipeline on a small synthetic network -------------------------------------------------------------


@pytest.fixture
def small_root(tmp_path, unchecked) -> Path:
    """120 cities: hubs (the capitals among them) and their partners, some partnerships listed both ways."""
    with igraph_seed(3):
        pairs = ig.Graph.Barabasi(120, 2, directed=True).get_edgelist()
    pairs += [(v, u) for u, v in pairs[::3]]
    degree = np.bincount(np.ravel(pairs), minlength=120)
    capitals = set(np.argsort(-degree, kind="stable")[:6].tolist()) | {100, 110}
    rng = np.random.default_rng(0)
    lat, lng = rng.uniform(-50, 70, 115), rng.uniform(-180, 180, 115)
    rows = [  # 115..119 are missing from the table
        f"{v}\tcity{v}\tcountry{v % 7}\t{lat[v]:.4f}\t{lng[v]:.4f}\t{int(v in capitals)}\n" for v in range(115)
    ]
    return write_root(tmp_path / "data", pairs, rows)


def finished_runs(tmp_path: Path) -> pd.DataFrame:
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
    return mlflow.search_runs(experiment_names=["sister_cities"], order_by=["attributes.start_time ASC"])


@pytest.mark.slow
def test_pipeline_trains_once_per_alpha_and_seed(
    small_root, compose_config, tracking_uri, tmp_path, capfd, monkeypatch
):
    monkeypatch.delenv("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", raising=False)  # as in a fresh process
    base = ["experiment=sister_cities", f"data.root={small_root}", "encoder.distance=2", *TINY]
    first = pipelines.run(compose_config(*base, "task.k=3"))
    capfd.readouterr()
    second = pipelines.run(compose_config(*base, "task.k=4"))
    assert "Downloading artifacts" not in capfd.readouterr().err  # progress=false: MLflow's bars too
    other_seed = pipelines.run(compose_config(*base, "task.k=4", "seed=1"))
    again = pipelines.run(compose_config(*base, "task.k=4", "task.reuse_embeddings=false"))
    runs = finished_runs(tmp_path)
    assert list(runs.status) == ["FINISHED"] * 4
    assert list(runs["params.task.k"]) == ["3", "4", "4", "4"]
    trained, reused, seeded, retrained = runs.run_id
    tag = lambda name: [value if isinstance(value, str) else None for value in runs[f"tags.{name}"]]  # noqa: E731
    assert tag(reuse.SOURCE_TAG) == [None, trained, None, None]
    keys = tag(reuse.KEY_TAG)
    assert keys[0] == keys[3] and None not in (keys[0], keys[2]) and keys[0] != keys[2] and keys[1] is None
    assert runs["metrics.loss"].notna().tolist() == [True, False, True, True]  # only runs that trained have it
    client = mlflow.MlflowClient()
    artifacts = {run: {a.path for a in client.list_artifacts(run)} for run in runs.run_id}
    assert {"embeddings.npy", "nodes.csv", "capitals.png", "cities.png", "config.yaml"} <= artifacts[trained]
    assert "embeddings.npy" not in artifacts[reused] and "capitals.png" in artifacts[reused]
    download = lambda run, name: mlflow.artifacts.download_artifacts(f"runs:/{run}/{name}")  # noqa: E731
    embeddings = [np.load(download(run, "embeddings.npy")) for run in (trained, retrained)]
    np.testing.assert_array_equal(*embeddings)  # reusing is what training again gives
    scores = lambda metrics: {k: v for k, v in metrics.items() if k.startswith(EVALUATION)}  # noqa: E731
    assert scores(second) == scores(again) and len(scores(second)) == 15
    nodes = pd.read_csv(download(trained, "nodes.csv"))
    assert len(nodes) == 120 and nodes["capital"].sum() == 8 and nodes["cluster"].nunique() == 3
    for metrics in (first, second, other_seed):
        assert metrics["capitals"] == 8 and 1 <= metrics["cluster_size"] <= 120
        assert 0 < metrics["f1_cluster"] <= 1 and 0 <= metrics["f1_top_degree"] <= 1
        assert -1 <= metrics["spearman_degree"] <= 1 and "spearman_closeness_p" in metrics
    with pytest.raises(ConfigError, match=r"^task.k=1000: the embeddings hold \d+ distinct points"):  # was task.k_min
        pipelines.run(compose_config(*base, "task.k=1000"))


def test_runs_are_named_with_their_graph_and_protocol(small_root, compose_config, tracking_uri, tmp_path):
    """The authors' and the faithful run of one (α, k, seed) were both `α=1 k=3 seed=0` in MLflow's lists, where the
    other experiments' runs say their graph and protocol (`miserables_cloned α=1 authors seed=0`)."""
    base = ["experiment=sister_cities", f"data.root={small_root}", "encoder.distance=1", "task.k=3", *TINY]
    for protocol in ("faithful", "authors"):
        pipelines.run(compose_config(*base, f"protocol={protocol}"))
    pipelines.run(compose_config(*base, "encoder=deepwalk"))
    assert list(finished_runs(tmp_path)["tags.mlflow.runName"]) == [
        "sister_cities α=1 k=3 seed=0",
        "sister_cities α=1 k=3 authors seed=0",
        "sister_cities deepwalk k=3 seed=0",
    ]


def test_a_dataset_without_capitals_is_refused(compose_config, tracking_uri, tmp_path):
    with pytest.raises(ConfigError, match="dataset=miserables has no node table: task=sister_cities needs capital"):
        pipelines.run(compose_config("experiment=sister_cities", "dataset=miserables", *TINY))
    with pytest.raises(ConfigError, match="task.k=0: expected an integer ≥ 1"):
        pipelines.run(compose_config("experiment=sister_cities", "task.k=0", *TINY))


def test_embedding_key_ignores_the_task_and_data_root(compose_config):
    key = embedding_key(compose_config("experiment=sister_cities"))
    assert key == embedding_key(compose_config("experiment=sister_cities", "task.k=7", "data.root=/elsewhere"))
    assert key != embedding_key(compose_config("experiment=sister_cities", "seed=1"))
    assert key != embedding_key(compose_config("experiment=sister_cities", "encoder.distance=1"))
    assert key != embedding_key(compose_config("experiment=sister_cities", "trainer.epochs=3"))


@pytest.mark.data
@pytest.mark.slow
def test_real_sister_cities_end_to_end(data_root, compose_config, tracking_uri, tmp_path):
    short = ["encoder.distance=1", "trainer.epochs=1", "trainer.walk_length=4", "trainer.batch_size=100000"]
    metrics = pipelines.run(compose_config("experiment=sister_cities", f"data.root={data_root}", *short, *TINY[-1:]))
    [edges] = finished_runs(tmp_path)["metrics.graph_edges"]
    assert (metrics["capitals"], edges) == (179, 15225)
    assert 0 < metrics["f1_cluster"] < 1 and metrics["cluster_capitals"] > 0
    assert metrics["spearman_degree_p"] < 1e-20


def test_code_fingerprint_ignores_evaluators_and_figures_only(tmp_path):
    files = {"training.py": "a", "plots.py": "b", "tasks/capitals.py": "c", "new.py": "d"}
    fingerprints = []
    for changed in [None, *files]:
        copy = tmp_path / f"copy-{len(fingerprints)}"
        (copy / "tasks").mkdir(parents=True)
        for name, text in files.items():
            (copy / name).write_text(text + ("!" if name == changed else ""))
        fingerprints.append(source_fingerprint(copy))
    original, training, plots, evaluator, new = fingerprints
    assert original == plots == evaluator and len({original, training, new}) == 3


def test_a_malformed_partnership_list_names_its_file_and_line(tmp_path):
    path = tmp_path / "SisterCity.edgelist"
    path.write_text("0 1\n2 Paris\n")
    with pytest.raises(DataError, match=rf"{path}:2: node id 'Paris' is not an integer"):
        module.read_sister_cities_graph(path)
