"""Shared fixtures: small real graphs, the real data root (when present), composed configs, a tmp MLflow store."""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import igraph as ig
import numpy as np
import pytest
import torch
import yaml
from hydra import compose, initialize_config_module
from mlflow.tracking import MlflowClient

from igel_exp.data.registry import miserables_graph
from igel_exp.reference import reference_encoding

REPO = Path(__file__).resolve().parents[1]


def shared_data_root() -> Path | None:
    """$IGEL_DATA_DIR, else ../shared/data beside the repository, when it exists."""
    for candidate in (os.environ.get("IGEL_DATA_DIR"), REPO.parent / "shared" / "data"):
        if candidate and Path(candidate).is_dir():
            return Path(candidate)
    return None


@pytest.fixture(autouse=True, scope="session")
def _temporary_files_in_pytests_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The temporary files of the tests' own process under pytest's folder, which keeps the last three sessions', not
    in /tmp: MLflow's downloads of artifacts (download_artifacts without dst_path) are never removed, and a suite left
    some 40 folders there."""
    before = tempfile.tempdir
    tempfile.tempdir = str(tmp_path_factory.mktemp("tempfile"))
    yield
    tempfile.tempdir = before


@pytest.fixture
def data_root() -> Path:
    root = shared_data_root()
    if root is None:
        pytest.skip("real datasets absent: set IGEL_DATA_DIR or provide ../shared/data")
    return root


def small_graphs() -> dict[str, ig.Graph]:
    """Real and generated graphs covering hubs, trees, cliques, disconnected parts and isolated nodes."""
    disconnected = ig.Graph.Ring(6) + ig.Graph.Full(4) + ig.Graph.Star(5) + ig.Graph(3)  # 3 isolated nodes
    with_isolated = ig.Graph.Erdos_Renyi(n=60, m=70)
    with_isolated.add_vertices(2)
    return {
        "zachary": ig.Graph.Famous("Zachary"),
        "miserables": miserables_graph()[0],
        "tree": ig.Graph.Tree(40, 3),
        "erdos_renyi": ig.Graph.Erdos_Renyi(n=120, p=0.05),
        "disconnected": disconnected,
        "with_isolated": with_isolated,
        "lattice": ig.Graph.Lattice([5, 6], circular=False),
        "empty": ig.Graph(4),
    }


KINDS = {"closer": 0, "further": 1, "degree": 2}


def reference_counts(graph, encoder, nodes=None) -> np.ndarray:
    """The plain-BFS reference laid out in the encoder's columns."""
    nodes = list(range(graph.vcount())) if nodes is None else nodes
    reference = reference_encoding(graph, encoder.distance, encoder.relative_degrees, nodes)
    width = encoder.max_degree_ + 1
    block = (encoder.distance + 1) * width
    dense = np.zeros((len(nodes), encoder.n_features), dtype=np.int64)
    for row, counter in enumerate(reference):
        for key, count in counter.items():
            kind, (c, degree) = (KINDS[key[0]], key[1:]) if encoder.relative_degrees else (0, key)
            dense[row, kind * block + c * width + min(degree, encoder.max_degree_)] += count
    return dense


@pytest.fixture(
    params=["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU"))]
)
def device(request) -> torch.device:
    """Each device the maths must hold on: the CPU, and the GPU where there is one (CI has none)."""
    return torch.device(request.param)


@pytest.fixture
def compose_config():
    """Compose the packaged config tree with overrides, as igel-run would."""

    def _compose(*overrides: str):
        with initialize_config_module(config_module="igel_exp.conf", version_base="1.3"):
            return compose(config_name="config", overrides=list(overrides))

    return _compose


