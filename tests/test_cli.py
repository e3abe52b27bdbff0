"""igel-run as users call it: composed configs, end-to-end runs, errors, packaging."""

import contextlib
import functools
import logging
import os
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import mlflow
import numpy as np
import pytest
import torch
from hydra.errors import ConfigCompositionException

from igel_exp import pipelines, tracking
from igel_exp.cli import embed as embed_main
from igel_exp.cli import main, one_line_errors
from igel_exp.errors import BudgetError, ConfigError
from igel_exp.tracking import HARDWARE_TAG, HEARTBEAT_TAG, use_store
from igel_exp.training import emulated_bfloat16, hardware

from conftest import (
    REPO,
    heartbeat_threads,
    joblib_workers,
    keep_reading,
    kill_leaves_no_process,
    start_training,
)

QUICK = ["trainer.epochs=1", "trainer.walk_length=20", "progress=false"]


def igel_run(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """The console script's code, run as a separate process in `cwd` like a user would, with no tracking
    URI inherited (mlflow.set_tracking_uri exports one to the environment of later subprocesses)."""
    command = [sys.executable, "-c", "from igel_exp.entry import igel_run; igel_run()", *args]
    clean = {key: value for key, value in os.environ.items() if key != "MLFLOW_TRACKING_URI"}
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, env={**clean, **(env or {})}, timeout=300)


def runs(tmp_path: Path):
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
    return mlflow.search_runs(search_all_experiments=True)


def test_default_config_is_the_clustering_experiment(compose_config):
    config = compose_config()
    assert config.name == "clustering" and config.task.name == "clustering"
    assert config.dataset.name == "miserables_cloned"
    assert (config.encoder.distance, config.trainer.dim, config.trainer.walk_length) == (1, 8, 200)


def test_command_line_overrides_win_over_the_experiment(compose_config):
    config = compose_config("dataset=edgelist", "dataset.path=g.txt", "encoder.distance=3")
    assert (config.dataset.name, config.dataset.path, config.encoder.distance) == ("edgelist", "g.txt", 3)


def test_unknown_dataset_lists_the_valid_ones(compose_config):
    with pytest.raises(ConfigCompositionException, match="(?s)Available options.*facebook.*miserables_cloned"):
        compose_config("dataset=cora")


def test_bad_distance_fails_before_any_run(compose_config, tracking_uri, tmp_path):
    with pytest.raises(ConfigError, match="encoder.distance"):
        pipelines.run(compose_config("encoder.distance=-1"))
    assert runs(tmp_path).empty


HERE = ["hydra.run.dir=.", "hydra.sweep.dir=multirun", "hydra.output_subdir=null", "hydra/job_logging=none"]

# The invalid invocations of issue 17, which passed Hydra's own checks: all but the first used to leave a FAILED run
INVALID = [
    (["encoder.distance=-1"], "encoder.distance=-1: expected an integer ≥ 0"),
    (["encoder.distance=0"], "encoder.distance=0 encodes every node alike (its 0-hop ego graph is the node alone"),
    (["experiment=link_prediction", "encoder.distance=0"], "encoder.distance=0 encodes every node alike"),
    (["trainer.epochs=0"], "trainer.epochs=0: expected an integer ≥ 1"),
    (["dataset=edgelist", "dataset.path=missing.txt"], "missing.txt: edge list file not found"),
    (["dataset=edgelist", "dataset.path=empty.txt"], "empty.txt: the edge list file is empty"),
    (["dataset=edgelist", "dataset.path=folder"], "folder: is a directory; give the edge list file"),
    (["trainer.lr=-1"], "trainer.lr=-1.0: expected a number > 0"),
    (["trainer.dim=0"], "trainer.dim=0: expected an integer ≥ 1"),
    (["task.k_min=5", "task.k_max=3"], "task.k_min=5 is above task.k_max=3"),
    (["threads=0"], "threads=0: expected an integer ≥ 1"),
    (["trainer.device=tpu"], "trainer.device=tpu: expected one of auto, cpu, mps, cuda, cuda:N, xpu or xpu:N"),
    (["experiment=sister_cities", "dataset=facebook"], "dataset=facebook has no node table: task=sister_cities needs"),
    (["experiment=ppi", "dataset=miserables"], "dataset=miserables has no train/valid/test node splits and labels"),
    (["trainer.lr=abc"], "trainer.lr=abc: expected a number"),
    (["trainer.batch_scale=true"], "trainer.batch_scale=true: expected an integer"),  # as typed, not Python's True
    (["trainer.noise=gaussian"], "trainer.noise=gaussian: expected one of uniform, degree"),
    (
        ["dataset.path=graph.txt"],
        "dataset.path is not a setting of dataset=miserables_cloned (its settings: name, bridge_stream);",
    ),
    (["encoder.encoded_distance=0"], "encoder.encoded_distance=0 encodes every node alike"),
    (["tracking.uri=sqlite://"], "tracking.uri=sqlite:// keeps the runs in memory, lost when the process ends"),
    (["=5"], "Config group override must be a string or a list. Got int"),  # Hydra's words, without its traceback
    (["seed=${nope}"], "seed: Interpolation key 'nope' not found"),
    (["seed=null"], "seed=null: expected a value"),
    (["tracking.uri=runs.db"], "tracking.uri=runs.db is a path, which MLflow takes for a file store"),
    (["tracking.uri="], "tracking.uri=: expected one of the non-blank URIs"),  # was ./mlflow.db, unsaid
    # a file name that Hydra reads as a number (it looked for the file '100000.0', or '2024' typed as 2_024)
    (["dataset=edgelist", "dataset.path=1e5"], "dataset.path=100000.0: Hydra read the value as a number (1e5 is"),
    (
        ["dataset=edgelist", "dataset.path=2024"],
        "dataset.path=2024: Hydra read the value as a number (1e5 is 100000.0 to it, 1_000 is 1000), not as text: quote"
        """ it as typed, inside the shell's quotes (dataset.path="'2024'")""",
    ),
    (["name=[a]"], "name=[a]: expected a string"),  # was "name=['a']: Error merging override name=[a]"
    (["name=é"], "name=é: Hydra's override grammar cannot read it; quote a value that holds spaces or characters"),
    (["protocol=authors", "trainer.noise=degree"], "trainer.batching=buckets draws its negatives uniformly"),
    # settings a run logged as its own and never read
    (["experiment=link_prediction", "task.source=astroph"], "task.source=astroph is read by experiment=transfer_link"),
    (["experiment=ppi_features", "trainer.pretrain.epochs=5"], "trainer.pretrain.epochs=5 pre-trains IGEL's W, which"),
    (["encoder=deepwalk", "trainer.precision=bfloat16"], "trainer.precision=bfloat16 applies to IGEL's products"),
    (["~protocol"], "~protocol: protocol cannot be left out; choose one of its options (protocol=OPTION, listed by"),
    (["~trainer"], "~trainer: trainer cannot be left out; choose one of"),  # was "trainer.device: Missing key device"
]


