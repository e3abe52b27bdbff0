"""The reproduction plan: experiments/ files expanded into jobs as `igel-run -m` would run them."""

import os
import shlex
import subprocess
import sys

import pytest
from hydra import compose, initialize_config_dir

from igel_exp import plan as plan_module
from igel_exp.errors import ConfigError
from igel_exp.identity import config_hash
from igel_exp.plan import default_experiments_dir, load_plan, table_files

from conftest import REPO, TINY_QUICK

TABLE = {"table": "Tiny", "rows": ["encoder.distance"], "columns": {"PageRank": "spearman_pagerank"}}


def test_the_sweep_expands_as_hydra_basic_sweeper_does(experiments_dir):
    quick = {"params": {"seed": "range(2)", "trainer.dim": "4"}, "overrides": ["trainer.epochs=1"]}
    path = experiments_dir("grid", {"encoder.distance": "1,2,3", "seed": "range(3)"}, {**TABLE, "quick": quick})
    full = load_plan(path, "full")
    assert [(job.config.encoder.distance, job.config.seed) for job in full.jobs] == [
        (distance, seed) for distance in (1, 2, 3) for seed in range(3)
    ]
    plan = load_plan(path, "quick")
    # a replaced sweep param keeps its place (the first key still varies slowest); new ones come after
    assert [(job.config.encoder.distance, job.config.seed) for job in plan.jobs] == [
        (distance, seed) for distance in (1, 2, 3) for seed in range(2)
    ]
    assert {(job.config.trainer.dim, job.config.trainer.epochs) for job in plan.jobs} == {(4, 1)}
    assert plan.jobs[0].shown == "encoder.distance=1 seed=0"
    assert plan.command.endswith(
        "--config-name grid encoder.distance=1,2,3 'seed=range(2)' trainer.dim=4 trainer.epochs=1"
    )
    assert len({job.hash for job in plan.jobs}) == 6 and len({job.point for job in plan.jobs}) == 3
    transfer = load_plan(default_experiments_dir() / "transfer_link_prediction.yaml", "quick")
    assert "task.source_overrides=['trainer.epochs=1','trainer.walks_per_node=1']" in transfer.arguments
    assert shlex.split(transfer.command)[6:] == transfer.arguments  # pasted, the same (its inner quotes were lost)
    narrowed = load_plan(path, "quick", ["encoder.distance=2", "trainer.lr=0.5"])
    assert [(job.config.encoder.distance, job.config.seed, job.config.trainer.lr) for job in narrowed.jobs] == [
        (2, 0, 0.5),
        (2, 1, 0.5),
    ]


def test_jobs_are_the_configs_hydra_composes_and_igel_run_would_run(compose_config):
    path = REPO / "experiments" / "link_prediction.yaml"
    plan = load_plan(path, "quick")
    assert {job.config.dataset.name for job in plan.jobs} == {"facebook", "astroph"}
    with initialize_config_dir(config_dir=str(path.parent), version_base="1.3"):
        for job in plan.jobs[::5]:
            full = compose(config_name=path.stem, overrides=["hydra.searchpath=[pkg://igel_exp.conf]", *job.overrides])
            assert full == job.config, job.overrides
    # the same settings given to plain igel-run (no experiments/ file) are the same run
    job = next(job for job in reversed(plan.jobs) if job.config.encoder.name == "node2vec")
    plain = compose_config("experiment=link_prediction", *job.overrides)
    assert config_hash(plain) == job.hash
    # the authors ran no baselines: reproduce.skip leaves them out of the authors' path
    assert {job.config.encoder.name for job in plan.jobs if job.config.protocol == "authors"} == {"igel"}


def test_every_reproduction_file_expands_its_quick_profile():
    for path in table_files(REPO / "experiments"):
        plan = load_plan(path, "quick")
        assert plan.jobs, path.name
        assert all(plan.experiments), path.name


