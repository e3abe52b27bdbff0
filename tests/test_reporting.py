"""igel-report: runs made by hand in a real MLflow store, aggregated and rendered as the paper's tables."""

import csv
import io
import logging
import math
from pathlib import Path

import numpy as np
import pytest
from mlflow.tracking import MlflowClient

from igel_exp.errors import ConfigError
from igel_exp.identity import HASH_TAG
from igel_exp.plan import load_plan
from igel_exp.reporting import PREDICTION, Aggregate, Cell, Missing, _number, aggregate, build_table, load_runs
from igel_exp.reproduce import report_main, reproduce_main
from igel_exp.tracking import HARDWARE_TAG

CORRELATIONS = {
    "table": "Correlations",
    "caption": "Spearman <rho> by distance",
    "rows": ["encoder.distance"],
    "columns": {"PageRank": "spearman_pagerank"},
    "paper": [{"encoder.distance": 1, "PageRank": 0.5}],
}
GRID = {
    "table": "Grid",
    "rows": [],
    "columns": {"Test": "test_score", "Validation": "val_score"},
    "select": {"metric": "val_score", "mode": "max"},
    "paper": [{"Test": 0.9}],
}


class Store:
    """Runs logged with the identity of a plan's jobs, as tracked_run would tag them."""

    def __init__(self, uri: str):
        self.client = MlflowClient(uri)
        self.ids: dict[str, str] = {}
        self.clock = 1_000_000

    def log(
        self,
        job,
        metrics: dict,
        status: str = "FINISHED",
        error: str | None = None,
        changed=None,
        hardware=None,
        params: bool = False,
    ) -> str:
        """A run of `job`; with `changed` ({key: value}), a run of it under other settings (another identity); with
        `hardware`, the tag of what it ran on; with `params`, its flattened config as params, as a real run logs it."""
        name = str(job.config.name)
        if name not in self.ids:
            found = self.client.get_experiment_by_name(name)
            self.ids[name] = found.experiment_id if found else self.client.create_experiment(name)
        self.clock += 1000  # start times in logging order: the latest run of a config is the one that counts
        identity = job.hash if changed is None else "0" * 16
        tags = {
            HASH_TAG: identity,
            **({"error": error} if error else {}),
            **({HARDWARE_TAG: hardware} if hardware else {}),
        }
        run = self.client.create_run(self.ids[name], start_time=self.clock, tags=tags)
        for key, value in metrics.items():
            self.client.log_metric(run.info.run_id, key, value)
        if changed is not None or params:
            for key, value in {**job.flat, **(changed or {})}.items():
                self.client.log_param(run.info.run_id, key, str(value))
        self.client.set_terminated(run.info.run_id, status)
        return run.info.run_id


@pytest.fixture
def correlations(experiments_dir, store_uri):
    """A 2 × 3-seed plan with: distance 1 complete (plus an older duplicate of seed 0), distance 2 with one
    finished seed, one failed seed and one never run, and a run of a config outside the plan."""
    path = experiments_dir("correlations", {"encoder.distance": "1,2", "seed": "range(3)"}, CORRELATIONS)
    plan = load_plan(path, "full")
    store = Store(store_uri)
    jobs = {(job.config.encoder.distance, job.config.seed): job for job in plan.jobs}
    store.log(jobs[1, 0], {"spearman_pagerank": 100.0})  # superseded by the later run of the same config
    for seed, value in enumerate([0.5, 0.7, 0.9]):
        store.log(jobs[1, seed], {"spearman_pagerank": value})
    store.log(jobs[2, 0], {}, status="FAILED", error="DataError: graph.txt is missing\nsecond line")
    store.log(jobs[2, 1], {"spearman_pagerank": 0.3})
    outside = load_plan(path, "quick").jobs[0]  # same distance and seed, other epochs: another config
    store.log(outside, {"spearman_pagerank": 5.0})
    return plan, store_uri


def test_aggregate_is_mean_sample_std_and_count():
    three = aggregate([0.5, 0.7, 0.9])
    assert (three.mean, three.std, three.n, three.low, three.high) == pytest.approx((0.7, 0.2, 3, 0.5, 0.9))
    assert aggregate([0.3, math.nan]) == Aggregate(0.3, None, 1, 0.3, 0.3, (0.3,))
    assert aggregate([]) is None


@pytest.mark.parametrize(
    "paper, values, share",
    [
        (0.5, [0.1, 0.2, 0.3, 0.4], 0.5),  # the extremes lie outside the others' range, the middle two inside
        (854, [850, 851.4, 852], 1 / 3),  # ± half a unit: 852 is not within 850–851.4 widened to 851.9
        (854, [850, 851.6, 852.3], 2 / 3),  # 852.3, printed 852 as the paper prints counts, is within 850–852.1
        (0.5, [0.1, 0.2], None),  # two seeds leave one: no range to speak of
        (None, [0.1, 0.2, 0.3], None),
    ],
)
def test_chance_is_the_share_of_our_seeds_within_the_others_range(paper, values, share):
    """Cell.chance: how often a run exchangeable with ours would match the cell, each seed taken in turn for the paper's
    run, printed as the paper prints, against the range of the others widened as `matched` widens it."""
    cell = Cell(paper, aggregate(values))
    assert cell.chance == (None if share is None else pytest.approx(share))


@pytest.mark.parametrize(
    "value, signed, text",
    [(0.97612, False, "0.976"), (13.324, False, "13.32"), (854.0, False, "854"), (851.4, False, "851.4"),
     (-0.0081, True, "-0.008"), (12.0, True, "+12.00"), (1.73, False, "1.73"), (-6.62, True, "-6.62"),
     (3.714, False, "3.71"), (1.0, False, "1.000"), (None, False, "—")],
)  # fmt: skip
def test_numbers_are_rounded_by_their_size_and_whole_counts_stay_whole(value, signed, text):
    """As the paper prints: scores up to 1 with three decimals, percentages and seconds with two."""
    assert _number(value, signed=signed) == text


