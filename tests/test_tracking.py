import contextlib
import importlib.util
import itertools
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlparse

import mlflow
import pytest
from mlflow.entities import ViewType
from omegaconf import OmegaConf

from igel_exp import pipelines, tracking
from igel_exp.errors import JobTaken, StoreError
from igel_exp.identity import HASH_TAG
from igel_exp.reproduce import report_main, reproduce_main
from igel_exp.tracking import (
    HEARTBEAT_TAG,
    PARENT_RUN_ENV,
    PROCESS_TAG,
    SERVER_PROBE_S,
    SHARED_RUN_ENV,
    STALE_TAG,
    SWEEP_TAG,
    check_store_uri,
    claimed,
    close_stale_runs,
    flatten,
    open_experiment,
    process_gone,
    process_identity,
    running_jobs,
    sigterm_interrupts,
    store_exists,
    tracked_run,
    tracking_uri,
    use_store,
)

from conftest import TINY_QUICK, heartbeat_threads


def test_flatten_nested_config():
    assert flatten({"a": 1, "b": {"c": [1, 2], "d": {"e": None}}}) == {"a": 1, "b.c": [1, 2], "b.d.e": None}


def test_runs_of_one_seed_are_named_by_what_they_ran(compose_config, store_uri, tmp_path):
    """MLflow drew each run's name from Python's `random`, seeded with the run's seed just before: every run of seed 0
    had one name (`chill-owl-867`)."""
    (tmp_path / "graph.txt").write_text("1 2\n2 3\n3 1\n3 4\n")
    jobs = [
        ["task.k_max=3", "dataset=miserables", "encoder.distance=1"],
        ["task.k_max=3", "dataset=miserables", "encoder.distance=2"],
        ["task.k_max=3", "dataset=miserables_cloned", "encoder.distance=1"],
        ["task.k_max=3", "dataset=miserables_cloned", "encoder.distance=1", "protocol=authors"],
        ["task.k_max=3", "dataset=miserables", "encoder=deepwalk"],
        ["task.k_max=2", "dataset=edgelist", f"dataset.path={tmp_path / 'graph.txt'}"],
        ["experiment=scalability", "dataset.num_nodes=200", "task.isolate=false"],
    ]
    for overrides in jobs:
        pipelines.run(compose_config(*TINY_QUICK, *overrides))
    names = [
        run.info.run_name for run in reversed(mlflow.search_runs(search_all_experiments=True, output_format="list"))
    ]
    assert names == [
        "miserables α=1 seed=0",
        "miserables α=2 seed=0",
        "miserables_cloned α=1 seed=0",
        "miserables_cloned α=1 authors seed=0",
        "miserables deepwalk seed=0",
        "graph.txt α=1 seed=0",
        "erdos_renyi n=200 degree=8 α=1 seed=0",
    ]


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


def test_a_parent_run_that_is_not_in_the_store_is_one_line_and_no_run(store_uri, monkeypatch):
    nested = OmegaConf.merge(config(), {"tracking": {"parent_run_id": "deadbeef"}})
    with pytest.raises(StoreError, match=r"^tracking.parent_run_id=deadbeef: no such run in the MLflow store sqlite"):
        with tracked_run(nested, "toy"):
            pass
    monkeypatch.setenv(PARENT_RUN_ENV, "feedbeef")  # as a sweep's launcher hands it to its jobs
    with pytest.raises(StoreError, match=r"^\$IGEL_PARENT_RUN_ID=feedbeef: no such run"):
        with tracked_run(config(), "toy"):
            pass
    assert mlflow.search_runs(search_all_experiments=True).empty


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["Ctrl-C", "SIGTERM"])
def test_an_interrupt_inside_a_store_call_still_ends_the_run_failed(store_uri, signum):
    """SIGTERM (or Ctrl-C) landing inside an MLflow call used to leave the sqlite store locked: the clean-up then
    waited 20 s for the lock and failed, and the run stayed RUNNING. The signals here come at a spread of moments
    while the run logs metrics, so that most of them land inside a store call."""
    run_ids = []
    for delay in (0.02, 0.05, 0.1, 0.15, 0.2, 0.3):
        timer = threading.Timer(delay, os.kill, (os.getpid(), signum))
        with pytest.raises(KeyboardInterrupt, match=f"signal {signum:d}"), sigterm_interrupts():
            with tracked_run(config(), "toy") as logger:
                timer.start()
                for step in itertools.count():
                    logger.metrics({"loss": 1 / (step + 1)}, step=step)
        run_ids.append(logger.run_id)
    runs = [mlflow.get_run(run_id) for run_id in run_ids]
    assert [run.info.status for run in runs] == ["FAILED"] * len(runs)
    assert all(run.data.tags["error"] == f"KeyboardInterrupt: signal {signum:d}" for run in runs)