def exit_line(*args: str) -> str:
    """igel-run's code run in this process on `args`: the message it exits with."""
    with pytest.MonkeyPatch.context() as patch, pytest.raises(SystemExit) as exited:
        patch.setattr(sys, "argv", ["igel-run", *args])
        main()
    return exited.value.code


def test_invalid_invocations_fail_in_one_line_before_any_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "folder").mkdir()
    (tmp_path / "broken" / "experiment").mkdir(parents=True)
    (tmp_path / "broken" / "experiment" / "broken.yaml").write_text("a: [1, 2\nb: 3\n")
    for overrides, line in INVALID:
        assert exit_line(*HERE, *overrides).startswith(f"igel-run: error: {line}"), overrides
    assert exit_line("--config-dir", "broken", *HERE, "experiment=broken") == (
        f"igel-run: error: {tmp_path}/broken/experiment/broken.yaml:2: not valid YAML"
        " (expected ',' or ']', but got ':')"
    )
    assert not (tmp_path / "mlflow.db").exists()  # no run, not even a store
    # a sweep's folder where none can be made: Hydra made it at its first job, after the store and the parent run
    line = exit_line("-m", "seed=0,1", "hydra.sweep.dir=empty.txt/sweep", *HERE[2:], "trainer.epochs=1")
    assert line == (
        "igel-run: error: empty.txt/sweep: Not a directory (hydra.run.dir, or hydra.sweep.dir with -m, sets where Hydra"
        " writes)"
    )
    assert not (tmp_path / "mlflow.db").exists()


def test_a_key_set_twice_is_said_and_the_last_one_is_used(tmp_path):
    """`igel-run seed=1 … seed=2` ran seed 2 without a word (`-m seed=0,1,2 … seed=3`: seed 3 alone). It still does, as
    Hydra's scripts expect of an override added to a list, but says so in one line per key set again."""
    done = igel_run("--cfg", "job", "seed=1", "+dataset@x=miserables", "seed=2", "~dataset@x", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("igel-run: warning:")]
    assert warnings == [
        "igel-run: warning: seed is set twice (seed=1, then seed=2): Hydra keeps the last",
        "igel-run: warning: dataset@x is set twice (+dataset@x=miserables, then ~dataset@x): Hydra keeps the last",
    ]
    assert "\nseed: 2\n" in done.stdout
    assert not (tmp_path / "mlflow.db").exists()


def test_an_options_name_set_on_its_own_is_refused(tmp_path, monkeypatch):
    """`experiment=link_prediction dataset.name=astroph` ran AstroPh with the settings that conf/specialise/ gives the
    default dataset=facebook (α = 2, 10 epochs; AstroPh's are α = 3, 8 epochs); `encoder.name=deepwalk` ran DeepWalk
    logging IGEL's settings as its own; `task=link_prediction` ran link prediction on Les Misérables, filed under the
    clustering experiment. Refused, as a single run, a sweep and igel-reproduce's overrides, before any store."""
    from igel_exp.plan import default_experiments_dir, load_plan

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    line = "igel-run: error: dataset.name names the option that dataset= picks, and is not set on its own: pick the"
    assert exit_line(*HERE, "experiment=link_prediction", "dataset.name=astroph").startswith(line)
    line = "igel-run: error: encoder.name names the option that encoder= picks"
    assert exit_line("-m", "seed=0,1", *HERE, "encoder.name=deepwalk").startswith(line)
    line = "igel-run: error: task= is picked by the experiment, and is not set on its own: pick the experiment"
    assert exit_line(*HERE, "task=link_prediction").startswith(line)  # ran LP on Les Misérables, filed as clustering
    assert not (tmp_path / "mlflow.db").exists()
    plan = default_experiments_dir() / "miserables_correlations.yaml"
    with pytest.raises(ConfigError, match=r"^miserables_correlations.yaml: task.name names the option that task="):
        load_plan(plan, "quick", ["task.name=link_prediction"])
    with pytest.raises(ConfigError, match=r"^miserables_correlations.yaml: task= is picked by the experiment"):
        load_plan(plan, "quick", ["task=link_prediction"])


def test_a_users_dataset_file_without_its_schema_line_takes_overrides(tmp_path):
    path = tmp_path / "graph.txt"
    path.write_text("".join(f"{i} {i + 1}\n{i} {i + 2}\n" for i in range(0, 12, 3)))  # degrees 1 to 3
    (tmp_path / "mine" / "dataset").mkdir(parents=True)
    (tmp_path / "mine" / "dataset" / "mygraph.yaml").write_text("name: edgelist\npath: nowhere.txt\nnode_ids: int\n")
    tiny = ["trainer.epochs=1", "trainer.walk_length=10", "task.k_max=3", "progress=false", *HERE]
    done = igel_run("--config-dir", "mine", "dataset=mygraph", f"dataset.path={path}", *tiny, cwd=tmp_path)
    assert done.returncode == 0, done.stderr  # was a TypeError traceback from the check of the override
    assert runs(tmp_path)["params.dataset.path"].tolist() == [str(path)]


