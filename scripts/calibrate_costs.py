"""Refit igel-reproduce's cost model (igel_exp/costs.yaml) to the FINISHED runs of an MLflow store.

    python scripts/calibrate_costs.py --tracking-uri sqlite:///mlflow.db [--write]

For each kind of costs.yaml that the store has runs of, per_unit_s becomes the median of (duration - start_s) / work
over those runs (start_s is kept: it is the part of a run that does not grow with the work); the other kinds keep
their numbers. Prints the kinds with the number of runs behind each; --write rewrites igel_exp/costs.yaml's kinds
(its comment stays: update its date and machine). Run it after the trainer changes or on another kind of machine,
on a store where tables ran one job at a time (e.g. `igel-reproduce all --profile quick`, then a few full tables).
"""

from __future__ import annotations

import argparse
import re
import statistics
from pathlib import Path

import mlflow
from mlflow.entities import ViewType

from igel_exp.estimate import Duration, Estimator, load_kinds

COSTS = Path(__file__).resolve().parents[1] / "igel_exp" / "costs.yaml"


def durations(uri: str) -> list[Duration]:
    client = mlflow.MlflowClient(tracking_uri=uri)
    ids = [experiment.experiment_id for experiment in client.search_experiments()]
    runs = client.search_runs(ids, "attributes.status = 'FINISHED'", ViewType.ACTIVE_ONLY, max_results=50000)
    return [
        Duration(run.data.params, (run.info.end_time - run.info.start_time) / 1000)
        for run in runs
        if run.info.end_time and "igel.config_hash" in run.data.tags
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tracking-uri", required=True)
    parser.add_argument("--write", action="store_true", help="rewrite igel_exp/costs.yaml's kinds")
    arguments = parser.parse_args()
    kinds = load_kinds(COSTS.read_text())
    fitted = Estimator(durations(arguments.tracking_uri), kinds).rates  # per kind: the runs' seconds per unit
    lines = []
    for index, kind in enumerate(kinds):
        rates = fitted.get(index, [])
        rate = statistics.median(rates) if rates else kind.per_unit_s
        match = ", ".join(f"{key}: {value}" for key, value in kind.match.items())
        lines.append(f"  - {{match: {{{match}}}, start_s: {kind.start_s:g}, per_unit_s: {rate:.4g}}}")
        print(f"{lines[-1]}  # {len(rates)} runs")
    if arguments.write:
        text = COSTS.read_text()
        COSTS.write_text(re.sub(r"(?ms)^kinds:\n.*", "kinds:\n" + "\n".join(lines) + "\n", text))
        print(f"wrote {COSTS}")


if __name__ == "__main__":
    main()