def test_skip_leaves_the_matching_jobs_of_the_cross_product_out(experiments_dir):
    skip = [{"encoder.distance": 2, "trainer.dim": 8}]
    sweep = {"encoder.distance": "1,2", "trainer.dim": "4,8", "seed": "range(2)"}
    table = {**TABLE, "rows": ["encoder.distance", "trainer.dim"], "skip": skip}
    plan = load_plan(experiments_dir("cut", sweep, table))
    kept = [(job.config.encoder.distance, job.config.trainer.dim, job.config.seed) for job in plan.jobs]
    assert kept == [(1, 4, 0), (1, 4, 1), (1, 8, 0), (1, 8, 1), (2, 4, 0), (2, 4, 1)]
    assert plan.skipped == 2
    # overrides that leave only skipped jobs: said so, not blamed on the file's rows (no job has their keys)
    with pytest.raises(ConfigError, match=r"^cut.yaml: reproduce.skip leaves out every job of the sweep with"
                       r" encoder.distance=2 trainer.dim=8: nothing to run$"):  # fmt: skip
        load_plan(experiments_dir.folder / "cut.yaml", overrides=["encoder.distance=2", "trainer.dim=8"])


def test_a_glob_over_a_packaged_group_sweeps_its_options(experiments_dir):
    """Hydra's glob() lists a group's options: an experiments file's sweep or an override of igel-reproduce found none
    (the plan's loader searched the experiments folder, the packaged groups being on its jobs' hydra.searchpath), and
    `encoder=glob(deep*)` said "the sweep has no jobs"."""
    table = {**TABLE, "rows": ["encoder.name"]}
    path = experiments_dir("globbed", {"encoder": "glob(*walk)", "seed": "0"}, table)
    assert [job.config.encoder.name for job in load_plan(path).jobs] == ["deepwalk"]
    plan = load_plan(path, overrides=["encoder=glob([deep*,node*])"])
    assert [job.shown for job in plan.jobs] == ["encoder=deepwalk", "encoder=node2vec"]
    assert [job.config.encoder.name for job in plan.jobs] == ["deepwalk", "node2vec"]
    with pytest.raises(ConfigError, match="^globbed.yaml: the sweep has no jobs"):  # a glob of no option, as before
        load_plan(path, overrides=["encoder=glob(nosuch*)"])


def test_an_override_that_empties_the_sweep_says_the_sweep_has_no_jobs(experiments_dir):
    path = experiments_dir("tiny", {"encoder.distance": "1,2", "seed": "range(2)"}, TABLE)
    for override in ("seed=range(0,0)", "encoder.distance=range(1,1)"):  # not blamed on the file's rows
        with pytest.raises(ConfigError) as error:
            load_plan(path, overrides=[override])
        assert str(error.value) == "tiny.yaml: the sweep has no jobs (a sweep over an empty range or list?)"


def test_a_misspelled_skip_key_is_refused_when_planned(experiments_dir):
    """A skip entry whose key no run has would skip nothing, while the table's caption says it left those runs out."""
    table = {**TABLE, "skip": [{"encoder.distance": 1}, {"encoder.distanc": 2}]}
    path = experiments_dir("cut", {"encoder.distance": "1,2", "seed": "0"}, table)
    with pytest.raises(ConfigError) as error:
        load_plan(path)
    assert str(error.value) == "cut.yaml: 'encoder.distanc' (in reproduce.skip) is not a config key of its runs"


def test_tables_are_chosen_by_file_name_paper_label_or_all(experiments_dir):
    first = experiments_dir("first", {"seed": "0"}, {**TABLE, "table": "Alpha"})
    second = experiments_dir("second", {"seed": "0"}, {**TABLE, "table": "Beta"})
    folder = experiments_dir.folder
    (folder / "notes.yaml").write_text("just: data\n")  # no reproduce: block, not a table
    assert table_files(folder) == [first, second]
    assert table_files(folder, ["second"]) == table_files(folder, ["beta"]) == [second]
    assert table_files(folder, ["second.yaml"]) == [second]  # as a shell completes it
    assert table_files(folder, ["ALL"]) == table_files(folder, ["All"]) == [first, second]  # as labels (no table 'ALL')
    with pytest.raises(  # the labels that select tables too (only the file names were listed)
        ConfigError, match="no table 'gamma' in .*; valid tables: all, first, second; or a paper label: Alpha, Beta$"
    ):
        table_files(folder, ["gamma"])


