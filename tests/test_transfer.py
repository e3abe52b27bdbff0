"""experiment=transfer_link_prediction: A's frozen model on B's split, beside B's own; the runs it shares."""

import mlflow
import pytest
from test_cli import igel_run, runs

from igel_exp import pipelines
from igel_exp.errors import ConfigError
from igel_exp.identity import config_hash
from igel_exp.pipelines import transfer as transfer_pipeline
from igel_exp.pipelines.transfer import link_prediction_config_of, own_config
from igel_exp.plan import load_plan
from igel_exp.tracking import PARENT_RUN_ENV

from conftest import REPO, small_graphs

TINY = ["trainer.epochs=1", "trainer.walk_length=10"]
SOURCE_TINY = "task.source_overrides=['trainer.epochs=1','trainer.walk_length=10']"
RUNTIME = ["progress=false", "threads=1"]


@pytest.mark.parametrize("source, target", [("facebook", "astroph"), ("astroph", "facebook")])
def test_the_models_are_the_link_prediction_runs_of_a_and_b(compose_config, source, target):
    transfer = compose_config(
        "experiment=transfer_link_prediction", f"task.source={source}", f"dataset={target}", "seed=3", "threads=1"
    )
    lp = ["experiment=link_prediction", "seed=3", "threads=1"]
    source_config = link_prediction_config_of(transfer)
    assert config_hash(source_config) == config_hash(compose_config(*lp, f"dataset={source}"))
    assert config_hash(own_config(transfer, source_config)) == config_hash(compose_config(*lp, f"dataset={target}"))
    assert source_config.threads == 1 and source_config.dataset.name == source  # where it runs follows this run


def test_with_a_equal_to_b_the_model_is_bs_own_run_with_its_overrides(compose_config):
    """task.source=B: A's run is B's own, this run's overrides included, then task.source_overrides. A got only the
    latter: `task.source=miserables dataset=miserables trainer.epochs=1` trained a second model at the file's epochs,
    and the transfer AUC was not B's own, as the docs say it is with A = B."""
    base = ["experiment=transfer_link_prediction", "task.source=miserables", "dataset=miserables", "seed=3"]
    settings = ["trainer.epochs=1", "encoder.distance=3", "encoder=igel"]
    lp = ["experiment=link_prediction", "dataset=miserables", "seed=3", *settings]
    transfer = compose_config(*base, *settings)
    source = link_prediction_config_of(transfer)
    assert config_hash(source) == config_hash(own_config(transfer, source)) == config_hash(compose_config(*lp))
    assert transfer_pipeline.settings_a_lacks(transfer, source) == []
    # task.source_overrides on top of B's settings, group overrides too
    transfer = compose_config(*base, *settings, "task.source_overrides=['trainer.lr=0.5','trainer=skipgram']")
    source = link_prediction_config_of(transfer)
    assert config_hash(source) == config_hash(compose_config(*lp, "trainer.lr=0.5"))
    assert config_hash(own_config(transfer, source)) == config_hash(compose_config(*lp))
    # an edge list: A is B's file unless task.source_overrides name another (then another graph, A's own settings)
    edgelist = ["experiment=transfer_link_prediction", "task.source=edgelist", "dataset=edgelist", "seed=3"]
    transfer = compose_config(*edgelist, f"dataset.path={REPO / 'README.md'}", "trainer.epochs=1")
    assert link_prediction_config_of(transfer).dataset.path == str(REPO / "README.md")
    assert link_prediction_config_of(transfer).trainer.epochs == 1
    other = f"task.source_overrides=['dataset.path={REPO / 'pyproject.toml'}']"
    source = link_prediction_config_of(compose_config(*edgelist, f"dataset.path={REPO / 'README.md'}", other))
    assert source.dataset.path == str(REPO / "pyproject.toml")


def test_settings_of_b_that_a_does_not_take_are_named(compose_config):
    """Another A takes task.source_overrides, not this run's overrides, which apply to B's run only: said at run time
    (an AstroPh model trained 16 min at the file's settings under a transfer run given trainer.epochs=1)."""
    base = ["experiment=transfer_link_prediction", "task.source=miserables", "dataset=miserables_cloned"]
    transfer = compose_config(*base, "trainer.epochs=1", "encoder.distance=1", "threads=1", "progress=false")
    assert transfer_pipeline.settings_a_lacks(transfer, link_prediction_config_of(transfer)) == [
        "encoder.distance=1",
        "trainer.epochs=1",
    ]
    transfer = compose_config(*base, "trainer.epochs=1", "task.source_overrides=['trainer.epochs=1']")
    assert transfer_pipeline.settings_a_lacks(transfer, link_prediction_config_of(transfer)) == []


