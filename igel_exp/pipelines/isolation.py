"""Run a pipeline in a fresh Python process.

Hydra's launchers do not give every job a process of its own: the basic launcher runs a sweep's jobs one
after the other in one process, joblib with n_jobs=1 does the same, and joblib's worker processes (loky)
are reused from job to job. A measurement of memory wants a process that starts empty, and a job killed
by the kernel must not take the sweep down with it nor leave its MLflow run RUNNING: the job runs in a
child process, the parent waits, returns its metrics, re-raises its one-line error, or reports the kill
and marks the child's run FAILED.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import mlflow
from mlflow.entities import RunStatus
from omegaconf import DictConfig, OmegaConf

from igel_exp import errors
from igel_exp.errors import IgelError
from igel_exp.tracking import store_call, tracking_uri

log = logging.getLogger(__name__)

CHILD_ENV = "IGEL_ISOLATED"  # set in the child: the pipeline runs in place
RUN_ID_FILE_ENV = "IGEL_RUN_ID_FILE"  # where the child notes its MLflow run id, for the parent
_CHILD_COMMAND = "import sys; from igel_exp.pipelines.isolation import child_main; sys.exit(child_main(sys.argv[1]))"


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
        env = {**os.environ, CHILD_ENV: "1", RUN_ID_FILE_ENV: str(folder / "run_id")}
        command = [sys.executable, "-c", _CHILD_COMMAND, str(folder)]
        code = subprocess.run(command, env=env).returncode
        if code == 0:
            return json.loads((folder / "metrics.json").read_text())
        if (folder / "error.json").exists():
            error = json.loads((folder / "error.json").read_text())
            kind = getattr(errors, error["type"], IgelError)
            raise (kind if isinstance(kind, type) and issubclass(kind, IgelError) else IgelError)(error["message"])
        if code < 0:
            name = signal.Signals(-code).name
            reason = f"the job's process was killed by {name}" + (" (out of memory?)" if name == "SIGKILL" else "")
        else:
            reason = f"the job's process failed with exit status {code} (its traceback is above)"
        message = f"{reason}{'; ' + hint if hint else ''}"
        run_id = (folder / "run_id").read_text() if (folder / "run_id").exists() else None
        if run_id:
            _close_failed(config, run_id, message)
        raise IgelError(message)


@store_call()
def _close_failed(config: DictConfig, run_id: str, message: str) -> None:
    """Mark a run that its process could not close FAILED, with the reason as its `error` tag."""
    client = mlflow.MlflowClient(tracking_uri(config.get("tracking", {}).get("uri")))
    client.set_tag(run_id, "error", message[:5000])
    client.set_terminated(run_id, RunStatus.to_string(RunStatus.FAILED))


def child_main(folder: str) -> int:
    """The child process: run the pipeline of `folder`/config.yaml, leave its metrics or its error there."""
    from igel_exp import pipelines  # not at the top: igel_exp.pipelines imports this module

    folder = Path(folder)

    logging.basicConfig(level=logging.INFO, format="[%(asctime)s][%(name)s][%(levelname)s] - %(message)s")
    config = OmegaConf.load(folder / "config.yaml")
    try:
        metrics = pipelines.run(config)
    except IgelError as error:
        (folder / "error.json").write_text(json.dumps({"type": type(error).__name__, "message": str(error)}))
        return 1
    (folder / "metrics.json").write_text(json.dumps({key: float(value) for key, value in metrics.items()}))
    return 0
