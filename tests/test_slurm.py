"""Sweeps and igel-reproduce on a real Slurm (hydra/launcher=submitit_slurm), and jobs that Slurm kills.

They need a running Slurm: `scripts/slurm_local.sh start` (root, Debian) starts one on this machine. Without one
they skip, except where $IGEL_REQUIRE_SLURM is set (.ci/run sets it after starting Slurm): there they fail.
"""

import os
import subprocess
import sys
import time

import mlflow
import pytest

from igel_exp.identity import HASH_TAG
from igel_exp.tracking import REPRODUCE_TAG

from conftest import TINY_QUICK

pytestmark = pytest.mark.slurm

TABLE = {
    "table": "Tiny",
    "rows": ["encoder.distance"],
    "columns": {"PageRank": "spearman_pagerank"},
    "paper": [{"encoder.distance": 1, "PageRank": 0.728}],
}
WAIT_S = 240  # for jobs to be scheduled and run on a busy 2-core node


@pytest.fixture(scope="module")
def partition() -> str:
    """The default partition of the Slurm that answers here."""
    try:
        answer = subprocess.run(["sinfo", "-h", "-o", "%P"], capture_output=True, text=True, timeout=30)
        names = answer.stdout.split() if answer.returncode == 0 else []
    except FileNotFoundError:
        names, answer = [], None
    default = [name.rstrip("*") for name in names if name.endswith("*")] or [name for name in names]
    if not default:
        reason = f"no Slurm answers here (sinfo: {answer.stderr.strip() if answer else 'not installed'})"
        if os.environ.get("IGEL_REQUIRE_SLURM"):
            pytest.fail(f"{reason}; IGEL_REQUIRE_SLURM is set: scripts/slurm_local.sh start must have started one")
        pytest.skip(f"{reason}: run scripts/slurm_local.sh start (as root) to run the tests marked slurm")
    return default[0]


def slurm(partition: str) -> list[str]:
    return ["hydra/launcher=submitit_slurm", f"hydra.launcher.partition={partition}", "hydra.launcher.cpus_per_task=1"]


def python(code: str, *args: str, cwd, uri: str, **popen) -> list:
    return [sys.executable, "-c", code, *args], {"cwd": cwd, "env": {**os.environ, "MLFLOW_TRACKING_URI": uri}, **popen}


IGEL_RUN = "from igel_exp.entry import igel_run; igel_run()"


def store_runs(uri: str):
    mlflow.set_tracking_uri(uri)
    return mlflow.search_runs(search_all_experiments=True, order_by=["attributes.start_time ASC"])


def jobs_and_parents(uri: str):
    runs = store_runs(uri)
    is_job = runs[f"tags.{HASH_TAG}"].notna()
    return runs[is_job], runs[~is_job]


def test_a_sweep_on_slurm_nests_every_job_under_one_parent(partition, store_uri, tmp_path):
    command, options = python(IGEL_RUN, "-m", "seed=0,1", *TINY_QUICK, *slurm(partition), cwd=tmp_path, uri=store_uri)
    result = subprocess.run(command, capture_output=True, text=True, timeout=WAIT_S, **options)
    assert result.returncode == 0, result.stderr[-3000:]
    jobs, parents = jobs_and_parents(store_uri)
    [parent] = parents.itertuples()
    assert sorted(jobs["params.seed"]) == ["0", "1"] and set(jobs.status) == {"FINISHED"}
    assert set(jobs["tags.igel.sweep"]) == {parent.run_id} and parent.status == "FINISHED"
    assert list((tmp_path / "multirun").glob("*/*/.submitit/*_0/*_0_log.out")), "not run by Slurm"


