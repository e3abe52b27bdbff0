"""igel-embed: a graph embedded by an earlier run's frozen model, logged in experiment `embed`; its errors."""

import logging
import re
import subprocess
import sys

import igraph as ig
import mlflow
import numpy as np
import pandas as pd
import pytest
import torch
from hydra import compose, initialize_config_module
from test_cli import QUICK, runs

from igel_exp import pipelines
from igel_exp.cli import embed as embed_main
from igel_exp.encoding import IGELEncoder
from igel_exp.errors import IgelError, ModelError
from igel_exp.pipelines.common import load
from igel_exp.pipelines.embed import embed
from igel_exp.saved_model import IGELModel

from conftest import small_graphs


def embed_config(*overrides: str):
    with initialize_config_module(config_module="igel_exp.conf", version_base="1.3"):
        return compose(config_name="embed", overrides=["progress=false", "threads=1", *overrides])


def test_a_graph_beyond_the_model_is_embedded_and_logged(compose_config, store_uri, tmp_path):
    pipelines.run(compose_config(*QUICK, "dataset=miserables", "threads=1"))  # δmax = 36
    source = mlflow.last_active_run().info.run_id
    edges = tmp_path / "hubs.txt"  # two hubs of degree 40 (beyond δmax) sharing 30 neighbours
    edges.write_text("".join(f"h{hub} n{i}\n" for hub in (1, 2) for i in range(hub * 10, hub * 10 + 40)))
    metrics = embed(embed_config(f"source_run={source}", f"dataset.path={edges}", "dataset.node_ids=token"))
    run = mlflow.last_active_run()
    assert mlflow.get_experiment(run.info.experiment_id).name == "embed" and run.info.status == "FINISHED"
    assert run.data.tags["igel.source_run"] == source
    assert metrics["clamped_nodes"] == run.data.metrics["clamped_nodes"] == 2
    assert metrics["max_degree"] == 36 and metrics["graph_max_degree"] == 40
    embeddings = np.load(mlflow.artifacts.download_artifacts(f"runs:/{run.info.run_id}/embeddings.npy"))
    nodes = pd.read_csv(mlflow.artifacts.download_artifacts(f"runs:/{run.info.run_id}/nodes.csv"))
    assert embeddings.shape == (len(nodes), 8) and list(nodes.columns) == ["vertex", "name", "degree"]
    assert nodes.name.iloc[0] == "h1" and nodes.degree.iloc[0] == 40
    graph = load(embed_config("source_run=x", f"dataset.path={edges}", "dataset.node_ids=token"))
    np.testing.assert_array_equal(embeddings, IGELModel.load(source).embed(graph.graph))


def test_the_embed_run_of_a_model_trained_on_reused_encodings_names_both_alphas(store_uri, tmp_path):
    """A model of the authors' path at α = 2 encodes at α = 1 (encoder.encoded_distance): its embed run was named α=1,
    as if its run had been α = 1's."""
    graph = ig.Graph.Famous("Zachary")
    graph.vs["name"] = [str(node) for node in range(graph.vcount())]
    encoder = IGELEncoder(1).fit(graph)
    config = {"encoder": {"name": "igel", "distance": 2, "encoded_distance": 1}}
    folder = IGELModel(encoder, torch.ones(encoder.n_features, 4), config=config).save(tmp_path / "model")
    edges = tmp_path / "path.txt"
    edges.write_text("".join(f"{i} {i + 1}\n" for i in range(10)))
    embed(embed_config(f"source_run={folder}", f"dataset.path={edges}"))
    assert mlflow.last_active_run().info.run_name == "path.txt α=2 (α=1 encodings) seed=0"


def test_nodes_embedded_as_the_zero_vector_are_counted_and_said(compose_config, store_uri, tmp_path, caplog):
    """An isolated node (a self loop's, dropped) where the training graph had none: its one structure, (0, 0), meets a
    zero row of W, so its embedding is zeros. It was unsaid: unseen_structure_share, 1 entry in 2,000, hid it."""
    pipelines.run(compose_config(*QUICK, "dataset=miserables", "threads=1"))  # no isolated node
    source = mlflow.last_active_run().info.run_id
    edges = tmp_path / "lone.txt"
    edges.write_text("".join(f"{i} {i + 1}\n" for i in range(30)) + "lone lone\n")
    metrics = embed(embed_config(f"source_run={source}", f"dataset.path={edges}", "dataset.node_ids=token"))
    run = mlflow.last_active_run()
    embeddings = np.load(mlflow.artifacts.download_artifacts(f"runs:/{run.info.run_id}/embeddings.npy"))
    assert metrics["unseen_nodes"] == run.data.metrics["unseen_nodes"] == 1 and not embeddings[-1].any()
    assert "1 nodes are embedded as the zero vector: none of their (distance, degree) structures" in caplog.text


