"""The paper's tables from MLflow runs: the paper's value, ours (mean ± std over seeds, n) and the difference.

A table's runs are found by identity, never by name or by sweep: the plan (igel_exp.plan) says which configs
make the table, and a run belongs to it when its `igel.config_hash` tag is one of theirs, whichever command
made it (igel-run, igel-run -m, igel-reproduce). Of several FINISHED runs of one config the latest counts,
so a seed is counted once. Runs that differ only in their seed form a grid point, whose metrics are averaged;
where the file has `select`, each cell reports the grid point with the best mean of the validation metric it
names. This module aggregates what the runs logged; it computes no metric of its own.

A plan that runs several protocols (conf/protocol: the paper's computation, the authors' code path) gets a column of
ours per protocol beside the paper's value. A cell matches the paper when the paper's value lies within our range over
seeds, widened by half a unit of the paper's printed precision; a paper value that is a mean of several runs, within
our prediction interval of such a mean (Cell.judged_range). Even a perfect reproduction matches fewer than all
cells, its run lying outside our seeds' range as often as it would be their new extreme: with 3 seeds or more a table
also gives how many cells a run exchangeable with ours would match (Table.chance). Each table ends with a verdict:
reproduced (on the faithful path, at least MATCHED_SHARE as many cells match as that run would match, or as there are
cells where seeds are too few to tell), reproduced only on the authors' path, or not reproduced, with the reasons its
experiments/ file gives (reproduce.verdict).
"""

from __future__ import annotations

import csv
import difflib
import functools
import html
import io
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from mlflow.entities import ViewType
from mlflow.tracking import MlflowClient

from igel_exp.errors import ConfigError
from igel_exp.identity import ADDED_DEFAULTS, HASH_TAG, NOT_IDENTITY, REUSED_TAG
from igel_exp.plan import DEFAULT_PROTOCOL, PAPER_RUNS, Column, Job, Plan, cached_plan, matches, protocol_of, same_value
from igel_exp.tracking import HARDWARE_TAG, TIMING, deleted, store_call, store_exists

FORMATS = ("markdown", "csv", "html")
SUFFIXES = {".md": "markdown", ".markdown": "markdown", ".csv": "csv", ".html": "html", ".htm": "html"}
MISSING_SHOWN = 12  # missing runs listed per reason; the rest are counted
METRICS_SHOWN = 6  # a column's metric that no run has: the runs' metrics named in its error, the closest first
MATCHED_SHARE = 0.75  # of the cells a perfect reproduction would match (Table.chance), to call a table reproduced
# float noise allowed in Table.chance when it is weighed: its shares are i/n, so a bar truly above k matches is above
# it by 0.75 / lcm of the cells' seed counts at least (over 3e-9 for any counts up to 20)
BAR_NOISE = 1e-9
# a paper value that is the mean of several runs (reproduce.paper's `runs`) is judged against our prediction interval of
# such a mean at this level, and a perfect reproduction lies within it this often
PREDICTION = 0.95


@dataclass(frozen=True)
class StoredRun:
    """What the report needs of an MLflow run."""

    run_id: str
    status: str
    start_time: int
    hash: str
    metrics: Mapping[str, float]
    error: str | None = None
    params: Mapping[str, str] = field(default_factory=dict)  # the flattened config, as MLflow keeps it (strings)
    end_time: int = 0  # ms, 0 while running
    reused: bool = False  # took its embeddings from another run (task.reuse_embeddings): it did not train
    hardware: str = ""  # what it ran on (tag device_name, training.hardware; "" for runs made before the tag)

    @property
    def seconds(self) -> float | None:
        """The run's wall time, once it has ended."""
        return (self.end_time - self.start_time) / 1000 if self.end_time and self.start_time else None


@dataclass(frozen=True)
class Aggregate:
    """A metric over the seeds of one grid point: mean, sample standard deviation (None for one run), n, min, max."""

    mean: float
    std: float | None
    n: int
    low: float = math.nan
    high: float = math.nan
    values: tuple[float, ...] = ()  # each seed's


