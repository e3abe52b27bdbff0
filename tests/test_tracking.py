import itertools
import os
import signal
import subprocess
import sys
import threading
import time

import mlflow
import pytest
from omegaconf import OmegaConf

from igel_exp.tracking import SWEEP_TAG, flatten, running_jobs, sigterm_interrupts, tracked_run, tracking_uri


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


def test_an_interrupt_inside_a_store_call_still_ends_the_run_failed(tracking_uri):
    """SIGTERM (or Ctrl-C) landing inside an MLflow call used to leave the sqlite store locked: the clean-up then
    waited 20 s for the lock and failed, and the run stayed RUNNING. The signals here come at a spread of moments
    while the run logs metrics, so that most of them land inside a store call."""
    run_ids = []
    for delay in (0.02, 0.05, 0.1, 0.15, 0.2, 0.3):
        timer = threading.Timer(delay, os.kill, (os.getpid(), signal.SIGTERM))
        with pytest.raises(KeyboardInterrupt, match="signal 15"), sigterm_interrupts():
            with tracked_run(config(), "toy") as logger:
                timer.start()
                for step in itertools.count():
                    logger.metrics({"loss": 1 / (step + 1)}, step=step)
        run_ids.append(logger.run_id)
    runs = [mlflow.get_run(run_id) for run_id in run_ids]
    assert [run.info.status for run in runs] == ["FAILED"] * len(runs)
    assert all(run.data.tags["error"] == "KeyboardInterrupt: signal 15" for run in runs)


def test_an_interrupt_stays_an_interrupt_when_its_clean_up_fails():
    with pytest.raises(KeyboardInterrupt, match="signal 15") as raised, sigterm_interrupts():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises KeyboardInterrupt first
        except KeyboardInterrupt:
            raise OSError("the store is unreachable") from None
    assert isinstance(raised.value.__cause__, OSError)


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


def test_running_jobs_counts_the_running_runs_nested_under_the_parents(store_uri):
    mlflow.set_tracking_uri(store_uri)  # as use_store has set it wherever running_jobs is called
    client = mlflow.MlflowClient(store_uri)
    experiment = client.create_experiment("sweeps")
    parents = [client.create_run(experiment).info.run_id for _ in range(3)]
    for parent, statuses in zip(parents, [("RUNNING", "RUNNING"), ("RUNNING", "FINISHED"), ("RUNNING",)], strict=True):
        client.set_tag(parent, SWEEP_TAG, parent)
        for status in statuses:
            job = client.create_run(experiment, tags={SWEEP_TAG: parent}).info.run_id
            if status != "RUNNING":
                client.set_terminated(job, status)
    assert running_jobs([experiment], parents[:2]) == 3  # the parents themselves (RUNNING) do not count
    assert running_jobs([experiment], parents) == 4 and running_jobs([experiment], []) == 0
