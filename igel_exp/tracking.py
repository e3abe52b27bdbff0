"""MLflow tracking: where runs go, and what each run logs (params, config, metrics, artifacts).

Without configuration runs go to a local store the tool creates in the working directory
(`sqlite:///mlflow.db`, artifacts under `./mlruns`): no server to start. `tracking.uri` or
$MLFLOW_TRACKING_URI point elsewhere.
"""

from __future__ import annotations

import atexit
import logging
import multiprocessing
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import mlflow
import numpy as np
import pandas as pd
from hydra.experimental.callback import Callback
from mlflow.entities import RunStatus
from omegaconf import DictConfig, OmegaConf

from igel_exp.identity import HASH_TAG, config_hash

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; start concurrent runs after the store exists
    fcntl = None

log = logging.getLogger(__name__)

PARENT_RUN_ENV = "IGEL_PARENT_RUN_ID"  # set by a sweep so that its jobs become nested runs
SWEEP_TAG = "igel.sweep"  # the parent run's id, on the parent and on every job of the sweep
NOT_PARAMS = ("reproduce",)  # reference data of experiments/ files: kept in config.yaml, not run params


def tracking_uri(configured: str | None) -> str:
    """The configured URI, else $MLFLOW_TRACKING_URI, else a sqlite store in the working directory."""
    if configured:
        return str(configured)
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"]
    return f"sqlite:///{Path.cwd() / 'mlflow.db'}"


def use_store(uri: str) -> str:
    """Make `uri` MLflow's tracking URI, creating a local sqlite store first if it is new.

    Creating a sqlite store runs its migrations, which two processes must not do at once (two `igel-run`
    started together in a fresh directory: one crashes on the other's half-made schema), so creation holds
    an exclusive lock on `<db>.lock` beside it.
    """
    mlflow.set_tracking_uri(uri)
    if not uri.startswith("sqlite:///") or fcntl is None:
        return uri
    database = Path(uri.removeprefix("sqlite:///"))
    database.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{database}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            mlflow.MlflowClient(tracking_uri=uri).search_experiments(max_results=1)  # creates or migrates it
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return uri


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mapping → {"a.b.c": value}; lists become their string form."""
    flat = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


class RunLogger:
    """What a running experiment may log; the evaluators never see it."""

    def __init__(self, run: mlflow.ActiveRun):
        self.run = run
        self.run_id = run.info.run_id

    def metrics(self, values: Mapping[str, float], step: int | None = None) -> None:
        mlflow.log_metrics({key: float(value) for key, value in values.items()}, step=step)

    def figure(self, figure: plt.Figure, name: str) -> None:
        mlflow.log_figure(figure, name)
        plt.close(figure)

    def table(self, frame: pd.DataFrame, name: str) -> None:
        mlflow.log_text(frame.to_csv(index=False), name)

    def array(self, values: np.ndarray, name: str) -> None:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / name
            np.save(path, values)
            mlflow.log_artifact(str(path))

    def file(self, path: str | Path) -> None:
        """Log an existing file under its own name."""
        mlflow.log_artifact(str(path), run_id=self.run_id)

    def text(self, text: str, name: str) -> None:
        mlflow.log_text(text, name)

    def tags(self, values: Mapping[str, Any]) -> None:
        mlflow.set_tags({key: str(value) for key, value in values.items()})


@contextmanager
def tracked_run(config: DictConfig, experiment: str, run_name: str | None = None) -> Iterator[RunLogger]:
    """An MLflow run that logs the resolved config (flattened as params, whole as config.yaml), tagged with
    its identity (`igel.config_hash`, see igel_exp.identity).

    An exception inside the block ends the run FAILED, with the error as the `error` tag; inside a sweep
    ($IGEL_PARENT_RUN_ID set) the run is nested under the sweep's parent run.
    """
    use_store(tracking_uri(config.get("tracking", {}).get("uri")))
    mlflow.set_experiment(experiment)
    parent = os.environ.get(PARENT_RUN_ENV)
    resolved = OmegaConf.to_container(config, resolve=True, throw_on_missing=True)
    # the run's identity: igel-reproduce skips a job whose hash has a FINISHED run, igel-report finds tables by it
    tags = {HASH_TAG: config_hash(resolved), **({SWEEP_TAG: parent} if parent else {})}
    with mlflow.start_run(run_name=run_name, parent_run_id=parent, nested=parent is not None, tags=tags) as run:
        log.info("MLflow run %s in experiment %r at %s", run.info.run_id, experiment, mlflow.get_tracking_uri())
        mlflow.log_params(flatten({k: v for k, v in resolved.items() if k not in NOT_PARAMS}))
        mlflow.log_text(OmegaConf.to_yaml(resolved), "config.yaml")
        try:
            yield RunLogger(run)
        except BaseException as error:
            mlflow.set_tag("error", f"{type(error).__name__}: {error}"[:5000])
            raise


INTERRUPTS = (signal.SIGINT, signal.SIGTERM)


def _interrupt(signum: int, frame: object) -> None:
    """Raise KeyboardInterrupt once: a second signal (Ctrl-C reaches a sweep's workers as well as the SIGTERM their
    launcher sends) would interrupt the clean-up that ends the run FAILED."""
    for sig in INTERRUPTS:
        signal.signal(sig, signal.SIG_IGN)
    raise KeyboardInterrupt(f"signal {signum}")


def _handle_interrupts(handler: Callable[[int, object], None]) -> dict[int, Any]:
    """Send Ctrl-C and SIGTERM to `handler`; returns the handlers to restore. Only the main thread may set signal
    handlers: elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {sig: signal.signal(sig, handler) for sig in INTERRUPTS}