@pytest.mark.parametrize("folder", ["run?2", "a#b", "pc%20x"])
def test_a_working_directory_the_default_stores_uri_cannot_carry_is_one_line(tmp_path, monkeypatch, folder):
    (tmp_path / folder).mkdir()
    monkeypatch.chdir(tmp_path / folder)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    line = exit_line(*HERE, "trainer.epochs=1")
    assert line.startswith(f"igel-run: error: the working directory {tmp_path / folder} holds"), line
    assert sorted(path.name for path in tmp_path.iterdir()) == [folder]  # `?`: a store made as tmp_path/run, then
    assert not any((tmp_path / folder).iterdir())  # "Permission denied"; `#`: a stray folder; `%`: cannot open


def test_an_experiment_file_hydra_cannot_compose_says_why_in_one_line(tmp_path, monkeypatch):
    """Hydra's reason is on its second line, which the one line left out: "… raised while composing config:" and
    nothing after it; a file without its package line read "Could not override 'dataset@experiment.dataset'." or,
    without defaults, named `experiment` as an unknown setting of the whole config."""
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "mine" / "experiment"
    folder.mkdir(parents=True)
    (folder / "listy.yaml").write_text("# @package _global_\n- a\n- b\n")
    (folder / "unpackaged.yaml").write_text("defaults:\n  - override /dataset: miserables\nname: mine\n")
    (folder / "empty.yaml").write_text("")
    (folder / "plain.yaml").write_text("trainer:\n  epochs: 1\n")
    mine = ["--config-dir", str(tmp_path / "mine")]
    for name in ("empty", "plain"):  # both read "experiment is not a setting of Config (its settings: …)"
        assert exit_line(*mine, f"experiment={name}") == (
            f"igel-run: error: experiment/{name}.yaml: Hydra nests its keys under `experiment`, no setting (an"
            " experiment file starts with `# @package _global_`)"
        )
    assert exit_line(*mine, "experiment=listy") == (
        "igel-run: error: In 'experiment/listy': ConfigTypeError raised while composing config: Cannot merge"
        " DictConfig with ListConfig"
    )
    assert exit_line(*mine, "experiment=unpackaged") == (
        "igel-run: error: In 'experiment/unpackaged': Could not override 'dataset@experiment.dataset'. Did you mean to"
        " override dataset? (an experiment file starts with `# @package _global_`)"
    )


def test_a_bad_job_stops_a_sweep_before_its_store_and_its_first_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert exit_line("-m", *HERE, "seed=0,1", "trainer.epochs=1,0") == (
        "igel-run: error: the job seed=0 trainer.epochs=0: trainer.epochs=0: expected an integer ≥ 1"
    )
    # the job's overrides as typed, not as Hydra's sweep expansion escapes them (sqlite\\:///)
    assert exit_line("-m", *HERE, "tracking.uri=sqlite:///elsewhere.db", "trainer.epochs=1,0") == (
        "igel-run: error: the job tracking.uri=sqlite:///elsewhere.db trainer.epochs=0: trainer.epochs=0: expected an"
        " integer ≥ 1"
    )
    assert exit_line("-m", *HERE, "seed=0,1", "trainer.lr=0.1,abc") == (
        "igel-run: error: config.yaml with seed=0 trainer.lr=abc: trainer.lr=abc: expected a number"
    )
    experiments = ["--config-dir", str(REPO / "experiments"), "--config-name", "miserables_correlations"]
    assert exit_line("-m", *experiments, *HERE, "trainer.walk_length=0").startswith(
        "igel-run: error: the job protocol=faithful encoder.distance=1 seed=0 trainer.walk_length=0:"
        " trainer.walk_length=0:"
    )
    assert exit_line("-m", *HERE, "trainer.lr=abc") == "igel-run: error: trainer.lr=abc: expected a number"
    assert exit_line("-m", *HERE, "seed=range(0,0)") == (
        "igel-run: error: the sweep has no jobs (a sweep over an empty range or list?)"
    )
    # a sweep Hydra cannot expand: Python's ValueError named no key, and Hydra, taking it for a warning, went on to make
    # the store and a parent run
    assert exit_line("-m", *HERE, "seed=0,1", "trainer.epochs=range(1,3,0)") == (
        "igel-run: error: the sweep: trainer.epochs=range(1,3,0): range() arg 3 must not be zero"
    )
    assert exit_line("-m", *HERE, "dataset=miserables,miserables_cloned", "dataset.num_nodes=64") == (
        "igel-run: error: no job of the sweep takes dataset.num_nodes; dataset=erdos_renyi takes it"
    )
    # a dataset absent from the data root, not to be downloaded: found before the runs on the others, not after them
    offline = ["data.download=false", "data.root=no-data"]
    assert exit_line("-m", *HERE, "dataset=miserables,facebook", *offline) == (
        "igel-run: error: the job dataset=facebook data.download=false data.root=no-data: Facebook.edgelist.gz is"
        f" missing: download https://snap.stanford.edu/data/facebook_combined.txt.gz into {tmp_path}/no-data/Facebook/"
        " as Facebook.edgelist.gz (or set data.download=true, or point data.root / $IGEL_DATA_DIR at a folder that"
        " has it)"
    )
    # every job's config before what the jobs need at hand
    assert exit_line("-m", *HERE, "dataset=facebook,miserables", *offline, "trainer.epochs=1,0").startswith(
        "igel-run: error: the job dataset=facebook data.download=false data.root=no-data trainer.epochs=0:"
        " trainer.epochs=0: expected"
    )
    # the launcher's settings, which joblib reads as the jobs launch: a traceback after the store and parent run
    joblib = ["hydra/launcher=joblib", "seed=0,1"]
    assert exit_line("-m", *HERE, *joblib, "hydra.launcher.n_jobs=0") == (
        "igel-run: error: hydra.launcher: joblib refuses its settings: n_jobs == 0 in Parallel has no meaning"
    )
    assert exit_line("-m", *HERE, *joblib, "hydra.launcher.prefer=nosuch").startswith(
        "igel-run: error: hydra.launcher: joblib refuses its settings: prefer=nosuch is not a valid backend hint"
    )
    # 0 dispatched no job (a FINISHED sweep of no runs, exit 0), a word was a traceback; a timeout left a run RUNNING
    for dispatch in ("0", "abc", "n_jobs-5"):
        assert exit_line("-m", *HERE, *joblib, f"hydra.launcher.pre_dispatch={dispatch}") == (
            f"igel-run: error: hydra.launcher.pre_dispatch={dispatch}: expected all, a number ≥ 1 or an expression of"
            " n_jobs (2*n_jobs)"
        )
    assert exit_line("-m", *HERE, *joblib, "hydra.launcher.timeout=10").startswith(
        "igel-run: error: hydra.launcher.timeout=10.0: a job cut off mid-run would leave its MLflow run RUNNING"
    )
    assert not (tmp_path / "mlflow.db").exists()
    assert not (tmp_path / "multirun").exists()  # the check that the sweep's folder can be made leaves none made
    # glob() over a group lists its options through the config loader: the check said "ConfigLoader is not set"
    assert exit_line("-m", *HERE, "encoder=glob(deep*)", "trainer.epochs=0") == (
        "igel-run: error: the job encoder=deepwalk trainer.epochs=0: trainer.epochs=0: expected an integer ≥ 1"
    )


