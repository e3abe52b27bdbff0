"""igel-reproduce with real tiny clustering runs: it runs what is missing, skips what is finished, resumes."""

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import joblib
import mlflow
import pytest

from igel_exp import pipelines, tracking
from igel_exp.identity import HASH_TAG
from igel_exp.pipelines import clustering
from igel_exp.plan import load_plan
from igel_exp.reproduce import launch_plan, report_main, reproduce_main, run_plan
from igel_exp.tracking import HEARTBEAT_TAG, PROCESS_TAG, REPRODUCE_TAG, process_identity

from conftest import TINY_QUICK, heartbeat_threads, joblib_workers

pytestmark = pytest.mark.slow

TABLE = {
    "table": "Tiny",
    "caption": "tiny clustering table",
    "rows": ["encoder.distance"],
    "columns": {"PageRank": "spearman_pagerank"},
    "paper": [{"encoder.distance": 1, "PageRank": 0.728}],
}


def jobs_in_store(uri: str):
    """The store's job runs (parents carry no identity), oldest first."""
    mlflow.set_tracking_uri(uri)
    runs = mlflow.search_runs(search_all_experiments=True, order_by=["attributes.start_time ASC"])
    return runs[runs[f"tags.{HASH_TAG}"].notna()] if f"tags.{HASH_TAG}" in runs else runs.iloc[:0]


def reproduce(folder, *extra: str) -> int:
    return reproduce_main(["tiny", "--profile", "quick", "--experiments", str(folder), *extra])


def test_reproduce_runs_only_what_is_missing_and_a_rerun_does_nothing(
    experiments_dir, store_uri, compose_config, capsys
):
    experiments_dir("tiny", {"encoder.distance": "1,2", "seed": "0"}, TABLE)
    # a run made by plain igel-run with the same settings (another thread count) counts as the table's first job
    pipelines.run(compose_config("encoder.distance=1", "seed=0", *TINY_QUICK[:-1], "threads=2"))
    assert reproduce(experiments_dir.folder) == 0
    first = capsys.readouterr().out
    runs = jobs_in_store(store_uri)
    assert list(runs.status) == ["FINISHED", "FINISHED"]
    assert runs["params.encoder.distance"].tolist() == ["1", "2"]
    parents = mlflow.search_runs(search_all_experiments=True, filter_string=f"tags.`{REPRODUCE_TAG}` = 'tiny (quick)'")
    assert len(parents) == 1 and runs["tags.igel.sweep"].tolist()[1] == parents.run_id[0]
    assert "| 1 | 0.728 |" in first and "Missing" not in first

    assert reproduce(experiments_dir.folder) == 0
    assert len(jobs_in_store(store_uri)) == 2  # no job ran again
    assert capsys.readouterr().out == first


def test_a_reproductions_parent_run_says_it_is_alive_until_its_last_job_ends(experiments_dir, store_uri, monkeypatch):
    """As a sweep's (test_cli.py): a parent run without heartbeats, its command killed on another machine, stayed
    RUNNING for ever."""
    monkeypatch.setattr(tracking, "HEARTBEAT_S", 0.05)
    experiments_dir("tiny", {"encoder.distance": "1", "seed": "0,1,2"}, TABLE)
    assert reproduce(experiments_dir.folder) == 0
    parents = mlflow.search_runs(search_all_experiments=True, filter_string=f"tags.`{REPRODUCE_TAG}` = 'tiny (quick)'")
    jobs = jobs_in_store(store_uri)
    assert list(parents.status) == ["FINISHED"] and list(jobs.status) == ["FINISHED"] * 3 and not heartbeat_threads()
    assert float(parents[f"tags.{HEARTBEAT_TAG}"][0]) >= jobs.end_time.max().timestamp() - 1  # beats in whole seconds