def test_the_embed_run_says_where_its_files_are_and_names_read_back_as_written(
    compose_config, store_uri, tmp_path, caplog
):
    """The last line named no run nor place (only MLflow's run line, further up, did); names such as NA or 007 come back
    from nodes.csv as written when read as the README says (a plain read_csv gives NaN and 7.0)."""
    pipelines.run(compose_config(*QUICK, "dataset=miserables", "threads=1"))
    source = mlflow.last_active_run().info.run_id
    edges = tmp_path / "names.txt"
    edges.write_text("NA 007\n007 7\n7 NA\nnull 7\n")
    with caplog.at_level(logging.INFO, logger="igel_exp"):
        embed(embed_config(f"source_run={source}", f"dataset.path={edges}", "dataset.node_ids=token"))
    run = mlflow.last_active_run()
    [last] = [message for message in caplog.messages if message.startswith("embedded names.txt")]
    assert last.endswith(f"embeddings.npy and nodes.csv in run {run.info.run_id}, at {run.info.artifact_uri}")
    folder = mlflow.artifacts.download_artifacts(run_id=run.info.run_id, tracking_uri=store_uri)
    nodes = pd.read_csv(f"{folder}/nodes.csv", dtype={"name": str}, keep_default_na=False)
    assert nodes.name.tolist() == ["NA", "007", "7", "null"]
    assert np.load(f"{folder}/embeddings.npy").shape == (4, 8)


def test_a_dataset_read_otherwise_than_the_models_run_read_it_is_said(compose_config, store_uri, tmp_path, caplog):
    """A model trained on a graph read with its parallel edges (protocol=authors) embedded that dataset without them,
    unsaid: other embeddings than the run's own."""
    edges = tmp_path / "graph.txt"
    edges.write_text("".join(f"{u} {v}\n{v} {u}\n" for u, v in small_graphs()["zachary"].get_edgelist()[:40]))
    read = ["dataset=edgelist", f"dataset.path={edges}"]
    pipelines.run(compose_config(*QUICK, *read, "dataset.parallel_edges=true", "threads=1"))
    source = mlflow.last_active_run().info.run_id
    embed(embed_config(f"source_run={source}", *read))
    assert "the model's run read dataset=edgelist with dataset.parallel_edges=true: add that to embed" in caplog.text
    caplog.clear()
    embed(embed_config(f"source_run={source}", *read, "dataset.parallel_edges=true"))
    other = tmp_path / "other.txt"  # another graph: the file is not a setting of the reading
    other.write_text("1 2\n2 3\n")
    embed(embed_config(f"source_run={source}", f"dataset.path={other}", "dataset.parallel_edges=true"))
    assert "the model's run read" not in caplog.text


def test_another_file_than_the_models_is_not_said_to_be_read_otherwise(compose_config, store_uri, tmp_path, caplog):
    """A model trained on graph.txt read with its parallel edges, embedding another file (IGEL is inductive) read
    without them, said the model's run read dataset=edgelist with dataset.parallel_edges=true "to embed the graph it
    was trained on": another graph, embedded on purpose. Its own file, however named, is still said."""
    edges = tmp_path / "graph.txt"
    edges.write_text("".join(f"{u} {v}\n{v} {u}\n" for u, v in small_graphs()["zachary"].get_edgelist()[:40]))
    read = ["dataset=edgelist", "dataset.path=graph.txt", "dataset.parallel_edges=true"]  # relative: as given
    pipelines.run(compose_config(*QUICK, *read, "threads=1"))
    source = mlflow.last_active_run().info.run_id
    (tmp_path / "other.txt").write_text("1 2\n2 3\n")
    embed(embed_config(f"source_run={source}", "dataset.path=other.txt"))
    assert "the model's run read" not in caplog.text
    (tmp_path / "link.txt").symlink_to(edges)
    (tmp_path / "sub").mkdir()
    for same in (str(edges), "sub/../graph.txt", "link.txt"):  # the file the model's run read, by other names
        caplog.clear()
        embed(embed_config(f"source_run={source}", f"dataset.path={same}", "dataset.parallel_edges=false"))
        assert "the model's run read dataset=edgelist with dataset.parallel_edges=true: add that" in caplog.text, same