class UncompletedJobError(RuntimeError):
    """submitit's, raised by its USR2 handler when Slurm's time limit is near and the job cannot be requeued."""


def submitit_usr2(signum, frame):
    raise UncompletedJobError("Job not requeued because: timed-out and not checkpointable.")


@pytest.mark.skipif(not hasattr(signal, "SIGUSR2"), reason="no SIGUSR2 on this platform")
def test_a_handler_that_raises_on_usr2_waits_for_the_store_call_in_progress(store_uri):
    """submitit's USR2 handler (Slurm's time limit is near) raises wherever the job is: inside an MLflow call it broke
    SQLAlchemy's session, and the run's error said "InvalidRequestError: This session is in 'committed' state"
    instead. Held back until the call returns, it is the run's error, and its handler is restored afterwards."""
    previous = signal.signal(signal.SIGUSR2, submitit_usr2)
    try:
        run_ids = []
        for delay in (0.02, 0.05, 0.1, 0.15, 0.2, 0.3):
            timer = threading.Timer(delay, os.kill, (os.getpid(), signal.SIGUSR2))
            with pytest.raises(UncompletedJobError), sigterm_interrupts():
                with tracked_run(config(), "toy") as logger:
                    timer.start()
                    for step in itertools.count():
                        logger.metrics({"loss": 1 / (step + 1)}, step=step)
            run_ids.append(logger.run_id)
        assert signal.getsignal(signal.SIGUSR2) is submitit_usr2
    finally:
        signal.signal(signal.SIGUSR2, previous)
    runs = [mlflow.get_run(run_id) for run_id in run_ids]
    assert [run.info.status for run in runs] == ["FAILED"] * len(runs)
    expected = "UncompletedJobError: Job not requeued because: timed-out and not checkpointable."
    assert all(run.data.tags["error"] == expected for run in runs), [run.data.tags["error"] for run in runs]


class SignalledWhileFinalised:
    """An object whose finaliser is running when SIGTERM's handler runs: Python drops an exception raised there."""

    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)
        sum(range(10))  # a call: the handler runs here, inside __del__


def test_an_interrupt_that_arrives_in_a_finaliser_still_interrupts(capsys):
    """The interrupt's KeyboardInterrupt raised inside a __del__ (tqdm's: 11 of 300 SIGTERMs) was dropped, and with
    its signals ignored from then on the work went on: a job whose launcher was killed trained on."""
    steps = []
    with pytest.raises(KeyboardInterrupt, match="^signal 15$"), sigterm_interrupts():
        SignalledWhileFinalised()  # no name holds it: finalised at once
        while len(steps) < 1000:
            steps.append(time.sleep(0.001))
    assert len(steps) < 1000
    assert "Exception ignored" not in capsys.readouterr().err


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