@pytest.mark.parametrize("profile", ["quick", "full"])
def test_the_transfer_table_reuses_the_runs_of_the_link_prediction_table(profile):
    transfer = load_plan(REPO / "experiments" / "transfer_link_prediction.yaml", profile)
    link_prediction = {job.hash for job in load_plan(REPO / "experiments" / "link_prediction.yaml", profile).jobs}
    assert len(transfer.jobs) == 4 * (1 if profile == "quick" else 5)
    for job in transfer.jobs:
        source = link_prediction_config_of(job.config)
        assert config_hash(source) in link_prediction, job.shown
        assert config_hash(own_config(job.config, source)) in link_prediction, job.shown


def test_transfer_end_to_end_reusing_finished_runs(compose_config, store_uri, monkeypatch):
    client = mlflow.MlflowClient(store_uri)
    sweep = client.create_run(client.create_experiment("transfer_link_prediction")).info.run_id
    monkeypatch.setenv(PARENT_RUN_ENV, sweep)  # as in a sweep: the transfer runs are nested, the models' runs not

    def transfer(target: str) -> dict:
        overrides = ["experiment=transfer_link_prediction", "task.source=miserables", f"dataset={target}"]
        return pipelines.run(compose_config(*overrides, SOURCE_TINY, *TINY, *RUNTIME))

    same = transfer("miserables")  # A = B: one link-prediction run serves as both
    other = transfer("erdos_renyi")  # another graph: its own link-prediction run, A's reused
    transfer("erdos_renyi")  # everything again: no model trained
    lp = client.get_experiment_by_name("link_prediction").experiment_id
    trained = client.search_runs([lp], order_by=["attributes.start_time ASC"])
    assert [run.data.params["dataset.name"] for run in trained] == ["miserables", "erdos_renyi"]
    assert all("mlflow.parentRunId" not in run.data.tags for run in trained)
    transfers = client.search_runs([client.get_experiment_by_name("transfer_link_prediction").experiment_id])
    assert len(transfers) == 4 and {run.data.tags.get("mlflow.parentRunId") for run in transfers} == {None, sweep}
    # named as other runs are, A's model's α with it (they said `miserables → miserables seed=0`, an edge list
    # `edgelist → edgelist`)
    named = sorted(run.info.run_name for run in transfers if run.info.run_id != sweep)
    assert named == ["miserables α=2 → erdos_renyi n=1024 degree=8 seed=0"] * 2 + ["miserables α=2 → miserables seed=0"]
    assert same["auc"] == same["own_auc"] == trained[0].data.metrics["auc"]  # a model re-embeds its graph exactly
    assert other["own_auc"] == trained[1].data.metrics["auc"] != other["auc"]
    last = mlflow.last_active_run()
    assert last.data.tags["igel.source_run"] == trained[0].info.run_id
    assert last.data.tags["igel.own_run"] == trained[1].info.run_id
    assert last.data.tags["split"] == trained[1].data.tags["split"]  # B's split, the one its own run used
    assert last.data.metrics["max_degree"] == 18  # δmax of Les Misérables' residual graph, seed 0


def test_a_changed_edge_list_is_other_data_whose_runs_are_not_reused(compose_config, store_uri, tmp_path):
    """Link-prediction runs are found by their config, which names dataset.path, not what the file holds: A's changed
    file gave the old model in a FINISHED transfer run, B's failed every transfer run after it ("its data changed")."""
    graphs = small_graphs()
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"

    def write(path, name):
        path.write_text("".join(f"{u} {v}\n" for u, v in graphs[name].get_edgelist()))

    def transfer() -> dict:
        source = f"task.source_overrides=['dataset.path={a}','trainer.epochs=1','trainer.walk_length=10']"
        overrides = ["experiment=transfer_link_prediction", "task.source=edgelist", source, "dataset=edgelist"]
        return pipelines.run(compose_config(*overrides, f"dataset.path={b}", *TINY, *RUNTIME))

    write(a, "zachary")
    write(b, "miserables")
    transfer()
    write(a, "miserables")  # A = B now: the transfer AUC is B's own
    same = transfer()
    write(b, "zachary")
    changed = transfer()
    client = mlflow.MlflowClient(store_uri)
    trained = client.search_runs([client.get_experiment_by_name("link_prediction").experiment_id])
    assert len(trained) == 4  # A and B, A anew, B anew
    assert same["auc"] == same["own_auc"] != changed["auc"]
    last = mlflow.last_active_run()
    assert last.data.tags["igel.data"] == client.get_run(last.data.tags["igel.own_run"]).data.tags["igel.data"]
    assert last.info.run_name == "a.txt α=2 → b.txt seed=0"  # the files, as their link-prediction runs are named