def test_an_interrupted_reproduction_resumes_where_it_stopped(experiments_dir, store_uri, monkeypatch):
    experiments_dir("tiny", {"encoder.distance": "1,2,3", "seed": "0"}, TABLE)
    calls = []
    evaluate = clustering.centrality_correlations

    def interrupted_on_the_second_job(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt  # Ctrl-C in the middle of a run
        return evaluate(*args, **kwargs)

    monkeypatch.setattr(clustering, "centrality_correlations", interrupted_on_the_second_job)
    assert reproduce(experiments_dir.folder) == 130
    before = jobs_in_store(store_uri)
    assert list(zip(before["params.encoder.distance"], before.status, strict=True)) == [
        ("1", "FINISHED"),
        ("2", "FAILED"),
    ]
    everything = mlflow.search_runs(search_all_experiments=True)
    parents = everything[everything[f"tags.{REPRODUCE_TAG}"].notna()]
    assert list(zip(parents.status, parents["tags.error"], strict=True)) == [
        ("KILLED", "igel-reproduce stopped before the plan's last job (interrupted)")
    ]

    resumed = []
    monkeypatch.setattr(clustering, "centrality_correlations", lambda *a, **k: resumed.append(1) or evaluate(*a, **k))
    assert reproduce(experiments_dir.folder) == 0
    assert len(resumed) == 2  # distance 2 and 3; distance 1 was not repeated
    after = jobs_in_store(store_uri)
    finished = after[after.status == "FINISHED"]
    assert sorted(finished["params.encoder.distance"]) == ["1", "2", "3"]
    assert before.run_id.iloc[0] in set(finished.run_id)


def test_runs_of_an_igel_run_sweep_are_recognised(experiments_dir, store_uri, tmp_path):
    experiments_dir("tiny", {"encoder.distance": "1,2", "seed": "0"}, TABLE)
    sweep = ["-m", "--config-dir", str(experiments_dir.folder), "--config-name", "tiny", "encoder.distance=1", "seed=0"]
    command = [sys.executable, "-c", "from igel_exp.entry import igel_run; igel_run()", *sweep, *TINY_QUICK]
    result = subprocess.run(
        command, cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "MLFLOW_TRACKING_URI": store_uri}
    )
    assert result.returncode == 0, result.stderr
    ran = []
    plan = load_plan(experiments_dir.folder / "tiny.yaml", "quick")
    outcome = run_plan(plan, store_uri, runner=lambda config: ran.append(config.encoder.distance) or {})
    assert ran == [2] and outcome.finished_before == 1 and outcome.ran == 1


@pytest.mark.parametrize(
    "launch", [[], ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]], ids=["in_process", "joblib"]
)
def test_a_job_another_command_is_running_is_left_to_it_until_its_process_is_gone(experiments_dir, store_uri, launch):
    def reproduce_plan():
        return launch_plan(plan, store_uri, launch) if launch else run_plan(plan, store_uri)

    experiments_dir("tiny", {"encoder.distance": "1,2", "seed": "0"}, TABLE)
    plan = load_plan(experiments_dir.folder / "tiny.yaml", "quick")
    first = plan.jobs[0]
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # the other command's process
    client = mlflow.MlflowClient(store_uri)
    experiment = client.create_experiment(str(first.config.name))
    tags = {HASH_TAG: first.hash, PROCESS_TAG: process_identity(other.pid)}
    running = client.create_run(experiment, tags=tags).info.run_id
    try:
        outcome = reproduce_plan()
    finally:
        other.kill()
        other.wait()
    assert (outcome.ran, outcome.taken) == (1, 1)
    assert "1 runs were left to another command running them at the same time" in outcome.notes()[0]
    runs = jobs_in_store(store_uri)
    assert sorted(runs.status) == ["FINISHED", "RUNNING"] and running in set(runs.run_id)  # not run a second time
    outcome = reproduce_plan()  # its process is gone: the job is this command's again
    assert (outcome.ran, outcome.taken) == (1, 0)


def test_two_reproductions_of_a_table_at_once_share_its_jobs(experiments_dir, store_uri, tmp_path):
    experiments_dir("tiny", {"encoder.distance": "1,2,3,4", "seed": "0"}, TABLE)
    code = "import sys; from igel_exp.reproduce import reproduce_main; sys.exit(reproduce_main(sys.argv[1:]))"
    command = [sys.executable, "-c", code, "tiny", "--profile", "quick", "--experiments", str(experiments_dir.folder)]
    both = [subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in "ab"]
    for process in both:
        _, err = process.communicate(timeout=600)
        assert process.returncode == 0, err.decode()
    runs = jobs_in_store(store_uri)
    assert len(runs) == 4 and set(runs.status) == {"FINISHED"}  # each job once; without the claim each ran twice
    assert runs[f"tags.{HASH_TAG}"].nunique() == 4