def test_a_sweep_that_lists_a_value_twice_is_refused_before_its_store(tmp_path, monkeypatch):
    """`igel-run -m seed=1,1` ran the one job twice: two MLflow runs of one config. Sweeps of distinct values (range(),
    several keys) go on to their jobs' checks (trainer.epochs=0 stops them there)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    tiny = ["trainer.epochs=1", "trainer.walk_length=10", "task.k_max=3", "progress=false", "dataset=miserables"]
    repeated = "(each job runs once)"
    assert (
        exit_line("-m", *HERE, *tiny, "seed=1,1")
        == f"igel-run: error: the sweep: seed=1,1: 1 is listed twice {repeated}"
    )
    assert exit_line("-m", *HERE, *tiny, "seed=range(0,2)", "encoder.distance=1,2,1", "trainer.lr=0.1,1e-1") == (
        f"igel-run: error: the sweep: encoder.distance=1,2,1: 1 is listed twice {repeated}"
    )
    assert exit_line("-m", *HERE, *tiny, "data.download=false,false") == (
        f"igel-run: error: the sweep: data.download=false,false: false is listed twice {repeated}"
    )
    assert exit_line("-m", *HERE, "seed=range(0,2)", "encoder.distance=1,2", "trainer.epochs=1,0") == (
        "igel-run: error: the job seed=0 encoder.distance=1 trainer.epochs=0: trainer.epochs=0: expected an integer ≥ 1"
    )
    with pytest.MonkeyPatch.context() as patch, pytest.raises(SystemExit) as exited:
        patch.setattr(sys, "argv", ["igel-embed", "-m", *HERE, "source_run=nope,nope", "dataset=miserables"])
        embed_main()
    assert exited.value.code == f"igel-embed: error: the sweep: source_run=nope,nope: nope is listed twice {repeated}"
    assert not (tmp_path / "mlflow.db").exists()
    assert not (tmp_path / "multirun").exists()


@pytest.mark.parametrize(
    "program, argv, line",
    [
        ("igel-run", ["--bogus"], "unrecognized arguments: --bogus"),
        ("igel-run", ["-c", "jobs"], "argument --cfg/-c: invalid choice: 'jobs' (choose from 'job', 'hydra', 'all')"),
        ("igel-embed", ["--nope", "source_run=x"], "unrecognized arguments: --nope"),
        (  # overrides on both sides of an option: valid each, refused for where they stand
            "igel-run",
            ["progress=false", "--cfg", "job", "trainer.epochs=3"],
            "unrecognized arguments: trainer.epochs=3: give the options (--cfg, -m, --config-dir, …) before or after"
            " all of the overrides",
        ),
    ],
)
def test_an_option_error_is_one_line_pointing_to_help(capsys, program, argv, line):
    entry = {"igel-run": main, "igel-embed": embed_main}[program]
    with pytest.MonkeyPatch.context() as patch, pytest.raises(SystemExit) as exited:
        patch.setattr(sys, "argv", [program, *argv])
        entry()
    assert exited.value.code == 2  # argparse's
    assert capsys.readouterr().err.splitlines() == [f"{program}: error: {line} ({program} --help lists the options)"]


@pytest.mark.parametrize("program, name", [("igel-run", "config"), ("igel-embed", "embed")])
@pytest.mark.parametrize("named", [False, True])
def test_a_primary_config_in_config_dir_is_refused_not_ignored(tmp_path, capsys, program, name, named):
    """Hydra reads the package's config.yaml (embed.yaml) before --config-dir's: the user's was silently ignored."""
    (tmp_path / f"{name}.yaml").write_text("defaults: [nope\n")  # broken, and not even read
    entry = {"igel-run": main, "igel-embed": embed_main}[program]
    with pytest.MonkeyPatch.context() as patch, pytest.raises(SystemExit) as exited:
        patch.setattr(sys, "argv", [program, "--config-dir", str(tmp_path), *["--config-name", name] * named])
        entry()
    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        f"{program}: error: {tmp_path}/{name}.yaml: --config-dir cannot replace {program}'s own {name}.yaml, which"
        " Hydra reads first: rename yours and pass --config-name with its name"
    ]


def test_a_job_that_fails_in_its_run_is_named_in_the_sweeps_error_line(tmp_path):
    result = igel_run("-m", *QUICK, "dataset=miserables", "trainer.lr=0.05,1e30", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1] == (
        "igel-run: error: the job trainer.epochs=1 trainer.walk_length=20 progress=false dataset=miserables"
        " trainer.lr=1e+30: training diverged in epoch 1 (loss nan): lower trainer.lr=1e+30"
    )
    assert sorted(runs(tmp_path).status) == ["FAILED", "FAILED", "FINISHED"]  # the job, the sweep; the first job


def test_a_bad_value_is_one_line_on_the_command_line(tmp_path):
    result = igel_run("trainer.lr=abc", cwd=tmp_path)
    assert (result.returncode, result.stderr) == (1, "igel-run: error: trainer.lr=abc: expected a number\n")