def _restore_handlers(previous: dict[int, Any]) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """SIGTERM (kill, Slurm's time limit) stops the work as Ctrl-C does, and only the first of them interrupts: the
    run in progress ends FAILED instead of staying RUNNING."""
    previous = _handle_interrupts(_interrupt)
    try:
        yield
    finally:
        _restore_handlers(previous)


class SweepCallback(Callback):
    """Groups the jobs of an `igel-run -m` sweep under one parent MLflow run.

    The store, the experiment and the parent run are created here, in the launching process, before
    jobs fan out: parallel jobs (joblib, submitit) then never race to create the sqlite store. Jobs find
    the parent through $IGEL_PARENT_RUN_ID. The parent ends FINISHED with the sweep, FAILED if the
    process exits before the sweep completes; Ctrl-C and SIGTERM stop the jobs in progress first.
    """

    STOP_WAIT_S = 30  # at most, for the jobs in progress to end their runs after Ctrl-C or SIGTERM

    def __init__(self):
        self.parent_run_id: str | None = None
        self.experiment_id: str | None = None
        self.previous_handlers: dict[int, Any] = {}
        self.stopping = False

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        use_store(tracking_uri(config.get("tracking", {}).get("uri")))
        experiment = mlflow.set_experiment(config.name)
        client = mlflow.MlflowClient()
        overrides = " ".join(config.hydra.overrides.task)
        run = client.create_run(
            experiment.experiment_id,
            run_name=f"sweep {time.strftime('%Y-%m-%d %H:%M:%S')}",
            tags={"igel.sweep_overrides": overrides[:5000], "mlflow.note.content": f"igel-run -m {overrides}"},
        )
        self.parent_run_id, self.experiment_id = run.info.run_id, experiment.experiment_id
        client.set_tag(self.parent_run_id, SWEEP_TAG, self.parent_run_id)
        os.environ[PARENT_RUN_ENV] = self.parent_run_id
        atexit.register(self._end, RunStatus.FAILED)
        self.previous_handlers = _handle_interrupts(self._stop)
        log.info("sweep parent run %s in experiment %r", self.parent_run_id, config.name)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        self._end(RunStatus.FINISHED)

    def _end(self, status: int) -> None:
        if self.parent_run_id is None:
            return
        mlflow.MlflowClient().set_terminated(self.parent_run_id, RunStatus.to_string(status))
        os.environ.pop(PARENT_RUN_ENV, None)
        self.parent_run_id = None
        _restore_handlers(self.previous_handlers)
        self.previous_handlers = {}

    def _stop(self, signum: int, frame: object) -> None:
        """Ctrl-C or SIGTERM in the launching process. Its job processes (joblib's workers) get SIGTERM and end
        their runs FAILED; only then does the sweep stop, as joblib kills its workers at once. Without job
        processes, or at a second signal, it stops at once."""
        workers = multiprocessing.active_children()
        if self.stopping or not workers:
            _interrupt(signum, frame)
        self.stopping = True
        for worker in workers:
            worker.terminate()
        deadline = time.monotonic() + self.STOP_WAIT_S
        while self._running_jobs() and time.monotonic() < deadline:
            time.sleep(0.2)
        print("sweep interrupted: its jobs in progress ended FAILED, as its parent run will", file=sys.stderr)
        raise SystemExit(130)  # the shell's code for Ctrl-C; joblib then kills its workers

    def _running_jobs(self) -> int:
        jobs = mlflow.search_runs(
            experiment_ids=[self.experiment_id],
            filter_string=f"tags.`{SWEEP_TAG}` = '{self.parent_run_id}' and attributes.status = 'RUNNING'",
        )
        return int((jobs.run_id != self.parent_run_id).sum()) if len(jobs) else 0


def finished_runs(experiment: str, uri: str | None = None) -> pd.DataFrame:
    """Every FINISHED run of an MLflow experiment, one row each: run_id, start_time, params.<key> (strings),
    metrics.<name> and tags.<name> columns. Empty when the experiment does not exist."""
    mlflow.set_tracking_uri(tracking_uri(uri))
    if mlflow.get_experiment_by_name(experiment) is None:
        return pd.DataFrame()
    return mlflow.search_runs(experiment_names=[experiment], filter_string="attributes.status = 'FINISHED'")