def test_a_graph_drawn_from_another_seed_than_the_models_run_is_said(compose_config, store_uri, caplog):
    """miserables_cloned's bridge is drawn from the seed: a seed=1 run's model re-embedded dataset=miserables_cloned at
    igel-embed's seed=0, another graph, unsaid (other rows than the run's own embeddings)."""
    pipelines.run(compose_config(*QUICK, "seed=1", "threads=1"))  # the default experiment: miserables_cloned
    source = mlflow.last_active_run().info.run_id
    own = np.load(mlflow.artifacts.download_artifacts(f"runs:/{source}/embeddings.npy"))
    embed(embed_config(f"source_run={source}", "dataset=miserables_cloned"))
    assert "the model's run read dataset=miserables_cloned with seed=1: add that to embed the graph" in caplog.text
    other = mlflow.last_active_run().info.run_id  # another bridge: its ends' rows differ
    assert not np.array_equal(np.load(mlflow.artifacts.download_artifacts(f"runs:/{other}/embeddings.npy")), own)
    caplog.clear()
    embed(embed_config(f"source_run={source}", "dataset=miserables_cloned", "seed=1"))
    assert "the model's run read" not in caplog.text
    again = mlflow.last_active_run().info.run_id
    np.testing.assert_array_equal(np.load(mlflow.artifacts.download_artifacts(f"runs:/{again}/embeddings.npy")), own)
    pipelines.run(compose_config(*QUICK, "dataset=miserables", "seed=1", "threads=1"))  # the seed draws nothing
    embed(embed_config(f"source_run={mlflow.last_active_run().info.run_id}", "dataset=miserables"))
    assert "the model's run read" not in caplog.text


def test_a_model_folder_is_recorded_where_it_is(compose_config, store_uri, tmp_path, monkeypatch):
    """`igel-embed source_run=model`, a folder given relative to the working directory: the run's tag igel.source_run
    (and the advice of a load of the run, "use source_run=…") said `model`, a folder of nowhere once elsewhere."""
    pipelines.run(compose_config(*QUICK, "dataset=miserables", "threads=1"))
    folder = IGELModel.load(mlflow.last_active_run().info.run_id).save(tmp_path / "work" / "model")
    monkeypatch.chdir(tmp_path / "work")
    embed(embed_config("source_run=model", "dataset=miserables"))
    run = mlflow.last_active_run()
    assert run.data.tags["igel.source_run"] == str(folder)
    monkeypatch.chdir(tmp_path)  # elsewhere, the advice still names the model
    with pytest.raises(ModelError, match=f"use source_run={re.escape(str(folder))}$"):
        IGELModel.load(run.info.run_id)


def test_a_bad_source_run_fails_before_any_run(store_uri):
    with pytest.raises(ModelError, match="^source_run=nope: 'nope' is neither a model folder nor a run"):
        embed(embed_config("source_run=nope", "dataset=miserables"))
    client = mlflow.MlflowClient(store_uri)
    assert client.search_runs([experiment.experiment_id for experiment in client.search_experiments()]) == []


