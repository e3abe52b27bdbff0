"""igel-scalability-plot: the paper's Figure ScalabilityResults from the scalability runs in MLflow.

    igel-scalability-plot [--output scalability.png] [--metric time_total_s] [--sweep PARENT_RUN_ID ...]

Left: the measure against |V| at average degree `--degree` (8), log-log, one curve per α; right: against the
average degree at |V| = `--nodes` (4,096). Seeds are averaged (error bars: one standard deviation). The
log-log slope of each curve is fitted over [--fit-min, --fit-max] on the left (2^10 to 2^20) and over every
degree on the right; the slopes are printed and shown in the legends. `scalability_report` is the same as
a function, for the report command.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.backend_bases import FigureCanvasBase

from igel_exp import plots
from igel_exp.errors import DataError, IgelError, OneLineParser, StoreError, output_file
from igel_exp.identity import HASH_TAG
from igel_exp.tasks.scalability import seed_means, slopes
from igel_exp.tracking import (
    DEFAULT_STORE,
    HARDWARE_TAG,
    SWEEP_TAG,
    TIMING,
    check_store_uri,
    finished_runs,
    no_store,
    store_exists,
    tracking_uri,
)

NODES = "params.dataset.num_nodes"
DEGREE = "params.dataset.average_degree"
ALPHA = "params.encoder.distance"
LABELS = {"time_total_s": "runtime (s)", "peak_rss_mib": "peak resident memory (MiB)"}


@dataclass
class ScalabilityReport:
    """The two panels' seed means (seed_means tables), their slopes per α, and the figure."""

    by_size: pd.DataFrame
    by_degree: pd.DataFrame
    size_slopes: dict
    degree_slopes: dict
    figure: plt.Figure
    runs: int

    def text(self, fit: tuple[float, float], degree: float, nodes: int, metric: str) -> str:
        """The slopes and the tables, as printed by the command."""
        lines = [f"{self.runs} finished runs; {metric} (mean ± std over seeds, n runs)"]
        for title, table, fitted, where, option in [
            (f"against |V| at average degree {degree:g}", self.by_size, self.size_slopes, f"|V| in {_range(fit)}",
             "--degree"),
            (f"against the average degree at |V| = {nodes}", self.by_degree, self.degree_slopes, "all degrees",
             "--nodes"),
        ]:  # fmt: skip
            if table.empty:  # its panel is empty
                lines.append(f"\n{title}: no run (another {option} picks runs for this panel)")
                continue
            lines.append(f"\n{title}; log-log slope over {where}:")
            lines += [f"  α = {alpha}: {_slope(value)}" for alpha, value in fitted.items()]
            for row in table.itertuples():
                lines.append(f"  α = {row.series}  x = {row.x:>9g}  {row.mean:12.3f} ± {row.std:.3f}  (n = {row.n})")
        return "\n".join(lines)


def _listed(values: pd.Series) -> str:
    return ", ".join(f"{value:g}" for value in sorted(values.unique()))


def _range(fit: tuple[float, float]) -> str:
    return f"[{fit[0]:,.0f}, {fit[1]:,.0f}]"


def _slope(value: float) -> str:
    return f"slope {value:.3f}" if value == value else "no slope: fewer than two sizes in the range"  # NaN


def scalability_report(
    uri: str | None = None,
    experiment: str = "scalability",
    metric: str = "time_total_s",
    degree: float = 8,
    nodes: int = 4096,
    fit: tuple[float, float] = (2**10, 2**20),
    sweeps: list[str] | None = None,
) -> ScalabilityReport:
    """Read the finished Erdős–Rényi runs of `experiment` (only those of `sweeps`, parent run ids, if given)
    and draw both panels of `metric` (a run metric: time_total_s, time_<stage>_s, peak_rss_mib, ...)."""
    given, uri = uri, tracking_uri(uri, key="--tracking-uri")
    check_store_uri(uri, key="--tracking-uri" if given is not None else None)
    if not store_exists(uri):  # reading must not make one
        raise StoreError(no_store(uri))
    runs = finished_runs(experiment, uri)
    if not runs.empty and "params.dataset.name" in runs:
        runs = runs[runs["params.dataset.name"] == "erdos_renyi"]
    if sweeps:
        of = runs.get(f"tags.{SWEEP_TAG}", pd.Series(index=runs.index, dtype=object))
        unknown = [sweep for sweep in dict.fromkeys(sweeps) if sweep not in set(of)]
        if unknown and of.notna().any():  # a mistyped id among good ones vanished; with no sweep at all, see below
            raise DataError(
                f"--sweep {', '.join(unknown)}: no finished Erdős–Rényi run of MLflow experiment {experiment!r} is"
                f" of this sweep; its sweeps: {', '.join(sorted(of.dropna().unique()))}"
            )
        runs = runs[of.isin(sweeps)]
    if not runs.empty and f"tags.{HASH_TAG}" in runs:
        # one run per config (seed included), the latest, as igel-report counts them: a point that two sweeps
        # share (|V| = 4,096 at degree 8) is one measurement per seed, not two
        tagged = runs[f"tags.{HASH_TAG}"].notna()
        latest = runs[tagged].sort_values("start_time").drop_duplicates(f"tags.{HASH_TAG}", keep="last")
        runs = pd.concat([latest, runs[~tagged]])
    if runs.empty:
        raise DataError(
            f"no finished Erdős–Rényi runs in MLflow experiment {experiment!r}"
            f"{' for sweeps ' + ', '.join(sweeps) if sweeps else ''}: run the sweeps of experiments/scalability_*.yaml"
        )
    value = f"metrics.{metric}"
    if value not in runs:
        raise DataError(f"the runs have no metric {metric!r}; try time_total_s, time_train_s or peak_rss_mib")
    _check_same_settings(runs)
    if metric.startswith(TIMING):
        _check_same_hardware(runs)
    runs = runs.assign(**{key: pd.to_numeric(runs[key]) for key in (NODES, DEGREE, ALPHA)}).dropna(subset=[value])
    by_size = seed_means(runs[runs[DEGREE] == degree], NODES, ALPHA, value)
    by_degree = seed_means(runs[runs[NODES] == nodes], DEGREE, ALPHA, value)
    if by_size.empty and by_degree.empty:  # an empty figure
        raise DataError(
            f"no run at average degree {degree:g} (--degree) nor at |V| = {nodes} (--nodes): the runs have degrees"
            f" {_listed(runs[DEGREE])} and sizes {_listed(runs[NODES])}"
        )
    size_slopes, degree_slopes = slopes(by_size, *fit), slopes(by_degree)
    panels = [
        {
            "table": by_size,
            "slopes": size_slopes,
            "fit": fit,
            "xlabel": "|V| (nodes)",
            "title": f"Erdős–Rényi, average degree {degree:g}",
        },
        {
            "table": by_degree,
            "slopes": degree_slopes,
            "fit": (0, float("inf")),
            "xlabel": "average degree",
            "title": f"Erdős–Rényi, |V| = {nodes:,}",
        },
    ]
    figure = plots.scalability_panels(panels, LABELS.get(metric, metric))
    return ScalabilityReport(by_size, by_degree, size_slopes, degree_slopes, figure, len(runs))


