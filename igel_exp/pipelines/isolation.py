"""Run a pipeline in a fresh Python process.

Hydra's launchers do not give every job a process of its own: the basic launcher runs a sweep's jobs one
after the other in one process, joblib with n_jobs=1 does the same, and joblib's worker processes (loky)
are reused from job to job. A measurement of memory wants a process that starts empty, and a job killed
by the kernel must not take the sweep down with it nor leave its MLflow run RUNNING: the job runs in a
child process, the parent waits, returns its metrics, re-raises its one-line error, or reports the kill
and marks the child's run FAILED.

Ctrl-C and SIGTERM reach the child through its parent (a terminal's Ctrl-C reaches both; `kill`, `timeout` or a
sweep's launcher may signal the parent alone): the parent passes SIGTERM on, waits for the child to end its run
FAILED (at most STOP_WAIT_S, then kills it and closes the run itself), then stops. A child whose parent dies (kill
-9) stops too, rather than train on unobserved: it watches its parent.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import mlflow
from mlflow.entities import RunStatus
from omegaconf import DictConfig, OmegaConf

from igel_exp import errors
from igel_exp.errors import FAILED_RUN, IgelError
from igel_exp.tracking import sigterm_interrupts, store_call, tracking_uri, watch_parent

log = logging.getLogger(__name__)

CHILD_ENV = "IGEL_ISOLATED"  # set in the child: the pipeline runs in place
RUN_ID_FILE_ENV = "IGEL_RUN_ID_FILE"  # where the child notes its MLflow run id, for the parent
PARENT_ENV = "IGEL_ISOLATED_PARENT"  # the parent's pid, which the child watches
STOP_WAIT_S = 30  # at most, for an interrupted child to end its run FAILED
INTERRUPTED = 130  # the child's exit status when Ctrl-C or SIGTERM stopped it (the shell's code for Ctrl-C)
_CHILD_COMMAND = "from igel_exp.entry import isolated_job; isolated_job()"


def in_child() -> bool:
    """Whether this process is the fresh process of an isolated job."""
    return os.environ.get(CHILD_ENV) == "1"


def note_run_id(run_id: str) -> None:
    """Tell the parent which MLflow run is the child's (so that it can close it if the child is killed)."""
    path = os.environ.get(RUN_ID_FILE_ENV)
    if path and in_child():
        Path(path).write_text(run_id)


def run_isolated(config: DictConfig, hint: str = "") -> dict[str, float]:
    """Run `config`'s pipeline in a new Python process and return its final metrics.

    `hint` completes the message when the process is killed (what to lower, for instance).
    """
    with tempfile.TemporaryDirectory(prefix="igel-job-") as folder:
        folder = Path(folder)
        (folder / "config.yaml").write_text(OmegaConf.to_yaml(config, resolve=True))
        env = {**os.environ, CHILD_ENV: "1", RUN_ID_FILE_ENV: str(folder / "run_id"), PARENT_ENV: str(os.getpid())}
        command = [sys.executable, "-c", _CHILD_COMMAND, str(folder)]
        process = subprocess.Popen(command, env=env)
        try:
            code = process.wait()
        except KeyboardInterrupt as interrupt:  # Ctrl-C or SIGTERM: stop the child, then stop
            _stop(process, config, folder, f"KeyboardInterrupt: {interrupt}")
            if run_id := _run_id(folder):
                setattr(interrupt, FAILED_RUN, run_id)
            raise
        if code == 0:
            return json.loads((folder / "metrics.json").read_text())
        if (folder / "error.json").exists():
            error = json.loads((folder / "error.json").read_text())
            kind = getattr(errors, error["type"], IgelError)
            raise (kind if isinstance(kind, type) and issubclass(kind, IgelError) else IgelError)(error["message"])
        if code == INTERRUPTED:
            raise IgelError("the job's process was interrupted (Ctrl-C or SIGTERM); its run ended FAILED")
        if code < 0:
            name = signal.Signals(-code).name
            reason = f"the job's process was killed by {name}" + (" (out of memory?)" if name == "SIGKILL" else "")
        else:
            reason = f"the job's process failed with exit status {code} (its traceback is above)"
        message = f"{reason}{'; ' + hint if hint else ''}"
        _close_failed(config, folder, message)
        raise IgelError(message)


def _stop(process: subprocess.Popen, config: DictConfig, folder: Path, reason: str) -> None:
    """Have the child end its run FAILED and exit (SIGTERM; a Ctrl-C may have reached it already), killing it after
    STOP_WAIT_S; then close its run here if it could not."""
    process.send_signal(signal.SIGTERM)
    try:
        if process.wait(timeout=STOP_WAIT_S) == INTERRUPTED:
            return  # it ended its run FAILED itself
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        reason = f"{reason}; the job's process did not stop within {STOP_WAIT_S} s and was killed"
    _close_failed(config, folder, reason)


@store_call()
def _close_failed(config: DictConfig, folder: Path, message: str) -> None:
    """Mark the child's run FAILED, with the reason as its `error` tag, if it has one that is still RUNNING."""
    run_id = _run_id(folder)
    if not run_id:
        return
    client = mlflow.MlflowClient(tracking_uri(config.get("tracking", {}).get("uri")))
    if client.get_run(run_id).info.status != RunStatus.to_string(RunStatus.RUNNING):
        return
    client.set_tag(run_id, "error", message[:5000])
    client.set_terminated(run_id, RunStatus.to_string(RunStatus.FAILED))


def _run_id(folder: Path) -> str | None:
    """The id of the child's MLflow run, once it has one."""
    return (folder / "run_id").read_text() if (folder / "run_id").exists() else None


def child_main(folder: str) -> int:
    """The child process: run the pipeline of `folder`/config.yaml, leave its metrics or its error there."""
    from igel_exp import pipelines  # not at the top: igel_exp.pipelines imports this module

    folder = Path(folder)

    logging.basicConfig(level=logging.INFO, format="[%(asctime)s][%(name)s][%(levelname)s] - %(message)s")
    config = OmegaConf.load(folder / "config.yaml")
    try:
        # a parent killed outright (kill -9) leaves its temporary folder, this job's, for no one else to remove
        remove_folder = functools.partial(shutil.rmtree, folder, ignore_errors=True)
        with sigterm_interrupts(), watch_parent(int(os.environ[PARENT_ENV]), orphaned=remove_folder):
            metrics = pipelines.run(config)
    except IgelError as error:
        (folder / "error.json").write_text(json.dumps({"type": type(error).__name__, "message": str(error)}))
        return 1
    except KeyboardInterrupt:  # its run is FAILED, with the signal as its error; the parent says so
        return INTERRUPTED
    (folder / "metrics.json").write_text(json.dumps({key: float(value) for key, value in metrics.items()}))
    return 0