@pytest.mark.parametrize(
    "paper, values, matched",
    [
        (1.73, [1.734, 1.9], True),  # "%vs Degree F1": two decimals, 1.734 rounds to 1.73
        (1.73, [1.736, 1.9], False),
        (0.728, [0.7284, 0.75], True),  # a correlation: three decimals
        (0.728, [0.7286, 0.75], False),
        (682.10, [682.104, 700.0], True),  # a runtime of the authors' notebook: two decimals above 100 s too
        (682.10, [682.14, 700.0], False),  # (it was read with one: ±0.05 s, and 682.14 matched)
        (12376.87, [12376.92, 12500.0], False),
        (854, [854.4, 860], True),  # a count: whole
        # a seed exactly half a unit off the paper's value is within, on either side (some were not, by float noise)
        (0.754, [0.7535, 0.70], True),
        (0.728, [0.7285, 0.75], True),
        (0.791, [0.7915, 0.80], True),
        (1.73, [1.735, 1.9], True),
        (27.99, [27.995, 28.5], True),
        (0.754, [0.75349, 0.70], False),
        (0.728, [0.72851, 0.75], False),
    ],
)
def test_a_cell_matches_within_half_a_unit_of_the_papers_printed_precision(paper, values, matched):
    """Cell.matched widens our range by half a unit of the last decimal the paper prints: 1.73 has two, not three;
    the paper's runtimes of 100 s and more (682.10) two as well, not the one decimal our means of counts have."""
    assert Cell(paper, aggregate(values)).matched is matched


@pytest.mark.parametrize(
    "paper, runs, matched",
    [
        # 0.47, 0.48, 0.49: mean 0.48, s 0.01; a mean of 5 more lies within 0.48 ± t(0.975; 2) · 0.01 · √(1/3 + 1/5)
        # = 0.48 ± 0.0314 95 % of the time, widened by half a unit of the third decimal
        (0.449, 5, True),
        (0.448, 5, False),
        (0.511, 5, True),
        (0.512, 5, False),
        (0.449, 1, False),  # a value of one run: our min–max, 0.47-0.49
        (0.469, 1, False),
        (0.470, 1, True),
    ],
)
def test_a_paper_mean_of_several_runs_is_judged_against_our_prediction_interval_of_such_a_mean(paper, runs, matched):
    assert Cell(paper, aggregate([0.47, 0.48, 0.49]), paper_runs=runs).matched is matched


def test_a_perfect_reproduction_of_a_mean_of_five_runs_matches_as_often_as_its_chance_says():
    """Five seeds of ours and the paper's mean of five more runs, all from one distribution: the prediction interval
    holds the paper's mean about PREDICTION (0.95) of the time, as Cell.chance says; our min–max would hold it 86 % of
    the time, far above the 2/3 it holds one run, so that bar was lenient for means. 4,000 draws: ± 0.01 is 3 σ."""
    rng = np.random.default_rng(0)
    draws = rng.normal(0.5, 0.05, size=(4000, 10))
    cells = [Cell(round(float(row[5:].mean()), 3), aggregate(row[:5].tolist()), paper_runs=5) for row in draws]
    assert {cell.chance for cell in cells} == {PREDICTION}
    assert np.mean([cell.matched for cell in cells]) == pytest.approx(PREDICTION, abs=0.01)
    as_one_run = [Cell(cell.paper, cell.ours).matched for cell in cells]
    assert np.mean(as_one_run) == pytest.approx(0.86, abs=0.02)


def test_the_papers_column_prints_its_values_with_the_papers_decimals():
    """The paper column: 682.10 and 12376.87 s as the authors' notebook gives them (they printed 682.1, 12376.9)."""
    assert [_number(value, paper=True) for value in (682.1, 12376.87, 0.07, 13.32, 854.0)] == [
        "682.10", "12376.87", "0.070", "13.32", "854"
    ]  # fmt: skip
    assert _number(851.4) == "851.4"  # a mean of ours of a count keeps one decimal


def test_seeds_of_a_config_are_aggregated_once_each(correlations):
    plan, uri = correlations
    table = build_table(plan, load_runs(uri, plan.experiments))
    assert table.rows == [(1,), (2,)]
    first, second = table.cells[0, "PageRank", "faithful"], table.cells[1, "PageRank", "faithful"]
    assert (first.ours.mean, first.ours.std, first.ours.n) == pytest.approx((0.7, 0.2, 3))
    assert first.paper == 0.5 and first.diff == pytest.approx(0.2)
    assert second.ours == Aggregate(0.3, None, 1, 0.3, 0.3, (0.3,)) and second.paper is None and second.diff is None


def test_missing_runs_are_named_with_the_reason(correlations):
    plan, uri = correlations
    table = build_table(plan, load_runs(uri, plan.experiments))
    assert [(item.shown, item.reason) for item in table.missing] == [
        ("encoder.distance=2 seed=0", "failed (DataError: graph.txt is missing)"),
        ("encoder.distance=2 seed=2", "not run"),
    ]


def test_runs_made_under_settings_that_have_changed_since_are_named(correlations):
    plan, uri = correlations
    stale = next(job for job in plan.jobs if (job.config.encoder.distance, job.config.seed) == (2, 2))
    Store(uri).log(stale, {"spearman_pagerank": 0.1}, changed={"trainer.lr": 0.5, "threads": 7})
    table = build_table(plan, load_runs(uri, plan.experiments))
    assert table.missing[-1] == Missing(
        "encoder.distance=2 seed=2", "not run with the current config (a finished run of it has other trainer.lr)"
    )
    assert table.cells[1, "PageRank", "faithful"].ours.n == 1  # and it does not count


def test_a_full_tables_job_whose_quick_profile_run_is_in_the_store_is_named_so(correlations):
    """After `igel-reproduce --profile quick`, the full table's missing jobs said "not run with the current config (a
    finished run of it has other trainer.epochs, …)", as if a setting had changed since: those are the quick profile's
    runs, cut down, which `--profile quick` reports."""
    plan, uri = correlations
    store = Store(uri)
    quick = load_plan(plan.path, "quick")
    [of_2_2] = [job for job in quick.jobs if (job.config.encoder.distance, job.config.seed) == (2, 2)]
    store.log(of_2_2, {"spearman_pagerank": 5.0}, params=True)
    table = build_table(plan, load_runs(uri, plan.experiments))
    assert table.missing[-1] == Missing(
        "encoder.distance=2 seed=2",
        "not run; the store has its quick profile's run, cut down (other trainer.epochs, trainer.walk_length), which"
        " --profile quick reports",
    )
    # the quick table's jobs whose full run is in the store are not run, as they said
    for job in plan.jobs:
        if (job.config.encoder.distance, job.config.seed) == (1, 1):
            store.log(job, {"spearman_pagerank": 0.5}, params=True)
    reasons = {item.shown: item.reason for item in build_table(quick, load_runs(uri, plan.experiments)).missing}
    assert reasons["encoder.distance=1 seed=1"] == "not run"