def test_a_source_run_that_hydra_reads_as_a_number_says_to_quote_it(compose_config, store_uri, tmp_path):
    """`igel-embed source_run=1e5`, a folder (or run) named 1e5: Hydra's grammar reads 100000.0, which the str field
    turned into '100000.0', looked for under a name nobody gave ("'100000.0' is neither a model folder nor a run");
    1_000 and true alike. One line says so now, before any run, and its advice, as bash hands it over, finds 1e5."""
    pipelines.run(compose_config(*QUICK, "dataset=miserables", "threads=1"))
    IGELModel.load(mlflow.last_active_run().info.run_id).save(tmp_path / "1e5")
    client = mlflow.MlflowClient(store_uri)
    runs_before = client.search_runs([experiment.experiment_id for experiment in client.search_experiments()])
    for override, line in [
        ("source_run=1e5", "source_run=100000.0: Hydra read the value as a number (1e5 is 100000.0 to it, 1_000 is"),
        ("source_run=1_000", "source_run=1000: Hydra read the value as a number"),
        ("source_run=true", "source_run=true: Hydra read the value as true or false, not as text: quote it as typed"),
    ]:
        with pytest.raises(IgelError, match=f"^{re.escape(line)}") as raised:
            embed(embed_config(override, "dataset=miserables"))
    assert str(raised.value).endswith("""(source_run="'true'")""")
    runs_after = client.search_runs([experiment.experiment_id for experiment in client.search_experiments()])
    assert len(runs_after) == len(runs_before)
    with pytest.raises(IgelError) as raised:
        embed(embed_config("source_run=1e5", "dataset=miserables"))
    advice = re.search(r"\((source_run=\S+)\)$", str(raised.value)).group(1)
    given = subprocess.run(["bash", "-c", f"printf %s {advice}"], capture_output=True, text=True, check=True).stdout
    assert given == "source_run='1e5'"  # what Hydra gets of the advice on a bash command line
    embed(embed_config(given, "dataset=miserables"))
    assert mlflow.last_active_run().data.tags["igel.source_run"] == str(tmp_path / "1e5")


def test_a_model_that_encodes_every_node_alike_embeds_nothing(compose_config, store_uri, tmp_path):
    """A scalability run at α = 0 (which times it) logs a model in which every node's ego graph is the node alone: it
    embedded every graph as one point, in a FINISHED run. igel-embed refuses it before its run, the model itself when
    asked to embed."""
    scalability = ("experiment=scalability", "dataset.num_nodes=64", "encoder.distance=0", "trainer.epochs=1")
    pipelines.run(compose_config(*scalability, "threads=1", "progress=false"))  # in a process of its own
    client = mlflow.MlflowClient(store_uri)
    runs_before = client.search_runs([experiment.experiment_id for experiment in client.search_experiments()])
    [source] = [run.info.run_id for run in runs_before]
    line = f"source_run={source}: its model has α = 0, which encodes every node alike"
    with pytest.raises(ModelError, match=f"^{re.escape(line)}"):
        embed(embed_config(f"source_run={source}", "dataset=miserables"))
    runs_after = client.search_runs([experiment.experiment_id for experiment in client.search_experiments()])
    assert len(runs_after) == len(runs_before)
    with pytest.raises(ModelError, match="^its model has α = 0"):
        IGELModel.load(source).embed(ig.Graph.Famous("Zachary"))


@pytest.mark.parametrize(
    "overrides, line",
    [
        (["seed=-1"], "seed=-1: expected an integer ≥ 0"),
        (["threads=0"], "threads=0: expected an integer ≥ 1"),  # was ignored; threads=-1 was torch's traceback
        (["dataset.path=missing.txt"], "missing.txt: edge list file not found"),  # was a FAILED run
        (["dataset=erdos_renyi", "dataset.num_nodes=0"], "dataset.num_nodes=0: expected an integer ≥ 1"),
        # was ignored: Les Misérables embedded
        (["dataset=miserables", "dataset.path=graph.txt"], "dataset.path is not a setting of dataset=miserables"),
        # was a FAILED run: a named dataset's file is looked for before the run, too
        (["dataset=facebook", "data.download=false", "data.root=no-data"], "Facebook.edgelist.gz is missing: download"),
        # was the model of ./model/, whichever that was (Path('') is the working directory), in a FINISHED run
        (["source_run="], "source_run=: expected one of the non-blank run ids and model folders"),
    ],
)
def test_a_bad_embed_config_fails_in_one_line_before_any_run(store_uri, overrides, line):
    """igel-embed checks its config as igel-run does (its schema, the command line's keys against the options it
    picks, the dataset's files) before its model and run."""
    with pytest.raises(IgelError, match=f"^{re.escape(line)}"):
        embed(embed_config("source_run=nope", *overrides), given=[override.split("=")[0] for override in overrides])
    client = mlflow.MlflowClient(store_uri)
    assert client.search_runs([experiment.experiment_id for experiment in client.search_experiments()]) == []
    client = mlflow.MlflowClient(store_uri)
    assert client.search_runs([experiment.experiment_id for experiment in client.search_experiments()]) == []