def test_igel_reproduce_on_slurm_and_a_resubmission_skips_the_finished_jobs(
    partition, experiments_dir, store_uri, tmp_path
):
    experiments_dir("tiny", {"encoder.distance": "1,2", "seed": "0"}, TABLE)
    arguments = ["tiny", "--profile", "quick", "--experiments", str(experiments_dir.folder), *slurm(partition)]
    code = "import sys; from igel_exp.reproduce import reproduce_main; sys.exit(reproduce_main(sys.argv[1:]))"
    command, options = python(code, *arguments, cwd=tmp_path, uri=store_uri)
    first = subprocess.run(command, capture_output=True, text=True, timeout=WAIT_S, **options)
    assert first.returncode == 0, first.stderr[-3000:]
    jobs, parents = jobs_and_parents(store_uri)
    assert sorted(jobs["params.encoder.distance"]) == ["1", "2"] and set(jobs.status) == {"FINISHED"}
    assert parents[f"tags.{REPRODUCE_TAG}"].tolist() == ["tiny (quick)"] and parents.status.tolist() == ["FINISHED"]
    assert set(jobs["tags.igel.sweep"]) == set(parents.run_id)
    assert "| 1 | 0.728 |" in first.stdout and "Missing" not in first.stdout
    submitted = list((tmp_path / "multirun").glob("*/*/.submitit/*_*/*_log.out"))
    assert len(submitted) == 2, submitted

    again = subprocess.run(command, capture_output=True, text=True, timeout=WAIT_S, **options)
    assert again.returncode == 0, again.stderr[-3000:]
    table = first.stdout[first.stdout.index("### Tiny") :]  # submitit's warnings come before it
    assert "2 of 2 runs finished, 0 to run" in again.stderr and again.stdout == table
    assert len(jobs_and_parents(store_uri)[0]) == 2
    assert len(list((tmp_path / "multirun").glob("*/*/.submitit/*_*/*_log.out"))) == 2  # nothing submitted


def wait_for(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(1)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def test_jobs_that_slurm_cancels_or_stops_at_their_time_limit_end_their_runs_failed(partition, store_uri, tmp_path):
    """scancel sends SIGTERM, then SIGKILL after KillWait; so does a time limit, which with Hydra's submitit settings
    comes after a USR2 (hydra.launcher.signal_delay_s before it) on which submitit stops a job that has used most of
    its time. Our jobs end their runs FAILED on either (submitit alone ignores SIGTERM: the run would stay RUNNING).
    Slurm sends its own USR2 up to a minute early, so the test sends it to a job with three minutes of time."""
    long = ["trainer.epochs=100000", "trainer.walk_length=10", "progress=false", "threads=1"]
    limit = ["hydra.launcher.timeout_min=3", "hydra.launcher.signal_delay_s=10"]
    command, options = python(IGEL_RUN, "-m", "seed=0,1", *long, *slurm(partition), *limit, cwd=tmp_path, uri=store_uri)
    sweep = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, **options)
    array = None
    try:

        def both_running() -> bool:
            runs = store_runs(store_uri)
            if "params.seed" not in runs:  # no job has started its run yet
                return False
            return {"0", "1"} <= set(runs[runs.status == "RUNNING"]["params.seed"])

        wait_for(both_running, WAIT_S, "both jobs to start their runs")
        queued = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True).stdout.split()
        [array] = {job.split("_")[0] for job in queued}  # submitit submits a sweep as one job array, seed 0 first
        subprocess.run(["scancel", f"{array}_0"], check=True)
        subprocess.run(["scancel", "--signal=USR2", f"{array}_1"], check=True)  # the time limit is near
        _, stderr = sweep.communicate(timeout=WAIT_S)  # the sweep ends when both jobs have
    finally:
        if sweep.poll() is None:
            sweep.kill()
        if array:  # whatever is left of the jobs when the test fails
            subprocess.run(["scancel", array], capture_output=True)
    jobs, parents = jobs_and_parents(store_uri)
    errors = dict(zip(jobs["params.seed"], jobs["tags.error"], strict=True))
    assert list(jobs.status) == ["FAILED", "FAILED"] and parents.status.tolist() == ["FAILED"], stderr[-3000:]
    assert errors["0"].startswith("KeyboardInterrupt: signal 15"), errors  # SIGTERM
    assert "Job not requeued because: timed-out" in errors["1"], errors  # submitit raised it inside the run
    wait_for(lambda: not subprocess.run(["squeue", "-h"], capture_output=True, text=True).stdout.strip(), 60, "squeue")
