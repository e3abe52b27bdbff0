"""Benchmark: the training time of the authors' code path against the faithful one, run for run.

    python scripts/bench_protocols.py [--experiment sister_cities] [--distance 1 2 3 4] [--seed 0] [--repeats 3]
        [--threads 1]

Runs `igel-run experiment=E encoder.distance=A seed=S protocol=P threads=T progress=false` for protocol=authors and
protocol=faithful in turn, for each α, --repeats rounds, each run in a fresh temporary MLflow store (no run reuses
another's embeddings). Prints each run's training time (time_train_s) and whole run, then each protocol's best of both
per α, their ratios, and the sums over the α (a table's cost: issue 16 asks that the authors' path cost no more than
the faithful one). `--threads 0` leaves torch's default. Run it on an otherwise idle machine: it measures one job at a
time.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import mlflow

from igel_exp.training import hardware

PROTOCOLS = ("authors", "faithful")


def train_seconds(uri: str) -> float:
    """time_train_s of the store's one run."""
    client = mlflow.MlflowClient(tracking_uri=uri)
    ids = [experiment.experiment_id for experiment in client.search_experiments()]
    (run,) = client.search_runs(ids, max_results=2)
    return run.data.metrics["time_train_s"]


def run_once(experiment: str, distance: int, seed: int, protocol: str, threads: int) -> tuple[float, float]:
    """(training seconds, whole run's seconds) of one igel-run in a fresh store."""
    with tempfile.TemporaryDirectory() as folder:
        uri = f"sqlite:///{Path(folder) / 'mlflow.db'}"
        command = [
            sys.executable, "-m", "igel_exp.cli", f"experiment={experiment}", f"encoder.distance={distance}",
            f"seed={seed}", f"protocol={protocol}", "progress=false", f"tracking.uri={uri}",
            f"hydra.run.dir={folder}/hydra", *([f"threads={threads}"] if threads else []),
        ]  # fmt: skip
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode:  # the run's own one-line error (igel-run's last line), not a traceback of this script
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            sys.exit(f"bench_protocols: {' '.join(command[2:6])} failed: {last}")
        return train_seconds(uri), time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", default="sister_cities", help="sister_cities or clustering (both paths)")
    parser.add_argument("--distance", type=int, nargs="+", default=[2], help="one α or several (their sums too)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch's threads per run; 0: its default")
    arguments = parser.parse_args()
    print(f"machine: {hardware()}", flush=True)
    # best[distance][protocol] = [training, whole run], each the best over the rounds
    best = {distance: {protocol: [float("inf")] * 2 for protocol in PROTOCOLS} for distance in arguments.distance}
    for round_ in range(1, arguments.repeats + 1):
        for distance, times in best.items():
            for protocol in PROTOCOLS:
                train, whole = run_once(arguments.experiment, distance, arguments.seed, protocol, arguments.threads)
                times[protocol] = [min(train, times[protocol][0]), min(whole, times[protocol][1])]
                line = f"round {round_}, α = {distance}, {protocol}: training {train:.2f} s, whole run {whole:.1f} s"
                print(line, flush=True)
    summed = {
        protocol: [sum(times[protocol][part] for times in best.values()) for part in (0, 1)] for protocol in PROTOCOLS
    }
    for distance, times in [*best.items(), ("summed", summed)]:
        (authors, authors_whole), (faithful, faithful_whole) = times["authors"], times["faithful"]
        print(
            f"{arguments.experiment}, α = {distance}, best of {arguments.repeats}: training {authors:.2f} s on the"
            f" authors' path, {faithful:.2f} s faithful ({authors / faithful:.2f}×); whole runs {authors_whole:.1f} s"
            f" against {faithful_whole:.1f} s ({authors_whole / faithful_whole:.2f}×)"
        )


if __name__ == "__main__":
    main()
