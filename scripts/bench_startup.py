"""Benchmark: what a run costs besides its work: a tiny isolated job end to end, and the imports of a job's process.

    python scripts/bench_startup.py [--repeats 4] [--against PATH] [OVERRIDE ...]

1. A tiny job end to end: `igel-run experiment=scalability dataset.num_nodes=1024` (a 1-second run, in a process of
   its own as every scalability job is: the launching process imports, then the job's), plus any OVERRIDE, into a
   temporary MLflow store whose tables a first, untimed run made (as for every run after a user's first). In a sweep
   the launching process imports once, the job's process once per job: the second figure.
2. The imports of a job's process (`igel_exp.pipelines`, as entry.isolated_job does), in a fresh interpreter.

Each is timed --repeats times and its best kept. With --against PATH (another checkout of igel-exp, e.g. a `git
worktree` of an earlier commit) the same is timed for it, alternating with this one: the machine's load swings,
so only figures taken side by side compare.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from igel_exp.training import hardware

HERE = Path(__file__).resolve().parents[1]
IMPORTS = "import igel_exp.pipelines.isolation, igel_exp.pipelines"


def timed(command: list[str], checkout: Path, cwd: str) -> float:
    """Seconds that `command` takes with igel_exp imported from `checkout`; it must succeed."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(checkout), os.environ.get("PYTHONPATH", "")])}
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, cwd=cwd, env=env)
    return time.perf_counter() - started


def tiny_job(checkout: Path, folder: str, overrides: list[str]) -> float:
    command = [
        sys.executable, "-m", "igel_exp.cli", "experiment=scalability", "dataset.num_nodes=1024",
        f"tracking.uri=sqlite:///{folder}/mlflow.db", f"hydra.run.dir={folder}/hydra", *overrides,
    ]  # fmt: skip
    return timed(command, checkout, folder)


def job_imports(checkout: Path) -> float:
    with tempfile.TemporaryDirectory() as folder:
        return timed([sys.executable, "-c", IMPORTS], checkout, folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--against", type=Path, help="another checkout of igel-exp, timed alternately with this one")
    parser.add_argument("overrides", nargs="*", help="igel-run overrides for the tiny job")
    arguments = parser.parse_args()
    print(f"machine: {hardware()}", flush=True)
    checkouts = {"this checkout": HERE}
    if arguments.against is not None:
        checkouts[str(arguments.against)] = arguments.against.resolve()
    best = {name: [float("inf"), float("inf")] for name in checkouts}  # tiny job, imports
    stores = {name: tempfile.TemporaryDirectory() for name in checkouts}
    for name, checkout in checkouts.items():  # makes the store's tables
        tiny_job(checkout, stores[name].name, arguments.overrides)
    for round_ in range(1, arguments.repeats + 1):
        for name, checkout in checkouts.items():
            job, imports = tiny_job(checkout, stores[name].name, arguments.overrides), job_imports(checkout)
            best[name] = [min(job, best[name][0]), min(imports, best[name][1])]
            print(f"round {round_}, {name}: tiny job {job:.1f} s, a job process's imports {imports:.1f} s", flush=True)
    for name, (job, imports) in best.items():
        print(f"{name}, best of {arguments.repeats}: tiny job {job:.1f} s end to end, imports {imports:.1f} s")
    if len(best) == 2:
        (job, imports), (other_job, other_imports) = best.values()
        print(f"ratio (other / this): tiny job {other_job / job:.2f}×, imports {other_imports / imports:.2f}×")


if __name__ == "__main__":
    main()
