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
PROTOCOL_TAG = "igel.protocol"  # faithful (the paper's computation) or the authors' code path: conf/protocol
NOT_PARAMS = ("reproduce",)  # reference data of experiments/ files: kept in config.yaml, not run params


def tracking_uri(configured: str | None) -> str:
    """The configured URI, else $MLFLOW_TRACKING_URI, else a sqlite store in the working directory."""
    if configured:
        return str(configured)
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"]
    return f"sqlite:///{Path.cwd() / 'mlflow.db'}"


INTERRUPTS = (signal.SIGINT, signal.SIGTERM)
_store_calls = 0  # calls into the MLflow store in progress on the main thread
_deferred_signal: int | None = None  # an interrupt that arrived during one of them
_interrupted_by: int | None = None  # the signal that interrupted the work in progress, if one did


@contextmanager
def store_call() -> Iterator[None]:
    """A call into the MLflow store that Ctrl-C and SIGTERM wait for: they interrupt when it returns.

    An interrupt raised inside SQLAlchemy leaves the sqlite store locked by this process: the clean-up that ends the
    run FAILED then waits 20 s for the lock (MLflow's busy timeout) and fails, and the run stays RUNNING. Works as a
    decorator too. Signals reach the main thread only, so other threads' calls are not counted.
    """
    global _store_calls, _deferred_signal
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _store_calls += 1
    try:
        yield
    finally:
        _store_calls -= 1
    if _store_calls == 0 and _deferred_signal is not None:
        signum, _deferred_signal = _deferred_signal, None
        raise KeyboardInterrupt(f"signal {signum}")


def _interrupt(signum: int, frame: object) -> None:
    """Raise KeyboardInterrupt once, at once or when the store call in progress returns: a second signal (Ctrl-C
    reaches a sweep's workers as well as the SIGTERM their launcher sends) would interrupt the clean-up that ends the
    run FAILED."""
    global _deferred_signal, _interrupted_by
    for sig in INTERRUPTS:
        signal.signal(sig, signal.SIG_IGN)
    _interrupted_by = signum
    if _store_calls:
        _deferred_signal = signum
        return
    raise KeyboardInterrupt(f"signal {signum}")


@store_call()
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

    @store_call()
    def metrics(self, values: Mapping[str, float], step: int | None = None) -> None:
        mlflow.log_metrics({key: float(value) for key, value in values.items()}, step=step)

    @store_call()
    def figure(self, figure: plt.Figure, name: str) -> None:
        mlflow.log_figure(figure, name)
        plt.close(figure)

    @store_call()
    def table(self, frame: pd.DataFrame, name: str) -> None:
        mlflow.log_text(frame.to_csv(index=False), name)

    @store_call()
    def array(self, values: np.ndarray, name: str) -> None:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / name
            np.save(path, values)
            mlflow.log_artifact(str(path))

    @store_call()
    def file(self, path: str | Path) -> None:
        """Log an existing file under its own name."""
        mlflow.log_artifact(str(path), run_id=self.run_id)

    @store_call()
    def text(self, text: str, name: str) -> None:
        mlflow.log_text(text, name)

    @store_call()
    def tags(self, values: Mapping[str, Any]) -> None:
        mlflow.set_tags({key: str(value) for key, value in values.items()})


@contextmanager
def tracked_run(config: DictConfig, experiment: str, run_name: str | None = None) -> Iterator[RunLogger]:
    """An MLflow run that logs the resolved config (flattened as params, whole as config.yaml), tagged with
    its identity (`igel.config_hash`, see igel_exp.identity) and its protocol (`igel.protocol`).

    An exception inside the block ends the run FAILED, with the error as the `error` tag; inside a sweep
    ($IGEL_PARENT_RUN_ID set) the run is nested under the sweep's parent run.
    """
    use_store(tracking_uri(config.get("tracking", {}).get("uri")))
    parent = os.environ.get(PARENT_RUN_ENV)
    resolved = OmegaConf.to_container(config, resolve=True, throw_on_missing=True)
    # the run's identity: igel-reproduce skips a job whose hash has a FINISHED run, igel-report finds tables by it
    tags = {
        HASH_TAG: config_hash(resolved),
        PROTOCOL_TAG: str(resolved.get("protocol", "faithful")),
        **({SWEEP_TAG: parent} if parent else {}),
    }
    try:
        with store_call():
            mlflow.set_experiment(experiment)
            run = mlflow.start_run(run_name=run_name, parent_run_id=parent, nested=parent is not None, tags=tags)
            log.info("MLflow run %s in experiment %r at %s", run.info.run_id, experiment, mlflow.get_tracking_uri())
            mlflow.log_params(flatten({k: v for k, v in resolved.items() if k not in NOT_PARAMS}))
            mlflow.log_text(OmegaConf.to_yaml(resolved), "config.yaml")
        yield RunLogger(run)
    except BaseException as error:
        if mlflow.active_run() is not None:
            with store_call():
                mlflow.set_tag("error", f"{type(error).__name__}: {error}"[:5000])
                mlflow.end_run(RunStatus.to_string(RunStatus.FAILED))
        raise
    with store_call():
        mlflow.end_run()


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
    run in progress ends FAILED instead of staying RUNNING. Interrupted work ends in KeyboardInterrupt even when its
    clean-up fails (the store unreachable): a sweep must stop, not go on to its next job."""
    global _interrupted_by, _deferred_signal
    _interrupted_by = _deferred_signal = None  # nothing left over from an earlier interrupted block
    previous = _handle_interrupts(_interrupt)
    try:
        yield
    except Exception as error:
        if _interrupted_by is None:
            raise
        raise KeyboardInterrupt(f"signal {_interrupted_by}") from error
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

    @store_call()
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

    @store_call()
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
        if self.stopping or not workers or _store_calls:
            _interrupt(signum, frame)  # raises now, or when the store call in progress returns
            return
        self.stopping = True
        for worker in workers:
            worker.terminate()
        deadline = time.monotonic() + self.STOP_WAIT_S
        while self._running_jobs() and time.monotonic() < deadline:
            time.sleep(0.2)
        print("sweep interrupted: its jobs in progress ended FAILED, as its parent run will", file=sys.stderr)
        raise SystemExit(130)  # the shell's code for Ctrl-C; joblib then kills its workers

    @store_call()
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