def test_a_source_that_cannot_transfer_is_refused(compose_config, store_uri):
    base = ["experiment=transfer_link_prediction", "dataset=miserables", *RUNTIME]
    with pytest.raises(ConfigError, match="A's run has encoder=deepwalk, which embeds only the nodes it was trained"):
        pipelines.run(compose_config(*base, "task.source_overrides=['encoder=deepwalk']"))
    # with A = B, A's run is B's own: its encoder came from this run's (it blamed task.source_overrides)
    with pytest.raises(ConfigError, match=r"^encoder=deepwalk with task.source=miserables, this run's dataset: A's"):
        pipelines.run(compose_config(*base, "task.source=miserables", "encoder=deepwalk"))
    with pytest.raises(ConfigError, match=r"^task.source=nope task.source_overrides=\[\]: .*dataset/nope"):
        pipelines.run(compose_config(*base, "task.source=nope"))
    with pytest.raises(
        ConfigError, match=r"^task.source=edgelist: A's run: dataset.path has no value.*source_overrides"
    ):
        pipelines.run(compose_config(*base, "task.source=edgelist"))  # it named B's dataset.path, which B refuses
    for item in ["dataset=miserables_cloned", "seed=4", "experiment=clustering"]:  # the run named A's dataset, seed
        # (a run of another A, unsaid); another experiment said `task.k_min: Missing key k_min`
        with pytest.raises(ConfigError, match=rf"^task.source_overrides: '{item}' sets what transfer sets: A's"):
            pipelines.run(compose_config(*base, f"task.source_overrides=['{item}']"))
    for nested in ["[['trainer.epochs=1']]", "[epochs]"]:  # a list in the list, a bare word: not overrides
        with pytest.raises(ConfigError, match=r"^task.source_overrides: .* is not an override: each item is one key="):
            pipelines.run(compose_config(*base, f"task.source_overrides={nested}"))


def test_a_trained_on_bs_graph_with_another_split_is_refused(compose_config, store_uri, tmp_path):
    """A on B's graph with a split of its own (task.removed_fraction in task.source_overrides): A's training graph held
    most of the edges that B holds out and scores; the transfer run FINISHED with that AUC. Now no run is made."""
    edges = tmp_path / "club.txt"
    edges.write_text("".join(f"{u} {v}\n" for u, v in small_graphs()["zachary"].get_edgelist()))
    source = "task.source_overrides=['task.removed_fraction=0.2','trainer.epochs=1','trainer.walk_length=10']"
    base = ["experiment=transfer_link_prediction", "dataset=edgelist", f"dataset.path={edges}", *TINY, *RUNTIME]
    split = r"\(task.split=leak_free task.removed_fraction=0.2 against task.split=leak_free task.removed_fraction=0.5\)"
    with pytest.raises(
        ConfigError, match=rf"^task.source_overrides: A's run would split B's graph otherwise .* {split}"
    ):
        pipelines.run(compose_config(*base, "task.source=edgelist", source))
    assert mlflow.search_runs(search_all_experiments=True).empty


@pytest.mark.slow
def test_a_sweep_of_igel_run_composes_a_inside_the_app(tmp_path):
    """Inside igel-run, Hydra is initialised: A's config comes from the app's own search path."""
    sweep = ["-m", "experiment=transfer_link_prediction", "task.source=miserables", "dataset=miserables,erdos_renyi"]
    result = igel_run(*sweep, SOURCE_TINY, *TINY, *RUNTIME, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    done = runs(tmp_path)
    transfers = done[done["params.name"] == "transfer_link_prediction"].sort_values("start_time")
    assert len(done) == 2 + 2 + 1 and list(transfers["params.dataset.name"]) == ["miserables", "erdos_renyi"]
    assert transfers["metrics.auc"].iloc[0] == transfers["metrics.own_auc"].iloc[0]
