"""Refit igel-reproduce's cost model (igel_exp/costs.yaml) to the FINISHED runs of an MLflow store.

    python scripts/calibrate_costs.py --tracking-uri sqlite:///mlflow.db [--write]

For each kind of costs.yaml that the store has runs of, per_unit_s becomes the median of (duration - start_s) / work
over those runs (start_s is kept: it is the part of a run that does not grow with the work); the other kinds keep
their numbers. Prints the kinds with the number of runs behind each; --write rewrites the refitted kinds' per_unit_s in
igel_exp/costs.yaml (its comments stay: update their dates and machine). Run it after the trainer changes or on another
kind of machine, on a store where tables ran a thread per job, two jobs at a time (`hydra/launcher=joblib
hydra.launcher.n_jobs=2 threads=1`), as the costs were measured. Runs that reused another's embeddings are left out,
and of a kind with runs on this machine's CPU (the tag device_name) only those count: the costs are this machine's.
"""

from __future__ import annotations

import argparse
import re
import statistics
from pathlib import Path

import mlflow

from igel_exp.estimate import Duration, Estimator, finished_durations, load_kinds, timed_here
from igel_exp.reporting import load_runs
from igel_exp.training import hardware

COSTS = Path(__file__).resolve().parents[1] / "igel_exp" / "costs.yaml"


def durations(uri: str) -> list[Duration]:
    """The durations of every FINISHED run of the store's experiments (igel-reproduce's dry run reads them alike)."""
    names = [experiment.name for experiment in mlflow.MlflowClient(tracking_uri=uri).search_experiments()]
    return finished_durations(load_runs(uri, names))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tracking-uri", required=True)
    parser.add_argument("--write", action="store_true", help="rewrite igel_exp/costs.yaml's kinds")
    arguments = parser.parse_args()
    kinds = load_kinds(COSTS.read_text())
    fitted = Estimator(durations(arguments.tracking_uri), kinds).rates  # per kind: the runs' seconds per unit
    here = hardware()
    print(f"fitting to the runs timed on this machine's CPU, {here}, where the store has some")
    refitted = {}  # kind index -> its new per_unit_s, for the kinds the store has runs of
    for index, kind in enumerate(kinds):
        runs, where = timed_here(fitted.get(index, []), here)
        if runs:
            refitted[index] = statistics.median(runs)
        match = ", ".join(f"{key}: {value}" for key, value in kind.match.items())
        rate = refitted.get(index, kind.per_unit_s)
        counted = f"{len(runs)} runs{where if runs else ''}"
        print(f"  - {{match: {{{match}}}, start_s: {kind.start_s:g}, per_unit_s: {rate:.4g}}}  # {counted}")
    if arguments.write:  # the refitted kinds' per_unit_s in place: the other kinds and the comments stay as they are
        lines, index = COSTS.read_text().splitlines(keepends=True), 0
        for number, line in enumerate(lines):
            if line.lstrip().startswith("- {match:"):
                if index in refitted:
                    lines[number] = re.sub(r"per_unit_s: [^}]+", f"per_unit_s: {refitted[index]:.4g}", line)
                index += 1
        COSTS.write_text("".join(lines))
        print(f"wrote {COSTS}")


if __name__ == "__main__":
    main()