def test_two_reproductions_of_a_transfer_table_at_once_train_each_link_prediction_run_once(experiments_dir, tmp_path):
    transfer = {"table": "T", "caption": "t", "rows": ["dataset.name"], "columns": {"A on B": "auc"}}
    params = {"task.source": "miserables", "dataset": "miserables,miserables_cloned", "seed": "0"}
    experiments_dir("tr", params, transfer, experiment="transfer_link_prediction")
    code = "import sys; from igel_exp.reproduce import reproduce_main; sys.exit(reproduce_main(sys.argv[1:]))"
    command = [sys.executable, "-c", code, "tr", "--profile", "quick", "--experiments", str(experiments_dir.folder)]
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    both = []
    for _ in "ab":  # the second while the first trains A's link-prediction run, which both transfer jobs need
        both.append(subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        time.sleep(1)
    for process in both:
        _, err = process.communicate(timeout=600)
        assert process.returncode == 0, err.decode()
    runs = jobs_in_store(env["MLFLOW_TRACKING_URI"])
    assert set(runs.status) == {"FINISHED"}
    assert runs[f"tags.{HASH_TAG}"].is_unique, runs["tags.mlflow.runName"].tolist()  # each trained once (was twice)
    assert len(runs) == 5  # A's link prediction, B's for each B, and the two transfers


def test_missing_data_is_reported_and_the_other_jobs_on_it_are_not_attempted(
    experiments_dir, store_uri, tmp_path, capsys
):
    empty = tmp_path / "no-data"
    empty.mkdir()
    quick = {"params": {}, "overrides": ["data.download=false", f"data.root={empty}", *TINY_QUICK]}
    table = {"table": "Needs data", "rows": [], "columns": {"AUC": "auc"}, "paper": [{"AUC": 0.976}], "quick": quick}
    experiments_dir("tiny", {"seed": "range(3)"}, table, experiment="link_prediction")
    assert reproduce(experiments_dir.folder) == 0
    captured = capsys.readouterr()
    assert "igel-reproduce: tiny: data missing: Facebook.edgelist.gz is missing" in captured.err
    assert "- 1 failed (DataError: Facebook.edgelist.gz is missing: download" in captured.out
    assert "Note: 2 runs on data that another run found missing were not attempted" in captured.out
    assert list(jobs_in_store(store_uri).status) == ["FAILED"]
    # the report, from the store alone, says why
    assert report_main(["tiny", "--profile", "quick", "--experiments", str(experiments_dir.folder)]) == 0
    text = capsys.readouterr().out
    assert "- 1 failed (DataError: Facebook.edgelist.gz is missing" in text and "- 2 not run: seed=1; seed=2" in text


def test_the_report_reads_a_store_without_importing_torch_or_igraph(experiments_dir, store_uri):
    """igel-report composes configs and reads runs, it never trains: torch's and igraph's imports (3.5 s on the 2-core
    machine) are not its to pay."""
    experiments_dir("tiny", {"encoder.distance": "1", "seed": "0"}, TABLE)
    assert reproduce(experiments_dir.folder) == 0
    code = (
        "import sys; from igel_exp.reproduce import report_main; status = report_main(sys.argv[1:]);"
        " print(status, *sorted({'torch', 'igraph'} & set(sys.modules)))"
    )
    argv = ["tiny", "--profile", "quick", "--experiments", str(experiments_dir.folder), "--tracking-uri", store_uri]
    result = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=300)
    assert "| 1 | 0.728 |" in result.stdout, result.stdout + result.stderr[-2000:]
    assert result.stdout.splitlines()[-1] == "0"