@dataclass
class Cell:
    paper: float | None
    ours: Aggregate | None
    chosen: str | None = None  # the grid point `select` chose, as its overrides
    planned: bool = True  # false for a cell of no job of the plan (reproduce.skip's), which never gets ours
    ran: bool = False  # every job of its grid point has a FINISHED run: without ours, none logged a value (NaN)
    paper_runs: int = 1  # the runs the paper's value averages (reproduce.paper's `runs`)

    @property
    def diff(self) -> float | None:
        if self.paper is None or self.ours is None:
            return None
        return self.ours.mean - self.paper

    @property
    def of_mean(self) -> bool:
        """Whether the paper's value, a mean of several runs, is judged against our prediction interval of such a mean
        (`judged_range`): with 2 seeds of ours or more."""
        return self.paper_runs > 1 and self.ours is not None and self.ours.n > 1

    @property
    def judged_range(self) -> tuple[float, float] | None:
        """What the paper's value is judged against: our min–max over seeds, for a value of one run; for a mean of m
        runs (`of_mean`), our PREDICTION interval of a mean of m more: mean ± t·s·√(1/n + 1/m), t Student's of n − 1
        degrees of freedom. Our min–max would be lenient there: five seeds' min–max holds a mean of five more runs some
        86 % of the time, one run 67 %. None without ours."""
        if self.ours is None:
            return None
        if not self.of_mean:
            return self.ours.low, self.ours.high
        from scipy.special import stdtrit  # Student's t quantile; scipy.stats costs igel-report's start 0.3 s

        n, m = self.ours.n, self.paper_runs
        half = float(stdtrit(n - 1, (1 + PREDICTION) / 2)) * self.ours.std * math.sqrt(1 / n + 1 / m)
        return self.ours.mean - half, self.ours.mean + half

    @property
    def matched(self) -> bool | None:
        """Whether the paper's value lies within `judged_range` (our min–max over seeds for a value of one run), widened
        by half a unit of its last printed digit (the paper rounds); None without both values."""
        if self.paper is None or self.ours is None:
            return None
        return _within(self.paper, *self.judged_range, _paper_digits(self.paper))

    @property
    def chance(self) -> float | None:
        """How often a run exchangeable with ours — the paper's own, were our computation exactly theirs — would match:
        the share of our seeds whose value, printed as the paper prints, lies within the other seeds' range as
        `matched` widens it. Estimated from n − 1 seeds, a little below what n give (for continuous values,
        (n − 2)/n against (n − 1)/(n + 1): 0.60 against 0.67 at 5 seeds). For a paper value that is a mean (`of_mean`),
        PREDICTION: how often such a mean lies within our interval. None without the paper's value or 3 seeds (2 for
        a mean)."""
        if self.paper is not None and self.of_mean:
            return PREDICTION
        if self.paper is None or self.ours is None or len(self.ours.values) < 3:
            return None
        values, digits = self.ours.values, _paper_digits(self.paper)
        inside = 0
        for i, value in enumerate(values):
            others = values[:i] + values[i + 1 :]
            inside += _within(round(value, digits), min(others), max(others), digits)
        return inside / len(values)


@dataclass(frozen=True)
class Missing:
    """A planned run without a FINISHED run in the store, and why, as far as the store knows."""

    shown: str
    reason: str


@dataclass
class Table:
    plan: Plan
    rows: list[tuple]
    cells: dict[tuple[int, str, str], Cell]  # (row index, column title, protocol)
    missing: list[Missing]
    planned: int
    notes: list[str] = field(default_factory=list)
    rerun: str = ""  # the options and overrides, as given, of the igel-reproduce that runs the missing jobs

    @property
    def complete(self) -> bool:
        return not self.missing

    @property
    def protocols(self) -> list[str]:
        return self.plan.protocols

    def matches(self, protocol: str) -> tuple[int, int]:
        """(cells whose paper value lies within our seed range, cells with a paper value and ours) of a protocol."""
        judged = [cell.matched for (_, _, of), cell in self.cells.items() if of == protocol]
        judged = [value for value in judged if value is not None]
        return sum(judged), len(judged)

    def chance(self, protocol: str) -> float | None:
        """The cells of a protocol that a run exchangeable with ours would match, Cell.chance summed over the cells that
        `matches` counts (a cell of fewer than 3 seeds counts whole): what a perfect reproduction scores. None where no
        cell has 3 seeds."""
        judged = [cell for (_, _, of), cell in self.cells.items() if of == protocol and cell.matched is not None]
        shares = [cell.chance for cell in judged]
        if all(share is None for share in shares):
            return None
        return sum(1.0 if share is None else share for share in shares)

    @property
    def verdict(self) -> str:
        """One line: reproduced, reproduced only on the authors' path (why), or not reproduced (what was ruled out)."""
        counts = {protocol: self.matches(protocol) for protocol in self.protocols}
        if not self.plan.spec.paper:
            return "nothing to compare: the paper has no values for this table"
        totals = {p: self.paper_cells(p) for p in counts}
        # a cell whose runs all finished without a value (a NaN gain, an unlogged ρ) awaits nothing: it is no run yet
        valueless = {p: self.valueless_cells(p) for p in counts}
        if not any(total for _, total in counts.values()):
            if any(valueless.values()) and sum(valueless.values()) == sum(totals.values()):
                shown = ", ".join(f"{_protocol_name(p)} in {k} cells" for p, k in valueless.items() if k)
                return f"no cell has both the paper's value and ours: finished runs without a value: {shown}"
            return "no cell has both the paper's value and ours yet"
        shown = ", ".join(f"{_protocol_name(p)} {k}/{n}" for p, (k, n) in counts.items())
        tally = f"{shown} cells within our range over seeds"
        chances = {p: chance for p in self.protocols if (chance := self.chance(p)) is not None}
        if chances:
            expected = ", ".join(f"{_protocol_name(p)} {chance:.1f}" for p, chance in chances.items())
            tally += f"; a run exchangeable with ours would match {expected}"
        # the bar: MATCHED_SHARE of what a perfect reproduction matches (every cell, where seeds are too few to tell)
        # (within float noise: fifteen shares of 0.8 sum to 12.000000000000002; 9 matches met 3/4 of 12 but not that)
        reproduced = [p for p, (k, n) in counts.items() if n and k >= MATCHED_SHARE * chances.get(p, n) - BAR_NOISE]
        # cells of the paper without ours yet: a protocol with none neither matched nor missed; one with some is judged
        # so far (its 3/4 cells of the 16 read as reproduced, the other 12 unsaid)
        unrun = {p: totals[p] - n - valueless[p] for p, (_, n) in counts.items() if totals[p] > n + valueless[p]}
        if any(valueless.values()):
            shown = ", ".join(f"{_protocol_name(p)} in {k} of {totals[p]} cells" for p, k in valueless.items() if k)
            tally += f"; finished runs without a value: {shown}"
        if unrun:
            pending = [
                f"{_protocol_name(p)}{f' in {left} of {totals[p]} cells' if counts[p][1] or valueless[p] else ''}"
                for p, left in unrun.items()
            ]
            tally += f"; no runs yet: {', '.join(pending)}"
        reasons = self.plan.spec.verdict
        if DEFAULT_PROTOCOL in reproduced:
            return f"reproduced{' so far' * (DEFAULT_PROTOCOL in unrun)} ({tally})"
        if reproduced:
            why = f": {reasons['authors']}" if "authors" in reasons else ""
            only = " only" if counts.get(DEFAULT_PROTOCOL, (0, 0))[1] else ""  # the faithful path ran, and missed
            so_far = " so far" if any(p in unrun for p in reproduced) else ""
            return f"reproduced{only}{so_far} on the authors' path ({tally}){why}"
        # the reasons of the protocols this verdict speaks about: a table cut to one (protocol=authors) gave the other's
        ruled_out = "" if unrun else "".join(_ruled_out(self.plan.spec.ruled_out_of(self.protocols)))
        return f"not reproduced{' so far' * any(counts[p][1] for p in unrun)} ({tally}){ruled_out}"

    def paper_cells(self, protocol: str) -> int:
        """The cells of a protocol that have the paper's value and a job of the plan: those the verdict judges once
        they have ours."""
        return sum(cell.paper is not None and cell.planned for (_, _, of), cell in self.cells.items() if of == protocol)

    def valueless_cells(self, protocol: str) -> int:
        """The cells of `paper_cells` whose runs all finished and none has a value: never judged, and not awaited."""
        cells = [cell for (_, _, of), cell in self.cells.items() if of == protocol]
        return sum(cell.paper is not None and cell.planned and cell.ours is None and cell.ran for cell in cells)