def test_a_log_file_hydra_cannot_write_is_one_line(tmp_path):
    """hydra.job.name names the job's log file: with a slash in it, logging could not open the file, and igel-run ended
    in logging's traceback ("Unable to configure handler 'file'")."""
    result = igel_run("hydra.run.dir=.", "hydra.job.name=a/b", cwd=tmp_path)
    assert (result.returncode, result.stderr) == (
        1,
        f"igel-run: error: {tmp_path}/a/b.log: No such file or directory (Hydra's log file: hydra.job.name names it,"
        " in hydra.run.dir (hydra.sweep.dir with -m))\n",
    )
    assert not (tmp_path / "mlflow.db").exists()


def test_default_run_end_to_end(tmp_path):
    result = igel_run(*QUICK, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "mlflow.db").exists()
    [run] = runs(tmp_path).itertuples()
    assert run.status == "FINISHED"
    client = mlflow.MlflowClient()
    metrics = client.get_run(run.run_id).data.metrics
    for key in [
        "best_k",
        "modularity",
        "louvain_modularity",
        "loss",
        "time_encode_s",
        "time_train_s",
        "spearman_pagerank",
        "spearman_betweenness",
        "spearman_closeness",
        "spearman_degree",
    ]:
        assert key in metrics, key
    assert 2 <= metrics["best_k"] <= 10
    assert [m.step for m in client.get_metric_history(run.run_id, "modularity_by_k")] == list(range(2, 11))
    artifacts = {a.path for a in client.list_artifacts(run.run_id)}
    assert {"config.yaml", "embeddings.npy", "nodes.csv", "clusters.png", "modularity.png"} <= artifacts
    embeddings = np.load(mlflow.artifacts.download_artifacts(f"runs:/{run.run_id}/embeddings.npy"))
    assert embeddings.shape == (154, 8)


