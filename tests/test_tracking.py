import subprocess
import sys

import mlflow
import pytest
from omegaconf import OmegaConf

from igel_exp.tracking import flatten, tracked_run, tracking_uri


def test_flatten_nested_config():
    assert flatten({"a": 1, "b": {"c": [1, 2], "d": {"e": None}}}) == {"a": 1, "b.c": [1, 2], "b.d.e": None}


def test_tracking_uri_precedence(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert tracking_uri(None) == f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///elsewhere.db")
    assert tracking_uri(None) == "sqlite:///elsewhere.db"
    assert tracking_uri("http://server:5000") == "http://server:5000"


def config():
    return OmegaConf.create({"name": "toy", "seed": 3, "encoder": {"distance": 2}, "tracking": {"uri": None}})


def test_a_run_logs_its_config_as_params_and_yaml(tracking_uri):
    with tracked_run(config(), "toy") as logger:
        logger.metrics({"score": 0.5})
    run = mlflow.get_run(logger.run_id)
    assert run.info.status == "FINISHED"
    assert run.data.params == {"name": "toy", "seed": "3", "encoder.distance": "2", "tracking.uri": "None"}
    assert run.data.metrics == {"score": 0.5}
    assert OmegaConf.create(mlflow.artifacts.load_text(f"{run.info.artifact_uri}/config.yaml")) == config()
    assert mlflow.get_experiment(run.info.experiment_id).name == "toy"


def test_a_crash_inside_a_run_leaves_it_failed_with_the_error(tracking_uri):
    with pytest.raises(ZeroDivisionError):
        with tracked_run(config(), "toy") as logger:
            _ = 1 / 0
    run = mlflow.get_run(logger.run_id)
    assert run.info.status == "FAILED"
    assert run.data.tags["error"] == "ZeroDivisionError: division by zero"


def test_runs_started_together_in_a_fresh_directory_share_one_new_store(tmp_path):
    """Two `igel-run` started at once must not both create (migrate) the sqlite store: one would crash."""
    script = (
        "import sys, mlflow; from igel_exp.tracking import use_store; use_store(sys.argv[1]);"
        " mlflow.set_experiment('together'); mlflow.start_run(); mlflow.end_run()"
    )
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    starts = [
        subprocess.Popen([sys.executable, "-c", script, uri], cwd=tmp_path, stderr=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    errors = [process.communicate(timeout=300)[1] for process in starts]
    assert all(process.returncode == 0 for process in starts), "\n".join(errors)
    mlflow.set_tracking_uri(uri)
    runs = mlflow.search_runs(experiment_names=["together"], output_format="list")
    assert len(runs) == 4