@store_call()
def load_runs(uri: str, experiments: Iterable[str]) -> list[StoredRun]:
    """The active runs (any status) of the MLflow experiments that carry an identity tag."""
    if not store_exists(uri):
        return []
    client = MlflowClient(tracking_uri=uri)
    ids = [found.experiment_id for name in experiments if (found := client.get_experiment_by_name(name))]
    runs: list[StoredRun] = []
    token = None
    while ids:
        page = client.search_runs(ids, run_view_type=ViewType.ACTIVE_ONLY, max_results=10000, page_token=token)
        for run in page:
            identity = run.data.tags.get(HASH_TAG)
            if identity:
                runs.append(
                    StoredRun(
                        run.info.run_id,
                        run.info.status,
                        run.info.start_time or 0,
                        identity,
                        dict(run.data.metrics),
                        run.data.tags.get("error"),
                        dict(run.data.params),
                        run.info.end_time or 0,
                        REUSED_TAG in run.data.tags,
                        run.data.tags.get(HARDWARE_TAG, ""),
                    )
                )
        token = page.token
        if not token:
            break
    return runs


@store_call()
def deleted_experiments(uri: str, experiments: Iterable[str]) -> list[str]:
    """A line for each of the experiments that the store holds deleted: their runs, hidden, read as never run."""
    if not store_exists(uri):
        return []
    client = MlflowClient(tracking_uri=uri)
    found = [client.get_experiment_by_name(name) for name in experiments]
    return [why for experiment in found if (why := deleted(experiment, uri, ", so its runs count as not run"))]


def finished_by_hash(runs: Iterable[StoredRun]) -> dict[str, StoredRun]:
    """The latest FINISHED run of each identity."""
    latest: dict[str, StoredRun] = {}
    for run in runs:
        if run.status == "FINISHED" and (run.hash not in latest or run.start_time > latest[run.hash].start_time):
            latest[run.hash] = run
    return latest


def aggregate(values: Iterable[float]) -> Aggregate | None:
    """Mean, sample std (ddof=1; None for a single value), count, min and max of the finite values; None if none."""
    finite = [float(value) for value in values if value is not None and math.isfinite(value)]
    if not finite:
        return None
    mean = sum(finite) / len(finite)
    std = math.sqrt(sum((value - mean) ** 2 for value in finite) / (len(finite) - 1)) if len(finite) > 1 else None
    return Aggregate(mean, std, len(finite), min(finite), max(finite), tuple(finite))


def point_metric(jobs: Sequence[Job], finished: Mapping[str, StoredRun], metric: str) -> Aggregate | None:
    """A metric of one grid point, over the seeds that have a FINISHED run."""
    return aggregate(finished[job.hash].metrics.get(metric, math.nan) for job in jobs if job.hash in finished)