def test_a_log_file_hydra_cannot_write_names_the_file(experiments_dir, store_uri, tmp_path):
    """hydra.job.name=a/b puts each job's log file in a folder no one made: the launcher's failure names the file and
    the key (it read `ValueError: Unable to configure handler 'file'`)."""
    experiments_dir("tiny", {"encoder.distance": "1", "seed": "0"}, TABLE)
    code = "import sys; from igel_exp.reproduce import reproduce_main; sys.exit(reproduce_main(sys.argv[1:]))"
    argv = ["tiny", "--profile", "quick", "--experiments", str(experiments_dir.folder), "--tracking-uri", store_uri]
    argv += [f"hydra.sweep.dir={tmp_path}/sweep", "hydra.job.name=a/b"]
    result = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=300)
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1] == (
        f"igel-reproduce: error: tiny: the launcher failed: {tmp_path}/sweep/0/a/b.log: No such file or directory"
        " (Hydra's log file: hydra.job.name names it, in hydra.run.dir (hydra.sweep.dir with -m))"
    )


def test_reproduce_needs_the_tables_named(capsys):
    assert reproduce_main(["threads=1"]) == 2
    assert capsys.readouterr().err.strip() == "igel-reproduce: error: name the tables to reproduce, or all"


@pytest.mark.parametrize(
    "main, argv, line",
    [
        (report_main, ["--profile", "slow"], "igel-report: error: argument --profile: invalid choice: 'slow' (choose"),
        (reproduce_main, ["tiny", "-m"], "igel-reproduce: error: unrecognized arguments: -m"),
        # the dry run's list went to standard output, the file named was not written, unsaid (exit 0)
        (reproduce_main, ["tiny", "--dry-run", "-o", "plan.md"], "igel-reproduce: error: --output plan.md: --dry-run"
         " prints the runs to do on standard output, no tables (> FILE keeps them)"),
        (reproduce_main, ["tiny", "--dry-run", "--format", "csv"], "igel-reproduce: error: --format csv: --dry-run"),
    ],
)  # fmt: skip
def test_option_errors_are_one_line_pointing_to_help(capsys, main, argv, line):
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2  # as argparse's
    [error] = capsys.readouterr().err.splitlines()  # no usage block above it
    prog = line.split(":")[0]
    assert error.startswith(line) and error.endswith(f" ({prog} --help lists the options)")


def test_an_experiments_file_given_for_the_folder_is_named_so(experiments_dir, capsys):
    path = experiments_dir("tiny", {"seed": "0"}, TABLE)
    assert report_main(["--experiments", str(path)]) == 1
    assert reproduce_main(["tiny", "--dry-run", "--experiments", str(path)]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"{prog}: error: --experiments {path}: is a file; the option takes the folder of experiments files"
        for prog in ("igel-report", "igel-reproduce")
    ]


GRID = {**TABLE, "rows": [], "select": {"metric": "spearman_degree", "mode": "max", "seeds": [0]}}


def test_select_then_confirm_runs_the_grid_on_the_selection_seed_then_the_chosen_point_on_every_seed(
    experiments_dir, store_uri, capsys
):
    experiments_dir("grid", {"encoder.distance": "1,2,3", "seed": "range(3)"}, {**GRID, "paper": []})
    assert (
        reproduce_main(["grid", "--profile", "quick", "--experiments", str(experiments_dir.folder), "--dry-run"]) == 0
    )
    dry = capsys.readouterr().out
    assert dry.startswith("grid (quick): 3 (then 2 more: the chosen points' other seeds) of 5 runs to do, about")
    assert "all: 5 runs to do, about" in dry
    assert "two at a time (hydra/launcher=joblib hydra.launcher.n_jobs=2 threads=1)" in dry

    assert reproduce_main(["grid", "--profile", "quick", "--experiments", str(experiments_dir.folder)]) == 0
    text = capsys.readouterr().out
    runs = jobs_in_store(store_uri)
    assert list(runs.status) == ["FINISHED"] * 5
    first = runs.iloc[:3]  # the selection: every point on seed 0, then the best point's seeds 1 and 2
    assert list(first["params.seed"]) == ["0"] * 3
    best = first.loc[first["metrics.spearman_degree"].astype(float).idxmax(), "params.encoder.distance"]
    assert list(zip(runs["params.encoder.distance"][3:], runs["params.seed"][3:], strict=True)) == [
        (best, "1"),
        (best, "2"),
    ]
    assert "(n=3)" in text and f"encoder.distance={best}" in text and "Missing" not in text
    assert "Select, then confirm: every grid point runs on seed 0" in text
    assert reproduce_main(["grid", "--profile", "quick", "--experiments", str(experiments_dir.folder)]) == 0
    assert len(jobs_in_store(store_uri)) == 5  # a rerun does nothing
    capsys.readouterr()
    # a fourth seed of the chosen point is priced by the point's runs, which name the hardware the job would run on
    more = ["grid", "--profile", "quick", "--experiments", str(experiments_dir.folder), "--dry-run", "seed=range(4)"]
    assert reproduce_main(more) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith("; 1 from the store's runs of the same grid point")