def test_a_bad_job_stops_an_embed_sweep_before_its_store_and_its_first_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    (tmp_path / "good.txt").write_text("0 1\n1 2\n2 0\n")
    here = ["hydra.run.dir=.", "hydra.sweep.dir=multirun", "hydra.output_subdir=null", "hydra/job_logging=none"]
    sweep = ["-m", *here, "source_run=nope"]  # checked before any model is loaded
    for args, line in [
        (["dataset.path=good.txt,missing.txt"], "the job source_run=nope dataset.path=missing.txt: missing.txt: edge"),
        (["dataset.path=good.txt", "seed=0,-1"], "the job source_run=nope dataset.path=good.txt seed=-1: seed=-1:"),
        (["dataset.path=good.txt", "dataset.num_nodes=5"], "no job of the sweep takes dataset.num_nodes;"),
    ]:
        with pytest.MonkeyPatch.context() as patch, pytest.raises(SystemExit) as exited:
            patch.setattr(sys, "argv", ["igel-embed", *sweep, *args])
            embed_main()
        assert exited.value.code.startswith(f"igel-embed: error: {line}"), exited.value.code
    assert not (tmp_path / "mlflow.db").exists()  # no run, not even a store


def test_a_source_run_without_a_model_stops_an_embed_sweep_before_its_first_run(compose_config, store_uri, tmp_path):
    pipelines.run(compose_config(*QUICK, "dataset=miserables", "threads=1"))
    source = mlflow.last_active_run().info.run_id
    here = ["hydra.sweep.dir=" + str(tmp_path / "multirun"), "hydra/job_logging=none", "hydra/hydra_logging=none"]
    with pytest.MonkeyPatch.context() as patch, pytest.raises(SystemExit) as exited:
        patch.setattr(sys, "argv", ["igel-embed", "-m", *here, f"source_run={source},nope", "dataset=miserables"])
        embed_main()
    assert exited.value.code == (
        f"igel-embed: error: the job source_run=nope dataset=miserables: 'nope' is neither a model folder nor a run of"
        f" the MLflow store {store_uri}"
    )
    client = mlflow.MlflowClient(store_uri)
    assert [run.info.run_id for run in client.search_runs([e.experiment_id for e in client.search_experiments()])] == [
        source  # the embedding of the good source was not made either
    ]


def test_igel_embed_help_lists_the_groups_it_takes_only(capsys):
    """igel-run's other groups (encoder, trainer, protocol, …) are refused by igel-embed: its --help leaves them out."""
    with pytest.MonkeyPatch.context() as patch, pytest.raises(SystemExit):
        patch.setattr(sys, "argv", ["igel-embed", "--help", "hydra/hydra_logging=none", "hydra/job_logging=none"])
        embed_main()
    shown = capsys.readouterr().out
    groups = shown.split("== Configuration groups ==")[1].split("== Config ==")[0]
    assert "dataset=OPTION" in groups and "tracking=mlflow" in groups
    assert not re.search(r"^(encoder|trainer|protocol|experiment|schema/\w+):", groups, re.MULTILINE)


@pytest.mark.slow
def test_igel_embed_runs_from_the_command_line_and_fails_in_one_line(compose_config, store_uri, tmp_path):
    pipelines.run(compose_config(*QUICK, "dataset=miserables", "threads=1"))
    source = mlflow.last_active_run().info.run_id

    def igel_embed(*args: str) -> subprocess.CompletedProcess:  # the console script, in the same store
        command = [sys.executable, "-c", "from igel_exp.entry import igel_embed; igel_embed()", "progress=false", *args]
        return subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)

    ok = igel_embed(f"source_run={source}", "dataset=miserables_cloned")
    assert ok.returncode == 0, ok.stderr
    assert sorted(runs(tmp_path).status) == ["FINISHED", "FINISHED"]
    bad = igel_embed("source_run=0123abcd", "dataset=miserables")
    assert bad.returncode == 1
    assert bad.stderr.strip().splitlines()[-1] == (
        f"igel-embed: error: source_run=0123abcd: '0123abcd' is neither a model folder nor a run of the MLflow store"
        f" {store_uri}"
    )