def best_point(
    points: Mapping[str, Sequence[Job]], finished: Mapping[str, StoredRun], metric: str, mode: str
) -> str | None:
    """The grid point whose seeds' mean of `metric` is the highest (mode max) or lowest (min); None if none has it."""
    scored = {point: point_metric(jobs, finished, metric) for point, jobs in points.items()}
    scored = {point: value.mean for point, value in scored.items() if value is not None}
    if not scored:
        return None
    choose = max if mode == "max" else min
    return choose(scored, key=scored.__getitem__)


Cells = dict[tuple[tuple, str, str], dict[str, list[Job]]]  # (row, column, protocol) -> grid point -> its seeds' jobs


def cell_points(plan: Plan) -> Cells:
    """The grid points of every cell of the plan's table — (row, column, protocol) — each with the jobs of its seeds."""
    cells: Cells = {}
    for job in plan.jobs:
        for column in plan.spec.columns:
            if matches(job.flat, column.where):
                key = (plan.row_key(job), column.title, protocol_of(job))
                cells.setdefault(key, {}).setdefault(job.point, []).append(job)
    return cells


def chosen_points(
    plan: Plan, cells: Cells, finished: Mapping[str, StoredRun]
) -> dict[tuple[tuple, str, str], str | None]:
    """The grid point each cell reports: its only one, or the best on the selection seeds' validation metric."""
    select = plan.spec.select
    if select is None:
        return {cell: next(iter(points)) for cell, points in cells.items()}  # plan.check_cells: one point per cell
    return {
        cell: best_point(
            {point: [job for job in jobs if plan.selects(job)] for point, jobs in points.items()},
            finished,
            select.metric,
            select.mode,
        )
        for cell, points in cells.items()
    }


def planned_jobs(plan: Plan, finished: Mapping[str, StoredRun]) -> tuple[list[Job], int]:
    """The jobs the table needs as far as the store tells, and how many more its selections will add.

    Without select.seeds, every job of the sweep. With them, the selection jobs and the other seeds of each cell's
    chosen point; a cell not chosen yet (no finished selection run) will add its point's other seeds, counted once
    per set of candidate points (the columns of a row share their choice)."""
    if plan.spec.select is None or not plan.spec.select.seeds:
        return list(plan.jobs), 0
    cells = cell_points(plan)
    chosen = chosen_points(plan, cells, finished)
    wanted = {point for point in chosen.values() if point is not None}
    pending = {
        frozenset(cells[cell]): max(sum(not plan.selects(job) for job in jobs) for jobs in cells[cell].values())
        for cell, point in chosen.items()
        if point is None
    }
    return [job for job in plan.jobs if plan.selects(job) or job.point in wanted], sum(pending.values())


def build_table(plan: Plan, runs: Iterable[StoredRun], notes: Sequence[str] = (), rerun: str = "") -> Table:
    """The plan's table from the store's runs: paper, ours and Δ per cell; the planned runs that are missing."""
    runs = list(runs)
    finished = finished_by_hash(runs)
    check_metrics(plan, finished)
    spec = plan.spec
    rows = _row_order(plan)
    points_of = cell_points(plan)
    chosen_of = chosen_points(plan, points_of, finished)
    cells: dict[tuple[int, str, str], Cell] = {}
    valueless: list[str] = []  # cells some of whose finished runs have no value to average
    for index, row in enumerate(rows):
        paper_row = next((entry for entry in spec.paper if _same_row(plan, entry, row)), {})
        for protocol in plan.protocols:
            for column in spec.columns:
                key = (row, column.title, protocol)
                points, chosen = points_of.get(key, {}), chosen_of.get(key)
                ours = point_metric(points[chosen], finished, column.metric) if chosen else None
                ran, counted = sum(job.hash in finished for job in points.get(chosen, ())), ours.n if ours else 0
                if ran > counted:
                    where = f"{_row_label(plan, row)}, {column.title}{_protocol_suffix(protocol)}"
                    valueless.append(f"{where}: {ran - counted} of {ran}")
                described = _describe(plan, column, points[chosen][0]) if chosen and spec.select is not None else None
                paper = paper_row.get(column.title)
                complete = bool(chosen) and all(job.hash in finished for job in points[chosen])
                cells[index, column.title, protocol] = Cell(
                    float(paper) if paper is not None else None,
                    ours,
                    described,
                    bool(points),
                    complete,
                    paper_row.get(PAPER_RUNS, 1),
                )
    outside = [entry for entry in spec.paper if not any(_same_row(plan, entry, row) for row in rows)]
    notes = list(notes)
    if valueless:  # a NaN or unlogged metric (a ρ of constant scores, a gain over a degree F1 of 0) drops its seed
        more = f"; … and {len(valueless) - MISSING_SHOWN} more" if len(valueless) > MISSING_SHOWN else ""
        notes.append(
            f"finished runs without a value, left out of their cell's seeds: {'; '.join(valueless[:MISSING_SHOWN])}"
            f"{more}"
        )
    if outside:
        labels = [_row_label(plan, tuple(entry[key] for key in spec.rows)) for entry in outside]
        more = f"; … and {len(labels) - MISSING_SHOWN} more" if len(labels) > MISSING_SHOWN else ""
        sweep = "this sweep (its overrides)" if plan.setting_overrides else "this profile's sweep"
        notes.append(f"paper rows that {sweep} does not run: {'; '.join(labels[:MISSING_SHOWN])}{more}")
    if any(column.metric.startswith(TIMING) for column in spec.columns):
        timed = [finished[job.hash] for job in plan.jobs if job.hash in finished]
        notes += hardware_notes(timed) + thread_notes(timed)
    planned, pending = planned_jobs(plan, finished)
    if pending:
        notes.append(f"{pending} more runs, the chosen points' other seeds, are planned once the selection has run")
    return Table(plan, rows, cells, _missing(plan, planned, runs, finished), len(planned) + pending, notes, rerun)