def test_a_run_left_running_by_a_killed_process_is_ended_failed_by_the_next_command(store_uri):
    """kill -9 (or the out-of-memory killer) leaves a run RUNNING: the next igel-run, igel-reproduce or igel-report on
    the store ends it FAILED, saying why; runs of live processes, and of other machines, are left as they are."""
    script = (
        "import os, signal, sys; from omegaconf import OmegaConf; from igel_exp.tracking import tracked_run\n"
        "with tracked_run(OmegaConf.create({'name': 'toy', 'tracking': {'uri': sys.argv[1]}}), 'toy') as logger:\n"
        "    print(logger.run_id, flush=True); os.kill(os.getpid(), signal.SIGKILL)"
    )
    killed = subprocess.run([sys.executable, "-c", script, store_uri], capture_output=True, text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    client = mlflow.MlflowClient(store_uri)
    experiment = client.get_experiment_by_name("toy").experiment_id
    alive = client.create_run(experiment, tags={PROCESS_TAG: process_identity()}).info.run_id
    elsewhere = client.create_run(experiment, tags={PROCESS_TAG: "another-host 1 1"}).info.run_id
    assert client.get_run(killed.stdout.strip()).info.status == "RUNNING"
    use_store(store_uri)
    run = client.get_run(killed.stdout.strip())
    assert run.info.status == "FAILED"
    pid = run.data.tags[PROCESS_TAG].split()[1]
    assert run.data.tags["error"] == f"its process (pid {pid}) died without ending it (kill -9, out of memory, a crash)"
    assert run.data.tags[STALE_TAG].endswith(process_identity())
    assert [client.get_run(run_id).info.status for run_id in (alive, elsewhere)] == ["RUNNING", "RUNNING"]


@pytest.mark.parametrize("first", ["other", "this"])
def test_of_two_commands_that_both_find_a_job_free_in_a_store_without_a_lock_only_the_first_runs_it(
    tmp_path, monkeypatch, first
):
    """A tracking server, or a database that a cluster's nodes share, has no lock to hold while a job is claimed: two
    commands can both find it free. Each looks again once its run has started, and the later one steps back, its run
    deleted. Here the other command starts its run just after this one's check: before this one's run, or after it."""
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    uri = (tmp_path / "store").as_uri()  # MLflow's file store: a real store that tracking.claimed has no lock for
    monkeypatch.setenv(SHARED_RUN_ENV, "1")  # a run that tracking.claimed guards, as igel-reproduce's jobs
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])  # the other command's process
    client, start_run, made = mlflow.MlflowClient(uri), mlflow.start_run, {}

    def start_beside_another(*args, **kwargs):
        experiment = mlflow.get_experiment_by_name("toy").experiment_id
        tags = {HASH_TAG: kwargs["tags"][HASH_TAG], PROCESS_TAG: process_identity(other.pid)}
        ours = start_run(*args, **kwargs) if first == "this" else None
        when = ours.info.start_time + 1000 if ours else int(time.time() * 1000) - 1000
        made["other"] = client.create_run(experiment, start_time=when, tags=tags).info.run_id
        return ours or start_run(*args, **kwargs)

    monkeypatch.setattr(mlflow, "start_run", start_beside_another)
    config, ran = OmegaConf.create({"name": "toy", "tracking": {"uri": uri}}), []
    try:
        with pytest.raises(JobTaken) if first == "other" else contextlib.nullcontext() as taken:
            with tracked_run(config, "toy") as logger:
                ran.append(logger.run_id)
    finally:
        other.kill()
        other.wait()
    runs = client.search_runs([client.get_experiment_by_name("toy").experiment_id], run_view_type=ViewType.ALL)
    stages = {run.info.run_id: (run.info.status, run.info.lifecycle_stage) for run in runs}
    assert stages.pop(made["other"]) == ("RUNNING", "active")
    (ours,) = stages.values()
    if first == "other":
        assert not ran and ours == ("KILLED", "deleted") and mlflow.active_run() is None
        assert str(taken.value).startswith(f"another command's run {made['other']} has it RUNNING")
    else:
        assert ran and ours == ("FINISHED", "active")


def test_a_run_of_another_machine_whose_heartbeat_stopped_is_ended_failed_and_leaves_its_job(store_uri):
    """A cluster node that dies (or a job killed there) leaves its run RUNNING, where no command on this machine can
    see its process: its heartbeat tells. Silent for longer than HEARTBEAT_LOST_S, the run is ended FAILED and its job
    is free; with a fresh heartbeat, or none (a version before them), it is left RUNNING and holds its job."""
    client = mlflow.MlflowClient(store_uri)
    experiment = client.create_experiment("toy")
    now, identity = time.time(), "job"

    def remote_run(beat: float | None) -> str:
        tags = {PROCESS_TAG: "node-7 4242 99", HASH_TAG: identity}
        if beat is not None:
            tags[HEARTBEAT_TAG] = f"{beat:.0f}"
        return client.create_run(experiment, tags=tags).info.run_id

    silent, beating, unknown = remote_run(now - 20 * 60), remote_run(now - 60), remote_run(None)
    mlflow.set_tracking_uri(store_uri)
    with pytest.raises(JobTaken) as taken, claimed(store_uri, identity):
        pass
    assert taken.value.running and beating in str(taken.value)  # the live one holds the job: wait for it
    client.set_terminated(beating, "KILLED")  # (a FINISHED one would hold the job for good)
    with pytest.raises(JobTaken) as taken, claimed(store_uri, identity):
        pass
    assert not taken.value.running and unknown in str(taken.value)  # unsure: left to it, not waited for
    assert close_stale_runs(store_uri) == [silent]
    run = client.get_run(silent)
    assert run.info.status == "FAILED"
    error = "its process (pid 4242 on node-7) sent no heartbeat for 20 min (killed, its machine down)"
    assert run.data.tags["error"] == error
    assert [client.get_run(run_id).info.status for run_id in (beating, unknown)] == ["KILLED", "RUNNING"]