def _check_same_settings(runs: pd.DataFrame) -> None:
    """Runs of one figure differ only in size, degree, α and seed: mixing trainer settings or thread counts
    would mislead."""
    for column in sorted(runs.columns):
        if not (column.startswith(("params.trainer.", "params.encoder.")) or column == "params.threads"):
            continue
        if column == ALPHA:
            continue
        values = runs[column].dropna().unique()
        if len(values) > 1:
            raise DataError(
                f"the runs differ in {column.removeprefix('params.')} ({', '.join(map(str, sorted(values)))}):"
                " pick the sweeps to plot with --sweep PARENT_RUN_ID"
            )


def _check_same_hardware(runs: pd.DataFrame) -> None:
    """Timings of runs on different hardware (a cluster's nodes, a shared machine whose host changed) make no curve.
    Runs made before igel-exp tagged their hardware are not counted."""
    kinds = runs.get(f"tags.{HARDWARE_TAG}", pd.Series(dtype=object)).dropna().unique()
    if len(kinds) > 1:
        raise DataError(
            f"the runs ran on {len(kinds)} kinds of hardware ({'; '.join(sorted(kinds))}), whose timings do not"
            " compare: pick the sweeps to plot with --sweep PARENT_RUN_ID"
        )


def main(argv: list[str] | None = None) -> None:
    parser = OneLineParser(prog="igel-scalability-plot", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tracking-uri", help=f"MLflow store (default: {DEFAULT_STORE})")
    parser.add_argument("--experiment", default="scalability", help="MLflow experiment (default: scalability)")
    parser.add_argument("--metric", default="time_total_s", help="run metric to plot (default: time_total_s)")
    parser.add_argument("--degree", type=float, default=8, help="average degree of the |V| panel (default: 8)")
    parser.add_argument("--nodes", type=int, default=4096, help="|V| of the degree panel (default: 4096)")
    parser.add_argument("--fit-min", type=float, default=2**10, help="smallest |V| of the slope fit (default: 1024)")
    parser.add_argument("--fit-max", type=float, default=2**20, help="largest |V| of the slope fit (default: 2^20)")
    parser.add_argument("--sweep", action="append", help="only the jobs of this sweep (parent run id); repeatable")
    parser.add_argument(
        "--output", type=output_file, default="scalability.png", help="figure file (default: scalability.png)"
    )
    args = parser.parse_args(argv)
    if args.output is None:
        parser.error("--output -: a figure is written to a file, not to standard output")
    output = args.output if args.output.suffix else args.output.with_suffix(".png")  # the file matplotlib writes
    formats = FigureCanvasBase.get_supported_filetypes()
    if output.suffix[1:].lower() not in formats:
        parser.error(f"--output {output}: not a figure format matplotlib writes ({', '.join(sorted(formats))})")
    if not args.degree >= 0 or args.nodes < 1 or not 0 < args.fit_min <= args.fit_max:  # NaN too
        parser.error("--degree must be ≥ 0, --nodes ≥ 1, and 0 < --fit-min ≤ --fit-max")
    fit = (args.fit_min, args.fit_max)
    try:
        report = scalability_report(
            args.tracking_uri, args.experiment, args.metric, args.degree, args.nodes, fit, args.sweep
        )
    except IgelError as error:
        sys.exit(f"igel-scalability-plot: error: {error}")
    print(report.text(fit, args.degree, args.nodes, args.metric))
    try:
        report.figure.savefig(output, dpi=150)
    except OSError as error:
        sys.exit(f"igel-scalability-plot: error: --output {output}: cannot write it ({error.strerror or error})")
    finally:
        plt.close(report.figure)
    print(f"\nfigure: {output}")


if __name__ == "__main__":
    main()