def hardware_notes(runs: Sequence[StoredRun]) -> list[str]:
    """What a table's timed runs ran on: timings compare only on the same hardware (a cluster's nodes differ, and a
    shared machine's host changes from day to day)."""
    counts: dict[str, int] = {}
    for run in runs:
        name = run.hardware or "hardware not recorded (runs made before igel-exp tagged it)"
        counts[name] = counts.get(name, 0) + 1
    if len(counts) <= 1:
        return [f"timed on {name}" for name in counts]
    ranked = sorted(counts.items(), key=lambda item: -item[1])
    kinds = "; ".join(f"{name}: {count} run{'s' * (count > 1)}" for name, count in ranked)
    return [f"timed on {len(counts)} kinds of hardware, whose timings do not compare: {kinds}"]


def thread_notes(runs: Sequence[StoredRun]) -> list[str]:
    """What a table's timed runs ran with when their thread counts differ: `threads` is no part of a run's identity
    (it changes speed only), so seeds run with threads=1 and threads=2 share a cell, whose timings do not compare."""
    counts: dict[str, int] = {}
    for run in runs:
        name = f"threads={run.params['threads']}" if "threads" in run.params else "threads not recorded"
        counts[name] = counts.get(name, 0) + 1
    if len(counts) <= 1:
        return []
    ranked = sorted(counts.items(), key=lambda item: -item[1])
    kinds = "; ".join(f"{name}: {count} run{'s' * (count > 1)}" for name, count in ranked)
    return [f"timed with {len(counts)} thread counts, whose timings do not compare: {kinds}"]


def check_metrics(plan: Plan, finished: Mapping[str, StoredRun]) -> None:
    """Refuse a column whose metric none of its FINISHED runs logged: a misspelled name, whose cells would all be empty.
    Without finished runs nothing can be told."""
    for column in plan.spec.columns:
        runs = [finished[job.hash] for job in plan.jobs if job.hash in finished and matches(job.flat, column.where)]
        if not runs or any(column.metric in run.metrics for run in runs):
            continue
        logged = sorted({name for run in runs for name in run.metrics})
        closest = ", ".join(difflib.get_close_matches(column.metric, logged, n=METRICS_SHOWN, cutoff=0))
        which = f"the closest of the {len(logged)} metrics" if len(logged) > METRICS_SHOWN else "the metrics"
        raise ConfigError(
            f"{plan.path.name}: reproduce.columns.{column.title}: no run of the table has the metric {column.metric!r};"
            + (f" {which} its runs have: {closest}" if logged else " its runs have no metric")
        )


def _within(value: float, low: float, high: float, digits: int) -> bool:
    """Whether `value` lies within [low, high] widened by half a unit of the last of `digits` decimals (the paper's)."""
    # in units of that decimal, rounded off float noise: a seed exactly half a unit away is within, on either side
    # (0.7535 + 0.0005 is 0.75399…, which left the paper's 0.754 out, where 0.7915 - 0.0005 let 0.791 in)
    scale = 10.0**digits
    return round((low - value) * scale, 6) <= 0.5 and round((value - high) * scale, 6) <= 0.5


def _ruled_out(reasons: Sequence[tuple[str | None, str]]) -> Iterator[str]:
    """A verdict's `; ruled out: …` parts: a reason of every protocol as it is; one protocol's own named with its path
    (`; ruled out on the faithful path: X; on the authors' path: Y`)."""
    for number, (protocol, reason) in enumerate(reasons):
        said = ["ruled out"] if number == 0 else []
        if protocol is not None:
            said.append("on the authors' path" if protocol == "authors" else f"on the {protocol} path")
        yield f"; {' '.join(said)}: {reason}"


def _protocol_name(protocol: str) -> str:
    return "faithful" if protocol == DEFAULT_PROTOCOL else f"{protocol}' path" if protocol == "authors" else protocol


def _row_order(plan: Plan) -> list[tuple]:
    """The paper's rows in the paper's order, then the sweep's other rows in sweep order."""
    planned: list[tuple] = []
    for job in plan.jobs:
        key = plan.row_key(job)
        if not any(_same_key(key, seen) for seen in planned):
            planned.append(key)
    ordered = [row for entry in plan.spec.paper for row in planned if _same_row(plan, entry, row)]
    return ordered + [row for row in planned if not any(_same_key(row, seen) for seen in ordered)]


def _same_key(ours: tuple, theirs: tuple) -> bool:
    return len(ours) == len(theirs) and all(same_value(a, b) for a, b in zip(ours, theirs, strict=True))