@pytest.fixture
def tracking_uri(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh sqlite MLflow store in a temporary working directory."""
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    return uri


@pytest.fixture(scope="session")
def _empty_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An MLflow sqlite store with its tables created (the migrations take seconds; a copy takes milliseconds)."""
    path = tmp_path_factory.mktemp("store-template") / "mlflow.db"
    MlflowClient(f"sqlite:///{path}").search_experiments()
    return path


@pytest.fixture
def store_uri(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _empty_store: Path) -> str:
    """As `tracking_uri` (a fresh store in a temporary working directory), copied from a template."""
    shutil.copy(_empty_store, tmp_path / "mlflow.db")
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    return uri


TINY_QUICK = ["trainer.epochs=1", "trainer.walk_length=10", "progress=false", "threads=1"]


@pytest.fixture
def experiments_dir(tmp_path: Path):
    """A folder of reproduction files: `write(name, params, reproduce, experiment=...)` adds experiments/<name>.yaml
    over the packaged config (see experiments/README.md); the quick profile defaults to tiny clustering runs."""
    folder = tmp_path / "experiments"
    folder.mkdir()

    def write(name: str, params: dict, reproduce: dict, experiment: str = "clustering") -> Path:
        reproduce = {"quick": {"params": {}, "overrides": TINY_QUICK}, **reproduce}
        document = {
            "defaults": ["config", {"override experiment": experiment}, "_self_"],
            "hydra": {"sweeper": {"params": params}},
            "reproduce": reproduce,
        }
        path = folder / f"{name}.yaml"
        path.write_text(yaml.safe_dump(document, sort_keys=False))
        return path

    write.folder = folder
    return write


def live_processes(group: int) -> list[int]:
    """The live processes of a process group, read from /proc (zombies, which a container's init may never reap, are
    not alive)."""
    return [pid for pid, fields in _live_stats() if int(fields[2]) == group]


def joblib_workers() -> list[int]:
    """This process's live joblib worker processes (their command line names loky's process launcher)."""
    return [pid for pid, fields in _live_stats(b"popen_loky_posix") if int(fields[1]) == os.getpid()]


def heartbeat_threads() -> list[threading.Thread]:
    """This process's heartbeat threads (tracking.HEARTBEATS): none once its runs have ended."""
    return [thread for thread in threading.enumerate() if thread.name == "igel-heartbeat"]


def _live_stats(named: bytes = b"") -> list[tuple[int, list[str]]]:
    """Each live process whose command line holds `named`, with the fields of /proc/PID/stat after its name."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            command = (stat.parent / "cmdline").read_bytes() if named else b""
        except OSError:  # gone meanwhile
            continue
        if fields[0] not in "ZX" and named in command:
            found.append((int(stat.parent.name), fields))
    return found


def wait_for_no_process(group: int, timeout_s: float = 60) -> list[int]:
    """Wait until the process group has no live process; returns those still alive at the timeout."""
    deadline = time.monotonic() + timeout_s
    while (alive := live_processes(group)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return alive


@contextlib.contextmanager
def reaping(process: subprocess.Popen):
    """On leaving, kill -9 every process of `process`'s group still alive: a failing test leaves none behind."""
    try:
        yield
    finally:
        for pid in live_processes(process.pid):
            os.kill(pid, signal.SIGKILL)


def kill_leaves_no_process(process: subprocess.Popen, lines: list[str]) -> None:
    """kill -9 of igel-run alone, as a node's out-of-memory killer or a user's `kill -9` does: its jobs' processes must
    notice by themselves and exit within a minute (`lines`, the output so far, shown if not)."""
    with reaping(process):
        process.kill()
        process.wait()
        assert wait_for_no_process(process.pid) == [], "".join(lines)[-5000:]


def start_training(args: list[str], cwd: Path, jobs: int = 1) -> tuple[subprocess.Popen, list[str]]:
    """igel-run with `args` in its own process group, returned once `jobs` jobs log that they train (the log, not the
    store, tells: reading the store meanwhile would compete for its lock); with the output read so far. A run that
    has not started training after 300 s is killed."""
    command = [sys.executable, "-c", "from igel_exp.entry import igel_run; igel_run()", *args, "progress=false"]
    env = {key: value for key, value in os.environ.items() if key != "MLFLOW_TRACKING_URI"}
    process = subprocess.Popen(
        command, cwd=cwd, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    lines, started = [], 0
    stuck = threading.Timer(300, os.killpg, (process.pid, signal.SIGKILL))  # then the output ends: the test fails
    stuck.start()
    try:
        for line in process.stdout:
            lines.append(line)
            started += "training on" in line
            if started == jobs:
                break
    finally:
        stuck.cancel()
    return process, lines


def keep_reading(process: subprocess.Popen, lines: list[str]) -> None:
    """Read the rest of the process's output into `lines` in the background: where nothing reads it, a job that logs
    an epoch a millisecond fills the pipe within a second and blocks on its next line, interrupted or not."""
    threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True).start()


def _drop_permission_override() -> None:
    """In a forked child before exec: drop CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from the bounding set, so that the
    program it runs as root cannot regain them and obeys permission bits as any user does."""
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH (linux/capability.h)
        if libc.prctl(24, capability, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")


@pytest.fixture
def obeys_permissions(tmp_path: Path):
    """A preexec_fn for subprocesses that must find a chmod 000 file unreadable and a chmod 555 folder read-only. The
    tests run as root, which ignores permission bits: its subprocesses drop the capabilities that let it. Skips, saying
    why, where that cannot be done (no prctl, or a root that keeps them)."""
    preexec = _drop_permission_override if os.geteuid() == 0 else None
    probe = tmp_path / "unreadable-probe"
    probe.write_text("x")
    probe.chmod(0)
    try:
        read = subprocess.run([sys.executable, "-c", f"open({str(probe)!r}).read()"], preexec_fn=preexec, timeout=60)
    except (OSError, subprocess.SubprocessError) as error:
        pytest.skip(f"cannot start a process that obeys permission bits here: {error}")
    finally:
        probe.unlink()
    if read.returncode == 0:
        pytest.skip("this user reads a chmod 000 file anyway: permission tests cannot fail here")
    return preexec