def test_a_run_is_run_again_from_its_logged_config(tmp_path):
    """The README's recipe: a run's config.yaml, renamed (--config-dir cannot replace igel-run's own config.yaml) and
    passed to igel-run, is the same run again: its identity, and on the same machine its embeddings."""
    assert igel_run(*QUICK, "seed=3", "encoder.distance=2", cwd=tmp_path).returncode == 0
    [first] = runs(tmp_path).itertuples()
    again = tmp_path / "again"
    mlflow.artifacts.download_artifacts(f"runs:/{first.run_id}/config.yaml", dst_path=str(again))
    (again / "config.yaml").rename(again / "run.yaml")
    result = igel_run("--config-dir", str(again), "--config-name", "run", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    both = runs(tmp_path).sort_values("start_time")
    assert list(both["tags.mlflow.runName"]) == ["miserables_cloned α=2 seed=3"] * 2
    assert both["tags.igel.config_hash"].nunique() == 1
    first_embeddings, second_embeddings = (
        np.load(mlflow.artifacts.download_artifacts(f"runs:/{run_id}/embeddings.npy")) for run_id in both.run_id
    )
    np.testing.assert_array_equal(first_embeddings, second_embeddings)


def test_an_objective_that_no_metric_has_is_a_warning_after_the_stored_run(tmp_path):
    result = igel_run(*QUICK, "task.objective=modularty", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    warning = "igel-run: warning: task.objective=modularty is not a metric of this run, so a sweeper gets none"
    assert f"{warning} (its metrics: " in result.stderr and "modularity," in result.stderr
    assert list(runs(tmp_path).status) == ["FINISHED"]


def test_an_allocation_the_machine_cannot_make_is_one_line_and_a_failed_run(compose_config, tracking_uri, tmp_path):
    """trainer.dim=2^44: W alone would take petabytes (no overcommit maps that); a traceback of torch's allocator."""
    with pytest.raises(BudgetError, match=r"^out of memory \([0-9,.]+ GB could not be allocated\): a smaller trainer"):
        pipelines.run(compose_config(*QUICK, f"trainer.dim={2**44}"))
    assert list(runs(tmp_path).status) == ["FAILED"]


@pytest.mark.parametrize("setting", ["trainer.walk_length", "trainer.walks_per_node"])
def test_a_walk_setting_beyond_memory_names_itself_among_the_keys(compose_config, tracking_uri, setting):
    """10^8 steps a walk, or walks a node: an epoch's walks take 115 GB; the error named trainer.dim, batch_size and
    negatives only."""
    with pytest.raises(BudgetError, match=r"^out of memory \(Unable to allocate .*: a smaller .*" + setting):
        pipelines.run(compose_config(*QUICK, f"{setting}={10**8}"))


def test_a_distance_past_any_graphs_diameter_is_an_allocation_that_names_the_distance(compose_config, tracking_uri):
    """encoder.distance=10^8: the encoding once looped over empty shells for hours, deaf to SIGTERM (a worker thread's
    chunk); now it stops at the graph's diameter, and W's (α + 1)(δmax + 1) rows are what cannot be allocated."""
    with pytest.raises(BudgetError, match=r"^out of memory .*: a smaller trainer.dim, encoder.distance, trainer.walks"):
        pipelines.run(compose_config(*QUICK, f"encoder.distance={10**8}"))


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_a_run_names_its_hardware_and_warns_where_bfloat16_would_run_emulated(
    compose_config, tracking_uri, tmp_path, caplog, precision
):
    """bfloat16, the documented setting for speed on CPUs with AVX512-BF16, ran 12 times slower than float32 on an
    AVX2 CPU (Facebook's trainer bench: 0.07 M against 0.84 M pairs/s), and nothing said so."""
    pipelines.run(compose_config(*QUICK, f"trainer.precision={precision}", "trainer.device=cpu"))
    [tag] = runs(tmp_path)[f"tags.{HARDWARE_TAG}"].tolist()
    assert tag == hardware() and tag.endswith(f", {os.cpu_count()} cores)")
    cpuinfo = Path("/proc/cpuinfo")  # on Linux: the CPU's own name, as the kernel gives it (x86's "model name")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
    names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    assert not names or tag.startswith(names[0])
    warned = [record.message for record in caplog.records if "run emulated" in record.message]
    assert len(warned) == (precision == "bfloat16" and emulated_bfloat16(torch.device("cpu")))


def test_same_seed_same_embeddings_and_metrics(compose_config, tracking_uri, tmp_path):
    first = pipelines.run(compose_config(*QUICK, "seed=7"))
    second = pipelines.run(compose_config(*QUICK, "seed=7"))
    other = pipelines.run(compose_config(*QUICK, "seed=8"))
    ids = runs(tmp_path).sort_values("start_time").run_id.tolist()
    arrays = [np.load(mlflow.artifacts.download_artifacts(f"runs:/{i}/embeddings.npy")) for i in ids]
    np.testing.assert_array_equal(arrays[0], arrays[1])
    assert not np.array_equal(arrays[0], arrays[2])
    drop_timings = lambda m: {k: v for k, v in m.items() if not k.startswith(("time_", "peak_"))}  # noqa: E731
    assert drop_timings(first) == drop_timings(second) != drop_timings(other)


def test_a_failure_inside_a_run_leaves_it_failed(compose_config, tracking_uri, tmp_path):
    with pytest.raises(ConfigError, match="task.k_min"):
        pipelines.run(compose_config(*QUICK, "task.k_min=500", "task.k_max=600"))
    [run] = runs(tmp_path).itertuples()
    assert run.status == "FAILED"


def test_a_k_max_far_beyond_the_graph_clusters_up_to_its_distinct_embeddings(compose_config, tracking_uri, tmp_path):
    """task.k_max=10**15 made a list of every k before the run: a MemoryError blamed on trainer.dim (and 10**9 one of
    tens of GB). KMeans takes the ks up to the number of distinct embeddings, as for any k_max above it."""
    metrics = pipelines.run(compose_config(*QUICK, "dataset=miserables", "task.k_max=1000000000000000"))
    [run] = runs(tmp_path).itertuples()
    assert run.status == "FINISHED"
    assert 2 <= metrics["best_k"] <= 77


def test_a_graph_past_draw_max_nodes_is_not_drawn(compose_config, tracking_uri, tmp_path, caplog):
    """A clustering run drew its graph twice, each time with a force-directed layout: over 12 minutes for AstroPh's
    18,772 nodes, after its numbers were logged. Past task.draw_max_nodes it is not drawn, and the log says so."""
    with caplog.at_level(logging.INFO, logger="igel_exp.pipelines.clustering"):
        pipelines.run(compose_config(*QUICK, "dataset=miserables", "task.draw_max_nodes=76"))
    [run] = runs(tmp_path).itertuples()
    artifacts = {artifact.path for artifact in mlflow.MlflowClient().list_artifacts(run.run_id)}
    assert run.status == "FINISHED" and {"nodes.csv", "modularity.png"} <= artifacts
    assert not {"clusters.png", "louvain.png"} & artifacts
    assert "the graph has 77 nodes, more than task.draw_max_nodes=76" in caplog.text


JOBLIB_SWEEP = ["-m", "seed=0,1", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "threads=1"]


def kill(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGTERM)


def ctrl_c(process: subprocess.Popen) -> None:
    os.killpg(process.pid, signal.SIGINT)  # the terminal signals the whole foreground process group


def hang_up(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGHUP)  # the terminal closed, the ssh session dropped: it left the run RUNNING


@pytest.mark.parametrize(
    "mode, stop",
    [
        pytest.param([], kill, id="run-SIGTERM"),
        pytest.param(["-m", "seed=0,1"], kill, id="sweep-SIGTERM"),
        pytest.param(JOBLIB_SWEEP, kill, id="joblib-sweep-SIGTERM"),
        pytest.param(JOBLIB_SWEEP, ctrl_c, id="joblib-sweep-Ctrl-C"),
        pytest.param([], hang_up, id="run-SIGHUP"),
    ],
)
def test_interrupts_end_the_runs_in_progress_failed(tmp_path, mode, stop):
    """kill (or Slurm's time limit) and Ctrl-C stop igel-run: the runs in progress end FAILED, a sweep's parent run
    too, and no job process is left running (it would hold the output pipe open past the timeout)."""
    command = [sys.executable, "-c", "from igel_exp.entry import igel_run; igel_run()", *mode, "trainer.epochs=100000"]
    env = {key: value for key, value in os.environ.items() if key != "MLFLOW_TRACKING_URI"}
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT, "start_new_session": True}
    # a hang-up as a terminal's, whatever the tests run under: under nohup igel-run inherited SIGHUP ignored, and
    # rightly kept ignoring it (test_a_run_started_under_nohup_goes_on_after_a_hang_up): it trained on past the timeout
    hangs_up = functools.partial(signal.signal, signal.SIGHUP, signal.SIG_DFL)
    process = subprocess.Popen(
        [*command, "progress=false"], cwd=tmp_path, env=env, text=True, preexec_fn=hangs_up, **pipes
    )
    jobs = 2 if mode == JOBLIB_SWEEP else 1  # in parallel; the basic launcher runs one job at a time
    try:
        started = 0
        for line in process.stdout:  # the log says when training has started (the store is not read meanwhile)
            started += "training on" in line
            if started == jobs:
                break
        stop(process)
        output, _ = process.communicate(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):  # whatever is left of the process group
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 130 and "interrupted" in output, output[-5000:]
    assert "Warning" not in output, output[-5000:]  # the resource trackers' of the stopped workers' semaphores
    tracked = runs(tmp_path)
    assert list(tracked.status) == ["FAILED"] * (jobs + ("-m" in mode)), output[-5000:]
    sweep = tracked.get("tags.igel.sweep")  # on a sweep's parent, its own id
    parents = tracked["run_id"] == sweep if sweep is not None else tracked["run_id"].isna()
    jobs_errors = tracked[~parents]["tags.error"].dropna()
    assert len(jobs_errors) == jobs and all(jobs_errors.str.startswith("KeyboardInterrupt"))
    stopped = "the sweep stopped before its last job: interrupted, a job failed, or its launcher did"
    assert list(tracked[parents]["tags.error"]) == [stopped] * ("-m" in mode)  # the parent says why it FAILED


def test_a_run_started_under_nohup_goes_on_after_a_hang_up(tmp_path):
    """nohup starts igel-run with SIGHUP ignored, so that a closed terminal leaves it running: igel-run's interrupt
    handlers must keep that so."""
    command = [sys.executable, "-c", "from igel_exp.entry import igel_run; igel_run()", "trainer.epochs=2"]
    env = {key: value for key, value in os.environ.items() if key != "MLFLOW_TRACKING_URI"}
    ignore_hang_ups = functools.partial(signal.signal, signal.SIGHUP, signal.SIG_IGN)  # as nohup does
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT, "preexec_fn": ignore_hang_ups}
    process = subprocess.Popen([*command, "progress=false"], cwd=tmp_path, env=env, text=True, **pipes)
    try:
        for line in process.stdout:
            if "training on" in line:
                break
        hang_up(process)
        output, _ = process.communicate(timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
    assert process.returncode == 0, output[-5000:]
    assert list(runs(tmp_path).status) == ["FINISHED"]


@pytest.mark.parametrize("program", ["igel_run", "igel_report"])
def test_a_ctrl_c_while_the_command_starts_is_one_line_and_no_run(tmp_path, program):
    """SIGINT as the console script imports the command (Hydra's import takes some 0.3 s): a traceback, or OmegaConf's
    own error in one, or a run that went on to FINISH. It is held back until the work begins, then interrupts."""
    script = (
        "import os, signal, sys; from unittest import mock; from igel_exp import entry\n"
        "real = entry.importlib.import_module\n"
        "def slow(name, *args, **kwargs):  # the signal lands inside the command's import\n"
        "    if name.startswith('igel_exp.'): os.kill(os.getpid(), signal.SIGINT)\n"
        "    return real(name, *args, **kwargs)\n"
        "with mock.patch.object(entry.importlib, 'import_module', slow):\n"
        f"    entry.{program}()\n"
    )
    env = {key: value for key, value in os.environ.items() if key != "MLFLOW_TRACKING_URI"}
    command = [sys.executable, "-c", script, *QUICK]
    result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert (result.returncode, result.stderr) == (130, f"{program.replace('_', '-')}: interrupted\n")
    assert not (tmp_path / "mlflow.db").exists()


def test_a_ctrl_c_while_an_isolated_jobs_process_starts_is_its_interrupted_status_and_no_traceback(tmp_path):
    """The parent (igel-reproduce --isolate, a scalability run in its own process) says `interrupted` in one line; the
    child printed a KeyboardInterrupt traceback from inside its imports."""
    script = (
        "import os, signal, sys; from unittest import mock; from igel_exp import entry\n"
        "real = entry.importlib.import_module\n"
        "def slow(name, *args, **kwargs):\n"
        "    if name == 'igel_exp.pipelines': os.kill(os.getpid(), signal.SIGINT)\n"
        "    return real(name, *args, **kwargs)\n"
        "with mock.patch.object(entry.importlib, 'import_module', slow):\n"
        "    entry.isolated_job()\n"
    )
    command = [sys.executable, "-c", script, str(tmp_path)]  # its folder: never read
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert (result.returncode, result.stderr) == (130, "")


def test_an_interrupt_before_any_run_is_one_line(capsys):
    """Ctrl-C while torch loads, or between a sweep's jobs: no traceback, no run named (there is none to end)."""
    with pytest.raises(SystemExit) as exit_:
        with one_line_errors("igel-run"):
            raise KeyboardInterrupt
    assert exit_.value.code == 130
    assert capsys.readouterr().err == "igel-run: interrupted\n"


@pytest.mark.slow
def test_a_killed_sweep_leaves_no_worker_and_its_runs_end_failed(store_uri, tmp_path):
    """kill -9 of a joblib sweep: its workers notice, end their jobs' runs FAILED and exit; the parent run, which
    nothing could end, is closed FAILED by the next igel-run on the store."""
    process, lines = start_training([*JOBLIB_SWEEP, "trainer.epochs=100000"], tmp_path, jobs=2)
    keep_reading(process, lines)  # the job's process outlives igel-run: its output must go somewhere
    kill_leaves_no_process(process, lines)
    assert sorted(runs(tmp_path).status) == ["FAILED", "FAILED", "RUNNING"]
    use_store(f"sqlite:///{tmp_path / 'mlflow.db'}")  # what the next igel-run, igel-reproduce or igel-report does
    tracked = runs(tmp_path).set_index("run_id")
    assert list(tracked.status) == ["FAILED"] * 3
    parent = tracked.loc[tracked["tags.igel.sweep"].iloc[0]]
    assert (
        parent["tags.error"]
        == f"its process (pid {process.pid}) died without ending it (kill -9, out of memory, a crash)"
    )
    jobs = tracked.drop(parent.name)
    assert list(jobs["tags.error"]) == [f"KeyboardInterrupt: signal 15 (its parent process {process.pid} is gone)"] * 2


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the worker processes from /proc")
def test_a_joblib_sweep_stops_its_workers_once_its_jobs_are_done(tmp_path, monkeypatch):
    """Left to exit with the interpreter, joblib's idle workers held `igel-run -m` some 4 s past its last job."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    small = ["experiment=scalability", "dataset.num_nodes=100", "task.isolate=false", "trainer.epochs=1"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "argv", ["igel-run", *JOBLIB_SWEEP, *HERE, *small, "progress=false"])
        main()
    assert list(runs(tmp_path).status) == ["FINISHED"] * 3 and not joblib_workers()


def test_a_sweeps_parent_run_says_it_is_alive_until_its_last_job_ends(tmp_path, monkeypatch):
    """Without heartbeats, the parent run of a sweep whose launcher was killed on another machine (a cluster's login
    node) stayed RUNNING until that machine's next command, for ever where it was gone."""
    monkeypatch.setattr(tracking, "HEARTBEAT_S", 0.05)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    small = ["experiment=scalability", "dataset.num_nodes=100", "task.isolate=false", "trainer.epochs=1"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "argv", ["igel-run", "-m", "seed=0,1,2", *HERE, *small, "progress=false"])
        main()
    tracked = runs(tmp_path).set_index("run_id")
    parent = tracked.loc[tracked["tags.igel.sweep"].iloc[0]]
    jobs = tracked.drop(parent.name)
    assert list(tracked.status) == ["FINISHED"] * 4 and not heartbeat_threads()
    assert float(parent[f"tags.{HEARTBEAT_TAG}"]) >= jobs.end_time.max().timestamp() - 1  # beats in whole seconds


@pytest.mark.slow
def test_two_sweeps_write_one_store_at_once(tmp_path):
    """Both create the store in a fresh folder (one waits for the other's migrations: the lock of use_store), then
    their parent runs and jobs interleave in it; each job is nested under its own sweep."""
    small = [
        "experiment=scalability",
        "dataset.num_nodes=100",
        "task.isolate=false",
        "trainer.epochs=1",
        "progress=false",
    ]
    command = [sys.executable, "-c", "from igel_exp.entry import igel_run; igel_run()", "-m", "seed=0,1", *small]
    env = {key: value for key, value in os.environ.items() if key != "MLFLOW_TRACKING_URI"}
    sweeps = [
        subprocess.Popen([*command, f"trainer.dim={dim}"], cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
        for dim in (4, 6)
    ]
    errors = [sweep.communicate(timeout=600)[1] for sweep in sweeps]
    assert [sweep.returncode for sweep in sweeps] == [0, 0], "\n".join(errors)[-5000:]
    tracked = runs(tmp_path)
    assert list(tracked.status) == ["FINISHED"] * 6
    jobs = tracked[tracked.run_id != tracked["tags.igel.sweep"]]
    assert sorted(jobs.groupby("tags.igel.sweep")["params.trainer.dim"].apply(sorted)) == [["4", "4"], ["6", "6"]]


def chorded_ring(prefix: str = "") -> str:
    """An edge list: a ring of 30 nodes with a chord at every third, so that not all of them encode alike (on a
    regular graph they would, and KMeans would find one distinct point)."""
    ring = [f"{prefix}{i} {prefix}{(i + 1) % 30}\n" for i in range(30)]
    return "".join(ring + [f"{prefix}{i} {prefix}{(i + 7) % 30}\n" for i in range(0, 30, 3)])


def test_own_edge_list_and_its_errors(tmp_path):
    graph = tmp_path / "ring.txt"
    graph.write_text(chorded_ring("n"))
    ok = igel_run("dataset=edgelist", f"dataset.path={graph}", "dataset.node_ids=token", *QUICK, cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    bad = tmp_path / "bad.txt"
    bad.write_text("1 2\n2 three\n")
    failed = igel_run("dataset=edgelist", f"dataset.path={bad}", *QUICK, cwd=tmp_path)
    assert failed.returncode != 0
    assert failed.stderr.strip().splitlines()[-1] == (
        f"igel-run: error: {bad}:2: node id 'three' is not an integer (set dataset.node_ids=token for arbitrary ids)"
    )
    assert sorted(runs(tmp_path).status) == ["FAILED", "FINISHED"]


def test_relative_paths_name_the_launch_folder_under_hydra_job_chdir(tmp_path):
    (tmp_path / "ring.txt").write_text(chorded_ring())
    ran = igel_run(
        "dataset=edgelist", "dataset.path=ring.txt", "hydra.job.chdir=true", "hydra.run.dir=out", *QUICK, cwd=tmp_path
    )
    assert ran.returncode == 0, ran.stderr
    assert list(runs(tmp_path).status) == ["FINISHED"]  # in ./mlflow.db of the launch folder, not of out/
    assert not (tmp_path / "out" / "mlflow.db").exists() and (tmp_path / "out" / ".hydra").is_dir()


def test_unknown_experiment_lists_the_valid_ones(tmp_path):
    result = igel_run("experiment=nope", cwd=tmp_path)
    assert result.returncode != 0
    assert "Could not find 'experiment/nope'" in result.stderr and "clustering" in result.stderr


def test_wheel_ships_the_configs_and_runs_from_another_directory(tmp_path):
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path), str(REPO)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr
    [wheel] = tmp_path.glob("igel_exp-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    configs = {
        f"igel_exp/conf/{path.relative_to(REPO / 'conf').as_posix()}" for path in (REPO / "conf").rglob("*.yaml")
    }
    assert "igel_exp/conf/specialise/dataset/link_prediction_facebook.yaml" in configs
    assert configs <= names, sorted(configs - names)
    installed = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(installed)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {"PYTHONPATH": str(installed)}
    probe = subprocess.run(
        [sys.executable, "-c", "import igel_exp; print(igel_exp.__file__)"],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
    )
    assert probe.stdout.startswith(str(installed))
    job = igel_run("--cfg", "job", cwd=elsewhere, env=env)
    assert job.returncode == 0, job.stderr
    assert "name: clustering" in job.stdout and "walk_length: 200" in job.stdout
    assert "igel-run" in igel_run("--help", cwd=elsewhere, env=env).stdout
    # the reproduction plans ship too: igel-reproduce finds the paper's tables from any folder
    plans = {f"igel_exp/experiments/{path.name}" for path in (REPO / "experiments").glob("*.yaml")}
    assert plans and plans <= names and "igel_exp/costs.yaml" in names
    code = "import sys; from igel_exp.reproduce import reproduce_main; sys.exit(reproduce_main(sys.argv[1:]))"
    dry = subprocess.run(
        [sys.executable, "-c", code, "all", "--dry-run"],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        env={**os.environ, **env, "MLFLOW_TRACKING_URI": f"sqlite:///{elsewhere / 'mlflow.db'}"},
        timeout=300,
    )
    assert dry.returncode == 0, dry.stderr
    assert f"--config-dir {installed / 'igel_exp' / 'experiments'} --config-name link_prediction_grid" in dry.stdout
    assert dry.stdout.splitlines()[-1].startswith("all: ") and not (elsewhere / "mlflow.db").exists()
