"""The saved IGEL model: what every IGEL run logs, re-embedding exactly, unseen graphs, and the bad inputs."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import igraph as ig
import mlflow
import numpy as np
import pytest
import scipy.sparse as sp
import torch

from igel_exp import pipelines
from igel_exp.cli import main as igel_run
from igel_exp.encoding import normalise_rows
from igel_exp.errors import ModelError
from igel_exp.identity import SOURCE_RUN_TAG
from igel_exp.pipelines.common import load
from igel_exp.pipelines.link_prediction import configured_split
from igel_exp.saved_model import ARTIFACT, MANIFEST, VERSION, WEIGHTS, IGELModel
from igel_exp.tracking import PROCESS_TAG, SWEEP_TAG, process_identity

from conftest import reference_counts

QUICK = ["trainer.epochs=1", "trainer.walk_length=20", "progress=false", "threads=1"]


def last_run(config) -> str:
    pipelines.run(config)
    return mlflow.last_active_run().info.run_id


def logged_embeddings(run_id: str) -> np.ndarray:
    return np.load(mlflow.artifacts.download_artifacts(f"runs:/{run_id}/embeddings.npy"))


@pytest.mark.parametrize(
    "overrides",
    [
        pytest.param([], id="clustering"),
        pytest.param(["encoder.distance=2", "encoder.relative_degrees=true", "encoder.normalise=l2"], id="relative"),
        pytest.param(["trainer.precision=bfloat16"], id="bfloat16"),  # re-embeds at the run's precision
    ],
)
def test_a_run_re_embeds_its_own_graph_exactly(compose_config, store_uri, overrides):
    config = compose_config(*QUICK, *overrides)
    run_id = last_run(config)
    embeddings = IGELModel.load(run_id).embed(load(config).graph)
    logged = logged_embeddings(run_id)
    assert embeddings.dtype == logged.dtype == np.float32
    np.testing.assert_array_equal(embeddings, logged)  # bit for bit


def test_a_link_prediction_run_re_embeds_its_residual_graph_exactly(compose_config, store_uri):
    config = compose_config("experiment=link_prediction", "dataset=miserables", *QUICK)
    run_id = last_run(config)
    dataset = load(config)
    split, _, _ = configured_split(dataset, config)
    residual = split.residual_graph(dataset.graph.vs["name"])
    np.testing.assert_array_equal(IGELModel.load(run_id).embed(residual), logged_embeddings(run_id))


def test_the_artifact_holds_the_documented_format(compose_config, store_uri, tmp_path):
    config = compose_config(*QUICK, "encoder.distance=2")
    run_id = last_run(config)
    folder = mlflow.artifacts.download_artifacts(f"runs:/{run_id}/{ARTIFACT}", dst_path=str(tmp_path))
    manifest = json.loads((tmp_path / ARTIFACT / MANIFEST).read_text())
    graph = load(config).graph
    assert manifest["format"] == "igel-model" and manifest["version"] == VERSION == 1
    assert manifest["encoder"] == {
        "distance": 2,
        "max_degree": graph.maxdegree(),
        "transform": "log",
        "normalise": "sum",
        "relative_degrees": False,
        "blocks": ["degree"],
        "n_features": 3 * (graph.maxdegree() + 1),
    }
    assert manifest["dim"] == 8 and manifest["config"]["trainer"]["epochs"] == 1
    assert manifest["trained_on"] == {"dataset": "miserables_cloned", "nodes": graph.vcount(), "edges": graph.ecount()}
    state = torch.load(tmp_path / ARTIFACT / WEIGHTS, weights_only=True)
    assert set(state) == {"weight", "affine"} and state["weight"].shape == (3 * (graph.maxdegree() + 1), 8)
    assert state["affine"].shape == (2,) and not torch.equal(state["affine"], torch.tensor([1.0, 0.0]))  # learned
    loaded = IGELModel.load(folder)  # a folder works as a run id does
    torch.testing.assert_close(loaded.weight, state["weight"], rtol=0, atol=0)


def test_without_a_logit_affine_the_model_has_none(compose_config, store_uri):
    run_id = last_run(compose_config(*QUICK, "trainer.logit_affine=false"))
    assert IGELModel.load(run_id).affine is None


def test_unseen_graphs_with_degrees_beyond_max_degree_are_clamped(compose_config, store_uri, tmp_path):
    model = IGELModel.load(last_run(compose_config(*QUICK, "dataset=miserables", "encoder.distance=2")))
    hub = ig.Graph.Star(60) + ig.Graph.Ring(10)  # a hub of degree 59, beyond Les Misérables' δmax of 36
    assert model.max_degree == 36 and model.clamped_nodes(hub) == 1
    # the embedding is normalise(log2(1 + counts)) @ W with a plain-BFS reference of the counts at δmax
    counts = reference_counts(hub, model.encoder).astype(np.float32)
    features = normalise_rows(sp.csr_matrix(np.log2(1 + counts)), "sum")
    expected = features.toarray() @ model.weight.numpy()
    np.testing.assert_allclose(model.embed(hub), expected, rtol=1e-5, atol=1e-6)


def test_a_saved_model_round_trips_through_a_folder(compose_config, store_uri, tmp_path, monkeypatch):
    model = IGELModel.load(last_run(compose_config(*QUICK)))
    graph = ig.Graph.Erdos_Renyi(50, 0.1)
    again = IGELModel.load(model.save(tmp_path / "copy"))
    np.testing.assert_array_equal(again.embed(graph), model.embed(graph))
    assert IGELModel.load(tmp_path / "copy" / MANIFEST).encoder.frozen() == model.encoder.frozen()
    monkeypatch.setenv("HOME", str(tmp_path))  # `source_run='~/copy'`, quoted past the shell, as dataset.path reads it
    assert IGELModel.load("~/copy").encoder.frozen() == model.encoder.frozen()


def test_a_graph_with_parallel_edges_is_refused_where_the_models_run_merged_them(compose_config, store_uri, tmp_path):
    """igraph's Read_Edgelist of a file listing each edge both ways gives every edge twice: the encoder counted each,
    every degree doubled, embeddings of another graph than the file's (igel-embed's reading merges them), unsaid."""
    model = IGELModel.load(last_run(compose_config(*QUICK)))
    edges = tmp_path / "both_ways.txt"
    edges.write_text("".join(f"{u} {v}\n{v} {u}\n" for u, v in ig.Graph.Famous("Zachary").get_edgelist()))
    doubled = ig.Graph.Read_Edgelist(str(edges), directed=False)
    line = "the graph has 78 parallel edges (repeated or reversed pairs), which IGEL counts in its degrees, and the"
    with pytest.raises(ValueError, match=f"^{re.escape(line)} .*: merge them \\(graph.simplify\\(loops=False\\)\\)"):
        model.embed(doubled)
    np.testing.assert_array_equal(model.embed(doubled.simplify(loops=False)), model.embed(ig.Graph.Famous("Zachary")))
    config = {**model.config, "dataset": {**model.config["dataset"], "parallel_edges": True}}  # an authors' model
    authors = IGELModel(model.encoder, model.weight, model.affine, model.trained_on, config)
    assert authors.embed(ig.Graph.Read_Edgelist(str(edges), directed=False)).shape == (34, model.dim)


def test_embedding_leaves_the_global_random_state_alone(compose_config, store_uri):
    model = IGELModel.load(last_run(compose_config(*QUICK)))
    torch.manual_seed(5)
    model.embed(ig.Graph.Ring(20))
    after = torch.rand(1)
    torch.manual_seed(5)
    assert torch.equal(torch.rand(1), after)


def test_a_typo_in_the_run_id_is_one_line(store_uri):
    with pytest.raises(ModelError) as error:
        IGELModel.load("0123abcd")
    assert str(error.value) == f"'0123abcd' is neither a model folder nor a run of the MLflow store {store_uri}"


def test_a_deepwalk_run_has_no_model(compose_config, store_uri):
    run_id = last_run(compose_config("experiment=link_prediction", "dataset=miserables", "encoder=deepwalk", *QUICK))
    with pytest.raises(ModelError) as error:
        IGELModel.load(run_id)
    assert str(error.value) == (
        f"run {run_id} (experiment link_prediction, encoder=deepwalk) has no IGEL model:"
        " only runs that train encoder=igel log one"
    )


def test_an_igel_run_that_failed_before_its_model_says_so(store_uri):
    client = mlflow.MlflowClient(store_uri)  # an IGEL run ended FAILED before training was done
    run_id = client.create_run(client.create_experiment("clustering")).info.run_id
    client.log_param(run_id, "encoder.name", "igel")
    client.set_terminated(run_id, "FAILED")
    with pytest.raises(ModelError) as error:
        IGELModel.load(run_id)
    assert str(error.value) == (
        f"run {run_id} (experiment clustering, encoder=igel) has no IGEL model: the run is FAILED, and logs its model"
        " once trained"
    )


def test_a_run_without_a_model_of_its_own_says_whose_it_used_or_that_it_logged_none(store_uri):
    """An igel-embed or transfer run embeds with another run's model (it said: its artifacts moved, which they had
    not); a FINISHED IGEL run whose artifacts hold no model/ logged none."""
    client = mlflow.MlflowClient(store_uri)
    experiment = client.create_experiment("transfer_link_prediction")
    transfer, bare = (client.create_run(experiment).info.run_id for _ in range(2))
    for run_id in (transfer, bare):
        client.log_param(run_id, "encoder.name", "igel")
        client.log_text(run_id, "name: x\n", "config.yaml")
        client.set_terminated(run_id, "FINISHED")
    client.set_tag(transfer, SOURCE_RUN_TAG, "abc123")
    head = "(experiment transfer_link_prediction, encoder=igel) has no IGEL model"
    with pytest.raises(ModelError) as error:
        IGELModel.load(transfer)
    assert str(error.value) == (
        f"run {transfer} {head}: its embeddings came from the model of abc123 (tag igel.source_run): use"
        " source_run=abc123"
    )
    with pytest.raises(ModelError) as error:
        IGELModel.load(bare)
    artifacts = client.get_run(bare).info.artifact_uri
    assert str(error.value) == f"run {bare} {head}: it logged none ({artifacts} has no model/)"


def test_a_node_classification_run_without_igel_says_it_trained_none(store_uri):
    """experiment=ppi_features runs encoder=igel with task.use_igel=false: the node features alone (it said: it logged
    none, as if a model had gone missing)."""
    client = mlflow.MlflowClient(store_uri)
    run_id = client.create_run(client.create_experiment("ppi")).info.run_id
    for key, value in {"encoder.name": "igel", "task.use_igel": "False", "task.use_features": "True"}.items():
        client.log_param(run_id, key, value)
    client.log_text(run_id, "name: ppi\n", "config.yaml")
    client.set_terminated(run_id, "FINISHED")
    with pytest.raises(ModelError) as error:
        IGELModel.load(run_id)
    assert str(error.value) == (
        f"run {run_id} (experiment ppi, encoder=igel) has no IGEL model: it ran with task.use_igel=false (the node"
        " features alone), which trains no IGEL layer"
    )


def test_a_run_that_ended_after_logging_its_model_gives_it_with_a_warning(compose_config, store_uri, caplog):
    """A run interrupted in its evaluation, after its model was logged: the model is whole, and used, but not unsaid;
    and an empty graph is embedded as no rows of d columns (it was (0, 0))."""
    run_id = last_run(compose_config(*QUICK))
    mlflow.MlflowClient().set_terminated(run_id, "FAILED")
    model = IGELModel.load(run_id)
    assert f"run {run_id} is FAILED: its model was logged when its training ended; it is used" in caplog.text
    assert model.embed(ig.Graph(n=0)).shape == (0, model.dim)


def test_a_running_igel_run_whose_process_is_gone_will_log_no_model(store_uri):
    """Killed (kill -9) during training: it said the run "logs its model once trained", which it never will."""
    dead = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    process = process_identity(dead.pid)
    dead.kill()
    dead.wait()
    client = mlflow.MlflowClient(store_uri)
    run_id = client.create_run(client.create_experiment("clustering"), tags={PROCESS_TAG: process}).info.run_id
    client.log_param(run_id, "encoder.name", "igel")
    with pytest.raises(ModelError) as error:
        IGELModel.load(run_id)
    assert str(error.value) == (
        f"run {run_id} (experiment clustering, encoder=igel) has no IGEL model: the run is RUNNING, but its process is"
        " gone: it will log none; train again"
    )


def test_a_finished_igel_run_whose_artifacts_moved_says_so(compose_config, store_uri, tmp_path):
    run_id = last_run(compose_config(*QUICK))
    artifacts = mlflow.get_run(run_id).info.artifact_uri
    shutil.move(tmp_path / "mlruns", tmp_path / "moved")  # a store copied elsewhere, its artifact folder left behind
    with pytest.raises(ModelError) as error:
        IGELModel.load(run_id)
    assert str(error.value) == (  # it said: only runs that train encoder=igel log one
        f"run {run_id} (experiment clustering, encoder=igel) has no IGEL model: its artifacts are not at {artifacts},"
        " where the store says they are (moved, or removed?)"
    )


def test_a_sweeps_parent_run_names_its_jobs_runs(store_uri, tmp_path, monkeypatch):
    """The parent run, which MLflow lists at the top and its jobs' runs nested under it: its id was told
    "encoder=no encoder … only runs that train encoder=igel log one", of a sweep of IGEL runs."""
    monkeypatch.chdir(tmp_path)
    here = ["hydra.sweep.dir=multirun", "hydra.output_subdir=null", "hydra/job_logging=none"]
    monkeypatch.setattr(sys, "argv", ["igel-run", "-m", *here, "seed=0,1", "dataset=miserables", *QUICK])
    igel_run()
    client = mlflow.MlflowClient(store_uri)
    found = client.search_runs([client.get_experiment_by_name("clustering").experiment_id])
    [parent] = [run.info.run_id for run in found if run.data.tags.get(SWEEP_TAG) == run.info.run_id]
    jobs = sorted((run for run in found if run.info.run_id != parent), key=lambda run: run.info.start_time)
    with pytest.raises(ModelError) as error:
        IGELModel.load(parent)
    assert str(error.value) == (
        f"run {parent} is the parent run of a sweep, which trains nothing: give one of its jobs' runs:"
        f" {jobs[0].info.run_id} (miserables α=1 seed=0), {jobs[1].info.run_id} (miserables α=1 seed=1)"
    )


def test_a_deleted_run_is_named(compose_config, store_uri):
    run_id = last_run(compose_config(*QUICK))
    mlflow.MlflowClient().delete_run(run_id)
    with pytest.raises(ModelError, match=f"^run {run_id} is deleted: restore it"):
        IGELModel.load(run_id)


def test_a_run_that_reused_embeddings_gives_the_model_of_the_run_that_trained(compose_config, store_uri):
    trained = last_run(compose_config(*QUICK))
    with mlflow.start_run(tags={"igel.embeddings_from": trained}) as reused:
        pass
    np.testing.assert_array_equal(IGELModel.load(reused.info.run_id).weight, IGELModel.load(trained).weight)


def test_another_format_version_is_refused(compose_config, store_uri, tmp_path):
    folder = IGELModel.load(last_run(compose_config(*QUICK))).save(tmp_path / "model")
    manifest = json.loads((folder / MANIFEST).read_text())
    (folder / MANIFEST).write_text(json.dumps({**manifest, "version": 2}))
    with pytest.raises(ModelError) as error:
        IGELModel.load(folder)
    assert str(error.value) == f"{folder / MANIFEST}: IGEL model format version 2; this igel-exp reads version 1"
    (folder / MANIFEST).write_text(json.dumps({**manifest, "version": True}))  # equal to 1 in Python: was read
    with pytest.raises(ModelError, match="IGEL model format version True; this igel-exp reads version 1"):
        IGELModel.load(folder)
    (folder / MANIFEST).write_text(json.dumps({"something": "else"}))
    with pytest.raises(ModelError, match='not an IGEL model file \\(no "format": "igel-model"\\)'):
        IGELModel.load(folder)
    (folder / MANIFEST).write_text("[" * 100_000 + "]" * 100_000)  # was a RecursionError traceback
    with pytest.raises(ModelError, match=f"^{re.escape(str(folder / MANIFEST))}: unreadable"):
        IGELModel.load(folder)
    (folder / MANIFEST).write_text(json.dumps({**manifest, "encoder": {**manifest["encoder"], "n_features": 3}}))
    with pytest.raises(ModelError, match="a malformed IGEL model .*inconsistent encoder settings"):
        IGELModel.load(folder)


def test_a_trained_on_that_is_no_object_is_refused_naming_the_file_and_key(compose_config, store_uri, tmp_path):
    """`"trained_on": null`, a number or a list was read into IGELModel.trained_on, the model's record of its graph;
    {} (a model built by hand, its graph unknown) is read."""
    folder = IGELModel.load(last_run(compose_config(*QUICK))).save(tmp_path / "model")
    manifest = json.loads((folder / MANIFEST).read_text())
    such = '{"dataset": …, "nodes": …, "edges": …}'
    for value, shown in [(None, "null"), (5, "5"), (["facebook"], '["facebook"]')]:
        (folder / MANIFEST).write_text(json.dumps({**manifest, "trained_on": value}))
        with pytest.raises(ModelError) as error:
            IGELModel.load(folder)
        assert str(error.value) == f"{folder / MANIFEST}: trained_on is {shown}, not an object such as {such}"
    (folder / MANIFEST).write_text(json.dumps({**manifest, "trained_on": {}}))
    assert IGELModel.load(folder).trained_on == {}


def test_a_malformed_model_of_a_run_names_the_run_not_its_download(compose_config, store_uri):
    run_id = last_run(compose_config(*QUICK))
    stored = Path(mlflow.get_run(run_id).info.artifact_uri.removeprefix("file://")) / ARTIFACT / MANIFEST
    stored.write_text(json.dumps({**json.loads(stored.read_text()), "version": 2}))
    with pytest.raises(ModelError) as error:
        IGELModel.load(run_id)
    reads = "IGEL model format version 2; this igel-exp reads version 1"
    assert str(error.value) == f"run {run_id}: {ARTIFACT}/{MANIFEST}: {reads}"  # not a temporary folder, deleted


@pytest.mark.parametrize("weights", [b"", b"not a pickle"], ids=["empty", "text"])
def test_damaged_weights_are_a_malformed_model_in_one_line(compose_config, store_uri, tmp_path, weights):
    folder = IGELModel.load(last_run(compose_config(*QUICK))).save(tmp_path / "model")
    (folder / WEIGHTS).write_bytes(weights)
    with pytest.raises(ModelError, match=f"{folder}: a malformed IGEL model"):
        IGELModel.load(folder)


def test_a_model_its_run_could_not_have_made_is_refused_when_read(compose_config, store_uri, tmp_path):
    """W or its logit not tensors of finite floats (NaN embeddings, FINISHED), a run config whose trainer section is
    no section or whose precision is none of ours (a traceback, or a FAILED embed run), dim as a string; and what a
    model written by hand may hold (tracebacks or FAILED embed runs)."""
    folder = IGELModel.load(last_run(compose_config(*QUICK))).save(tmp_path / "model")
    state = torch.load(folder / WEIGHTS, weights_only=True)
    manifest = json.loads((folder / MANIFEST).read_text())
    for weights, changes, reason in [
        ({**state, "weight": [1.0, 2.0]}, {}, "W is a list, not a tensor of floats"),
        ({**state, "weight": state["weight"].long()}, {}, "W is a Tensor, not a tensor of floats"),
        ({**state, "weight": torch.full_like(state["weight"], np.nan)}, {}, "W holds values that are not finite"),
        ({**state, "affine": torch.tensor([np.inf, 0.0])}, {}, "the logit's scale and bias holds values that are not"),
        (state, {"config": {**manifest["config"], "trainer": "x"}}, "its config's trainer is 'x', not a section"),
        (
            state,
            {"config": {**manifest["config"], "trainer": {"precision": "float64"}}},
            "its config's trainer.precision='float64' is not one of float32, bfloat16",
        ),
        (state, {"dim": str(manifest["dim"])}, f"but dim is '{manifest['dim']}'"),
        # written by hand: float64 beyond float32's range (inf once read), a bare tensor, no columns, a negative δmax
        ({**state, "weight": state["weight"].double().index_fill(0, torch.tensor([2]), 1e39)}, {}, "not finite in"),
        (state["weight"], {}, 'weights.pt holds a Tensor, not a state dict with "weight"'),
        ({**state, "weight": state["weight"][:, :0]}, {"dim": 0}, "W needs at least one column"),
        (
            {**state, "weight": state["weight"][:0]},
            {"encoder": {**manifest["encoder"], "max_degree": -1, "n_features": 0}},
            "max_degree is -1, a degree: at least 0",
        ),
    ]:
        torch.save(weights, folder / WEIGHTS)
        (folder / MANIFEST).write_text(json.dumps({**manifest, **changes}))
        malformed = f"^{re.escape(str(folder))}: a malformed IGEL model .*{re.escape(reason)}"
        with pytest.raises(ModelError, match=malformed):
            IGELModel.load(folder)


def test_a_run_id_looked_up_where_no_store_is_makes_none(tmp_path):
    where = f"sqlite:///{tmp_path / 'none.db'}"
    line = f"'0123abcd' is neither a model folder nor a run of an MLflow store: none at {where}"
    with pytest.raises(ModelError, match=f"^{re.escape(line)}$"):
        IGELModel.load("0123abcd", where)
    assert not (tmp_path / "none.db").exists()