def _same_row(plan: Plan, entry: Mapping, row: tuple) -> bool:
    return _same_key(tuple(entry.get(key) for key in plan.spec.rows), row)


def _describe(plan: Plan, column: Column, job: Job) -> str:
    """A chosen grid point as the overrides that set it apart within its cell."""
    fixed = {"seed", "protocol", *plan.spec.rows, *column.where}
    return " ".join(item for item in job.shown.split() if item.split("=", 1)[0] not in fixed)


def _missing(
    plan: Plan, planned: Sequence[Job], runs: list[StoredRun], finished: Mapping[str, StoredRun]
) -> list[Missing]:
    latest: dict[str, StoredRun] = {}
    for run in runs:
        if run.hash not in latest or run.start_time > latest[run.hash].start_time:
            latest[run.hash] = run
    # a finished run with the job's swept values and row keys but another identity is this job under settings that
    # have changed since (a config default, a specialise/ file): say so, or the table looks merely unrun
    swept = {job.hash for job in plan.jobs}
    others = [run for run in runs if run.status == "FINISHED" and run.hash not in swept]
    fixed = [*plan.spec.rows, *(key for column in plan.spec.columns for key in column.where)]
    quick_jobs = _QuickJobs(plan)
    missing = []
    for job in planned:
        if job.hash in finished:
            continue
        attempt = latest.get(job.hash)
        keys = [*fixed, *(key for key in (item.split("=", 1)[0] for item in job.overrides) if key in job.flat)]
        stale = [run for run in others if all(run.params.get(key) == str(job.flat.get(key)) for key in keys)]
        if attempt is None and stale:
            # the quick profile's run of a full table's job is no config changed since (a quick job's own overrides
            # keep the full runs out of `stale`)
            quick = [run for run in stale if run.hash in quick_jobs.hashes]
            changed = _changed_keys(job, max(quick or stale, key=lambda run: run.start_time))
            listed = ", ".join(changed[:4]) + (", …" if len(changed) > 4 else "")
            if quick:
                reason = (
                    f"not run; the store has its quick profile's run, cut down (other {listed}), which --profile quick"
                    " reports"
                )
            else:
                reason = f"not run with the current config (a finished run of it has other {listed})"
        elif attempt is None:
            reason = "not run"
        elif attempt.status == "RUNNING":
            reason = "running (or its process was killed)"
        else:
            error = attempt.error.splitlines()[0] if attempt.error else "no error recorded"
            reason = f"{attempt.status.lower()} ({error})"
        missing.append(Missing(job.shown or "(the only job)", reason))
    return missing


class _QuickJobs:
    """The identities of the jobs of a full table's quick profile, with the same overrides: its runs are cut down, not
    runs of a config changed since. Expanded when first asked for (from the plan cache, where the quick profile ran or
    was reported before); none for a quick table, or a file without a quick profile."""

    def __init__(self, plan: Plan):
        self.plan = plan

    @functools.cached_property
    def hashes(self) -> set[str]:
        if self.plan.profile == "quick":
            return set()
        try:
            return {job.hash for job in cached_plan(self.plan.path, "quick", self.plan.overrides).jobs}
        except ConfigError:  # no reproduce.quick, or overrides that the quick profile cannot take
            return set()


def _changed_keys(job: Job, run: StoredRun) -> list[str]:
    """The identity keys whose value in `run` differs from the job's."""

    def counts(key: str) -> bool:
        return not any(key == skip or key.startswith(f"{skip}.") for skip in NOT_IDENTITY)

    def differs(key: str) -> bool:
        ours = str(job.flat[key]) if key in job.flat else None
        if key not in run.params and key in ADDED_DEFAULTS and job.flat.get(key) == ADDED_DEFAULTS[key]:
            return False  # a key added since, at the value the run computed with
        return run.params.get(key) != ours

    keys = sorted({*job.flat, *run.params})
    return [key for key in keys if counts(key) and differs(key)]


# Rendering


def render(tables: Sequence[Table], fmt: str) -> str:
    """The tables as one Markdown, CSV (one line per cell) or HTML document."""
    if fmt == "markdown":
        return "\n\n".join(markdown(table) for table in tables) + "\n"
    if fmt == "csv":
        return to_csv(tables)
    if fmt == "html":
        body = "\n".join(to_html(table) for table in tables)
        head = '<head><meta charset="utf-8"><title>IGEL tables</title></head>'
        return f"<!doctype html>\n<html>{head}<body>\n{body}\n</body></html>\n"
    raise ValueError(f"unknown format {fmt!r}")


def title(table: Table) -> str:
    plan = table.plan
    profile = " — quick profile" if plan.profile == "quick" else ""
    overridden = " — with overrides" if plan.setting_overrides else ""
    return f"{plan.spec.table} ({plan.name}){profile}{overridden}"