@pytest.mark.parametrize(
    "change, message",
    [
        ({"select": {"metric": "test_auc"}}, "select.metric=test_auc is a test metric: select on validation"),
        ({"select": {"metric": "val_auc", "mode": "best"}}, "select.mode='best' is not one of max, min"),
        ({"rows": []}, r"the cell \(all; PageRank\) holds 2 grid points"),
        ({"rows": ["encoder.radius"]}, "'encoder.radius' .* is not a config key of its runs"),
        ({"paper": [{"PageRank": 0.5}]}, r"paper entry 1 lacks the row keys \['encoder.distance'\]"),
        ({"paper": [{"encoder.distance": 1, "Betweenness": 0.5}]}, "neither row keys nor column titles"),
        ({"paper": [{"encoder.distance": 1, "PageRank": "high"}]}, "paper entry 1: PageRank='high' is not a number"),
        ({"columns": {"PageRank": {"dataset.name": "x"}}}, "columns.PageRank must be a metric name"),
        ({"paper": [{"encoder.distance": 1, "PageRank": 0.5, "runs": 0}]}, "entry 1: runs=0 is not a count of runs"),
        ({"paper": [{"encoder.distance": 1, "runs": "five"}]}, "entry 1: runs='five' is not a count of runs"),
        ({"paper": [{"encoder.distance": 1, "runs": True}]}, "entry 1: runs=True is not a count of runs"),
        ({"columns": {"runs": "n_runs"}, "paper": []}, "reproduce.columns.runs: the title is reserved"),
        ({"quick": None}, "reproduce.quick is missing"),
        ({"skip": {"encoder.distance": 1}}, "reproduce.skip must be a list of"),
        ({"skip": [{}]}, "reproduce.skip must be a list of"),
        ({"verdict": {"ruled_out": {"faitful": "x"}}}, r"ruled_out must be WHAT .* of the protocols authors, faithful"),
        ({"verdict": {"ruled_out": {"authors": None}}}, "reproduce.verdict.ruled_out.authors must be a reason"),
    ],
)
def test_malformed_reproduction_files_fail_with_one_line(experiments_dir, change, message):
    path = experiments_dir("bad", {"encoder.distance": "1,2", "seed": "0"}, {**TABLE, **change})
    with pytest.raises(ConfigError, match=message):
        load_plan(path, "quick")


def test_unknown_profile_and_broken_sweep_are_config_errors(experiments_dir):
    path = experiments_dir("tiny", {"encoder.distance": "1,2"}, TABLE)
    with pytest.raises(ConfigError, match="profile 'huge' is not one of full, quick"):
        load_plan(path, "huge")
    with pytest.raises(ConfigError, match="tiny.yaml.*encoder.nonsense"):
        load_plan(path, "quick", ["encoder.nonsense=3"])
    assert TINY_QUICK[0] in load_plan(path, "quick").jobs[0].overrides


def test_an_unreadable_file_in_the_folder_hides_no_other_table(experiments_dir, caplog):
    good = experiments_dir("tiny", {"encoder.distance": "1"}, TABLE)
    folder = good.parent
    (folder / "latin1.yaml").write_bytes(b"reproduce:\n  table: caf\xe9\n")
    (folder / "gone.yaml").symlink_to(folder / "nowhere.yaml")
    (folder / "broken.yaml").write_text("a: [1, 2\nb: 3\n")
    assert table_files(folder, ["all"]) == table_files(folder, ["Tiny"]) == [good]  # was a traceback or a store error
    assert "latin1.yaml: cannot read it ('utf-8' codec can't decode" in caplog.text
    assert "gone.yaml: cannot read it ([Errno 2]" in caplog.text and "broken.yaml:2: not valid YAML" in caplog.text
    with pytest.raises(ConfigError, match=r"latin1.yaml: cannot read it"):
        table_files(folder, ["latin1"])
    for name in ("broken", "broken.yaml"):  # its parse error, by either name (broken.yaml said: no table)
        with pytest.raises(ConfigError, match=r"broken.yaml:2: not valid YAML \(expected ',' or '\]', but got ':'\)$"):
            table_files(folder, [name])


