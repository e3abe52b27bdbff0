"""Scalability experiment: per-stage time and memory, the memory budget, isolated jobs, slopes and the plot."""

import os
import signal
import time

import mlflow
import numpy as np
import pandas as pd
import pytest
import torch
from hydra import compose, initialize_config_dir

from igel_exp import pipelines, training
from igel_exp.errors import BudgetError, ConfigError, DataError
from igel_exp.identity import HASH_TAG
from igel_exp.memory import MemoryBudget, PeakMeter, rss_mib
from igel_exp.pipelines.common import Stages
from igel_exp.scalability_plot import main as plot_main
from igel_exp.scalability_plot import scalability_report
from igel_exp.tasks.scalability import loglog_slope, seed_means, slopes
from igel_exp.tracking import HARDWARE_TAG, SWEEP_TAG, use_store

from conftest import REPO, keep_reading, kill_leaves_no_process, reaping, start_training, wait_for_no_process

TINY = ["experiment=scalability", "dataset.num_nodes=200", "trainer.epochs=1", "trainer.walk_length=10"]
STAGES = ["generate", "encode", "walks", "train", "total"]


def runs(tmp_path):
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
    return mlflow.search_runs(search_all_experiments=True)


def test_experiment_has_the_papers_scalability_settings(compose_config):
    config = compose_config("experiment=scalability")
    trainer = config.trainer
    assert (config.dataset.name, config.task.name, config.encoder.distance) == ("erdos_renyi", "scalability", 1)
    settings = (trainer.dim, trainer.walk_length, trainer.window, trainer.negatives, trainer.epochs)
    assert settings == (25, 50, 5, 5, 3)
    assert (trainer.batch_size, trainer.walks_per_node, config.task.memory_budget_gib) == (25000, 1, 8)


def test_a_run_whose_step_could_not_be_compiled_says_so_in_a_tag(compose_config, tracking_uri, tmp_path, monkeypatch):
    """trainer.compile=true falls back to the eager step where torch cannot compile it (here a graph break): the run
    finishes, and its tag fallback.trainer.compile says that it ran eagerly and why, where its config says compiled."""
    real = training.feature_walk_gradients

    def breaking(*args):
        torch._dynamo.graph_break()
        return real(*args)

    monkeypatch.setattr(training, "feature_walk_gradients", breaking)
    # batches of one walk of 10: 60 ids against 200 nodes, the negatives stay rows of X (the step compile applies to)
    overrides = ["encoder.distance=2", "task.isolate=false", "trainer.compile=true", "trainer.batch_size=100"]
    pipelines.run(compose_config(*TINY, *overrides))
    [run] = runs(tmp_path).itertuples()
    tags = mlflow.get_run(run.run_id).data.tags
    assert run.status == "FINISHED"
    assert tags["fallback.trainer.compile"].startswith("the step runs eagerly, it could not be compiled: ")
    assert "fallback.trainer.cuda_graphs" not in tags
    assert mlflow.get_run(run.run_id).data.metrics["compiled"] == 0.0  # how it ran, not what it asked


# --- per-stage time and peak memory --------------------------------------------------------------------------


def test_a_tiny_run_logs_time_and_peak_memory_of_every_stage(compose_config, tracking_uri, tmp_path):
    metrics = pipelines.run(compose_config(*TINY, "encoder.distance=2", "task.isolate=false"))
    [run] = runs(tmp_path).itertuples()
    assert run.status == "FINISHED"
    logged = mlflow.get_run(run.run_id).data.metrics
    for stage in STAGES:
        assert metrics[f"time_{stage}_s"] > 0 and logged[f"time_{stage}_s"] == metrics[f"time_{stage}_s"]
        assert metrics[f"peak_{stage}_mib"] > 0 and logged[f"peak_{stage}_mib"] == metrics[f"peak_{stage}_mib"]
        assert metrics[f"time_{stage}_cpu_s"] >= 0
    parts = sum(metrics[f"time_{stage}_s"] for stage in ["generate", "encode", "walks", "train"])
    assert parts <= metrics["time_total_s"]  # walks are charged to walks only, not to train as well
    assert metrics["peak_walks_mib"] <= metrics["peak_train_mib"]  # walks are drawn inside training
    assert max(metrics[f"peak_{stage}_mib"] for stage in STAGES) == metrics["peak_total_mib"]
    assert metrics["peak_total_mib"] <= metrics["peak_rss_mib"]
    assert logged["graph_nodes"] == 200 and logged["graph_edges"] == 800
    assert logged["estimate_train_mib"] > 0 and logged["estimate_ball"] > 1
    assert mlflow.get_run(run.run_id).data.tags["pid"] == str(os.getpid())