def test_markdown_shows_paper_ours_and_difference_and_what_is_missing(correlations, capsys):
    plan, uri = correlations
    folder = plan.path.parent
    assert report_main(["correlations", "--experiments", str(folder), "--tracking-uri", uri]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert lines[0] == "### Correlations (correlations)"
    assert "| encoder.distance | PageRank paper | PageRank ours | PageRank Δ |" in lines
    assert "| 1 | 0.500 | 0.700 ± 0.200 (n=3) ✓ | +0.200 |" in lines  # ✓: 0.5 within 0.5–0.9
    assert "| 2 | — | 0.300 (n=1) | — |" in lines
    # the command as given: copied, it runs the missing jobs into this store, not a full sweep into ./mlflow.db
    rerun = f"igel-reproduce correlations --experiments {folder} --tracking-uri {uri}"
    assert f"Missing 2 of 6 runs (`{rerun}` runs them):" in lines
    assert "- 1 failed (DataError: graph.txt is missing): encoder.distance=2 seed=0" in lines
    assert "- 1 not run: encoder.distance=2 seed=2" in lines


def test_quick_profile_and_overrides_are_named_in_the_header(correlations, capsys):
    plan, uri = correlations
    assert report_main(["correlations", "--profile", "quick", "--experiments", str(plan.path.parent)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("### Correlations (correlations) — quick profile\n")
    assert "Quick profile (trainer.epochs=1, trainer.walk_length=10, progress=false, threads=1)" in text
    assert "| 1 | 0.500 | 5.00 (n=1) | +4.50 |" in text  # the quick run, and only it
    rerun = f"igel-reproduce correlations --profile quick --experiments {plan.path.parent}"
    assert f"Missing 5 of 6 runs (`{rerun}` runs them):" in text
    # the command's overrides, which make other runs than the file's: said in the header (they showed only in the
    # missing runs' hint, absent once none is missing), not taken for the profile's settings
    assert report_main(["correlations", "--profile", "quick", "--experiments", str(plan.path.parent), "seed=0"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("### Correlations (correlations) — quick profile — with overrides\n")
    assert "\nOverrides of every job, after the file's sweep and the quick profile: seed=0.\n" in text
    # where and how the runs run make the same runs, the same table (the README's threads=1 said: with overrides)
    same = ["threads=1", "progress=false", f"tracking.uri={uri}", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]
    assert report_main(["correlations", "--profile", "quick", "--experiments", str(plan.path.parent), *same]) == 0
    text = capsys.readouterr().out
    assert text.startswith("### Correlations (correlations) — quick profile\n") and "Overrides of every" not in text
    assert "| 1 | 0.500 | 5.00 (n=1) | +4.50 |" in text


def test_csv_has_one_line_per_cell_with_raw_numbers(correlations, tmp_path):
    plan, uri = correlations
    output = tmp_path / "tables" / "paper.csv"
    assert report_main(["--experiments", str(plan.path.parent), "--tracking-uri", uri, "--output", str(output)]) == 0
    rows = list(csv.DictReader(io.StringIO(output.read_text())))
    assert [(row["row"], row["column"], row["metric"]) for row in rows] == [
        ("encoder.distance=1", "PageRank", "spearman_pagerank"),
        ("encoder.distance=2", "PageRank", "spearman_pagerank"),
    ]
    first = rows[0]
    assert (first["table"], first["file"], first["profile"], first["n"], first["missing_runs"]) == (
        "Correlations",
        "correlations",
        "full",
        "3",
        "2",
    )
    assert [float(first[key]) for key in ("paper", "mean", "std", "diff")] == pytest.approx([0.5, 0.7, 0.2, 0.2])
    assert (rows[1]["paper"], rows[1]["std"], rows[1]["diff"]) == ("", "", "")
    assert {row["overrides"] for row in rows} == {""}
    # overrides that make other runs than the file's: said on every line, as the Markdown's title and header say them
    # (the CSV of other settings read as the file's own, its `matched` and all); where and how runs run are no setting
    given = ["--experiments", str(plan.path.parent), "--tracking-uri", uri, "--format", "csv", "-o", str(output)]
    assert report_main([*given, "seed=0", "threads=1"]) == 0
    rows = list(csv.DictReader(io.StringIO(output.read_text())))
    assert [(row["row"], row["overrides"], row["n"]) for row in rows] == [
        ("encoder.distance=1", "seed=0", "1"),
        ("encoder.distance=2", "seed=0", "0"),  # its seed 0 failed
    ]


def test_html_is_escaped_and_format_wins_over_the_suffix(correlations, tmp_path):
    plan, uri = correlations
    output = tmp_path / "paper.txt"
    arguments = ["--experiments", str(plan.path.parent), "--tracking-uri", uri, "--format", "html", "-o", str(output)]
    assert report_main(arguments) == 0
    text = output.read_text()
    assert text.startswith("<!doctype html>") and "<h3>Correlations (correlations)</h3>" in text
    assert "Spearman &lt;rho&gt; by distance" in text
    assert "<tr><td>1</td><td>0.500</td><td>0.700 ± 0.200 (n=3) ✓</td><td>+0.200</td></tr>" in text
    assert "<li>1 not run: encoder.distance=2 seed=2</li>" in text


@pytest.mark.parametrize("mode, dim, test", [("max", 8, 0.4), ("min", 4, 0.99)])
def test_best_point_is_chosen_on_the_validation_mean_never_on_test(experiments_dir, store_uri, mode, dim, test):
    # dim=4: validation 0.9 and 0.3 (mean 0.6, best single seed), test 0.99; dim=8: validation 0.7 and 0.7, test 0.4
    path = experiments_dir(
        "grid", {"trainer.dim": "4,8", "seed": "range(2)"}, {**GRID, "select": {"metric": "val_score", "mode": mode}}
    )
    plan = load_plan(path, "full")
    store = Store(store_uri)
    scores = {(4, 0): (0.9, 0.99), (4, 1): (0.3, 0.99), (8, 0): (0.7, 0.4), (8, 1): (0.7, 0.4)}
    for job in plan.jobs:
        validation, score = scores[job.config.trainer.dim, job.config.seed]
        store.log(job, {"val_score": validation, "test_score": score})
    table = build_table(plan, load_runs(store_uri, plan.experiments))
    cell = table.cells[0, "Test", "faithful"]
    assert cell.ours.mean == pytest.approx(test) and cell.ours.n == 2
    assert cell.chosen == f"trainer.dim={dim}" and table.cells[0, "Validation", "faithful"].chosen == cell.chosen
    assert cell.diff == pytest.approx(test - 0.9)


def test_select_chooses_per_cell_within_a_column_filter(experiments_dir, store_uri):
    columns = {
        "Plain": {"metric": "test_score", "dataset.name": "miserables"},
        "Cloned": {"metric": "test_score", "dataset.name": "miserables_cloned"},
    }
    spec = {**GRID, "columns": columns, "paper": []}
    path = experiments_dir("split", {"dataset": "miserables,miserables_cloned", "trainer.dim": "4,8"}, spec)
    plan = load_plan(path, "full")
    store = Store(store_uri)
    best = {"miserables": 4, "miserables_cloned": 8}
    for job in plan.jobs:
        chosen = job.config.trainer.dim == best[job.config.dataset.name]
        store.log(job, {"val_score": 0.9 if chosen else 0.1, "test_score": float(job.config.trainer.dim)})
    table = build_table(plan, load_runs(store_uri, plan.experiments))
    assert (
        table.cells[0, "Plain", "faithful"].ours.mean == 4.0 and table.cells[0, "Cloned", "faithful"].ours.mean == 8.0
    )


def test_paper_rows_outside_the_sweep_are_noted(experiments_dir, store_uri):
    paper = [{"encoder.distance": 1, "PageRank": 0.5}, {"encoder.distance": 3, "PageRank": 0.9}]
    path = experiments_dir("narrow", {"encoder.distance": "1", "seed": "0"}, {**CORRELATIONS, "paper": paper})
    plan = load_plan(path, "quick")
    table = build_table(plan, [])
    assert table.rows == [(1,)] and table.notes == [
        "paper rows that this profile's sweep does not run: encoder.distance=3"
    ]


@pytest.mark.parametrize("kinds", [1, 2])
def test_a_timed_table_says_what_its_runs_ran_on_and_when_that_differs(experiments_dir, store_uri, kinds):
    """A scalability table whose runs came from two cluster nodes, or from two days of a shared machine whose host
    changed, showed timings that do not compare, and nothing said so."""
    timed = {**CORRELATIONS, "columns": {"Runtime (s)": "time_total_s", "PageRank": "spearman_pagerank"}}
    plan = load_plan(experiments_dir("timed", {"encoder.distance": "1", "seed": "range(3)"}, timed), "full")
    store, epyc = Store(store_uri), "AMD EPYC (AVX2, family 23 model 1, 2 cores)"
    for job, hardware in zip(plan.jobs, [epyc, epyc, epyc if kinds == 1 else None], strict=True):
        store.log(job, {"time_total_s": 10.0, "spearman_pagerank": 0.5}, hardware=hardware)
    notes = build_table(plan, load_runs(store_uri, plan.experiments)).notes
    if kinds == 1:
        assert notes == [f"timed on {epyc}"]
    else:
        assert notes == [
            f"timed on 2 kinds of hardware, whose timings do not compare: {epyc}: 2 runs; hardware not recorded"
            " (runs made before igel-exp tagged it): 1 run"
        ]
    untimed = load_plan(experiments_dir("untimed", {"encoder.distance": "1", "seed": "range(3)"}, CORRELATIONS), "full")
    assert build_table(untimed, load_runs(store_uri, untimed.experiments)).notes == []


def test_a_timed_table_says_when_its_runs_ran_with_other_thread_counts(experiments_dir, store_uri):
    """threads is no part of a run's identity: a seed rerun with threads=2 takes its place in a scalability cell
    beside seeds of threads=1, on the same hardware, and the cell's mean mixed timings that do not compare."""
    timed = {**CORRELATIONS, "columns": {"Runtime (s)": "time_total_s", "PageRank": "spearman_pagerank"}}
    plan = load_plan(experiments_dir("timed", {"encoder.distance": "1", "seed": "range(3)"}, timed), "full")
    store, epyc = Store(store_uri), "AMD EPYC (AVX2, family 23 model 1, 2 cores)"
    for job, threads in zip(plan.jobs, [1, 1, 2], strict=True):
        run_id = store.log(job, {"time_total_s": 10.0 * threads, "spearman_pagerank": 0.5}, hardware=epyc)
        store.client.log_param(run_id, "threads", str(threads))  # as igel-run logs it: the flattened config
    notes = build_table(plan, load_runs(store_uri, plan.experiments)).notes
    assert notes == [
        f"timed on {epyc}",
        "timed with 2 thread counts, whose timings do not compare: threads=1: 2 runs; threads=2: 1 run",
    ]


def test_report_of_an_absent_store_lists_every_run_and_creates_nothing(experiments_dir, tmp_path, capsys):
    experiments_dir("correlations", {"encoder.distance": "1,2", "seed": "0"}, CORRELATIONS)
    store = tmp_path / "nothing-here.db"
    arguments = [
        "--experiments",
        str(experiments_dir.folder),
        "--tracking-uri",
        f"sqlite:///{store}",
        "--profile",
        "quick",
    ]
    assert report_main(arguments) == 0
    printed = capsys.readouterr()
    assert "- 2 not run: encoder.distance=1; encoder.distance=2" in printed.out
    assert (
        f"igel-report: no MLflow store at sqlite:///{store} (--tracking-uri, $MLFLOW_TRACKING_URI, else" in printed.err
    )
    assert not store.exists()
    store.touch()  # an empty file: MLflow made its tables in it (954 kB), and the report read an empty store
    assert report_main(arguments) == 0
    assert f"igel-report: no MLflow store at sqlite:///{store}" in capsys.readouterr().err
    assert store.stat().st_size == 0


def test_report_errors_are_one_line(experiments_dir, capsys):
    experiments_dir("correlations", {"seed": "0"}, CORRELATIONS)
    assert report_main(["nope", "--experiments", str(experiments_dir.folder)]) == 1
    assert capsys.readouterr().err.strip() == (
        f"igel-report: error: no table 'nope' in {experiments_dir.folder}; valid tables: all, correlations;"
        " or a paper label: Correlations"
    )
    # Hydra's deletion override is an override, not a table ("no table '~trainer.lr'")
    assert report_main(["correlations", "--experiments", str(experiments_dir.folder), "~trainer.lr"]) == 1
    error = capsys.readouterr().err.strip()
    assert error.startswith("igel-report: error: correlations: ") and "~trainer.lr" in error and "\n" not in error


# --- both protocols side by side, and the verdict -----------------------------------------------------------

BOTH_REASONS = {"verdict": {"authors": "their code did X", "ruled_out": "Y and Z"}}
BOTH = {**CORRELATIONS, **BOTH_REASONS}


@pytest.mark.parametrize(
    "faithful, authors, verdict",
    [
        ([0.1, 0.2], [0.45, 0.55], "reproduced only on the authors' path (faithful 0/1, authors' path 1/1 cells within"
         " our range over seeds): their code did X"),
        ([0.4996, 0.3], [0.45, 0.55], "reproduced (faithful 1/1, authors' path 1/1 cells within our range over seeds)"),
        ([0.1, 0.2], [0.6, 0.7], "not reproduced (faithful 0/1, authors' path 0/1 cells within our range over seeds);"
         " ruled out: Y and Z"),
        # one protocol not run yet: it neither matched ("only") nor missed ("ruled out")
        ([], [0.45, 0.55], "reproduced on the authors' path (faithful 0/0, authors' path 1/1 cells within our range"
         " over seeds; no runs yet: faithful): their code did X"),
        ([0.1, 0.2], [], "not reproduced (faithful 0/1, authors' path 0/0 cells within our range over seeds; no runs"
         " yet: authors' path)"),
    ],
)  # fmt: skip
def test_both_protocols_are_shown_beside_the_paper_with_a_verdict(
    experiments_dir, store_uri, capsys, faithful, authors, verdict
):
    path = experiments_dir("both", {"protocol": "faithful,authors", "encoder.distance": "1", "seed": "range(2)"}, BOTH)
    plan = load_plan(path, "full")
    assert plan.protocols == ["faithful", "authors"] and len(plan.jobs) == 4
    store = Store(store_uri)
    values = {"faithful": faithful, "authors": authors}
    for job in plan.jobs:
        if values[job.config.protocol]:
            store.log(job, {"spearman_pagerank": values[job.config.protocol][job.config.seed]})
    assert report_main(["both", "--experiments", str(path.parent), "--tracking-uri", store_uri]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "| encoder.distance | PageRank paper | PageRank ours | PageRank ours (authors' path) |" in lines
    row = next(line for line in lines if line.startswith("| 1 |"))
    assert row.count("(n=2)") == sum(bool(run) for run in values.values()) and row.startswith("| 1 | 0.500 |")
    assert row.count("✓") == verdict.count(" 1/1")  # a matched cell is marked, the one the verdict counts
    assert lines[-1] == f"Verdict: {verdict}"


PER_PROTOCOL = {"authors": "their code did X", "ruled_out": {"faithful": "the parallel edges alone", "authors": "Z"}}


@pytest.mark.parametrize(
    "overrides, ruled_out",
    [
        ([], "; ruled out on the faithful path: the parallel edges alone; on the authors' path: Z"),
        # a table cut to one protocol gives that protocol's reasons only (it gave both, the faithful path's read as
        # ruled out of the authors' runs)
        (["protocol=authors"], "; ruled out on the authors' path: Z"),
        (["protocol=faithful"], "; ruled out on the faithful path: the parallel edges alone"),
    ],
)
def test_the_reasons_ruled_out_are_those_of_the_protocols_the_verdict_speaks_about(
    experiments_dir, store_uri, capsys, overrides, ruled_out
):
    params = {"protocol": "faithful,authors", "encoder.distance": "1", "seed": "range(2)"}
    path = experiments_dir("both", params, {**CORRELATIONS, "verdict": PER_PROTOCOL})
    store = Store(store_uri)
    for job in load_plan(path, "full").jobs:  # no cell matches the paper's 0.5
        store.log(job, {"spearman_pagerank": (0.1, 0.2)[job.config.seed]})
    assert report_main(["both", "--experiments", str(path.parent), "--tracking-uri", store_uri, *overrides]) == 0
    verdict = capsys.readouterr().out.splitlines()[-1]
    assert verdict.startswith("Verdict: not reproduced (")
    assert verdict.endswith(f"within our range over seeds){ruled_out}")
    # a reason of every protocol is the plain form, as before; a protocol that is none is refused, naming them
    experiments_dir("both", params, {**CORRELATIONS, "verdict": {"ruled_out": "Y and Z"}})
    assert report_main(["both", "--experiments", str(path.parent), "--tracking-uri", store_uri, *overrides]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith("within our range over seeds); ruled out: Y and Z")
    experiments_dir("both", params, {**CORRELATIONS, "verdict": {"ruled_out": {"faitful": "Y"}}})
    assert report_main(["both", "--experiments", str(path.parent), "--tracking-uri", store_uri]) == 1
    assert capsys.readouterr().err == (
        "igel-report: error: both: both.yaml: reproduce.verdict.ruled_out must be WHAT (of every protocol) or"
        " {<protocol>: WHAT, ...} of the protocols authors, faithful, got {'faitful': 'Y'}\n"
    )


TWO_ROWS = {
    **CORRELATIONS,
    "paper": [{"encoder.distance": 1, "PageRank": 0.5}, {"encoder.distance": 2, "PageRank": 0.9}],
}


@pytest.mark.parametrize(
    "second_row, verdict",
    [
        ([0.1, 0.2, 0.3], "reproduced (faithful 1/2 cells within our range over seeds; a run exchangeable with ours"
         " would match faithful 0.7)"),
        ([0.1, 0.9, 1.3], "reproduced (faithful 2/2 cells within our range over seeds; a run exchangeable with ours"
         " would match faithful 0.7)"),
        ([0.1, 0.2, 0.3], "not reproduced (faithful 0/2 cells within our range over seeds; a run exchangeable with ours"
         " would match faithful 0.7); ruled out: Y and Z"),
        # the second row not run yet (an interrupted igel-reproduce, a row run by hand): a verdict so far, which rules
        # nothing out (it said `reproduced` of the one cell run, as if of the table; `not reproduced …; ruled out: …`)
        ([], "reproduced so far (faithful 1/1 cells within our range over seeds; a run exchangeable with ours would"
         " match faithful 0.3; no runs yet: faithful in 1 of 2 cells)"),
        ([], "not reproduced so far (faithful 0/1 cells within our range over seeds; a run exchangeable with ours would"
         " match faithful 0.3; no runs yet: faithful in 1 of 2 cells)"),
    ],
)  # fmt: skip
def test_the_verdict_weighs_the_matches_against_what_a_perfect_reproduction_scores(
    experiments_dir, store_uri, capsys, second_row, verdict
):
    """Three seeds of each row: a run exchangeable with ours lies within the other two's range a third of the time,
    so a perfect reproduction matches 2/3 of the two cells on average, and 1 of 2 is reproduced (3/4 of that bar),
    where 3/4 of all cells, the bar without seeds enough to tell, would call it not reproduced."""
    first_row = [0.4, 0.5, 0.6] if not verdict.startswith("not") else [0.6, 0.7, 0.8]
    path = experiments_dir("two", {"encoder.distance": "1,2", "seed": "range(3)"}, {**TWO_ROWS, **BOTH_REASONS})
    store = Store(store_uri)
    for job in load_plan(path, "full").jobs:
        values = first_row if job.config.encoder.distance == 1 else second_row
        if values:
            store.log(job, {"spearman_pagerank": values[job.config.seed]})
    assert report_main(["two", "--experiments", str(path.parent), "--tracking-uri", store_uri]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"Verdict: {verdict}"


def test_a_cell_that_reproduce_skip_leaves_out_is_not_awaited(experiments_dir, store_uri, capsys):
    """The link-prediction table skips the baselines on the authors' path (the paper's values are node2vec's): with
    every planned job run, its verdict is no verdict "so far" awaiting those cells."""
    skip = {"skip": [{"protocol": "authors", "encoder.distance": 2}]}
    params = {"protocol": "faithful,authors", "encoder.distance": "1,2", "seed": "range(2)"}
    path = experiments_dir("skips", params, {**TWO_ROWS, **BOTH_REASONS, **skip})
    store = Store(store_uri)
    for job in load_plan(path, "full").jobs:
        store.log(job, {"spearman_pagerank": (0.4, 0.6)[job.config.seed]})
    assert report_main(["skips", "--experiments", str(path.parent), "--tracking-uri", store_uri]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "Verdict: reproduced only on the authors' path (faithful 1/2, authors' path 1/1 cells within our range over"
        " seeds): their code did X"
    )


def test_csv_lists_each_protocol_with_its_range_and_match(experiments_dir, store_uri, tmp_path):
    path = experiments_dir("both", {"protocol": "faithful,authors", "encoder.distance": "1", "seed": "range(2)"}, BOTH)
    plan = load_plan(path, "full")
    store = Store(store_uri)
    for job in plan.jobs:
        store.log(job, {"spearman_pagerank": (0.4, 0.6)[job.config.seed] if job.config.protocol == "authors" else 0.1})
    output = tmp_path / "both.csv"
    assert report_main(["--experiments", str(path.parent), "--tracking-uri", store_uri, "-o", str(output)]) == 0
    rows = list(csv.DictReader(io.StringIO(output.read_text())))
    assert [(row["protocol"], row["min"], row["max"], row["matched"]) for row in rows] == [
        ("faithful", "0.1", "0.1", "false"),
        ("authors", "0.4", "0.6", "true"),
    ]


def test_a_paper_mean_is_marked_and_its_verdict_counts_the_interval(experiments_dir, store_uri, capsys, tmp_path):
    """Row 1's paper value is a mean of five runs (`runs: 5`), row 2's one run. Ours, 0.45-0.55 on both rows: 0.56
    lies outside that min-max but inside our interval for a mean of five (0.5 ± 0.157), 0.3 outside both. The table
    says which value is a mean and how it is judged, the CSV gives each cell's count, and the bar weighs the mean's cell
    by PREDICTION: a perfect reproduction matches 0.95 + 1/3 cells here."""
    paper = [{"encoder.distance": 1, "PageRank": 0.56, "runs": 5}, {"encoder.distance": 2, "PageRank": 0.3}]
    path = experiments_dir("means", {"encoder.distance": "1,2", "seed": "range(3)"}, {**TWO_ROWS, "paper": paper})
    store = Store(store_uri)
    for job in load_plan(path, "full").jobs:
        store.log(job, {"spearman_pagerank": (0.45, 0.5, 0.55)[job.config.seed]})
    output = tmp_path / "means.csv"
    assert report_main(["means", "--experiments", str(path.parent), "--tracking-uri", store_uri]) == 0
    text = capsys.readouterr().out
    assert "| 1 | 0.560 (mean of 5) | 0.500 ± 0.050 (n=3) ✓ |" in text
    assert "| 2 | 0.300 | 0.500 ± 0.050 (n=3) |" in text
    assert "judged against our 95% prediction interval of such a mean instead" in text
    assert text.splitlines()[-1] == (
        "Verdict: reproduced (faithful 1/2 cells within our range over seeds; a run exchangeable with ours would match"
        " faithful 1.3)"
    )
    assert (
        report_main(["means", "--experiments", str(path.parent), "--tracking-uri", store_uri, "-o", str(output)]) == 0
    )
    rows = list(csv.DictReader(io.StringIO(output.read_text())))
    assert [(row["paper_runs"], row["matched"], row["chance"]) for row in rows] == [
        ("5", "true", "0.95"),
        ("1", "false", repr(1 / 3)),
    ]


def test_a_sweep_over_a_protocol_the_experiment_lacks_is_refused_when_planned(experiments_dir):
    path = experiments_dir("ppi", {"protocol": "faithful,authors", "seed": "0"}, CORRELATIONS, experiment="ppi")
    with pytest.raises(ConfigError, match=r"ppi.yaml with protocol=authors seed=0: protocol=authors is not defined"):
        load_plan(path, "full")


def test_a_deleted_experiment_is_named_under_its_table_with_the_way_back(correlations, capsys):
    """MLflow hides a deleted experiment's runs: the table read as if none had run, unsaid."""
    plan, uri = correlations
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name(str(plan.jobs[0].config.name))
    client.delete_experiment(experiment.experiment_id)
    report = ["--experiments", str(plan.path.parent), "--tracking-uri", uri]
    assert report_main(report) == 0
    printed = capsys.readouterr().out
    assert "Missing 6 of 6 runs" in printed
    assert (
        f"\nNote: experiment '{experiment.name}' of the MLflow store {uri} is deleted, so its runs count as not run:"
        f" restore it (mlflow experiments restore --experiment-id {experiment.experiment_id}) or remove it for good"
        " (mlflow gc)\n"
    ) in printed
    client.restore_experiment(experiment.experiment_id)  # the way back: its runs count again
    assert report_main(report) == 0
    printed = capsys.readouterr().out
    assert "Missing 2 of 6 runs" in printed and "is deleted" not in printed


def test_a_format_that_the_output_name_contradicts_is_one_line(correlations, tmp_path, capsys):
    """--format csv --output t.md wrote CSV into t.md, unsaid; without --format the suffix picks the format."""
    plan, uri = correlations
    given = ["--experiments", str(plan.path.parent), "--tracking-uri", uri]
    table = tmp_path / "t.md"
    assert report_main([*given, "--format", "csv", "--output", str(table)]) == 1
    assert capsys.readouterr().err == (
        f"igel-report: error: --format csv disagrees with --output {table}, a markdown file's name: leave --format"
        " out, or name the file .csv\n"
    )
    assert not table.exists()
    for output, fmt, start in [("t.CSV", [], "table,"), ("t.md", [], "### "), ("t.txt", ["--format", "csv"], "table,")]:
        assert report_main([*given, "--output", str(tmp_path / output), *fmt]) == 0  # the suffix's, or --format's
        assert (tmp_path / output).read_text().startswith(start)
        assert capsys.readouterr().err.endswith(f"wrote 1 table to {tmp_path / output}\n")  # it said: 1 tables


def test_an_output_folder_or_a_store_that_is_not_one_is_one_line(correlations, tmp_path, capsys, monkeypatch):
    plan, uri = correlations
    folder = ["--experiments", str(plan.path.parent)]
    (tmp_path / "notes").write_text("")
    under_a_file = str(tmp_path / "notes" / "t.md")  # it said: File exists
    for output, why in [
        (str(tmp_path), f"{tmp_path} is a folder"),
        ("", "blank"),  # Path's '.', a folder too
        (under_a_file, f"{under_a_file} would be in {tmp_path / 'notes'}, a file"),
    ]:
        with pytest.raises(SystemExit) as exited:
            report_main([*folder, "--tracking-uri", uri, "--output", output])
        assert exited.value.code == 2
        assert capsys.readouterr().err.startswith(f"igel-report: error: argument --output/-o: {why}: give a file")
    assert report_main([*folder, "--tracking-uri", uri, "--output", "-"]) == 0  # stdout, as `-` means (was a file)
    assert capsys.readouterr().out.startswith("### ") and not Path("-").exists()
    for given in (["--tracking-uri", ""], ["tracking.uri= "]):  # "$URI" unset: was ./mlflow.db, unsaid
        with pytest.raises(SystemExit):
            report_main([*folder, *given])
        assert f"{given[0].strip('= ')} is blank: give a store's URI" in capsys.readouterr().err
    unknown = tmp_path / "tables.json"  # written as markdown, silently
    assert report_main([*folder, "--tracking-uri", uri, "--output", str(unknown)]) == 1
    assert capsys.readouterr().err == (
        f"igel-report: error: --output {unknown}: no format writes .json files (.md, .markdown, .csv, .html, .htm);"
        " name it so, or give --format\n"
    )
    assert report_main([*folder, "--tracking-uri", uri, "--output", str(unknown), "--format", "csv"]) == 0
    assert unknown.read_text().startswith("table,")
    failed = tmp_path / "failed.md"  # a command that fails after checking its output leaves no empty file
    assert report_main([*folder, "--tracking-uri", uri, "--output", str(failed), "nosuchtable"]) == 1
    assert not failed.exists()
    capsys.readouterr()
    junk = tmp_path / "junk.db"
    assert report_main([*folder, "--tracking-uri", str(junk)]) == 1  # a path without sqlite:///
    assert capsys.readouterr().err == (  # the option given, not igel-run's config key
        f"igel-report: error: --tracking-uri={junk} is a path, which MLflow takes for a file store, one it no longer"
        f" opens: for a sqlite store write sqlite:///{junk}\n"
    )
    assert report_main([*folder, f"tracking.uri={junk}"]) == 1
    assert capsys.readouterr().err.startswith(f"igel-report: error: tracking.uri={junk} is a path, which MLflow")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", str(junk))  # the default store's setting, not a key never given
    assert report_main(folder) == 1
    assert capsys.readouterr().err.startswith(f"igel-report: error: $MLFLOW_TRACKING_URI={junk} is a path, which")


def test_an_output_that_is_the_store_s_own_file_is_refused_before_anything_is_written(
    correlations, tmp_path, capsys, monkeypatch
):
    """-o mlflow.db (--format csv, or any --format) wrote the tables over the store: every finished run lost."""
    plan, uri = correlations
    store = tmp_path / "mlflow.db"  # the working directory's, named by $MLFLOW_TRACKING_URI
    before = store.read_bytes()
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.db").symlink_to(store)
    folder = ["--experiments", str(plan.path.parent)]
    for output, given in [
        ("mlflow.db", []),  # $MLFLOW_TRACKING_URI's
        ("sub/../mlflow.db", ["--tracking-uri", uri]),
        ("link.db", [f"tracking.uri=sqlite:///{store}"]),
        (str(store), ["--tracking-uri", "sqlite:///mlflow.db"]),  # a relative URI
    ]:
        for main, prog in [(report_main, "igel-report"), (reproduce_main, "igel-reproduce")]:
            assert main([*folder, "correlations", *given, "--format", "csv", "--output", output]) == 1
            shown = given[-1].split("=", 1)[-1] if given else uri
            assert capsys.readouterr().err == (
                f"{prog}: error: --output {output} is the MLflow store {shown}: the tables would overwrite its runs;"
                " name another file\n"
            )
            assert store.read_bytes() == before
    monkeypatch.delenv("MLFLOW_TRACKING_URI")  # the default store, ./mlflow.db
    assert report_main([*folder, "--format", "markdown", "-o", "mlflow.db"]) == 1
    assert "is the MLflow store sqlite:///" in capsys.readouterr().err
    assert store.read_bytes() == before
    assert len(load_runs(uri, ["clustering"])) == 7  # every run of the fixture kept


def test_a_store_that_is_not_a_database_is_one_error_line_and_no_warning(correlations, tmp_path, capsys, caplog):
    """Closing its stale runs fails as reading it does: a warning that it could not would only repeat the error."""
    plan, _ = correlations
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database, " * 64)
    assert report_main(["--experiments", str(plan.path.parent), "--tracking-uri", f"sqlite:///{junk}"]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"igel-report: error: cannot read the MLflow store sqlite:///{junk} (")
    assert [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING] == []


def test_a_column_metric_that_no_run_has_is_refused_naming_the_metrics_they_have(correlations, capsys):
    plan, uri = correlations
    folder = plan.path.parent
    typo = folder / "typo.yaml"
    typo.write_text(plan.path.read_text().replace("PageRank: spearman_pagerank", "PageRank: spearman_pagerankk"))
    assert build_table(load_plan(typo, "quick"), []).verdict == "no cell has both the paper's value and ours yet"
    assert report_main(["--experiments", str(folder), "--tracking-uri", uri]) == 1
    captured = capsys.readouterr()
    assert captured.err == (
        "igel-report: error: typo: typo.yaml: reproduce.columns.PageRank: no run of the table has the metric"
        " 'spearman_pagerankk'; the metrics its runs have: spearman_pagerank\n"
    )
    assert "### Correlations (correlations)" in captured.out  # the other table is printed


def test_a_cell_says_when_finished_runs_logged_no_value(experiments_dir, store_uri):
    """aggregate drops NaN and unlogged values (a ρ of constant scores is not logged, a gain over a degree F1 of 0 is
    NaN): the cell's seeds were fewer than its finished runs, and only its n said so."""
    plan = load_plan(
        experiments_dir("correlations", {"encoder.distance": "1", "seed": "range(3)"}, CORRELATIONS), "full"
    )
    store = Store(store_uri)
    for job, value in zip(plan.jobs, [0.5, math.nan, 0.7], strict=True):
        store.log(job, {"spearman_pagerank": value})
    table = build_table(plan, load_runs(store_uri, plan.experiments))
    assert [cell.ours.n for cell in table.cells.values() if cell.ours] == [2]
    assert table.notes == [
        "finished runs without a value, left out of their cell's seeds: encoder.distance=1, PageRank: 1 of 3"
    ]


@pytest.mark.parametrize(
    "first_row, second_row, verdict",
    [
        ([0.4, 0.5, 0.6], [math.nan] * 3, "reproduced (faithful 1/1 cells within our range over seeds; a run"
         " exchangeable with ours would match faithful 0.3; finished runs without a value: faithful in 1 of 2 cells)"),
        ([0.6, 0.7, 0.8], [math.nan] * 3, "not reproduced (faithful 0/1 cells within our range over seeds; a run"
         " exchangeable with ours would match faithful 0.3; finished runs without a value: faithful in 1 of 2 cells);"
         " ruled out: Y and Z"),
        # every cell's runs finished without a value: there is nothing to wait for (it said `… and ours yet`)
        ([math.nan] * 3, [math.nan] * 3, "no cell has both the paper's value and ours: finished runs without a value:"
         " faithful in 2 cells"),
        ([math.nan] * 3, [], "no cell has both the paper's value and ours yet"),
        # one seed finished without a value, two not run: the cell still awaits them
        ([0.4, 0.5, 0.6], [math.nan], "reproduced so far (faithful 1/1 cells within our range over seeds; a run"
         " exchangeable with ours would match faithful 0.3; no runs yet: faithful in 1 of 2 cells)"),
    ],
)  # fmt: skip
def test_a_cell_whose_runs_all_finished_without_a_value_is_not_awaited(
    experiments_dir, store_uri, capsys, first_row, second_row, verdict
):
    """A row whose every run logged NaN (a gain over a degree F1 of 0, a ρ of constant scores) has nothing more to come:
    the verdict is no verdict "so far" and gives its reasons (it said `no runs yet: faithful in 1 of 2 cells` of
    finished runs, `so far` for good, and ruled nothing out)."""
    path = experiments_dir("two", {"encoder.distance": "1,2", "seed": "range(3)"}, {**TWO_ROWS, **BOTH_REASONS})
    store = Store(store_uri)
    for job in load_plan(path, "full").jobs:
        values = first_row if job.config.encoder.distance == 1 else second_row
        if job.config.seed < len(values):
            store.log(job, {"spearman_pagerank": values[job.config.seed]})
    assert report_main(["two", "--experiments", str(path.parent), "--tracking-uri", store_uri]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"Verdict: {verdict}"


def test_a_table_that_meets_the_bar_exactly_is_reproduced(experiments_dir):
    """15 cells a perfect reproduction matches 4 times in 5 (5 seeds each, 0.8 a cell): it would match 12, and 9 cells
    matched are 3/4 of that. The shares summed in floats to 12.000000000000002, whose 3/4 is above 9: the verdict read
    `not reproduced` of a table on the bar."""
    columns = {"PageRank": "spearman_pagerank", "Degree": "spearman_degree", "Closeness": "spearman_closeness"}
    spec = {**CORRELATIONS, "columns": columns, **BOTH_REASONS}
    spec["paper"] = [{"encoder.distance": d, **dict.fromkeys(columns, 0.3)} for d in range(1, 6)]
    path = experiments_dir("bar", {"encoder.distance": "1,2,3,4,5", "seed": "0"}, spec)
    table = build_table(load_plan(path, "full"), [])
    assert len(table.cells) == 15
    for number, key in enumerate(table.cells):  # four seeds of five within the others' range: 0.8 a cell
        shifted = 0.0 if number < 9 else 0.5  # the paper's 0.3 within the first 9 cells' range, not the last 6's
        table.cells[key] = Cell(0.3, aggregate([value + shifted for value in (0.1, 0.2, 0.3, 0.4, 0.4)]))
    assert table.matches("faithful") == (9, 15) and table.chance("faithful") == pytest.approx(12)
    assert table.verdict == (
        "reproduced (faithful 9/15 cells within our range over seeds; a run exchangeable with ours would match faithful"
        " 12.0)"
    )