def test_the_dry_run_divides_the_wall_time_among_the_launchers_jobs_up_to_the_cores(experiments_dir, store_uri, capsys):
    experiments_dir("grid", {"encoder.distance": "1,2,3", "seed": "range(100)"}, {**TABLE, "paper": []})

    def times(*launch: str) -> list[str]:
        folder = str(experiments_dir.folder)
        assert reproduce_main(["grid", "--experiments", folder, "--dry-run", *launch]) == 0
        last = capsys.readouterr().out.strip().splitlines()[-1]
        return re.findall(r"about (\d+) min", last)

    sequential, two = times()
    assert abs(int(two) - int(sequential) / 2) <= 1 and int(two) > 1
    assert times("hydra/launcher=joblib", "hydra.launcher.n_jobs=1") == [sequential, sequential]
    assert times("hydra/launcher=joblib", "hydra.launcher.n_jobs=4") == [sequential, two]  # 2 cores


def test_the_dry_run_says_how_many_jobs_joblib_runs_at_once_as_joblib_reads_n_jobs(experiments_dir, store_uri, capsys):
    """joblib's n_jobs=-1 is all the machine's cores, -2 all but one: the dry run said "two at a time
    (hydra/launcher=joblib hydra.launcher.n_jobs=2 threads=1)" of both, and priced -2 two at a time on 2 cores, where
    joblib runs one."""
    experiments_dir("grid", {"encoder.distance": "1,2,3", "seed": "range(100)"}, {**TABLE, "paper": []})
    cores = joblib.cpu_count()

    def total(*launch: str) -> str:
        folder = str(experiments_dir.folder)
        assert reproduce_main(["grid", "--experiments", folder, "--dry-run", *launch]) == 0
        return capsys.readouterr().out.strip().splitlines()[-1]

    def minutes(line: str) -> list[int]:
        return [int(value) for value in re.findall(r"about (\d+) min", line)]

    def at_once(jobs: int) -> str:
        return "one at a time" if jobs == 1 else f"{jobs} at a time" if jobs <= 2 else "2 at a time, as many as"

    [sequential, _] = minutes(total())
    for n_jobs, jobs, rule in [
        ("-1", cores, f"all {cores} cores of this machine"),
        ("-2", max(cores - 1, 1), f"all {cores} cores of this machine but 1"),
    ]:
        line = total("hydra/launcher=joblib", f"hydra.launcher.n_jobs={n_jobs}")
        assert f"{at_once(jobs)}" in line and f"(joblib: hydra.launcher.n_jobs={n_jobs}: {rule}" in line, line
        assert "two at a time" not in line
        alone, together = minutes(line)
        assert alone == sequential and abs(together - sequential / min(jobs, 2)) <= 1
    # the joblib launcher's own default is -1; Hydra's basic launcher runs one job at a time
    default = f"(joblib: hydra.launcher.n_jobs=-1, the joblib launcher's default: all {cores} cores of this machine"
    assert default in total("hydra/launcher=joblib")
    assert "one at a time (Hydra's basic launcher)" in total("hydra/launcher=basic")