def explanation(table: Table) -> list[str]:
    """The lines under a table's title: caption, profile, how cells are computed."""
    plan, spec = table.plan, table.plan.spec
    lines = [f"{spec.caption} — experiments/{plan.path.name}" if spec.caption else f"experiments/{plan.path.name}"]
    if plan.profile == "quick":
        quick = spec.quick or {}
        changes = [f"{key}={value}" for key, value in (quick.get("params") or {}).items()]
        changes += [str(item) for item in quick.get("overrides") or []]
        lines.append(
            f"Quick profile ({', '.join(changes) or 'as the full sweep'}): a cut-down sweep, not the paper's protocol."
        )
    if plan.setting_overrides:  # a table of other settings than the file's must say so: its verdict is of these runs
        after = "the file's sweep and the quick profile" if plan.profile == "quick" else "the file's sweep"
        lines.append(f"Overrides of every job, after {after}: {' '.join(plan.setting_overrides)}.")
    how = "Ours: mean ± std over seeds (n runs); Δ = ours − paper."
    if len(table.protocols) > 1:
        named = ", ".join(f"ours ({_protocol_name(protocol)})" for protocol in table.protocols[1:])
        how = (
            f"Ours: mean ± std over seeds (n runs) of the paper's computation; {named}: of the authors' code path"
            " (conf/specialise/protocol/)."
        )
    if spec.paper:
        how += " ✓: the paper's value lies within our range over seeds (what the verdict counts)."
        if any(cell.paper_runs > 1 and cell.paper is not None for cell in table.cells.values()):
            how += (
                f' A paper value that is a mean of m runs ("mean of m") is judged against our {PREDICTION:.0%}'
                " prediction interval of such a mean instead: mean ± t·s·√(1/n + 1/m)."
            )
    if spec.select is not None:
        select = spec.select
        if select.seeds:
            seeds = ", ".join(str(seed) for seed in select.seeds)
            how += (
                f" Select, then confirm: every grid point runs on seed {seeds}; each cell is the point with the best"
                f" {select.metric} ({select.mode}) there, run on every seed of the sweep and reported over all of them."
            )
        else:
            how += f" Each cell is the grid point with the best mean {select.metric} ({select.mode}) over its seeds."
    if spec.skip:
        left_out = "; ".join(", ".join(f"{key}={value}" for key, value in where.items()) for where in spec.skip)
        how += f" Not run (reproduce.skip): {left_out}."
    lines.append(how)
    return lines


def display_header(table: Table) -> list[str]:
    """Per column: the paper's value, ours per protocol, and Δ when there is one protocol."""
    header = list(table.plan.spec.rows)
    single = len(table.protocols) == 1
    for column in table.plan.spec.columns:
        paper = _has_paper(table, column)
        header += [f"{column.title} paper"] if paper else []
        header += [f"{column.title} ours{_protocol_suffix(protocol)}" for protocol in table.protocols]
        header += [f"{column.title} Δ"] if paper and single else []
    if table.plan.spec.select is not None:
        header.append("chosen")
    return header


def display_rows(table: Table) -> list[list[str]]:
    lines = []
    single = len(table.protocols) == 1
    for index, row in enumerate(table.rows):
        line = [_value(value) for value in row]
        chosen = []
        for column in table.plan.spec.columns:
            cells = [table.cells[index, column.title, protocol] for protocol in table.protocols]
            paper = _has_paper(table, column)
            line += [_paper(cells[0])] if paper else []
            line += [_ours(cell.ours, cell.matched) for cell in cells]
            line += [_number(cells[0].diff, signed=True)] if paper and single else []
            chosen += [cell.chosen for cell in cells if cell.chosen is not None and cell.chosen not in chosen]
        if table.plan.spec.select is not None:
            line.append(" | ".join(chosen) or "—")
        lines.append(line)
    return lines


def _protocol_suffix(protocol: str) -> str:
    """How a column of ours names its protocol: nothing for the faithful one (the default)."""
    return "" if protocol == DEFAULT_PROTOCOL else f" ({_protocol_name(protocol)})"


def missing_lines(table: Table) -> list[str]:
    """'Missing k of n runs' and the runs, grouped by reason."""
    if not table.missing:
        return []
    profile = "--profile quick" if table.plan.profile == "quick" else ""
    command = " ".join(part for part in ["igel-reproduce", table.plan.name, profile, table.rerun] if part)
    lines = [f"Missing {len(table.missing)} of {table.planned} runs (`{command}` runs them):"]
    by_reason: dict[str, list[str]] = {}
    for item in table.missing:
        by_reason.setdefault(item.reason, []).append(item.shown)
    for reason, shown in by_reason.items():
        more = f"; … and {len(shown) - MISSING_SHOWN} more" if len(shown) > MISSING_SHOWN else ""
        lines.append(f"- {len(shown)} {reason}: {'; '.join(shown[:MISSING_SHOWN])}{more}")
    return lines


def markdown(table: Table) -> str:
    header = display_header(table)
    align = ["---" if index < len(table.plan.spec.rows) else "---:" for index in range(len(header))]
    if table.plan.spec.select is not None:
        align[-1] = "---"
    lines = [f"### {title(table)}", "", *explanation(table), ""]
    lines += [_md_line(header), _md_line(align), *(_md_line(row) for row in display_rows(table))]
    if not table.rows:
        lines.append("(no rows: the sweep is empty)")
    extra = missing_lines(table) + [f"Note: {note}" for note in table.notes]
    lines += ["", *extra, f"Verdict: {table.verdict}"]
    return "\n".join(lines)