def test_a_run_says_it_is_alive_while_it_lasts(store_uri, monkeypatch):
    monkeypatch.setattr(tracking, "HEARTBEAT_S", 0.05)
    client = mlflow.MlflowClient(store_uri)
    with tracked_run(OmegaConf.create({"name": "toy", "tracking": {"uri": store_uri}}), "toy") as logger:
        first = float(client.get_run(logger.run_id).data.tags[HEARTBEAT_TAG])
        for step in range(30):  # the main thread writes to the store as the heartbeat's thread does
            logger.metrics({"loss": 1.0 / (step + 1)}, step=step)
            time.sleep(0.05)
    run = client.get_run(logger.run_id)
    assert run.info.status == "FINISHED" and not heartbeat_threads()
    last = float(run.data.tags[HEARTBEAT_TAG])
    assert first + 1 <= last and abs(last - time.time()) < 5  # beats in whole seconds
    assert len(client.get_metric_history(logger.run_id, "loss")) == 30


def test_a_run_that_ends_while_the_stale_runs_are_closed_keeps_its_status(store_uri, monkeypatch):
    """The search finds the run RUNNING, then its process ends it FINISHED and exits: the closing, which found the
    process gone, turned the finished run FAILED."""
    script = (
        "import sys; from omegaconf import OmegaConf; from igel_exp.tracking import tracked_run\n"
        "with tracked_run(OmegaConf.create({'name': 'toy', 'tracking': {'uri': sys.argv[1]}}), 'toy') as logger:\n"
        "    print(logger.run_id, flush=True); sys.stdin.readline()\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script, store_uri], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    run_id = child.stdout.readline().strip()
    real = tracking.process_gone

    def after_the_run_ended(identity: str) -> bool:  # the interleaving: the run ends between search and check
        child.communicate("\n", timeout=120)
        return real(identity)

    monkeypatch.setattr(tracking, "process_gone", after_the_run_ended)
    assert tracking.close_stale_runs(store_uri) == []
    assert mlflow.MlflowClient(store_uri).get_run(run_id).info.status == "FINISHED"


def test_a_store_being_made_is_read_once_made(tmp_path):
    """igel-report as the first igel-run makes the store: reading it half-made ran MLflow's migrations alongside."""
    database = tmp_path / "mlflow.db"
    database.touch()  # as use_store leaves it while it migrates, holding the lock (empty: no store yet)
    maker = (
        "import fcntl, sys, time; lock = open(sys.argv[1] + '.lock', 'w'); fcntl.flock(lock, fcntl.LOCK_EX)\n"
        "print('locked', flush=True); time.sleep(1); open(sys.argv[1], 'wb').write(b'SQLite format 3\\0')\n"
        "open(sys.argv[2], 'w').close()\n"
    )
    command = [sys.executable, "-c", maker, str(database), str(tmp_path / "made")]
    child = subprocess.Popen(command, stdout=subprocess.PIPE)
    assert child.stdout.readline() == b"locked\n"
    assert store_exists(f"sqlite:///{database}")
    assert (tmp_path / "made").exists()  # it waited for the maker
    child.wait(timeout=60)


def test_a_process_is_told_from_a_later_one_with_its_pid():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    identity = process_identity(child.pid)
    assert not process_gone(identity) and not process_gone(process_identity())
    child.wait()
    assert process_gone(identity)
    host, pid, start = process_identity().split()
    assert process_gone(f"{host} {pid} {int(start) - 1}")  # this pid, but not this process: it was reused
    assert not process_gone(f"not-{host} {pid} {start}")  # another machine's: nothing to tell by


def test_an_experiment_whose_artifact_folder_is_read_only_names_that_folder(tmp_path, monkeypatch, obeys_permissions):
    """The database writable, the experiment's artifact folder (./mlruns/ID of where the experiment was made) not: the
    line named the store as unwritable, sending the user to a database that was fine."""
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    artifacts = Path(urlparse(open_experiment(uri, "toy").artifact_location).path)
    script = (
        "import sys; from igel_exp.errors import StoreError; from igel_exp.tracking import open_experiment\n"
        "try:\n    open_experiment(sys.argv[1], 'toy')\nexcept StoreError as error:\n    print(error)\n"
    )
    artifacts.chmod(0o555)
    try:
        result = subprocess.run(
            [sys.executable, "-c", script, uri], capture_output=True, text=True, preexec_fn=obeys_permissions
        )
    finally:
        artifacts.chmod(0o755)
    assert result.stdout == (
        f"cannot write the artifact folder {artifacts} of experiment 'toy' in the MLflow store {uri} (Permission"
        " denied): a sqlite store keeps an experiment's artifacts where it was made (mlruns/ beside the database;"
        " ./mlruns of the folder of its first run for experiments made before 2026-12-01 or by other tools): make"
        " that writable, or use a new store\n"
    ), result.stderr


def test_a_store_given_by_its_path_keeps_new_experiments_artifacts_beside_it(tmp_path, monkeypatch):
    """tracking.uri=sqlite:////path/mlflow.db from another folder: MLflow put a new experiment's artifacts under
    ./mlruns of that folder, away from the store. They go to mlruns/ID beside the database, and stay there once the
    experiment exists, whatever folder the next command runs in."""
    (tmp_path / "store").mkdir()
    for folder in ("first", "second"):
        (tmp_path / folder).mkdir()
    uri = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    monkeypatch.chdir(tmp_path / "first")
    first = _run_with_artifact(uri, "one")
    monkeypatch.chdir(tmp_path / "second")
    second = _run_with_artifact(uri, "two")
    experiment = mlflow.get_experiment_by_name("toy")
    beside = tmp_path / "store" / "mlruns" / experiment.experiment_id
    assert Path(urlparse(experiment.artifact_location).path) == beside
    assert [(beside / run / "artifacts" / "note.txt").read_text() for run in (first, second)] == ["one", "two"]
    assert not list((tmp_path / "first").iterdir()) and not list((tmp_path / "second").iterdir())


def _run_with_artifact(uri: str, text: str) -> str:
    """A run of experiment 'toy' in the store at `uri` that logs `text` as note.txt; its id."""
    experiment = open_experiment(uri, "toy")
    with mlflow.start_run(experiment_id=experiment.experiment_id) as run:
        mlflow.log_text(text, "note.txt")
    return run.info.run_id


@pytest.mark.parametrize("how", ["moved", "copied"])
def test_a_store_moved_or_copied_with_its_artifacts_writes_and_reads_them_beside_it(tmp_path, monkeypatch, how):
    """The default layout (mlflow.db and mlruns/ in the folder of the first run), the folder renamed or copied: new
    runs wrote their artifacts to the old folder's mlruns (made anew when moved: a store's runs over two folders; into
    the original's when copied) and the old runs' were read there."""
    old, new = tmp_path / "project", tmp_path / "renamed"
    old.mkdir()
    monkeypatch.chdir(old)
    first = _run_with_artifact(f"sqlite:///{old / 'mlflow.db'}", "first")
    (shutil.move if how == "moved" else shutil.copytree)(old, new)
    monkeypatch.chdir(new)
    uri = f"sqlite:///{new / 'mlflow.db'}"
    second = _run_with_artifact(uri, "second")
    client = mlflow.MlflowClient(uri)
    for run, text in [(first, "first"), (second, "second")]:
        artifacts = Path(urlparse(client.get_run(run).info.artifact_uri).path)
        assert artifacts.is_relative_to(new / "mlruns")
        assert (artifacts / "note.txt").read_text() == text
    assert sorted(path.name for path in (new / "mlruns").iterdir()) == ["1"]  # no "0", experiment 0's; toy's only
    if how == "moved":
        assert not old.exists()
    else:  # the original is as it was
        assert sorted(path.name for path in (old / "mlruns" / "1").iterdir()) == [first]


def test_a_store_in_a_read_only_folder_fails_in_one_line_and_gets_no_run(tmp_path, obeys_permissions, _empty_store):
    """A store used before (its lock file there, writable) and a new one, both in a read-only folder: the run does not
    start, and StoreError says why in one line (igel-run prints it as `igel-run: error: ...`)."""
    folder = tmp_path / "store"
    folder.mkdir()
    shutil.copy(_empty_store, folder / "mlflow.db")
    used, new = f"sqlite:///{folder / 'mlflow.db'}", f"sqlite:///{folder / 'new' / 'mlflow.db'}"
    use_store(used)
    script = (
        "import sys; from omegaconf import OmegaConf; from igel_exp.errors import StoreError\n"
        "from igel_exp.tracking import tracked_run\n"
        "for uri in sys.argv[1:]:\n"
        "    try:\n"
        "        with tracked_run(OmegaConf.create({'name': 'toy', 'tracking': {'uri': uri}}), 'toy'):\n"
        "            print('a run started')\n"
        "    except StoreError as error:\n"
        "        print(error)\n"
    )
    folder.chmod(0o555)
    try:
        result = subprocess.run(
            [sys.executable, "-c", script, used, new], capture_output=True, text=True, preexec_fn=obeys_permissions
        )
    finally:
        folder.chmod(0o755)
    lines = result.stdout.splitlines()
    assert len(lines) == 2, result.stdout + result.stderr
    assert lines[0].startswith(f"cannot write the MLflow store {used} (Permission denied: {folder}")
    assert lines[1].startswith(f"cannot write the MLflow store {new} (Permission denied: {folder / 'new'}")
    assert lines[0].endswith("): point tracking.uri or $MLFLOW_TRACKING_URI at a writable place")
    client = mlflow.MlflowClient(used)
    assert client.search_runs([experiment.experiment_id for experiment in client.search_experiments()]) == []


def _file_size_limit(size: int) -> Callable[[], None]:
    """For a child process: files grow to `size` bytes only, a full disk to sqlite (a write past it fails: EFBIG)."""

    def limit() -> None:
        import resource

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails and the process goes on
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

    return limit


def _log_under_size_limit(uri: str, logging: str, size: int) -> subprocess.CompletedProcess:
    """A child process, its files limited to `size` bytes, that runs `logging` (a statement on `logger`) inside a run of
    experiment 'toy' of the store at `uri` and prints the StoreError it ends with; run in the store's folder."""
    script = (
        "import sys; from omegaconf import OmegaConf; from igel_exp.errors import StoreError\n"
        "from igel_exp.tracking import tracked_run\n"
        "try:\n"
        "    with tracked_run(OmegaConf.create({'name': 'toy', 'tracking': {'uri': sys.argv[1]}}), 'toy') as logger:\n"
        f"        {logging}\n"
        "except StoreError as error:\n"
        "    print(error)\n"
    )
    folder = Path(uri.removeprefix("sqlite:///")).parent
    command = [sys.executable, "-c", script, uri]
    return subprocess.run(command, capture_output=True, text=True, preexec_fn=_file_size_limit(size), cwd=folder)


def test_a_store_that_could_not_be_made_is_not_left_half_made(tmp_path):
    """A full disk while a new store's migrations run: one line, and no half-made database, which no command could open
    again (`table spans already exists`) and which had to be found and deleted by hand."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    script = (
        "import sys; from igel_exp.errors import StoreError; from igel_exp.tracking import open_experiment\n"
        "try:\n"
        "    open_experiment(sys.argv[1], 'toy')\n"
        "except StoreError as error:\n"
        "    print(error)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, uri], capture_output=True, text=True, preexec_fn=_file_size_limit(300_000)
    )
    assert result.stdout.startswith(f"cannot open the MLflow store {uri}"), result.stdout + result.stderr
    assert not (tmp_path / "mlflow.db").exists()
    use_store(uri)  # once there is room, the store is made
    assert [experiment.name for experiment in mlflow.MlflowClient(uri).search_experiments()] == ["Default"]


def test_an_artifact_that_cannot_be_written_is_named_and_its_run_failed(tmp_path, _empty_store):
    """A full disk (here a file size limit) as a run writes an artifact: one line naming the artifact and the run's
    artifact folder, the run FAILED. It was an OSError that igel-run blamed on Hydra's files: `None: No space left on
    device (hydra.run.dir, or hydra.sweep.dir with -m, sets where Hydra writes)`."""
    shutil.copy(_empty_store, tmp_path / "mlflow.db")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    result = _log_under_size_limit(uri, "logger.text('x' * 8_000_000, 'big.txt')", 5_000_000)
    [run] = mlflow.MlflowClient(uri).search_runs([mlflow.MlflowClient(uri).get_experiment_by_name("toy").experiment_id])
    assert result.stdout == (
        f"cannot write the artifact big.txt of run {run.info.run_id} (File too large); its artifact folder is"
        f" {run.info.artifact_uri}\n"
    ), result.stdout + result.stderr
    assert run.info.status == "FAILED"


def test_a_store_that_fills_up_during_a_run_is_one_line_and_the_run_failed(tmp_path):
    """The store's database cannot grow (a full disk; here a file size limit at its size) once a run has begun: one
    line, the run FAILED. It was MLflow's traceback of three chained exceptions, after MLflow had logged the same
    traceback twice."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    use_store(uri)
    size = (tmp_path / "mlflow.db").stat().st_size
    result = _log_under_size_limit(uri, "logger.metrics({f'metric{i}': i for i in range(5000)})", size)
    assert result.stdout.startswith(f"cannot write the MLflow store {uri} ((sqlite3.OperationalError) "), result.stdout
    assert "Traceback" not in result.stderr
    client = mlflow.MlflowClient(uri)
    [run] = client.search_runs([client.get_experiment_by_name("toy").experiment_id])
    assert run.info.status == "FAILED"


def test_a_deleted_experiment_is_named_with_the_way_back(tmp_path):
    """MLflow refuses to log to a deleted experiment: that read `cannot open the MLflow store …`, a store that opens."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = mlflow.MlflowClient(uri)
    experiment = client.create_experiment("embed")
    client.delete_experiment(experiment)
    with pytest.raises(StoreError) as error:
        open_experiment(uri, "embed")
    assert str(error.value) == (
        f"experiment 'embed' of the MLflow store {uri} is deleted: restore it (mlflow experiments restore"
        f" --experiment-id {experiment}) or remove it for good (mlflow gc)"
    )


def test_a_store_file_this_user_cannot_read_is_one_line_at_once(tmp_path, obeys_permissions):
    """MLflow retried its connection for minutes (igel-run, igel-report), printing a warning at each try."""
    store = tmp_path / "mlflow.db"
    mlflow.MlflowClient(f"sqlite:///{store}").search_experiments(max_results=1)  # a real store, then unreadable
    store.chmod(0)
    script = (
        "import sys; from igel_exp.tracking import check_store_uri\n"
        "try:\n    check_store_uri(sys.argv[1], key='--tracking-uri')\nexcept Exception as error:\n    print(error)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, f"sqlite:///{store}"], capture_output=True, text=True, timeout=60,
        preexec_fn=obeys_permissions,
    )  # fmt: skip
    line = f"--tracking-uri=sqlite:///{store}: permission denied: this user cannot read {store}"
    assert result.stdout.splitlines() == [line], result.stderr


def test_a_store_that_is_no_store_fails_at_once_in_one_line(tmp_path, monkeypatch):
    """A sqlite URI naming a folder (MLflow retried it for two minutes), a plain path (MLflow's file store, which it
    no longer opens: a paragraph) and a scheme MLflow lacks: one line each, naming the store, and no run; the setting
    that gave it is named, $MLFLOW_TRACKING_URI where no tracking.uri did."""
    folder = f"tracking.uri=sqlite:///{tmp_path} is a folder, not a database file: give a file (sqlite:///{tmp_path}/"
    with pytest.raises(StoreError, match=f"^{re.escape(folder)}"):
        open_experiment(f"sqlite:///{tmp_path}", "toy")
    with pytest.raises(StoreError, match=f"^--tracking-uri=sqlite:///{tmp_path} is a folder"):  # igel-report: minutes
        check_store_uri(f"sqlite:///{tmp_path}", key="--tracking-uri")
    runs = tmp_path / "runs.db"
    for path in (str(runs), f"file://{runs}"):
        with pytest.raises(StoreError) as error:
            open_experiment(path, "toy")
        assert str(error.value) == (
            f"tracking.uri={path} is a path, which MLflow takes for a file store, one it no longer opens: for a"
            f" sqlite store write sqlite:///{runs}"
        )
    with pytest.raises(StoreError, match=r"^cannot open the MLflow store nope://runs: \S") as error:
        open_experiment("nope://runs", "toy")
    assert "\n" not in str(error.value) and "writable place" not in str(error.value)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", str(runs))
    with pytest.raises(StoreError, match=rf"^\$MLFLOW_TRACKING_URI={runs} is a path, which MLflow takes for a file"):
        open_experiment(tracking.tracking_uri(None), "toy")
    with pytest.raises(StoreError, match=r"^tracking.uri=sqlite:// keeps the runs in memory"):
        open_experiment(tracking.tracking_uri("sqlite://"), "toy")
    assert not runs.exists()


def test_a_server_that_does_not_answer_and_another_programs_database_are_refused_at_once(tmp_path, capsys):
    """An http URI whose server is not there (MLflow retried it for over two minutes), and a sqlite file of another
    program (MLflow added its tables to it): one line each, the file left as it was."""
    with socket.socket() as free:  # a port that nothing listens on once it is closed
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(StoreError, match=rf"^cannot reach the MLflow server http://127.0.0.1:{port} \(Connection"):
        open_experiment(f"http://127.0.0.1:{port}", "toy")
    server = f"http://127.0.0.1:{port}"  # igel-report and a dry run read the store: igel-report hung for minutes
    assert report_main(["miserables_correlations", "--tracking-uri", server]) == 1
    assert reproduce_main(["miserables_correlations", "--dry-run", "--tracking-uri", server]) == 1
    assert capsys.readouterr().err.count(f"error: cannot reach the MLflow server {server} (Connection") == 2
    assert time.monotonic() - started < 3 * SERVER_PROBE_S
    other = tmp_path / "notes.db"
    with contextlib.closing(sqlite3.connect(other)) as connection:
        connection.execute("create table notes (text)")
        connection.commit()
    before = other.read_bytes()
    with pytest.raises(StoreError, match=rf"^{other} is a sqlite database of something else \(tables notes; none of"):
        open_experiment(f"sqlite:///{other}", "toy")
    assert other.read_bytes() == before


@pytest.mark.parametrize(
    "uri, why",
    [
        ("http://localhost:99999", "Port out of range"),
        ("http://localhost:abc", "Port could not be cast"),
        ("http://[::1", "Invalid IPv6 URL"),
    ],
)
def test_a_malformed_server_uri_is_one_line_naming_its_key(uri, why):
    """urllib's ValueError escaped the server's probe in a traceback of some 70 lines (igel-run, igel-report)."""
    with pytest.raises(StoreError, match=rf"^--tracking-uri={re.escape(uri)} is not a server's URI \({why}"):
        check_store_uri(uri, key="--tracking-uri")


def test_a_sqlite_uri_with_options_opens_its_file_and_a_bad_option_is_one_line(tmp_path):
    """The URI's query (SQLAlchemy's options) was taken for part of the file's name: ?timeout=30 was refused as
    "Permission denied" on a writable folder, and ?timeout=abc raised SQLAlchemy's ValueError in a traceback."""
    assert open_experiment(f"sqlite:///{tmp_path / 'runs.db'}?timeout=30", "toy").name == "toy"
    assert (tmp_path / "runs.db").is_file()
    with pytest.raises(StoreError, match=r"^cannot open the MLflow store sqlite:///\S+\?timeout=abc \(could not conv"):
        open_experiment(f"sqlite:///{tmp_path / 'other.db'}?timeout=abc", "toy")


def test_databricks_is_a_store_not_a_path():
    """MLflow's `databricks` URI has no scheme: it was refused as a plain path, a file store."""
    check_store_uri("databricks")
    with pytest.raises(StoreError, match="^tracking.uri=databricks.db is a path"):
        check_store_uri("databricks.db")


@pytest.mark.parametrize("uri, driver", [("mssql://u:p@host:1/db", "pyodbc"), ("mysql://u@host/db", "MySQLdb")])
def test_a_database_store_whose_driver_is_not_installed_is_one_line(uri, driver):
    """SQLAlchemy's import of the driver failed in a traceback of a hundred lines (igel-run, igel-report, …)."""
    if importlib.util.find_spec(driver) is not None:
        pytest.skip(f"{driver} is installed here")
    with pytest.raises(StoreError) as error:
        check_store_uri(uri, key="--tracking-uri")
    assert str(error.value) == (
        f"--tracking-uri={uri}: its database driver ({driver}) is not installed: pip install it, or use a sqlite:///"
        " store"
    )