def test_the_dry_run_counts_runs_that_tables_share_once(experiments_dir, store_uri, capsys):
    experiments_dir("first", {"encoder.distance": "1,2", "seed": "0"}, TABLE)
    experiments_dir("second", {"encoder.distance": "2,3", "seed": "0"}, {**TABLE, "table": "Second"})
    folder = str(experiments_dir.folder)
    assert reproduce_main(["first", "second", "--profile", "quick", "--experiments", folder, "--dry-run"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if not line.startswith(" ")]
    assert lines[0].startswith("first (quick): 2 of 2 runs to do")
    assert lines[1].startswith("second (quick): 1 (1 more in a table above) of 2 runs to do")
    assert lines[2].startswith("all: 3 runs to do")


def test_the_dry_run_counts_the_link_prediction_runs_a_transfer_table_trains_first(experiments_dir, store_uri, capsys):
    """A transfer job trains A's and B's link-prediction runs where the store lacks them: `igel-reproduce
    transfer_link_prediction --dry-run` priced its 20 jobs alone, 5 min of an hour and 20 on 2 cores."""
    transfer = {"table": "T", "caption": "t", "rows": ["dataset.name"], "columns": {"A on B": "auc"}}
    params = {"task.source": "miserables", "dataset": "miserables,miserables_cloned", "seed": "0"}
    experiments_dir("tr", params, transfer, experiment="transfer_link_prediction")
    dry_run = ["tr", "--profile", "quick", "--experiments", str(experiments_dir.folder), "--dry-run"]

    def lines() -> list[str]:
        assert reproduce_main(dry_run) == 0
        return [line for line in capsys.readouterr().out.splitlines() if not line.startswith(" ")]

    # B's own for each B (the profile's settings), and A's for B = miserables_cloned (the file's: A takes
    # task.source_overrides only); for B = miserables, A's is B's own (task.source = dataset)
    first, total = lines()
    assert first.startswith("tr (quick): 2 (and 3 link-prediction runs that its jobs train first) of 2 runs to do")
    assert total.startswith("all: 5 runs to do")
    # B = miserables runs: its one link-prediction run is in the store; the other B's own and its A are not
    assert reproduce_main([*dry_run[:-1], "dataset=miserables"]) == 0
    capsys.readouterr()
    first, total = lines()
    assert first.startswith("tr (quick): 1 (and 2 link-prediction runs that its jobs train first) of 2 runs to do")
    assert total.startswith("all: 3 runs to do")


def test_the_dry_run_says_its_sweep_line_runs_the_jobs_reproduce_skip_leaves_out(experiments_dir, store_uri, capsys):
    experiments_dir("tiny", {"encoder.distance": "1,2", "seed": "0"}, {**TABLE, "skip": [{"encoder.distance": 2}]})
    assert reproduce(experiments_dir.folder, "--dry-run") == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("tiny (quick): 1 (1 of the sweep left out by reproduce.skip) of 1 runs to do, about")
    assert "; sweep (reproduce.skip's jobs included): igel-run -m " in first


def test_reproduce_through_the_joblib_launcher_skips_what_is_finished(experiments_dir, store_uri, capsys):
    experiments_dir("tiny", {"encoder.distance": "1,2", "seed": "0"}, TABLE)
    pipelines.run(compose_config_for(experiments_dir, "encoder.distance=1"))  # the first job is already done
    launch = ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]
    assert reproduce(experiments_dir.folder, *launch) == 0
    text = capsys.readouterr().out
    runs = jobs_in_store(store_uri)
    assert list(runs.status) == ["FINISHED", "FINISHED"] and list(runs["params.encoder.distance"]) == ["1", "2"]
    [parent] = mlflow.search_runs(
        search_all_experiments=True, filter_string=f"tags.`{REPRODUCE_TAG}` = 'tiny (quick)'"
    ).itertuples()
    assert parent.status == "FINISHED" and runs["tags.igel.sweep"].tolist()[1] == parent.run_id
    assert "| 1 | 0.728 |" in text and "Missing" not in text
    if Path("/proc/self/stat").exists():  # joblib's workers are stopped with the jobs done, not at the exit
        assert not joblib_workers()
    assert reproduce(experiments_dir.folder, *launch) == 0
    assert len(jobs_in_store(store_uri)) == 2


def compose_config_for(experiments_dir, *overrides):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(experiments_dir.folder), version_base="1.3"):
        return compose("tiny", ["hydra.searchpath=[pkg://igel_exp.conf]", "seed=0", *TINY_QUICK, *overrides])