def test_an_unreadable_file_in_the_folder_leaves_the_cached_plan_to_the_others(
    experiments_dir, tmp_path, obeys_permissions
):
    """The plan cache's fingerprint reads every file of the folder: one it cannot read (skipped, with a warning, by
    the plan) stopped igel-report and igel-reproduce with `cannot read the MLflow store … Permission denied`."""
    good = experiments_dir("tiny", {"encoder.distance": "1,2"}, TABLE)
    for secret in (good.parent / "secret.yaml", good.parent / "private" / "notes.yaml"):
        secret.parent.mkdir(exist_ok=True)
        secret.write_text("a: 1\n")
        secret.chmod(0)
    script = "import sys; from igel_exp.plan import cached_plan; print(len(cached_plan(sys.argv[1]).jobs))"
    environment = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    for _ in range(2):  # expanded, then read back
        result = subprocess.run(
            [sys.executable, "-c", script, str(good)], capture_output=True, text=True, env=environment,
            preexec_fn=obeys_permissions,
        )  # fmt: skip
        assert result.stdout == "2\n", result.stderr


def _jobs(plan) -> list[tuple]:
    return [(job.overrides, job.hash, job.point, job.flat, job.config) for job in plan.jobs]


def test_a_cached_plan_is_read_back_until_what_it_is_made_of_changes(experiments_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("IGEL_DATA_DIR", str(tmp_path / "data"))
    path = experiments_dir("tiny", {"encoder.distance": "1,2", "seed": "range(2)"}, TABLE)
    expanded = load_plan(path, "quick", ["trainer.lr=0.5"])
    assert _jobs(plan_module.cached_plan(path, "quick", ["trainer.lr=0.5"])) == _jobs(expanded)

    def expanding(*arguments):
        raise AssertionError("expanded, not read back")

    with monkeypatch.context() as patched:  # the entry is read back: nothing is expanded
        patched.setattr(plan_module, "load_plan", expanding)
        assert _jobs(plan_module.cached_plan(path, "quick", ["trainer.lr=0.5"])) == _jobs(expanded)
    # another profile or other overrides are other plans
    assert len(plan_module.cached_plan(path, "full").jobs) == 4
    assert {job.config.trainer.lr for job in plan_module.cached_plan(path, "quick").jobs} != {0.5}
    # an edited file, in the folder or in the package's configs' place, and a variable the configs read: expanded anew
    experiments_dir("tiny", {"encoder.distance": "1,3", "seed": "range(2)"}, TABLE)
    assert [job.config.encoder.distance for job in plan_module.cached_plan(path, "full").jobs] == [1, 1, 3, 3]
    elsewhere = str(tmp_path / "elsewhere")
    monkeypatch.setenv("IGEL_DATA_DIR", elsewhere)
    assert {job.flat["data.root"] for job in plan_module.cached_plan(path, "full").jobs} == {elsewhere}


def test_a_damaged_or_unwritable_plan_cache_is_only_a_slower_report(experiments_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = experiments_dir("tiny", {"encoder.distance": "1,2", "seed": "0"}, TABLE)
    expected = _jobs(load_plan(path))
    plan_module.cached_plan(path)
    [entry] = (tmp_path / "cache" / "igel-exp" / "plans").iterdir()
    for damage in (b"", b"not a pickle", entry.read_bytes()[:-100]):
        entry.write_bytes(damage)
        assert _jobs(plan_module.cached_plan(path)) == expected
    assert len(entry.read_bytes()) > 100  # written anew
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))  # no folder can be made there
    assert _jobs(plan_module.cached_plan(path)) == expected
    # errors are not kept
    with pytest.raises(ConfigError, match="encoder.nonsense"):
        plan_module.cached_plan(path, overrides=["encoder.nonsense=3"])
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    for _ in range(2):
        with pytest.raises(ConfigError, match="encoder.nonsense"):
            plan_module.cached_plan(path, overrides=["encoder.nonsense=3"])