def test_the_memory_plan_is_timed_apart_from_the_total(compose_config, tracking_uri, tmp_path):
    """The memory estimate samples α-balls before encoding: the harness's guard, not IGEL's work. On a dense graph at
    α = 3 (every ball the whole graph) it is a large share of a small run; it must not count in time_total_s, the
    figure's runtime, which it inflated as the degree and α grew (3 s of 40 at |V| = 4,096, degree 32, α = 3)."""
    dense = ["dataset.num_nodes=500", "dataset.average_degree=100", "encoder.distance=3", "task.memory_samples=500"]
    metrics = pipelines.run(compose_config(*TINY[:1], *dense, *TINY[2:], "task.isolate=false"))
    parts = sum(metrics[f"time_{stage}_s"] for stage in ["generate", "encode", "walks", "train"])
    assert metrics["time_plan_s"] > 0
    # total is its stages and some logging, not the plan as well
    assert metrics["time_total_s"] - parts < 0.5 * metrics["time_plan_s"], metrics


def test_each_stage_gets_its_own_peak():
    stages = Stages()
    if not stages.exact_peaks:
        pytest.skip("the kernel's peak resident set cannot be reset here (/proc/self/clear_refs)")
    size = 300 * 2**20
    with stages("big"):
        block = np.ones(size // 8)  # touched: resident
        del block
    base = rss_mib()
    with stages("small"):
        block = np.ones(2**20)
        del block
    with stages("outer"):
        with stages("inner"):
            block = np.ones(size // 8)
            del block
    peaks = stages.metrics()
    assert peaks["peak_big_mib"] >= base + 250
    assert peaks["peak_small_mib"] < base + 100  # the big stage's peak does not leak into later stages
    assert peaks["peak_outer_mib"] >= peaks["peak_inner_mib"] >= base + 250  # enclosing stages keep their peaks
    assert peaks["peak_rss_mib"] >= peaks["peak_big_mib"]


def test_peak_meter_falls_back_to_the_process_peak(monkeypatch):
    monkeypatch.setattr(PeakMeter, "_try_reset", staticmethod(lambda: False))
    meter = PeakMeter()
    assert not meter.exact
    import resource

    assert meter.peak_mib() == pytest.approx(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, rel=0.05)


# --- the memory budget ---------------------------------------------------------------------------------------


def test_a_run_over_the_budget_stops_before_the_stage_with_the_key_named(compose_config, tracking_uri, tmp_path):
    # well under what the interpreter already holds: the estimate of the first stage is over
    with pytest.raises(BudgetError, match=r"stage 'generate' would need about .* task\.memory_budget_gib"):
        pipelines.run(compose_config(*TINY, "task.isolate=false", "task.memory_budget_gib=0.05"))
    [run] = runs(tmp_path).itertuples()
    assert run.status == "FAILED"
    assert "task.memory_budget_gib" in mlflow.get_run(run.run_id).data.tags["error"]


def test_the_watchdog_interrupts_a_stage_that_grows_past_the_budget():
    budget = MemoryBudget(rss_mib() + 200, "task.memory_budget_gib", interval_s=0.01)
    stages = Stages(budget)
    held = []
    previous = signal.getsignal(signal.SIGUSR1)
    with pytest.raises(BudgetError, match=r"stage 'hungry' reached .* task\.memory_budget_gib .*stopped"):
        with budget.watch(), stages("hungry"):
            for _ in range(100):  # up to 2 GiB, 20 MiB at a time: stopped after about 200 MiB
                held.append(np.ones(20 * 2**20 // 8))
                time.sleep(0.005)
    assert 8 <= len(held) < 40
    assert signal.getsignal(signal.SIGUSR1) == previous


def test_budget_settings_are_checked(compose_config, tracking_uri, tmp_path):
    with pytest.raises(ConfigError, match="task.memory_budget_gib"):
        pipelines.run(compose_config(*TINY, "task.memory_budget_gib=-1"))
    assert not (tmp_path / "mlflow.db").exists()  # no run, not even a store
    MemoryBudget(None, "key").check("encode", 10**9)  # no budget, no check


@pytest.mark.parametrize(
    "overrides, key",
    [
        (["dataset.num_nodes=-4"], "dataset.num_nodes"),
        (["dataset.num_nodes=0"], "dataset.num_nodes"),
        (["dataset.num_nodes=10", "dataset.average_degree=12"], "dataset.average_degree"),
        (["dataset.average_degree=-1"], "dataset.average_degree"),
        (["dataset.average_degree=0"], "dataset.average_degree=0 gives"),  # a FAILED run: "the graph has no edges"
        (["dataset.num_nodes=100", "dataset.average_degree=0.001"], "dataset.average_degree=0.001 gives"),
        (["encoder.distance=-1"], "encoder.distance"),
    ],
)
def test_bad_sizes_name_their_key_before_any_run(compose_config, tracking_uri, tmp_path, overrides, key):
    with pytest.raises(ConfigError, match=key):
        pipelines.run(compose_config(*TINY, *overrides))
    assert not (tmp_path / "mlflow.db").exists()  # no run, not even a store


# --- jobs in a fresh process ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_isolated_jobs_run_in_their_own_process_and_report_their_errors(compose_config, tracking_uri, tmp_path):
    metrics = pipelines.run(compose_config(*TINY))  # task.isolate is the experiment's default
    with pytest.raises(BudgetError, match="task.memory_budget_gib"):  # raised in the child, re-raised here
        pipelines.run(compose_config(*TINY, "task.memory_budget_gib=0.05"))
    finished, failed = runs(tmp_path).sort_values("start_time").itertuples()
    assert (finished.status, failed.status) == ("FINISHED", "FAILED")
    logged = mlflow.get_run(finished.run_id).data
    assert logged.tags["pid"] != str(os.getpid())
    assert metrics["time_total_s"] == logged.metrics["time_total_s"]


def sigterm_to_igel_run(process):
    process.send_signal(signal.SIGTERM)  # `kill`: igel-run alone, which passes it on


def ctrl_c(process):
    os.killpg(process.pid, signal.SIGINT)  # the terminal signals the whole foreground group: the job's process too


@pytest.mark.slow
@pytest.mark.parametrize("stop", [sigterm_to_igel_run, ctrl_c])
def test_an_interrupted_isolated_job_ends_its_run_failed_and_leaves_no_process(store_uri, tmp_path, stop):
    process, lines = start_training([*TINY, "trainer.epochs=100000"], tmp_path)
    with reaping(process):
        stop(process)
        output = "".join(lines) + process.communicate(timeout=90)[0]
        assert process.returncode == 130, output[-5000:]
        assert wait_for_no_process(process.pid, timeout_s=0) == []
    [run] = runs(tmp_path).itertuples()
    assert output.strip().splitlines()[-1] == f"igel-run: interrupted; its run {run.run_id} ended FAILED"
    assert run.status == "FAILED"
    tags = mlflow.get_run(run.run_id).data.tags
    assert (
        tags["error"]
        == f"KeyboardInterrupt: signal {signal.SIGTERM if stop is sigterm_to_igel_run else signal.SIGINT:d}"
    )
    assert tags["pid"] != str(process.pid)  # the job's own process ended it


@pytest.mark.slow
def test_an_isolated_job_stops_when_igel_run_is_killed(store_uri, tmp_path, monkeypatch):
    """kill -9 of igel-run: its job's process notices within a second, ends its run FAILED and exits, removing the
    job's temporary folder, which igel-run can no longer remove (one was left in /tmp at every such kill)."""
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setenv("TMPDIR", str(temporary))  # igel-run's, whose environment is this process's
    process, lines = start_training([*TINY, "trainer.epochs=100000"], tmp_path)
    assert len(list(temporary.glob("igel-job-*"))) == 1  # the job's, while it trains
    keep_reading(process, lines)  # the job's process outlives igel-run: its output must go somewhere
    kill_leaves_no_process(process, lines)
    assert not list(temporary.glob("igel-job-*"))
    [run] = runs(tmp_path).itertuples()
    error = mlflow.get_run(run.run_id).data.tags["error"]
    assert (
        run.status == "FAILED" and error == f"KeyboardInterrupt: signal 15 (its parent process {process.pid} is gone)"
    )


# --- slopes and the plot -------------------------------------------------------------------------------------


def test_loglog_slope_recovers_power_laws():
    x = 2.0 ** np.arange(6, 21)
    assert loglog_slope(x, 3 * x**1.5) == pytest.approx((1.5, np.log(3)))
    noise = np.exp(np.random.default_rng(0).normal(0, 0.05, len(x)))
    assert loglog_slope(x, 0.2 * x * noise)[0] == pytest.approx(1.0, abs=0.03)
    for bad in [(x, -x), ([4, 4], [1, 2]), (x, x[:-1])]:
        with pytest.raises(ValueError):
            loglog_slope(*bad)


def test_seed_means_and_slopes_per_series():
    frame = pd.DataFrame(
        {"n": [64, 64, 128, 128, 256, 64, 128], "alpha": [1, 1, 1, 1, 1, 2, 2], "t": [1, 3, 4, 4, 8, 5, 5]}
    )
    table = seed_means(frame, "n", "alpha", "t")
    assert table[["series", "x", "mean", "n"]].values.tolist() == [
        [1, 64, 2, 2],
        [1, 128, 4, 2],
        [1, 256, 8, 1],
        [2, 64, 5, 1],
        [2, 128, 5, 1],
    ]
    assert table["std"].tolist() == pytest.approx([np.sqrt(2), 0, 0, 0, 0])
    fitted = slopes(table)
    assert fitted[1] == pytest.approx(1.0) and fitted[2] == pytest.approx(0.0)
    assert np.isnan(slopes(table, 100, 300)[2]) and slopes(table, 100, 300)[1] == pytest.approx(1.0)


def _fake_runs(
    uri: str, exponents: dict[int, float], epochs: int = 3, hardware: str | None = None, sweep: str | None = None
) -> None:
    """Finished scalability runs whose total time is n^exponent[α] (size panel) and degree^(α-1) (degree panel);
    the point both panels share (4,096 nodes, degree 8) is run twice, as its two sweeps would. `hardware`: the tag of
    what they ran on; `sweep`: their parent run's id."""
    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment("scalability")
    grid = [(n, 8) for n in (256, 1024, 4096, 16384)] + [(4096, d) for d in (2, 4, 8, 16)]
    for alpha, exponent in exponents.items():
        for n, degree in grid:
            for seed in (0, 1):
                tags = {HASH_TAG: f"{alpha}-{n}-{degree}-{seed}-{epochs}"} | ({SWEEP_TAG: sweep} if sweep else {})
                with mlflow.start_run(tags=tags | ({HARDWARE_TAG: hardware} if hardware else {})):
                    mlflow.log_params(
                        {
                            "dataset.name": "erdos_renyi",
                            "dataset.num_nodes": n,
                            "dataset.average_degree": degree,
                            "encoder.distance": alpha,
                            "trainer.epochs": epochs,
                            "seed": seed,
                        }
                    )
                    time_s = 1e-3 * n**exponent * (degree / 8) ** (alpha - 1) * (1.1 if seed else 0.9)
                    mlflow.log_metrics({"time_total_s": time_s, "peak_rss_mib": 500 + n / 100})


def test_plot_command_draws_both_panels_with_fitted_slopes(tracking_uri, tmp_path, capsys):
    _fake_runs(tracking_uri, {1: 1.0, 2: 1.25})
    with mlflow.start_run(experiment_id=mlflow.get_experiment_by_name("scalability").experiment_id):
        pass  # a run of another kind (no dataset params) is ignored
    output = tmp_path / "figure.png"
    plot_main(["--output", str(output), "--fit-min", "1024"])
    printed = capsys.readouterr().out
    assert output.stat().st_size > 10_000
    assert "α = 1: slope 1.000" in printed and "α = 2: slope 1.250" in printed  # size panel
    assert "α = 1: slope 0.000" in printed and "α = 2: slope 1.000" in printed  # degree panel
    report = scalability_report()
    assert report.size_slopes == pytest.approx({1: 1.0, 2: 1.25})
    assert report.by_size.n.unique().tolist() == [2] and report.by_degree.n.unique().tolist() == [2]  # seeds, once
    legend = [text.get_text() for text in report.figure.axes[0].get_legend().get_texts()]
    assert legend == ["α = 1 (slope 1.00)", "α = 2 (slope 1.25)"]
    plot_main(["--output", str(output), "--fit-min", "3000", "--fit-max", "4000"])  # no size in it: `slope nan`
    assert "α = 1: no slope: fewer than two sizes in the range" in capsys.readouterr().out
    # a degree or a size of no run: its panel says so (it printed a title over nothing, and drew an empty figure)
    plot_main(["--output", str(output), "--degree", "3"])
    assert "against |V| at average degree 3: no run (another --degree picks runs for this panel)" in (
        capsys.readouterr().out
    )
    with pytest.raises(SystemExit) as exited:
        plot_main(["--output", str(output), "--degree", "3", "--nodes", "7"])
    assert exited.value.code == (
        "igel-scalability-plot: error: no run at average degree 3 (--degree) nor at |V| = 7 (--nodes): the runs have"
        " degrees 2, 4, 8, 16 and sizes 256, 1024, 4096, 16384"
    )


def test_plot_command_option_errors_are_one_line(capsys):
    with pytest.raises(SystemExit) as exited:
        plot_main(["--degree", "many"])
    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        "igel-scalability-plot: error: argument --degree: invalid float value: 'many' (igel-scalability-plot --help"
        " lists the options)"
    ]
    with pytest.raises(SystemExit, match="^2$"):
        plot_main(["--output", "x.png", "--degree", "nan"])  # passed the range check: an empty figure
    assert "--degree must be ≥ 0" in capsys.readouterr().err


def test_plot_command_refuses_a_figure_it_cannot_write_in_one_line(tracking_uri, tmp_path, capsys):
    with pytest.raises(SystemExit):  # before reading the store
        plot_main(["--output", str(tmp_path / "x.unknownext")])
    assert (
        "--output " + str(tmp_path / "x.unknownext") + ": not a figure format matplotlib writes"
        in capsys.readouterr().err
    )
    with pytest.raises(SystemExit):
        plot_main(["--output", str(tmp_path / "x.png"), "--fit-min", "4096", "--fit-max", "1024"])
    assert "0 < --fit-min ≤ --fit-max" in capsys.readouterr().err
    _fake_runs(tracking_uri, {1: 1.0})
    (tmp_path / "folder").mkdir()
    with pytest.raises(SystemExit, match=r"^igel-scalability-plot: error: --output .*/no/such/x.png: cannot write it"):
        plot_main(["--output", str(tmp_path / "no" / "such" / "x.png")])
    capsys.readouterr()  # MLflow's lines as the store was made
    for output, why in [(str(tmp_path / "folder"), f"{tmp_path / 'folder'} is a folder"), ("", "blank")]:
        with pytest.raises(SystemExit, match="^2$"):  # an option error, not figure.png beside it or a traceback
            plot_main(["--output", output])
        assert capsys.readouterr().err.startswith(f"igel-scalability-plot: error: argument --output: {why}: give a")
    with pytest.raises(SystemExit, match="^2$"):
        plot_main(["--output", "-"])  # standard output, for the tables' commands
    assert "--output -: a figure is written to a file, not to standard output" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="^igel-scalability-plot: error: --tracking-uri is blank: give a store's"):
        plot_main(["--tracking-uri", " "])
    plot_main(["--output", str(tmp_path / "figure")])  # no suffix: a PNG, named as matplotlib names it
    assert capsys.readouterr().out.endswith(f"figure: {tmp_path / 'figure.png'}\n")
    assert (tmp_path / "figure.png").stat().st_size > 10_000


def test_plot_command_refuses_empty_stores_and_mixed_settings(tracking_uri, tmp_path):
    with pytest.raises(SystemExit, match=f"^igel-scalability-plot: error: no MLflow store at {tracking_uri} "):
        plot_main(["--output", str(tmp_path / "x.png")])
    assert not (tmp_path / "mlflow.db").exists()  # reading made none
    with pytest.raises(SystemExit, match="^igel-scalability-plot: error: --tracking-uri=/plain/path is a path, which"):
        plot_main(["--output", str(tmp_path / "x.png"), "--tracking-uri", "/plain/path"])
    use_store(tracking_uri)
    with pytest.raises(SystemExit, match="no finished Erdős–Rényi runs"):
        plot_main(["--output", str(tmp_path / "x.png")])
    _fake_runs(tracking_uri, {1: 1.0}, epochs=3)
    _fake_runs(tracking_uri, {1: 1.0}, epochs=1)
    with pytest.raises(DataError, match="trainer.epochs"):
        scalability_report()
    with pytest.raises(DataError, match="no metric 'nope'"):
        scalability_report(metric="nope", sweeps=None)


def test_plot_command_refuses_timings_of_different_hardware(tracking_uri):
    """A cluster's nodes, or a shared machine whose host changed (this project's: 2.4 times slower one day), drew
    one curve of timings that do not compare."""
    _fake_runs(tracking_uri, {1: 1.0}, hardware="AMD EPYC (AVX2, family 23 model 1, 2 cores)")
    _fake_runs(tracking_uri, {2: 1.25})  # made before the tag: not counted
    assert scalability_report().size_slopes == pytest.approx({1: 1.0, 2: 1.25})
    _fake_runs(tracking_uri, {3: 1.5}, hardware="AMD EPYC (AVX512, family 25 model 17, 2 cores)")
    with pytest.raises(DataError, match=r"^the runs ran on 2 kinds of hardware \(AMD EPYC \(AVX2, .*--sweep"):
        scalability_report()
    assert scalability_report(metric="peak_rss_mib").size_slopes  # memory is not the CPU's speed


def test_plot_command_names_a_sweep_of_no_run(tracking_uri, tmp_path):
    """A mistyped --sweep among good ones was dropped without a word: the figure showed the others' runs alone."""
    _fake_runs(tracking_uri, {1: 1.0}, sweep="a1")
    _fake_runs(tracking_uri, {2: 1.25}, sweep="b2")
    assert list(scalability_report(sweeps=["a1"]).size_slopes) == [1]
    with pytest.raises(SystemExit) as exited:
        plot_main(["--output", str(tmp_path / "x.png"), "--sweep", "a1", "--sweep", "b3", "--sweep", "c"])
    assert exited.value.code == (
        "igel-scalability-plot: error: --sweep b3, c: no finished Erdős–Rényi run of MLflow experiment 'scalability'"
        " is of this sweep; its sweeps: a1, b2"
    )
    assert not (tmp_path / "x.png").exists()


@pytest.mark.parametrize("name", ["scalability_size", "scalability_size_large", "scalability_degree"])
def test_reproduction_files_sweep_the_figure(name):
    with initialize_config_dir(config_dir=str(REPO / "experiments"), version_base="1.3"):
        plan = compose(config_name=name, overrides=["hydra.searchpath=[pkg://igel_exp.conf]"], return_hydra_config=True)
    params = plan.hydra.sweeper.params
    assert plan.task.name == "scalability" and plan.reproduce.table == "ScalabilityResults"
    assert params["encoder.distance"] == "1,2,3"
    for entry in plan.reproduce.paper:  # the authors' points are points of our sweep
        for key in plan.reproduce.rows:
            swept = params[key] if key in params else plan.dataset[key.split(".")[1]]
            assert str(entry[key]) in str(swept).split(",")