def test_a_transfer_table_runs_through_a_launcher_with_only_its_tables_on_stdout(experiments_dir, store_uri, capsys):
    transfer = {"table": "T", "caption": "t", "rows": ["dataset.name"], "columns": {"A on B": "auc"}}
    params = {"task.source": "miserables", "dataset": "miserables,miserables_cloned", "seed": "0"}
    experiments_dir("tr", params, transfer, experiment="transfer_link_prediction")
    command = ["tr", "--profile", "quick", "--experiments", str(experiments_dir.folder), "hydra/launcher=basic"]
    assert reproduce_main(command) == 0  # every job failed: A's config was composed in the launcher's Hydra context
    out = capsys.readouterr().out
    assert out.startswith("### T (tr)")  # the launcher's and the jobs' log lines were on stdout, amid the tables
    assert "| miserables_cloned | 0." in out and "Missing" not in out


def test_an_unknown_launcher_is_one_line(experiments_dir, store_uri, capsys):
    experiments_dir("tiny", {"encoder.distance": "1", "seed": "0"}, TABLE)
    assert reproduce(experiments_dir.folder, "hydra/launcher=nope") == 1
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert (
        error.startswith("igel-reproduce: error: hydra/launcher=nope: ")
        and "Could not find 'hydra/launcher/nope'" in error
    )


def test_a_dry_run_refuses_an_unknown_launcher_or_its_bad_settings_as_the_run_does(experiments_dir, store_uri, capsys):
    experiments_dir("tiny", {"encoder.distance": "1", "seed": "0"}, TABLE)
    assert reproduce(experiments_dir.folder, "--dry-run", "hydra/launcher=nope") == 1
    captured = capsys.readouterr()
    [error] = captured.err.strip().splitlines()
    assert captured.out == "" and error.startswith("igel-reproduce: error: hydra/launcher=nope: ")
    assert "Could not find 'hydra/launcher/nope'" in error
    # settings joblib refuses when the jobs launch: the dry run priced them "one job at a time"
    assert reproduce(experiments_dir.folder, "--dry-run", "hydra/launcher=joblib", "hydra.launcher.n_jobs=0") == 1
    assert capsys.readouterr().err == (
        "igel-reproduce: error: hydra.launcher: joblib refuses its settings: n_jobs == 0 in Parallel has no meaning\n"
    )


@pytest.mark.parametrize(
    "override, line",
    [
        ("trainer.lr=abc", r"tiny: tiny.yaml with encoder.distance=1 seed=0 .*: trainer.lr=abc: expected a number"),
        (
            "trainer.epochs=0",
            r"tiny: tiny.yaml with encoder.distance=1 seed=0 .*: trainer.epochs=0: expected an integer ≥ 1",
        ),
        ("task.k_max=1", r"tiny: encoder.distance=1 seed=0: task.k_min=2 is above task.k_max=1"),
    ],
)
def test_a_bad_value_stops_igel_reproduce_in_one_line_before_any_run(
    experiments_dir, tmp_path, monkeypatch, capsys, override, line
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    experiments_dir("tiny", {"encoder.distance": "1,2", "seed": "range(2)"}, TABLE)
    assert reproduce(experiments_dir.folder, override) == 1
    assert re.fullmatch(f"igel-reproduce: error: {line}", capsys.readouterr().err.strip().splitlines()[-1])
    assert not (tmp_path / "mlflow.db").exists()


def test_an_override_that_fails_every_table_is_one_line(experiments_dir, store_uri, capsys):
    experiments_dir("first", {"encoder.distance": "1,2", "seed": "0"}, TABLE)
    experiments_dir("second", {"encoder.distance": "2,3", "seed": "0"}, {**TABLE, "table": "Second"})
    folder = str(experiments_dir.folder)
    assert reproduce_main(["all", "--experiments", folder, "--dry-run", "encoder.nonsense=3"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""  # no estimate of nothing
    [line] = captured.err.strip().splitlines()
    assert line.startswith("igel-reproduce: error: first: first.yaml with") and line.endswith("(the same in second)")
