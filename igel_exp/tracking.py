"""MLflow tracking: where runs go, and what each run logs (params, config, metrics, artifacts).

Without configuration runs go to a local store the tool creates in the working directory
(`sqlite:///mlflow.db`, artifacts under `./mlruns`): no server to start. `tracking.uri` or
$MLFLOW_TRACKING_URI point elsewhere.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import multiprocessing
import os
import signal
import socket
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

import matplotlib.pyplot as plt
import mlflow
import numpy as np
import pandas as pd
import sqlalchemy
from hydra.experimental.callback import Callback
from mlflow.entities import Experiment, Run, RunStatus
from mlflow.environment_variables import MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR
from mlflow.exceptions import MlflowException
from omegaconf import DictConfig, OmegaConf
from sqlalchemy.exc import SQLAlchemyError

from igel_exp.errors import FAILED_RUN, JobTaken, StoreError, first_line
from igel_exp.identity import HASH_TAG, config_hash
from igel_exp.protocol import DEFAULT as DEFAULT_PROTOCOL
from igel_exp.protocol import label, overridden, switched_otherwise

if TYPE_CHECKING:  # for a type hint only
    import igraph as ig

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; start concurrent runs after the store exists
    fcntl = None

log = logging.getLogger(__name__)


def _not_mlflows_caught_database_error(record: logging.LogRecord) -> bool:
    """MLflow logs a database error it catches with its traceback (`SQLAlchemy database error. The following exception
    is caught.`), then raises it as an MlflowException: whoever catches that says it (igel-run in one line, a full
    disk's `database or disk is full`), and the log record is left out."""
    return not str(record.msg).startswith("SQLAlchemy database error")


logging.getLogger("mlflow.store.db.utils").addFilter(_not_mlflows_caught_database_error)

PARENT_RUN_ENV = "IGEL_PARENT_RUN_ID"  # set by a sweep so that its jobs become nested runs
LAUNCHER_ENV = "IGEL_SWEEP_LAUNCHER"  # the pid of the process that launches a sweep's jobs, which they watch
# PYTHONWARNINGS filters of the resource trackers' warning of leaked semaphores: multiprocessing's and loky's (joblib)
QUIET_RESOURCE_TRACKERS = ",".join(
    f"ignore:resource_tracker:UserWarning:{module}"
    for module in ("multiprocessing.resource_tracker", "joblib.externals.loky.backend.resource_tracker")
)
SHARED_RUN_ENV = "IGEL_SHARED_RUN"  # "1": a run that another command's RUNNING run of its identity makes (claimed)
REPRODUCE_TAG = "igel.reproduce"  # on the parent run of each igel-reproduce invocation: "<table> (<profile>)"
SWEEP_TAG = "igel.sweep"  # the parent run's id, on the parent and on every job of the sweep
PROTOCOL_TAG = "igel.protocol"  # faithful (the paper's computation) or the authors' code path: conf/protocol
NOT_PARAMS = ("reproduce",)  # reference data of experiments/ files: kept in config.yaml, not run params


DEFAULT_STORE = "$MLFLOW_TRACKING_URI, else ./mlflow.db"  # where runs go when no URI is given


def tracking_uri(configured: str | None, key: str = "tracking.uri") -> str:
    """The configured URI, else $MLFLOW_TRACKING_URI, else a sqlite store in the working directory. A blank one is
    refused, naming `key`: `--tracking-uri "$URI"` with $URI unset would read or write ./mlflow.db unawares."""
    if configured is not None and not str(configured).strip():
        raise StoreError(f"{key} is blank: give a store's URI, or leave it out for {DEFAULT_STORE}")
    if configured:
        return str(configured)
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"]
    database = Path.cwd() / "mlflow.db"
    odd = sorted(set("?#%") & set(str(database)))
    if odd:  # SQLAlchemy reads them as a URI's query, fragment or escapes: a database made elsewhere, or none
        raise StoreError(
            f"the working directory {database.parent} holds {' and '.join(odd)}, which the default store's URI cannot"
            f" carry: set {key} (or $MLFLOW_TRACKING_URI), or run elsewhere"
        )
    return f"sqlite:///{database}"


# Ctrl-C, SIGTERM (kill, a scheduler) and SIGHUP (the terminal closed, an ssh session dropped) end the work in progress
# FAILED; SIGHUP only where the process did not start ignoring it (nohup), as it would go on ignoring it otherwise
_HANGUP = getattr(signal, "SIGHUP", None)  # not on Windows
_HANGS_UP = _HANGUP is not None and signal.getsignal(_HANGUP) == signal.SIG_DFL
INTERRUPTS = (signal.SIGINT, signal.SIGTERM, *([_HANGUP] if _HANGS_UP else []))
# Signals whose handler, installed by someone else, is held back during store calls too: submitit's USR2 (Slurm's
# time limit is near), which raises in whatever code runs
HELD_BACK = tuple(getattr(signal, name) for name in ("SIGUSR2",) if hasattr(signal, name))
_store_calls = 0  # calls into the MLflow store in progress on the main thread
_deferred: Callable[[], None] | None = None  # what a signal's handler raises, held until the store calls return
_interrupted_by: int | None = None  # the signal that interrupted the work in progress, if one did
_why_interrupted = ""  # said with the signal, when this process sent it to itself (watch_parent)


@contextmanager
def store_call() -> Iterator[None]:
    """A call into the MLflow store that Ctrl-C and SIGTERM wait for: they interrupt when it returns.

    An interrupt raised inside SQLAlchemy leaves the sqlite store locked by this process: the clean-up that ends the
    run FAILED then waits 20 s for the lock (MLflow's busy timeout) and fails, and the run stays RUNNING; or it breaks
    SQLAlchemy's session, whose next call fails with an error that hides the interrupt. Works as a decorator too.
    Signals reach the main thread only, so other threads' calls are not counted.
    """
    global _store_calls, _deferred
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _store_calls += 1
    try:
        yield
    finally:
        _store_calls -= 1
    if _store_calls == 0 and _deferred is not None:
        action, _deferred = _deferred, None
        action()


def _after_store_calls(action: Callable[[], None]) -> None:
    """Run a signal handler's `action` now, or when the store calls in progress return (the first held back wins)."""
    global _deferred
    if not _store_calls:
        action()
    elif _deferred is None:
        _deferred = action


def _raise_interrupt(signum: int) -> None:
    raise KeyboardInterrupt(f"signal {signum}{_why_interrupted}")


def _interrupt(signum: int, frame: object) -> None:
    """Raise KeyboardInterrupt once, at once or when the store call in progress returns: a second signal (Ctrl-C
    reaches a sweep's workers as well as the SIGTERM their launcher sends) would interrupt the clean-up that ends the
    run FAILED."""
    global _interrupted_by
    for sig in INTERRUPTS:
        signal.signal(sig, signal.SIG_IGN)
    _interrupted_by = signum
    _after_store_calls(lambda: _raise_interrupt(signum))


def _take_again(dropped: Any, otherwise: Callable[[Any], None]) -> None:
    """sys.unraisablehook inside sigterm_interrupts. Python drops, printing it, an exception raised in a finaliser (a
    `__del__`, such as tqdm's, or a weakref's callback), where a signal's handler runs when the signal arrives there.
    When that was an interrupt's KeyboardInterrupt, the interrupt was lost and, its signals ignored from then on, the
    work went on (11 of 300 SIGTERMs sent to a loop that made tqdm bars; a job whose launcher was killed trained on):
    the signal is taken again, sent from another thread so that it arrives once the finaliser is left."""
    if not isinstance(dropped.exc_value, KeyboardInterrupt) or _interrupted_by is None:
        otherwise(dropped)
        return
    if threading.current_thread() is threading.main_thread():  # where the handler ran, and handlers may be set
        for sig in INTERRUPTS:
            signal.signal(sig, _interrupt)
        threading.Timer(0.001, os.kill, (os.getpid(), _interrupted_by)).start()


def _held_back(handler: Callable[[int, Any], Any]) -> Callable[[int, Any], None]:
    """`handler` run after the store calls in progress (HELD_BACK)."""
    return lambda signum, frame: _after_store_calls(lambda: handler(signum, frame))


@store_call()
def use_store(uri: str) -> str:
    """Make `uri` MLflow's tracking URI, creating a local sqlite store first if it is new.

    Creating a sqlite store runs its migrations, which two processes must not do at once (two `igel-run`
    started together in a fresh directory: one crashes on the other's half-made schema), so creation holds
    an exclusive lock on `<db>.lock` beside it; so does the check that an existing file is an MLflow store, which
    would otherwise read another process's half-made schema as a database of something else.
    """
    check_store_uri(uri)
    mlflow.set_tracking_uri(uri)
    database = sqlite_file(uri)
    if database is not None:
        database.parent.mkdir(parents=True, exist_ok=True)
        with _store_lock(database):
            existed = database.is_file()
            if existed:
                _refuse_foreign_database(database)
            fresh = not existed or database.stat().st_size == 0
            try:
                mlflow.MlflowClient(tracking_uri=uri).search_experiments(max_results=1)  # creates or migrates it
            except BaseException as error:
                _drop_half_made(database, fresh, existed)
                if isinstance(error, ValueError):  # SQLAlchemy's, on an option of the URI's query it cannot take
                    raise StoreError(f"cannot open the MLflow store {uri} ({first_line(error)})") from None
                raise
            follow_moved_artifacts(database)
    close_stale_runs(uri)
    return uri


def _drop_half_made(database: Path, fresh: bool, existed: bool) -> None:
    """Undo a store this process began to make and could not finish (a full disk, a file size limit mid-migrations):
    half-made, no command could open it again (`table spans already exists`). A store that had tables is kept."""
    if fresh:
        with contextlib.suppress(OSError):
            database.write_bytes(b"") if existed else database.unlink()


def sqlite_file(uri: str) -> Path | None:
    """The database file of a `sqlite:///` store (less the URI's query: SQLAlchemy's options, ?timeout=30), None for
    any other URI."""
    return Path(uri.removeprefix("sqlite:///").split("?", 1)[0]) if uri.startswith("sqlite:///") else None


def follow_moved_artifacts(database: Path) -> None:
    """Point the artifact places of a sqlite store that was moved or copied with its artifact folders beside it at
    those folders. MLflow records them as absolute paths (the default store's: `<its folder>/mlruns/<experiment>`): a
    project folder renamed or copied went on writing new runs' artifacts to the old place (made anew if gone: a moved
    store's runs split over two folders, a copy's written into the original's) and reading its old runs' there. An
    experiment is followed where `mlruns/<experiment>` beside the database is another folder than the recorded one and
    holds a run of the experiment. Stores whose artifacts lie elsewhere, read-only ones and files that are no MLflow
    store are left as they are."""
    followed = []
    try:
        with contextlib.closing(sqlite3.connect(database, timeout=30)) as connection, connection:
            experiments = connection.execute("select experiment_id, artifact_location from experiments").fetchall()
            for experiment, location in experiments:
                beside = _artifacts_beside(database, experiment, location, connection)
                if beside is None:
                    continue
                new = beside.as_uri() if location.startswith("file:") else str(beside)
                connection.execute(
                    "update experiments set artifact_location = ? where experiment_id = ?", (new, experiment)
                )
                prefix = location.rstrip("/") + "/"
                connection.execute(  # each run's artifacts: <location>/<run id>/artifacts
                    "update runs set artifact_uri = ? || substr(artifact_uri, ?) where experiment_id = ?"
                    " and substr(artifact_uri, 1, ?) = ?",
                    (new.rstrip("/") + "/", len(prefix) + 1, experiment, len(prefix), prefix),
                )
                followed.append(f"{location} → {new}")
    except sqlite3.Error:  # read-only, locked for good, or not MLflow's tables
        return
    if followed:
        log.warning(
            "the MLflow store %s was moved or copied: its artifact places now point beside it (%s)",
            database,
            "; ".join(followed),
        )


def _artifacts_beside(database: Path, experiment: int, location: str | None, connection) -> Path | None:
    """The folder `mlruns/<experiment>` beside the database that stands for the experiment's recorded artifact folder
    `location` (see follow_moved_artifacts), None where there is none or it is that folder."""
    old = _local_folder(location)
    if old is None:
        return None
    beside = database.absolute().parent / old.parent.name / old.name
    if not beside.is_dir() or (old.exists() and old.samefile(beside)):
        return None
    runs = connection.execute("select run_uuid from runs where experiment_id = ?", (experiment,))
    return beside if any((beside / run).is_dir() for (run,) in runs) else None


@contextmanager
def _store_lock(database: Path) -> Iterator[None]:
    """An exclusive lock on `<database>.lock` for the block (none where fcntl is missing: Windows): held to make the
    store, to check that a file is one, and to claim an igel-reproduce job (`claimed`)."""
    if fcntl is None:
        yield
        return
    with open(f"{database}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def check_store_uri(uri: str, *, key: str | None = None) -> None:
    """Refuse in one line a store that would lose the runs (sqlite in memory) or that MLflow will not open: a plain
    path or file: URI is MLflow's file store, which MLflow 3.7 and later refuse (unless $MLFLOW_ALLOW_FILE_STORE is
    true) in a paragraph about migrating file stores, where a user who wrote runs.db meant sqlite:///runs.db; a
    tracking server that does not answer. `key`: the config key or option that gave `uri`, which the errors name;
    None for tracking_uri's default, $MLFLOW_TRACKING_URI where `uri` is its value (a user who set it long ago and
    never a tracking.uri would look for the wrong setting), else tracking.uri."""
    if key is None:
        key = "$MLFLOW_TRACKING_URI" if uri == os.environ.get("MLFLOW_TRACKING_URI") else "tracking.uri"
    if uri.startswith(("http://", "https://")):
        _probe_server(uri, key)
    if uri in IN_MEMORY_STORES:
        raise StoreError(f"{key}={uri} keeps the runs in memory, lost when the process ends: give a file")
    parsed = urlparse(uri)
    if parsed.scheme.split("+")[0] in DATABASE_SCHEMES:
        _check_driver(uri, key)
    database = sqlite_file(uri)  # where MLflow would retry its connection for minutes, then fail in a paragraph:
    if database is not None and database.is_dir():
        raise StoreError(f"{key}={uri} is a folder, not a database file: give a file (sqlite:///{database}/mlflow.db)")
    if database is not None and database.is_file() and not os.access(database, os.R_OK):
        raise StoreError(f"{key}={uri}: permission denied: this user cannot read {database}")
    allowed = getattr(mlflow.environment_variables, "MLFLOW_ALLOW_FILE_STORE", None)  # None: MLflow < 3.7
    if parsed.scheme in ("", "file") and uri not in NAMED_STORES and allowed is not None and not allowed.get():
        path = Path(parsed.path if parsed.scheme else uri).expanduser().absolute()
        raise StoreError(
            f"{key}={uri} is a path, which MLflow takes for a file store, one it no longer opens: for a sqlite"
            f" store write sqlite:///{path}"
        )


def no_store(uri: str) -> str:
    """What a command that reads runs says where `uri` has no store."""
    return f"no MLflow store at {uri} (--tracking-uri, {DEFAULT_STORE})"


@contextmanager
def claimed(uri: str, identity: str) -> Iterator[None]:
    """The block starts the run of an igel-reproduce job (`identity`: its igel.config_hash) unless another command has
    one RUNNING, its process alive or maybe so (`liveness`), or FINISHED since this one listed its jobs: then
    JobTaken. Two igel-reproduce of one table at once so share its jobs instead of running each twice, and a transfer
    job's link-prediction runs (`SHARED_RUN_ENV`) are waited for. For a sqlite store, the check and the run's start
    hold the store's lock, so that two commands cannot both pass the check. Other stores (a tracking server, a database
    that a cluster's nodes share) have no lock: there both may pass it, so each looks again once its run has started,
    and the one whose run started later steps back (`_step_back_from`)."""
    database = sqlite_file(uri)
    with _store_lock(database) if database is not None else contextlib.nullcontext():
        if holders := _holders(identity):  # a FINISHED one first, then one whose end will be seen: to wait for
            raise _taken_by(max(holders, key=lambda run: (run.info.status == "FINISHED", liveness(run) is True)))
        yield
    if database is None:
        _step_back_from(identity)


def _holders(identity: str) -> list[Run]:
    """The runs of a job (`identity`) that hold it: FINISHED, or RUNNING by a process that is alive or may be."""
    client = mlflow.MlflowClient()
    experiments = [experiment.experiment_id for experiment in client.search_experiments()]
    runs = client.search_runs(experiments, filter_string=f"tags.`{HASH_TAG}` = '{identity}'")
    return [run for run in runs if run.info.status == "FINISHED" or _running(run)]


def _running(run: Run) -> bool:
    """RUNNING, by a process that is alive or may be (another machine's, without heartbeats)."""
    return run.info.status == "RUNNING" and bool(run.data.tags.get(PROCESS_TAG)) and liveness(run) is not False


def _taken_by(holder: Run) -> JobTaken:
    """What a command that leaves the job to `holder` (one of `_holders`) raises."""
    running = holder.info.status == "RUNNING"
    where = f" (process {holder.data.tags[PROCESS_TAG]})" if running else ""
    message = f"another command's run {holder.info.run_id} has it {holder.info.status}{where}"
    return JobTaken(message, running=running and liveness(holder) is True)


def _step_back_from(identity: str) -> None:
    """Where another command's run of the job started before the active run (by start time, then run id: the same order
    for both), delete the active run and raise JobTaken: of two commands that both passed `claimed`'s check, each sees
    the other's run here, and only the first keeps the job."""
    ours = mlflow.active_run()
    others = [run for run in _holders(identity) if run.info.run_id != ours.info.run_id]
    first = min([ours, *others], key=lambda run: (run.info.start_time, run.info.run_id))
    if first is ours:
        return
    mlflow.end_run(RunStatus.to_string(RunStatus.KILLED))
    mlflow.MlflowClient().delete_run(ours.info.run_id)  # no trace of a run that did nothing
    raise _taken_by(first)


def store_exists(uri: str) -> bool:
    """Whether a local store is there (reading must not create an empty one); remote stores are assumed. A sqlite store
    that another process is making (use_store, under its lock) is waited for: read half-made, MLflow would run its
    migrations alongside the maker's (igel-report as the first igel-run begins: tracebacks, stray tables)."""
    parsed = urlparse(uri)
    if parsed.scheme == "sqlite":
        path = uri[len("sqlite:///") :] if uri.startswith("sqlite:///") else parsed.path
        if path == ":memory:" or not Path(path).exists():
            return path == ":memory:"
        with contextlib.suppress(OSError), _store_lock(Path(path)):  # a folder this user cannot write: no wait
            follow_moved_artifacts(Path(path))
        return Path(path).stat().st_size > 0  # an empty file is no store: reading would make MLflow's tables in it
    if parsed.scheme in ("", "file"):
        return Path(parsed.path if parsed.scheme else uri).exists()
    return True


def _check_driver(uri: str, key: str) -> None:
    """Raise StoreError where a database store's driver is not installed (postgresql://, mysql://, mssql://, with or
    without +driver): SQLAlchemy's import of it failed in a traceback of a hundred lines."""
    try:
        dialect = sqlalchemy.engine.make_url(uri).get_dialect()
    except (SQLAlchemyError, ValueError):  # not a database URL SQLAlchemy knows: MLflow's own error says so
        return
    try:
        dialect.import_dbapi()
    except ImportError as error:
        raise StoreError(
            f"{key}={uri}: its database driver ({error.name or first_line(error)}) is not installed: pip install it,"
            " or use a sqlite:/// store"
        ) from None


STORE_ERRORS = (OSError, MlflowException, SQLAlchemyError)
IN_MEMORY_STORES = ("sqlite://", "sqlite:///:memory:")
NAMED_STORES = ("databricks", "databricks-uc")  # MLflow's URIs without a scheme that are not paths
DATABASE_SCHEMES = ("postgresql", "mysql", "mssql")  # MLflow's database stores besides sqlite, whose driver is Python's
SERVER_PROBE_S = 10  # seconds to connect to a tracking server before saying it cannot be reached


def _probe_server(uri: str, key: str = "tracking.uri") -> None:
    """Raise StoreError unless a tracking server's host accepts a connection: MLflow retries an absent server for
    over two minutes before it fails."""
    try:
        server = urlparse(uri)
        port = server.port or (443 if server.scheme == "https" else 80)
    except ValueError as error:  # a port out of range or not a number, a broken IPv6 address
        raise StoreError(f"{key}={uri} is not a server's URI ({error})") from None
    try:
        socket.create_connection((server.hostname or "localhost", port), timeout=SERVER_PROBE_S).close()
    except OSError as error:
        reason = error.strerror or str(error) or type(error).__name__
        raise StoreError(f"cannot reach the MLflow server {uri} ({reason}): start it, or set {key}") from None


def _refuse_foreign_database(database: Path) -> None:
    """Raise StoreError where a sqlite file holds tables but not MLflow's: MLflow would add its own to it."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as connection:
            tables = sorted(row[0] for row in connection.execute("select name from sqlite_master where type='table'"))
    except sqlite3.Error:  # not a sqlite file, or unreadable: MLflow's own error says so
        return
    if tables and "alembic_version" not in tables:  # every MLflow store has its migrations' table
        shown = ", ".join(tables[:5]) + (", …" if len(tables) > 5 else "")
        raise StoreError(
            f"{database} is a sqlite database of something else (tables {shown}; none of MLflow's): point"
            " tracking.uri at an MLflow store or a new file"
        )


def deleted(experiment: Experiment | None, uri: str, so: str = "") -> str | None:
    """The way back from a deleted experiment of the store at `uri` (MLflow hides its runs, refuses new ones), `so`
    saying what that does here; None for one that is not deleted."""
    if experiment is None or experiment.lifecycle_stage != "deleted":
        return None
    return (
        f"experiment {experiment.name!r} of the MLflow store {uri} is deleted{so}: restore it (mlflow experiments"
        f" restore --experiment-id {experiment.experiment_id}) or remove it for good (mlflow gc)"
    )


@store_call()
def open_experiment(uri: str, name: str) -> Experiment:
    """The experiment `name` of the store at `uri` (both made if new), once the store and the experiment's artifact
    folder are known to be writable: a store that cannot be written fails here, before any run exists, with a
    StoreError that names it."""
    try:
        use_store(uri)
        database = sqlite_file(uri)
        if database is not None:  # sqlite writes its journal beside the database
            _probe_write(database.parent)
            if not os.access(database, os.W_OK):
                raise PermissionError(13, "Permission denied", str(database))
        existing = mlflow.get_experiment_by_name(name)
        if why := deleted(existing, uri):  # MLflow's refusal read as a store fault
            raise StoreError(why)
        experiment = mlflow.set_experiment(name)
        if existing is None and database is not None:
            experiment = _keep_artifacts_beside(database, experiment)
    except OSError as error:
        raise StoreError(
            f"cannot write the MLflow store {uri} ({error.strerror}: {error.filename}): point tracking.uri or"
            " $MLFLOW_TRACKING_URI at a writable place"
        ) from error
    except STORE_ERRORS as error:  # MLflow's own refusal (a scheme it lacks, a file store it no longer writes)
        raise StoreError(f"cannot open the MLflow store {uri}: {first_line(error)}") from error
    folder = _local_folder(experiment.artifact_location)
    if folder is not None:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            _probe_write(folder)
        except OSError as error:  # the database may be writable while its experiment's artifact folder is not
            raise StoreError(
                f"cannot write the artifact folder {folder} of experiment {name!r} in the MLflow store {uri}"
                f" ({error.strerror}): a sqlite store keeps an experiment's artifacts where it was"
                " made (mlruns/ beside the database; ./mlruns of the folder of its first run for experiments made"
                " before 2026-12-01 or by other tools): make that writable, or use a new store"
            ) from error
    return experiment


def _keep_artifacts_beside(database: Path, experiment: Experiment) -> Experiment:
    """A new experiment of a sqlite store, with its artifact folder `mlruns/<experiment>` beside the database, as the
    default store's are. MLflow puts it under `./mlruns` of the working directory of the command that made it: one
    store given as `tracking.uri=sqlite:////path/mlflow.db` had its experiments' artifacts in the folders of whichever
    commands first ran them (a project checkout, a sweep's node), and not with the store."""
    beside = database.absolute().parent / "mlruns" / experiment.experiment_id
    location = experiment.artifact_location or ""
    if _local_folder(location) in (None, beside):  # a remote place, or beside already
        return experiment
    new = beside.as_uri() if location.startswith("file:") else str(beside)
    with contextlib.closing(sqlite3.connect(database, timeout=30)) as connection, connection:
        connection.execute(
            "update experiments set artifact_location = ? where experiment_id = ?", (new, experiment.experiment_id)
        )
    return mlflow.get_experiment(experiment.experiment_id)


def _local_folder(location: str | None) -> Path | None:
    """The folder of an artifact place MLflow recorded (a path, or a file: URI), None for a remote one."""
    recorded = urlparse(location or "")
    if recorded.scheme not in ("", "file") or not recorded.path:
        return None
    return Path(unquote(recorded.path) if recorded.scheme else location)


def _probe_write(folder: Path) -> None:
    """Raise OSError unless a file can be made in `folder` (a real attempt: root ignores permission bits, and
    os.access ignores read-only mounts' quirks of some file systems)."""
    with tempfile.TemporaryFile(dir=folder):
        pass


PROCESS_TAG = "igel.process"  # "<host> <pid> <start>" of the process that runs it: see close_stale_runs
STALE_TAG = "igel.closed_stale"  # on a run that close_stale_runs closed: when, and by which process
HARDWARE_TAG = "device_name"  # what a run trained on (training.hardware): its timings compare only on the same
TIMING = "time_"  # the prefix of a run's timings (time_<stage>_s), which measure the hardware as much as the method
HEARTBEAT_TAG = "igel.heartbeat"  # Unix time (s) at which the run's process last said it is alive: see heartbeat
HEARTBEAT_S = 60.0  # how often a run's process says so
# a run of another machine whose process has not said so for this long is taken for dead (killed, its machine down):
# long enough for a C call that holds Python's lock for minutes, and for the two machines' clocks to differ a little
HEARTBEAT_LOST_S = 15 * 60.0


def liveness(run: Run) -> bool | None:
    """Whether the process of a RUNNING run is alive: on this machine from its pid (process_gone), on another from its
    heartbeat (at most HEARTBEAT_LOST_S old); None where unsure: another machine's run without heartbeats (one that
    made none, of a version before them) or without a process tag."""
    process = run.data.tags.get(PROCESS_TAG, "")
    if process.split(" ", 1)[0] == socket.gethostname():
        return not process_gone(process)
    try:
        return time.time() - float(run.data.tags[HEARTBEAT_TAG]) <= HEARTBEAT_LOST_S
    except (KeyError, ValueError):
        return None


class _Heartbeats:
    """One thread of this process that tags each of its live runs (a job's, a sweep's or a reproduction's parent) with
    the time (HEARTBEAT_TAG) every HEARTBEAT_S, so that commands on other machines can tell a run whose process was
    killed (kill -9, a node's failure) from a live one: close it FAILED, run its job, where they would otherwise leave
    it RUNNING for ever. A beat the store refuses is skipped and said once a run: the run goes on. The thread runs while
    some run is beating, and is joined when the last one stops."""

    def __init__(self):
        self.lock = threading.Lock()
        self.clients: dict[str, mlflow.MlflowClient] = {}  # run id -> a client of its store
        self.thread: threading.Thread | None = None
        self.stop = threading.Event()

    def start(self, run_id: str, uri: str | None = None) -> None:
        with self.lock:
            self.clients[run_id] = mlflow.MlflowClient(tracking_uri=uri)
            if self.thread is None:
                self.stop = threading.Event()
                self.thread = threading.Thread(target=self._beat, args=(self.stop,), name="igel-heartbeat", daemon=True)
                self.thread.start()

    def end(self, run_id: str) -> None:
        with self.lock:
            self.clients.pop(run_id, None)
            if self.clients or self.thread is None:
                return
            thread, self.thread = self.thread, None
            self.stop.set()
        thread.join(timeout=HEARTBEAT_S)  # a beat that waits on a store out of reach must not hold the run's end

    def _beat(self, stop: threading.Event) -> None:
        refused: set[str] = set()
        while not stop.wait(HEARTBEAT_S):
            with self.lock:
                beating = list(self.clients.items())
            for run_id, client in beating:
                try:
                    client.set_tag(run_id, HEARTBEAT_TAG, _beat_now())
                except Exception as error:  # the store out of reach a while: later beats may pass
                    if run_id not in refused:
                        log.warning("run %s: its heartbeat could not be written: %s", run_id, first_line(error))
                    refused.add(run_id)


HEARTBEATS = _Heartbeats()
os.register_at_fork(after_in_child=HEARTBEATS.__init__)  # a forked child has no beat thread, and beats no run of ours


def alive_tags() -> dict[str, str]:
    """The tags that a run of this process starts with: which process runs it (PROCESS_TAG) and its first heartbeat,
    so that it is never without one (HEARTBEATS keeps it fresh)."""
    return {PROCESS_TAG: process_identity(), HEARTBEAT_TAG: _beat_now()}


def _beat_now() -> str:
    """A heartbeat's value: the Unix time in whole seconds, as `liveness` reads it back."""
    return f"{time.time():.0f}"


@contextmanager
def heartbeat(run_id: str) -> Iterator[None]:
    """Within: the run's heartbeat is kept fresh (HEARTBEATS)."""
    HEARTBEATS.start(run_id)
    try:
        yield
    finally:
        HEARTBEATS.end(run_id)


def process_identity(pid: int | None = None) -> str:
    """'<host> <pid> <start>' of a process (this one by default); its start time (clock ticks after boot, from Linux's
    /proc; '?' elsewhere) tells it from a later process that got the same pid."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()} {pid} {_start_time(pid) or '?'}"


def _start_time(pid: int) -> str | None:
    """The start time of a live process (/proc/<pid>/stat field 22); None when it is gone, a zombie, or unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in "ZX" else fields[19]


def process_gone(identity: str) -> bool:
    """Whether the process that `identity` names is known to be gone: it ran on this host, and its pid is free or now
    belongs to a process that started later. False when unsure (another host, a tag it cannot read)."""
    try:
        host, pid, start = identity.split()
        pid = int(pid)
    except ValueError:
        return False
    if host != socket.gethostname():
        return False
    if start != "?" and Path("/proc/self/stat").exists():
        return _start_time(pid) != start
    try:  # without start times, a pid in use counts as the same process
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass
    return False


@store_call()
def close_stale_runs(uri: str | None = None) -> list[str]:
    """End FAILED the runs that are RUNNING but whose process is gone (kill -9, the out-of-memory killer, a reboot, a
    cluster node's failure): nothing else could ever end them. Returns their ids. A run's process is gone when it ran
    on this machine and its pid is free, or when it ran on another and its heartbeat stopped (liveness); another
    machine's run without heartbeats is left as it is, for its own machine's next igel-run, igel-reproduce or
    igel-report to close."""
    client = mlflow.MlflowClient(tracking_uri=uri)
    experiments = [experiment.experiment_id for experiment in client.search_experiments()]
    running = f"attributes.status = 'RUNNING' and tags.`{PROCESS_TAG}` LIKE '%'"
    stale = []
    for run in client.search_runs(experiments, filter_string=running, max_results=10000) if experiments else []:
        if liveness(run) is not False:
            continue
        # read again now that its process is gone, and can write no more: it may have ended the run since the search
        run = client.get_run(run.info.run_id)
        if run.info.status != "RUNNING" or liveness(run) is not False:
            continue
        host, pid = run.data.tags[PROCESS_TAG].split()[:2]
        if host == socket.gethostname():
            why = f"its process (pid {pid}) died without ending it (kill -9, out of memory, a crash)"
        else:
            silent = (time.time() - float(run.data.tags[HEARTBEAT_TAG])) / 60
            why = f"its process (pid {pid} on {host}) sent no heartbeat for {silent:.0f} min (killed, its machine down)"
        client.set_tag(run.info.run_id, "error", why)
        client.set_tag(run.info.run_id, STALE_TAG, f"{time.strftime('%Y-%m-%d %H:%M:%S')} by {process_identity()}")
        client.set_terminated(run.info.run_id, RunStatus.to_string(RunStatus.FAILED))
        log.warning("run %s was left RUNNING: %s; ended FAILED", run.info.run_id, why)
        stale.append(run.info.run_id)
    return stale


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
        with writing_artifact(name, self.run):
            mlflow.log_figure(figure, name)
        plt.close(figure)

    @store_call()
    def table(self, frame: pd.DataFrame, name: str) -> None:
        with writing_artifact(name, self.run):
            mlflow.log_text(frame.to_csv(index=False), name)

    def embeddings(self, values: np.ndarray, graph: ig.Graph, **columns: Any) -> None:
        """embeddings.npy and nodes.csv, which names its rows: row i is the graph's vertex i (vertex, name, then
        `columns`, a value per vertex), whatever order the graph's file listed the nodes in."""
        self.array(values, "embeddings.npy")
        nodes = {"vertex": np.arange(graph.vcount()), "name": graph.vs["name"], **columns}
        self.table(pd.DataFrame(nodes), "nodes.csv")

    @store_call()
    def array(self, values: np.ndarray, name: str) -> None:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / name
            np.save(path, values)
            with writing_artifact(name, self.run):
                mlflow.log_artifact(str(path))

    @store_call()
    def file(self, path: str | Path) -> None:
        """Log an existing file under its own name."""
        with writing_artifact(Path(path).name, self.run):
            mlflow.log_artifact(str(path), run_id=self.run_id)

    @store_call()
    def folder(self, path: str | Path, name: str) -> None:
        """Log the files of a folder as the artifact folder `name`."""
        with writing_artifact(name, self.run):
            mlflow.log_artifacts(str(path), artifact_path=name, run_id=self.run_id)

    @store_call()
    def text(self, text: str, name: str) -> None:
        with writing_artifact(name, self.run):
            mlflow.log_text(text, name)

    @store_call()
    def tags(self, values: Mapping[str, Any]) -> None:
        mlflow.set_tags({key: str(value) for key, value in values.items()})


@contextmanager
def writing_artifact(name: str, run: mlflow.ActiveRun) -> Iterator[None]:
    """An artifact's write whose OSError (a full disk, a folder made read-only since the run began) is a StoreError
    naming the artifact and the run's artifact folder: igel-run read it as one of Hydra's own files, `None: No space
    left on device (hydra.run.dir, or hydra.sweep.dir with -m, sets where Hydra writes)`."""
    try:
        yield
    except OSError as error:
        where = f": {error.filename}" if error.filename else ""
        raise StoreError(
            f"cannot write the artifact {name} of run {run.info.run_id} ({error.strerror or error}{where}); its"
            f" artifact folder is {run.info.artifact_uri}"
        ) from error


def run_name_of(config: DictConfig, *details: str, encoded: bool = True, graph: str | None = None) -> str | None:
    """A run's name in MLflow's lists: its graph (`graph`, else graph_name's), encoder (α for IGEL; none where
    `encoded` is false), `details`, protocol (other than faithful) and seed: `facebook α=2 seed=0`, `facebook α=2
    authors seed=0`. MLflow draws a name from Python's `random`, which the run's seed has seeded by then: every run of
    a seed was named alike. None (MLflow's) for a config of no dataset."""
    dataset, encoder = config.get("dataset"), config.get("encoder") if encoded else None
    if dataset is None:
        return None
    method = [] if encoder is None else [f"α={encoder.distance}" if encoder.name == "igel" else str(encoder.name)]
    ran = label(config)  # the authors' path beside the faithful run of the same setting; an ablation of either
    path = [] if ran == DEFAULT_PROTOCOL else [ran]
    return " ".join([graph or graph_name(dataset), *method, *details, *path, f"seed={config.seed}"])


def _ran(config: DictConfig) -> str:
    """The run's `igel.protocol` tag: its protocol, or what it ran where overrides set some of its switches otherwise
    (protocol.label), said in a warning: an ablation a researcher runs on purpose, which no table counts."""
    ran = label(config)
    if ran != str(config.get("protocol", DEFAULT_PROTOCOL)):
        log.warning("%s: the run is tagged and named '%s'", switched_otherwise(config, overridden(config)), ran)
    return ran


def graph_name(dataset: DictConfig) -> str:
    """A dataset as run names say it: its option, the file of an edge list, a GraphSAGE prefix, a generated graph's
    size."""
    graph = str(dataset.name)
    if graph == "edgelist":  # the user's files, not the option's name
        graph = Path(str(dataset.path)).name
    elif graph == "graphsage":
        graph = str(dataset.prefix)
    elif graph == "erdos_renyi":  # scalability's sizes
        graph += f" n={dataset.num_nodes} degree={dataset.average_degree}"
    return graph


@contextmanager
def tracked_run(config: DictConfig, experiment: str, run_name: str | None = None) -> Iterator[RunLogger]:
    """An MLflow run that logs the resolved config (flattened as params, whole as config.yaml), tagged with
    its identity (`igel.config_hash`, see igel_exp.identity) and its protocol (`igel.protocol`), named `run_name`
    (default: run_name_of's).

    An exception inside the block ends the run FAILED, with the error as the `error` tag; inside a sweep
    (`tracking.parent_run_id`, else $IGEL_PARENT_RUN_ID) the run is nested under the sweep's parent run.
    """
    tracking = config.get("tracking", {})
    parent = tracking.get("parent_run_id") or os.environ.get(PARENT_RUN_ENV)
    resolved = OmegaConf.to_container(config, resolve=True, throw_on_missing=True, enum_to_str=True)
    # the run's identity: igel-reproduce skips a job whose hash has a FINISHED run, igel-report finds tables by it
    tags = {
        HASH_TAG: config_hash(resolved),
        PROTOCOL_TAG: _ran(config),
        **alive_tags(),
        **({SWEEP_TAG: parent} if parent else {}),
    }
    uri = tracking_uri(tracking.get("uri"))
    open_experiment(uri, experiment)
    reproducing = False
    if parent:
        source = "tracking.parent_run_id" if tracking.get("parent_run_id") else f"${PARENT_RUN_ENV}"
        reproducing = REPRODUCE_TAG in _parent_tags(parent, uri, source)
    shared = os.environ.get(SHARED_RUN_ENV) == "1"
    claim = claimed(uri, tags[HASH_TAG]) if reproducing or shared else contextlib.nullcontext()
    try:
        with store_call(), claim:
            run = mlflow.start_run(
                run_name=run_name or run_name_of(config), parent_run_id=parent, nested=parent is not None, tags=tags
            )
            log.info("MLflow run %s in experiment %r at %s", run.info.run_id, experiment, mlflow.get_tracking_uri())
            mlflow.log_params(flatten({k: v for k, v in resolved.items() if k not in NOT_PARAMS}))
            with writing_artifact("config.yaml", run):
                mlflow.log_text(OmegaConf.to_yaml(resolved), "config.yaml")
        with heartbeat(run.info.run_id):
            yield RunLogger(run)
    except BaseException as error:
        active = mlflow.active_run()
        if active is not None:
            with store_call():
                mlflow.set_tag("error", f"{type(error).__name__}: {error}"[:5000])
                mlflow.end_run(RunStatus.to_string(RunStatus.FAILED))
            setattr(error, FAILED_RUN, active.info.run_id)
        _raise_database_error(error, uri)
        raise
    try:
        with store_call():
            mlflow.end_run()
    except (MlflowException, SQLAlchemyError) as error:
        _raise_database_error(error, uri)
        raise


def _raise_database_error(error: BaseException, uri: str) -> None:
    """A StoreError in one line where `error` is the store's database failing a write (a full disk: `database or disk
    is full`, a database locked for good), which MLflow raises as a traceback of three chained exceptions from inside a
    run's first or last write (log_params, end_run); nothing for any other error."""
    cause = error
    while isinstance(cause, MlflowException | SQLAlchemyError):
        if isinstance(cause, SQLAlchemyError):
            raise StoreError(f"cannot write the MLflow store {uri} ({first_line(error)})") from error
        cause = cause.__cause__ or cause.__context__


def _parent_tags(parent: str, uri: str, source: str) -> dict[str, str]:
    """The tags of the parent run a job is to be nested under (named by `source`, the config key or the environment
    variable); StoreError unless it is a run of the store: MLflow's own error is a traceback from inside start_run."""
    try:
        with store_call():
            return mlflow.MlflowClient().get_run(parent).data.tags
    except MlflowException as error:
        if error.error_code != "RESOURCE_DOES_NOT_EXIST":
            raise
        raise StoreError(
            f"{source}={parent}: no such run in the MLflow store {uri} (the parent run of a sweep's jobs)"
        ) from None


def _handle_interrupts(handler: Callable[[int, object], None]) -> dict[int, Any]:
    """Send Ctrl-C and SIGTERM to `handler`, and hold back the Python handlers of HELD_BACK during store calls; returns
    the handlers to restore. Only the main thread may set signal handlers: elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    previous = {sig: signal.signal(sig, handler) for sig in INTERRUPTS}
    for sig in HELD_BACK:
        installed = signal.getsignal(sig)
        if callable(installed):
            previous[sig] = signal.signal(sig, _held_back(installed))
    return previous


def _restore_handlers(previous: dict[int, Any]) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)


@contextmanager
def watch_parent(
    pid: int | None, interval_s: float = 1.0, orphaned: Callable[[], object] | None = None
) -> Iterator[None]:
    """Interrupt this process as SIGTERM does when its parent `pid` dies, so that the job process of a launcher that
    was killed (kill -9, the out-of-memory killer) ends its run FAILED and exits instead of working on unobserved;
    `orphaned` is called before it exits then (what the parent would have cleaned up). Only while `pid` is this
    process's parent: a sweep's job that runs in the launcher itself, or that a scheduler started, is left alone."""
    if pid is None or os.getppid() != pid:
        yield
        return
    stop = threading.Event()

    def watch() -> None:
        global _why_interrupted
        while not stop.wait(interval_s):
            if os.getppid() != pid:
                _why_interrupted = f" (its parent process {pid} is gone)"
                os.kill(os.getpid(), signal.SIGTERM)
                return

    threading.Thread(target=watch, name="igel-watch-parent", daemon=True).start()
    try:
        yield
    finally:
        stop.set()
        if os.getppid() != pid:  # orphaned: no one can give a worker (joblib's) more work or read its result
            if orphaned is not None:
                orphaned()
            os._exit(130)


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """SIGTERM (kill, Slurm's time limit) stops the work as Ctrl-C does, and only the first of them interrupts: the
    run in progress ends FAILED instead of staying RUNNING. Interrupted work ends in KeyboardInterrupt even when its
    clean-up fails (the store unreachable): a sweep must stop, not go on to its next job."""
    global _interrupted_by, _deferred, _why_interrupted
    _interrupted_by = _deferred = None  # nothing left over from an earlier interrupted block
    _why_interrupted = ""
    previous, unraisable = _handle_interrupts(_interrupt), sys.unraisablehook
    sys.unraisablehook = functools.partial(_take_again, otherwise=unraisable)
    try:
        yield
    except Exception as error:
        if _interrupted_by is None:
            raise
        raise KeyboardInterrupt(f"signal {_interrupted_by}") from error
    finally:
        sys.unraisablehook = unraisable
        _restore_handlers(previous)


class JobInterrupted(Exception):
    """A sweep's job stopped by Ctrl-C or SIGTERM in a submitit job process (Slurm's scancel or time limit)."""


@contextmanager
def job_interrupts() -> Iterator[None]:
    """sigterm_interrupts for one job of a sweep. In a submitit job the interrupt ends as JobInterrupted, an ordinary
    exception, which submitit records as the job's result: the launching process learns at once that the job is
    over, where a KeyboardInterrupt would leave it asking sacct, which a Slurm without accounting cannot answer
    (it would wait forever). Elsewhere the KeyboardInterrupt stops the sweep, as it should."""
    try:
        with sigterm_interrupts():
            yield
    except KeyboardInterrupt as error:
        if os.environ.get("SUBMITIT_EXECUTOR"):  # set by submitit's job scripts
            raise JobInterrupted(f"interrupted ({error}): the run in progress ended FAILED") from error
        raise


class StopJobProcesses:
    """A Ctrl-C / SIGTERM handler for a process that launches jobs in worker processes (joblib's): the workers get
    SIGTERM and end their runs FAILED; once `running()` counts none (or after `wait_s`), `finish(signum)` ends the
    launching process, as joblib kills its workers at once. Without workers, or at a second signal, it interrupts
    at once (as sigterm_interrupts does)."""

    WAIT_S = 30  # at most, for the jobs in progress to end their runs

    def __init__(self, running: Callable[[], int], finish: Callable[[int], None], wait_s: float = WAIT_S):
        self.running, self.finish, self.wait_s = running, finish, wait_s
        self.stopping = False

    def __call__(self, signum: int, frame: object) -> None:
        workers = multiprocessing.active_children()
        if self.stopping or not workers or _store_calls:
            _interrupt(signum, frame)  # raises now, or when the store call in progress returns
            return
        self.stopping = True
        for worker in workers:
            worker.terminate()
        deadline = time.monotonic() + self.wait_s
        while self.running() and time.monotonic() < deadline:
            time.sleep(0.2)
        self.finish(signum)


@contextmanager
def stopping_job_processes(running: Callable[[], int]) -> Iterator[None]:
    """Within: Ctrl-C and SIGTERM stop the job processes first (StopJobProcesses), then raise KeyboardInterrupt."""

    def interrupted(signum: int) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous, warnings = _handle_interrupts(StopJobProcesses(running, interrupted)), quiet_resource_trackers()
    try:
        yield
    finally:
        _restore_handlers(previous)
        restore_warnings(warnings)


def release_job_processes() -> None:
    """Stop joblib's worker processes (its loky executor's), idle once a sweep's or a reproduction's jobs are done: left
    to exit with the interpreter, they held igel-run -m and igel-reproduce 6.0 s after the last job, against 2.0 s
    when stopped here. Nothing where joblib's launcher did not run in this process."""
    module = sys.modules.get("joblib.externals.loky.reusable_executor")
    executor = getattr(module, "_executor", None)
    if executor is not None:
        executor.shutdown(wait=True, kill_workers=True)


def quiet_resource_trackers() -> str | None:
    """Have the processes started from now on (joblib's workers, Python's resource trackers) leave out the trackers'
    warning, at an interrupted sweep's exit, of the semaphores of the workers it stopped, which they then free: noise
    under the sweep's own line. Returns $PYTHONWARNINGS as it was, for restore_warnings."""
    previous = os.environ.get("PYTHONWARNINGS")
    set_environ("PYTHONWARNINGS", ",".join(filter(None, [previous, QUIET_RESOURCE_TRACKERS])))
    return previous


def restore_warnings(previous: str | None) -> None:
    set_environ("PYTHONWARNINGS", previous)


def set_environ(name: str, value: str | None) -> str | None:
    """Set (None: unset) an environment variable; returns its value before, to set back."""
    previous = os.environ.get(name)
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
    return previous


@contextmanager
def environ_set(name: str, value: str | None) -> Iterator[None]:
    """An environment variable set (None: unset) for the block, then set back, however the block ends."""
    previous = set_environ(name, value)
    try:
        yield
    finally:
        set_environ(name, previous)


def artifact_bars(shown: bool) -> contextlib.AbstractContextManager[None]:
    """MLflow's progress bars of artifact downloads (a model, reused embeddings) shown or not, for the block: MLflow
    reads an environment variable."""
    name = MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR.name
    return environ_set(name, os.environ.get(name) if shown else "false")


@store_call()
def running_jobs(experiment_ids: list[str], parent_run_ids: list[str]) -> int:
    """How many runs nested under these parent runs are RUNNING."""
    count = 0
    for parent in parent_run_ids:  # MLflow's filters have no IN on tags
        jobs = mlflow.search_runs(
            experiment_ids=experiment_ids,
            filter_string=f"tags.`{SWEEP_TAG}` = '{parent}' and attributes.status = 'RUNNING'",
        )
        count += int((jobs.run_id != parent).sum()) if len(jobs) else 0
    return count


class SweepCallback(Callback):
    """Groups the jobs of an `igel-run -m` sweep under one parent MLflow run.

    The store, the experiment and the parent run are created here, in the launching process, before
    jobs fan out: parallel jobs (joblib, submitit) then never race to create the sqlite store. Jobs find
    the parent through $IGEL_PARENT_RUN_ID. The parent ends FINISHED with the sweep, FAILED if the
    process exits before the sweep completes; Ctrl-C and SIGTERM stop the jobs in progress first.
    """

    def __init__(self):
        self.parent_run_id: str | None = None
        self.experiment_id: str | None = None
        self.previous_handlers: dict[int, Any] = {}
        self.warnings: str | None = None  # $PYTHONWARNINGS before the sweep (a string: Hydra pickles its callbacks)

    @store_call()
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            experiment = open_experiment(tracking_uri(config.get("tracking", {}).get("uri")), config.name)
        except StoreError as error:  # SystemExit: Hydra turns a callback's exceptions into warnings and goes on
            sys.exit(f"igel-run: error: {error}")
        client = mlflow.MlflowClient()
        overrides = " ".join(config.hydra.overrides.task)
        run = client.create_run(
            experiment.experiment_id,
            run_name=f"sweep {time.strftime('%Y-%m-%d %H:%M:%S')}",
            tags={
                "igel.sweep_overrides": overrides[:5000],
                "mlflow.note.content": f"igel-run -m {overrides}",
                **alive_tags(),
            },
        )
        self.parent_run_id, self.experiment_id = run.info.run_id, experiment.experiment_id
        HEARTBEATS.start(self.parent_run_id)  # so that a launcher killed on another machine leaves no RUNNING parent
        client.set_tag(self.parent_run_id, SWEEP_TAG, self.parent_run_id)
        os.environ[PARENT_RUN_ENV] = self.parent_run_id
        os.environ[LAUNCHER_ENV] = str(os.getpid())  # its worker processes (joblib's) stop if it is killed
        self.warnings = quiet_resource_trackers()
        atexit.register(self._end, RunStatus.FAILED)
        stop = StopJobProcesses(lambda: running_jobs([self.experiment_id], [self.parent_run_id]), self._exit)
        self.previous_handlers = _handle_interrupts(stop)
        log.info("sweep parent run %s in experiment %r", self.parent_run_id, config.name)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        self._end(RunStatus.FINISHED)
        release_job_processes()

    @store_call()
    def _end(self, status: int) -> None:
        if self.parent_run_id is None:
            return
        HEARTBEATS.end(self.parent_run_id)
        client = mlflow.MlflowClient()
        if status == RunStatus.FAILED:  # the process exits before the sweep's end: an interrupt or a failed job
            why = "the sweep stopped before its last job: interrupted, a job failed, or its launcher did"
            client.set_tag(self.parent_run_id, "error", why)
        client.set_terminated(self.parent_run_id, RunStatus.to_string(status))
        os.environ.pop(PARENT_RUN_ENV, None)
        os.environ.pop(LAUNCHER_ENV, None)
        restore_warnings(self.warnings)
        self.parent_run_id = None
        _restore_handlers(self.previous_handlers)
        self.previous_handlers = {}

    @staticmethod
    def _exit(signum: int) -> None:
        print("sweep interrupted: its jobs in progress ended FAILED, as its parent run will", file=sys.stderr)
        raise SystemExit(130)  # the shell's code for Ctrl-C; joblib then kills its workers


def finished_runs(experiment: str, uri: str | None = None) -> pd.DataFrame:
    """Every FINISHED run of an MLflow experiment, one row each: run_id, start_time, params.<key> (strings),
    metrics.<name> and tags.<name> columns. Empty when the experiment does not exist."""
    mlflow.set_tracking_uri(tracking_uri(uri))
    if mlflow.get_experiment_by_name(experiment) is None:
        return pd.DataFrame()
    return mlflow.search_runs(experiment_names=[experiment], filter_string="attributes.status = 'FINISHED'")