def to_html(table: Table) -> str:
    escape = html.escape
    parts = [f"<h3>{escape(title(table))}</h3>"]
    parts += [f"<p>{escape(line)}</p>" for line in explanation(table)]
    parts.append("<table>")
    parts.append("<tr>" + "".join(f"<th>{escape(cell)}</th>" for cell in display_header(table)) + "</tr>")
    for row in display_rows(table):
        parts.append("<tr>" + "".join(f"<td>{escape(cell)}</td>" for cell in row) + "</tr>")
    parts.append("</table>")
    missing = missing_lines(table)
    if missing:
        parts.append(f"<p>{escape(missing[0])}</p><ul>")
        parts += [f"<li>{escape(line[2:])}</li>" for line in missing[1:]]
        parts.append("</ul>")
    parts += [f"<p>Note: {escape(note)}</p>" for note in table.notes]
    parts.append(f"<p>Verdict: {escape(table.verdict)}</p>")
    return "\n".join(parts)


CSV_FIELDS = [
    "table",
    "file",
    "profile",
    "overrides",  # the command's settings of every job (Plan.setting_overrides): a table of other runs than the file's
    "row",
    "column",
    "metric",
    "protocol",
    "paper",
    "paper_runs",  # the runs the paper's value averages: above 1, matched is judged by Cell.judged_range's interval
    "mean",
    "std",
    "n",
    "min",
    "max",
    "diff",
    "matched",
    "chance",  # Cell.chance: how often a run exchangeable with ours would match
    "chosen",
    "missing_runs",
    "planned_runs",
]


def to_csv(tables: Sequence[Table]) -> str:
    """One line per cell, numbers unformatted (GraphGym's agg/ shape), every table in one file."""
    out = io.StringIO()
    writer = csv.DictWriter(out, CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    for table in tables:
        plan = table.plan
        for index, row in enumerate(table.rows):
            for column in plan.spec.columns:
                for protocol in table.protocols:
                    cell = table.cells[index, column.title, protocol]
                    writer.writerow(_csv_line(table, row, column, protocol, cell))
    return out.getvalue()


def _csv_line(table: Table, row: tuple, column: Column, protocol: str, cell: Cell) -> dict[str, object]:
    plan, ours = table.plan, cell.ours
    return {
        "table": plan.spec.table,
        "file": plan.name,
        "profile": plan.profile,
        "overrides": " ".join(plan.setting_overrides),
        "row": _row_label(plan, row),
        "column": column.title,
        "metric": column.metric,
        "protocol": protocol,
        "paper": _raw(cell.paper),
        "paper_runs": cell.paper_runs if cell.paper is not None else "",
        "mean": _raw(ours.mean if ours else None),
        "std": _raw(ours.std if ours else None),
        "n": ours.n if ours else 0,
        "min": _raw(ours.low if ours else None),
        "max": _raw(ours.high if ours else None),
        "diff": _raw(cell.diff),
        "matched": "" if cell.matched is None else str(cell.matched).lower(),
        "chance": _raw(cell.chance),
        "chosen": cell.chosen or "",
        "missing_runs": len(table.missing),
        "planned_runs": table.planned,
    }


def _has_paper(table: Table, column: Column) -> bool:
    return any(cell.paper is not None for (_, title, _), cell in table.cells.items() if title == column.title)


def _row_label(plan: Plan, row: tuple) -> str:
    return ", ".join(f"{key}={_value(value)}" for key, value in zip(plan.spec.rows, row, strict=True)) or "all"


def _value(value: object) -> str:
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def _digits(value: float) -> int:
    """Decimals a number is shown with, as the paper prints them: scores up to 1 with three (0.728), percentages and
    seconds with two (1.73, 13.32: Sister Cities' "%vs Degree F1", the runtimes), counts whole (854). Cell.matched
    widens our range by half a unit of the last of them, so a 1.73 read as 1.730 would be judged ten times tighter."""
    size = abs(value)
    return 3 if size <= 1 else 2 if size < 100 else 0 if float(value).is_integer() else 1


def _paper_digits(value: float) -> int:
    """Decimals of a paper value: as _digits, but a paper value of 100 or more that is not whole has two (the authors'
    runtimes, 682.10 s, 12376.87 s); _digits' one decimal there is for our means of counts (851.4), and read into a
    paper runtime it widened the range ten times (±0.05 s) and printed 682.1."""
    return 2 if abs(value) >= 100 and not float(value).is_integer() else _digits(value)


def _number(value: float | None, signed: bool = False, paper: bool = False) -> str:
    if value is None:
        return "—"
    digits = _paper_digits(value) if paper else _digits(value)
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def _paper(cell: Cell) -> str:
    """The paper's value as the paper prints it, and how many runs it averages where more than one."""
    runs = f" (mean of {cell.paper_runs})" if cell.paper is not None and cell.paper_runs > 1 else ""
    return _number(cell.paper, paper=True) + runs


def _ours(value: Aggregate | None, matched: bool | None = None) -> str:
    if value is None:
        return "—"
    spread = f" ± {_number(value.std)}" if value.std is not None else ""
    return f"{_number(value.mean)}{spread} (n={value.n}){' ✓' if matched else ''}"


def _raw(value: float | None) -> str:
    return "" if value is None else repr(float(value))


def _md_line(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"
