"""igel-reproduce and igel-report: run the missing jobs of the paper's tables, then print the tables.

A job is skipped when its identity (igel_exp.identity, the `igel.config_hash` tag) already has a FINISHED run
in the store, whoever made it: a second igel-reproduce does no work, and an interrupted one loses only the
job it was running (that run ends FAILED, or stays RUNNING if the process was killed; both count as missing).

Jobs run one after the other in this process through `pipelines.run`, the code path of `igel-run` and of
`igel-run -m` with Hydra's basic launcher: a fresh process per job would cost every job the imports of torch,
MLflow and igraph (seconds each on a busy laptop), more than a quick job itself. Memory is the trade-off:
`--isolate` runs each job in a fresh process instead (igel_exp.pipelines.isolation), and the scalability
experiment isolates its jobs anyway (task.isolate). For parallel or cluster launchers, run the sweep with
`igel-run -m ... hydra/launcher=joblib` (the plan's command, `--dry-run` prints it): its runs are recognised.
"""

from __future__ import annotations

import argparse
import copy
import functools
import logging
import os
import shlex
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import mlflow
import yaml
from hydra import initialize_config_dir
from hydra._internal.callbacks import Callbacks
from hydra.core.global_hydra import GlobalHydra
from hydra.core.plugins import Plugins
from hydra.core.utils import JobStatus, setup_globals
from hydra.errors import HydraException
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, RunMode
from mlflow.entities import RunStatus
from omegaconf import DictConfig, OmegaConf, open_dict
from tqdm.auto import tqdm

from igel_exp.errors import (
    ConfigError,
    DataError,
    IgelError,
    JobTaken,
    OneLineParser,
    StoreError,
    first_line,
    output_file,
    same_file,
    unopened_log_file,
    yaml_problem,
)
from igel_exp.estimate import Estimate, Estimator, duration_text, finished_durations, load_kinds, reuse_key
from igel_exp.identity import config_hash
from igel_exp.plan import PACKAGED_CONFIGS, PROFILES, Job, Plan, cached_plan, default_experiments_dir, table_files
from igel_exp.reporting import (
    FORMATS,
    SUFFIXES,
    StoredRun,
    Table,
    build_table,
    deleted_experiments,
    finished_by_hash,
    load_runs,
    planned_jobs,
    render,
)
from igel_exp.schema import BASIC_LAUNCHER, JOBLIB_LAUNCHER, check_launcher, joblib_settings
from igel_exp.tracking import (
    DEFAULT_STORE,
    HEARTBEATS,
    PARENT_RUN_ENV,
    REPRODUCE_TAG,
    STORE_ERRORS,
    SWEEP_TAG,
    alive_tags,
    check_store_uri,
    close_stale_runs,
    flatten,
    job_interrupts,
    no_store,
    open_experiment,
    release_job_processes,
    running_jobs,
    sigterm_interrupts,
    sqlite_file,
    stopping_job_processes,
    store_call,
    store_exists,
    tracking_uri,
)

log = logging.getLogger(__name__)

Runner = Callable[[DictConfig], dict]


@dataclass
class Outcome:
    """What igel-reproduce did for one plan."""

    finished_before: int = 0
    ran: int = 0
    failed: list[str] = field(default_factory=list)  # "<job>: <error>"
    data_missing: list[str] = field(default_factory=list)  # one line per dataset whose files are absent
    not_attempted: int = 0  # jobs skipped because their dataset is missing
    taken: int = 0  # jobs left to another command that was running them, or had finished them (JobTaken)

    def problems(self) -> str | None:
        """Why the plan's parent runs end FAILED (None: they finish)."""
        if not self.failed and not self.data_missing:
            return None
        first = (self.failed or self.data_missing)[0]
        return f"{len(self.failed)} jobs failed, {len(self.data_missing)} datasets missing; the first: {first}"

    def notes(self) -> list[str]:
        """Lines for the table; the data errors themselves are in its missing runs (their runs are FAILED)."""
        notes = []
        if self.not_attempted:
            notes.append(f"{self.not_attempted} runs on data that another run found missing were not attempted")
        if self.taken:
            notes.append(
                f"{self.taken} runs were left to another command running them at the same time: those it has not"
                " finished yet are missing here"
            )
        return notes


STOPPED = "igel-reproduce stopped before the plan's last job"


def in_process(config: DictConfig) -> dict:
    from igel_exp import pipelines  # not at the top: igel-report must not import torch

    return pipelines.run(config)


def isolated(config: DictConfig) -> dict:
    from igel_exp.pipelines.isolation import run_isolated

    return run_isolated(config)


def run_plan(plan: Plan, uri: str, runner: Runner = in_process) -> Outcome:
    """Run the plan's jobs that have no FINISHED run in the store at `uri`, one after the other.

    A job that fails for want of data skips the other jobs of the same dataset (they would fail alike); any
    other failure is recorded and the next job runs. KeyboardInterrupt stops at once: rerun to resume.
    """
    outcome = Outcome()
    parents = _Parents(plan, uri)
    absent: dict[str, str] = {}  # a dataset section that raised DataError -> its message
    try:
        for todo in _rounds(plan, uri, outcome):
            for number, job in enumerate(todo, 1):
                dataset = OmegaConf.to_yaml(job.config.get("dataset", {}), resolve=True)
                if dataset in absent:
                    outcome.not_attempted += 1
                    continue
                log.info("%s [%d/%d] %s", plan.name, number, len(todo), job.shown or "(the only job)")
                config = _with_store(job, uri)
                os.environ[PARENT_RUN_ENV] = parents.for_experiment(str(config.name))
                try:
                    runner(config)
                    outcome.ran += 1
                except JobTaken as error:
                    outcome.taken += 1
                    log.info("%s: %s: left to it: %s", plan.name, job.shown, error)
                except DataError as error:
                    message = first_line(error)
                    absent[dataset] = message
                    outcome.data_missing.append(message)
                    log.error("%s: %s: data missing: %s", plan.name, job.shown, message)
                except IgelError as error:
                    outcome.failed.append(f"{job.shown}: {type(error).__name__}: {first_line(error)}")
                    log.error("%s: %s failed: %s", plan.name, job.shown, error)
                except Exception as error:  # a bug in one job must not cost the others; its run is FAILED
                    outcome.failed.append(f"{job.shown}: {type(error).__name__}: {error}")
                    log.exception("%s: %s failed", plan.name, job.shown)
    except BaseException as error:
        parents.end(RunStatus.KILLED, STOPPED + (" (interrupted)" if isinstance(error, KeyboardInterrupt) else ""))
        raise
    finally:
        os.environ.pop(PARENT_RUN_ENV, None)
    problems = outcome.problems()
    parents.end(RunStatus.FAILED if problems else RunStatus.FINISHED, problems)
    return outcome


def launch_plan(plan: Plan, uri: str, launch: Sequence[str]) -> Outcome:
    """As run_plan, through the Hydra launcher that `launch` picks (`hydra/launcher=joblib`, `...=submitit_slurm`
    and their `hydra.launcher.*` settings): each round of missing jobs is one launch, as `igel-run -m` would make.

    The jobs learn their store and parent run from overrides of `tracking` (not part of a run's identity), so
    that worker processes started for an earlier plan, and Slurm jobs, log where this plan's parent is.
    """
    outcome = Outcome()
    parents = _Parents(plan, uri)
    launched = 0
    try:
        with hydra_launcher(plan, launch) as (launcher, _):
            for todo in _rounds(plan, uri, outcome):
                overrides = [
                    [
                        *job.overrides,
                        _override("tracking.uri", uri),
                        _override("tracking.parent_run_id", parents.for_experiment(str(job.config.name))),
                    ]
                    for job in todo
                ]
                with stopping_job_processes(parents.running):  # joblib's workers end their runs FAILED first
                    returns = launcher.launch(overrides, initial_job_idx=launched)
                launched += len(todo)
                for job, result in zip(todo, returns, strict=True):
                    error = result._return_value  # the exception the job raised, where it raised one
                    if result.status == JobStatus.COMPLETED:
                        outcome.ran += 1
                    elif isinstance(error, JobTaken):
                        outcome.taken += 1
                    else:
                        outcome.failed.append(f"{job.shown}: {type(error).__name__}: {first_line(error)}")
    except KeyboardInterrupt:
        parents.end(RunStatus.KILLED, f"{STOPPED} (interrupted)")
        raise
    except IgelError as error:  # the launcher's settings: one line from igel-reproduce
        parents.end(RunStatus.FAILED, first_line(error))
        raise
    except Exception as error:  # the launcher's own failure (a Slurm job cancelled or killed, sbatch refused...)
        why = unopened_log_file(error) or f"{type(error).__name__}: {first_line(error)}"
        outcome.failed.append(f"the launcher failed: {why}")
        log.error("%s: the launcher failed (jobs already submitted may still run): %s", plan.name, error)
    problems = outcome.problems()
    parents.end(RunStatus.FAILED if problems else RunStatus.FINISHED, problems)
    return outcome


def launched_job(config: DictConfig) -> dict:
    """The task function of the jobs a launcher runs for igel-reproduce (in this process, a worker or a Slurm job).

    Its own Ctrl-C and SIGTERM handling replaces submitit's, which ignores SIGTERM: a job that Slurm cancels or
    stops at its time limit gets SIGTERM, then SIGKILL after KillWait (30 s by default), and its run must end
    FAILED in between, not stay RUNNING (tracking.job_interrupts).
    """
    from igel_exp import pipelines  # not at the top: igel-report must not import torch

    with job_interrupts():
        return pipelines.run(config)


# the packaged configs, and the launcher's and the jobs' log lines on stderr (Hydra's default: stdout, the tables')
LAUNCHED = (
    f"hydra.searchpath=[{PACKAGED_CONFIGS}]",
    "hydra.hydra_logging.handlers.console.stream=ext://sys.stderr",
    "hydra.job_logging.handlers.console.stream=ext://sys.stderr",
)


@contextmanager
def hydra_launcher(plan: Plan, launch: Sequence[str]) -> Iterator[tuple[Launcher, DictConfig]]:
    """The launcher that `igel-run -m --config-dir <plans> --config-name <plan> <launch>` would use, and its settings
    (the composed `hydra.launcher`)."""
    with initialize_config_dir(config_dir=str(plan.path.parent), version_base="1.3", job_name="igel-run"):
        setup_globals()
        hydra = GlobalHydra.instance().hydra
        try:
            config = hydra.compose_config(plan.name, [*LAUNCHED, *launch], run_mode=RunMode.MULTIRUN)
            context = HydraContext(config_loader=hydra.config_loader, callbacks=Callbacks())
            launcher = Plugins.instance().instantiate_launcher(
                hydra_context=context, task_function=launched_job, config=config
            )
        except HydraException as error:
            raise ConfigError(f"{' '.join(launch)}: {first_line(error)}") from None
        check_launcher(config.hydra.launcher)
        yield launcher, config.hydra.launcher


def _rounds(plan: Plan, uri: str, outcome: Outcome) -> Iterator[list[Job]]:
    """The plan's jobs without a FINISHED run, in rounds: the first has all the store can tell (with select.seeds,
    the selection runs and the other seeds of the points already chosen), the next the other seeds of the points
    the first round chose. A job is attempted once per call."""
    attempted: set[str] = set()
    while True:
        finished = finished_by_hash(load_runs(uri, plan.experiments))
        planned, pending = planned_jobs(plan, finished)
        todo = [job for job in planned if job.hash not in finished and job.hash not in attempted]
        if not attempted:
            outcome.finished_before = len(planned) - len(todo)
            log.info(
                "%s (%s profile): %d of %d runs finished, %d to run%s",
                plan.name,
                plan.profile,
                outcome.finished_before,
                len(planned) + pending,
                len(todo),
                f", then up to {pending} once the selection has run" if pending else "",
            )
        if not todo:
            return
        _check_jobs(plan, todo)
        attempted.update(job.hash for job in todo)
        yield todo


def _check_jobs(plan: Plan, jobs: list[Job]) -> None:
    """A bad value in any job stops the plan before its first run (ConfigError naming the job and the key). A missing
    data file is left to the job: it skips the other jobs on that dataset and is reported with them."""
    from igel_exp import pipelines  # not at the top: igel-report must not import torch

    for job in jobs:
        try:
            pipelines.check(job.config)
        except ConfigError as error:
            raise ConfigError(f"{plan.name}: {job.shown or '(the only job)'}: {error}") from None
        except DataError:
            pass


def _override(key: str, value: str) -> str:
    """A Hydra override of `key` with `value` quoted (a store URI holds ':' and '/')."""
    escaped = value.replace("'", "\\'")
    return f"{key}='{escaped}'"


class _Parents:
    """One parent MLflow run per experiment the plan's jobs log to, created when its first job starts."""

    def __init__(self, plan: Plan, uri: str):
        self.plan, self.ids = plan, {}
        self.uri, self.experiment_ids = uri, []

    @functools.cached_property
    def client(self) -> mlflow.MlflowClient:
        return mlflow.MlflowClient(tracking_uri=self.uri)  # not before a job needs it: a client creates the store

    @store_call()
    def for_experiment(self, name: str) -> str:
        if name not in self.ids:
            experiment = open_experiment(self.uri, name)  # creates the store and the experiment before any job
            command = f"igel-reproduce {self.plan.name} --profile {self.plan.profile}"
            run = self.client.create_run(
                experiment.experiment_id,
                run_name=f"reproduce {self.plan.name} ({self.plan.profile}) {time.strftime('%Y-%m-%d %H:%M:%S')}",
                tags={
                    REPRODUCE_TAG: f"{self.plan.name} ({self.plan.profile})",
                    "mlflow.note.content": command,
                    **alive_tags(),
                },
            )
            HEARTBEATS.start(run.info.run_id, self.uri)
            self.client.set_tag(run.info.run_id, SWEEP_TAG, run.info.run_id)
            self.ids[name] = run.info.run_id
            self.experiment_ids.append(experiment.experiment_id)
        return self.ids[name]

    def running(self) -> int:
        """How many of the jobs nested under these parents are RUNNING."""
        return running_jobs(self.experiment_ids, list(self.ids.values()))

    @store_call()
    def end(self, status: int, why: str | None = None) -> None:
        """End every parent run with `status`; `why` (a FAILED or KILLED one's reason) becomes its `error` tag, as a
        failed run's."""
        for run_id in self.ids.values():
            HEARTBEATS.end(run_id)
            if why:
                self.client.set_tag(run_id, "error", why[:5000])
            self.client.set_terminated(run_id, RunStatus.to_string(status))
        self.ids, self.experiment_ids = {}, []


def _with_store(job: Job, uri: str) -> DictConfig:
    """The job's config, logging to `uri` (tracking is not part of a run's identity)."""
    config = copy.deepcopy(job.config)
    with open_dict(config):
        OmegaConf.update(config, "tracking.uri", uri, force_add=True)
    return config


# Command lines


def _parser(prog: str, description: str, reproduce: bool) -> argparse.ArgumentParser:
    parser = OneLineParser(prog=prog, description=description)
    parser.add_argument(
        "items",
        nargs="*",
        metavar="TABLE|all | KEY=VALUE",
        help="experiments/ files by name (or a paper table's label), or all"
        + ("" if reproduce else " (the default)")
        + "; then Hydra overrides for every job, e.g. threads=1 or dataset=facebook,astroph",
    )
    parser.add_argument("--profile", choices=PROFILES, default="full", help="quick: the file's reproduce.quick profile")
    parser.add_argument(
        "--format",
        choices=FORMATS,
        help="output format (default: from --output's suffix, else markdown; a suffix of another format is an error)",
    )
    parser.add_argument("--output", "-o", type=output_file, help="write the tables to this file instead of stdout")
    parser.add_argument("--tracking-uri", help=f"MLflow store (default: {DEFAULT_STORE})")
    parser.add_argument(
        "--experiments",
        type=Path,
        help="folder of your own reproduction files (default: the paper's, installed with igel-exp)",
    )
    if reproduce:
        parser.add_argument("--isolate", action="store_true", help="run every job in a fresh process")
        parser.add_argument("--dry-run", action="store_true", help="list the jobs that would run; run nothing")
    return parser


def _split(items: Sequence[str]) -> tuple[list[str], list[str]]:
    """(tables, overrides): an override has a value (KEY=VALUE) or deletes a key (Hydra's ~KEY, which has none)."""
    overrides = [item for item in items if "=" in item or item.startswith("~")]
    return [item for item in items if item not in overrides], overrides


def _launcher_overrides(overrides: Sequence[str]) -> tuple[list[str], list[str]]:
    """The overrides of Hydra's own config (hydra/launcher=..., hydra.launcher.*=...: how jobs are launched), and
    the jobs' own overrides."""
    hydra = [item for item in overrides if item.lstrip("+~").startswith(("hydra/", "hydra."))]
    return hydra, [item for item in overrides if item not in hydra]


def _dry_run(plans: list[Plan], runs: _RunCache, launch: Sequence[str], launcher: DictConfig | None = None) -> None:
    """Per plan: the runs to do, their estimated wall time and the equivalent sweep; then the total, one job at a time
    and as many at a time as the launcher's settings (`launcher`, the composed `hydra.launcher` of `launch`) run."""
    kinds = load_kinds()
    total = Estimate()
    to_do = 0
    earlier: set[str] = set()  # jobs of the tables above: tables that share runs (Sister Cities) run them once
    trained: set[str] = set()  # the embeddings the jobs above train, which later jobs may reuse
    for plan in plans:
        stored = runs(plan)
        finished = finished_by_hash(stored)
        planned, pending = planned_jobs(plan, finished)
        unfinished = [job for job in planned if job.hash not in finished]
        todo = [job for job in unfinished if job.hash not in earlier]
        shared = len(unfinished) - len(todo)
        earlier.update(job.hash for job in todo)
        trained.update(filter(None, (reuse_key(job) for job in planned if job.hash in finished)))
        estimate = Estimator(finished_durations(stored), kinds).jobs(todo, pending, trained)
        models = _models_to_train(todo, runs, earlier, kinds, estimate)
        total += estimate
        to_do += len(todo) + pending + models
        later = f" (then {pending} more: the chosen points' other seeds)" if pending else ""
        later += f" (and {models} link-prediction runs that its jobs train first)" if models else ""
        later += f" ({shared} more in a table above)" if shared else ""
        later += f" ({plan.skipped} of the sweep left out by reproduce.skip)" if plan.skipped else ""
        sweep = "sweep (reproduce.skip's jobs included)" if plan.skipped else "sweep"  # a sweep is a cross product
        print(
            f"{plan.name} ({plan.profile}): {len(todo)}{later} of {len(planned) + pending} runs to do,"
            f" about {duration_text(estimate.seconds)}; {sweep}: {' '.join([plan.command, *launch])}"
        )
        for job in todo:
            print(f"  {job.shown or '(the only job)'}")
    sources = ", ".join(f"{count} from {source}" for source, count in total.sources.items())
    jobs, how = _jobs_at_once(launcher, launch)
    at_once = "" if jobs is None else f", about {duration_text(total.seconds / min(jobs, COST_MODEL_CORES))}"
    print(
        f"all: {to_do} runs to do, about {duration_text(total.seconds)} one job at a time on this kind of machine"
        f" ({COST_MODEL_CORES} cores, a thread per job){at_once} {how}{'; ' + sources if sources else ''}"
    )


def _models_to_train(todo: list[Job], runs: _RunCache, earlier: set[str], kinds: list, estimate: Estimate) -> int:
    """The link-prediction runs that the transfer jobs in `todo` train first (A's and B's own, where the store has no
    FINISHED run of them and no table above runs them), added to `estimate` and to `earlier`; how many. A transfer job
    itself costs seconds, its models most of an hour on 2 cores: `igel-reproduce transfer_link_prediction --dry-run`
    said 5 min of an hour and 20."""
    transfers = [job for job in todo if job.flat.get("name") == TRANSFER]
    if not transfers:
        return 0
    from igel_exp.pipelines.transfer import SOURCE_EXPERIMENT, link_prediction_config_of, own_config

    stored = runs.of(SOURCE_EXPERIMENT)
    finished, estimator = finished_by_hash(stored), Estimator(finished_durations(stored), kinds)
    count = 0
    for job in transfers:
        source = link_prediction_config_of(job.config)
        for config in (own_config(job.config, source), source):
            resolved = OmegaConf.to_container(config, resolve=True, enum_to_str=True)
            identity = config_hash(resolved)
            if identity in finished or identity in earlier:
                continue
            earlier.add(identity)
            seconds, source_of = estimator.job(_Priced(flatten(resolved)))
            estimate.add(seconds or 0.0, source_of)
            count += 1
    return count


@dataclass(frozen=True)
class _Priced:
    """A run to price that is no job of a plan (Estimator.job reads its flattened config)."""

    flat: dict


TRANSFER = "transfer_link_prediction"  # the experiment whose jobs train link-prediction runs first
COST_MODEL_CORES = 2  # costs.yaml's machine; its runs were timed a thread per job, the other core busy
PARALLEL_LAUNCH = "hydra/launcher=joblib hydra.launcher.n_jobs=2 threads=1"  # a job per core


def _jobs_at_once(launcher: DictConfig | None, launch: Sequence[str]) -> tuple[int | None, str]:
    """How many jobs the launcher runs at once, and how the dry run's total says it: without a launcher, what
    PARALLEL_LAUNCH would do; Hydra's basic launcher, one; the joblib launcher, what joblib makes of its n_jobs (-1:
    all the machine's cores, -2: all but one, ...; `hydra.launcher.n_jobs=-1` read "two at a time"); None for a
    launcher that decides for itself (Slurm's)."""
    if launcher is None:
        return COST_MODEL_CORES, f"two at a time ({PARALLEL_LAUNCH})"
    target = str(launcher.get("_target_", ""))
    if target == BASIC_LAUNCHER:
        return 1, "one at a time (Hydra's basic launcher)"
    if target != JOBLIB_LAUNCHER:
        limit = launcher.get("array_parallelism")
        up_to = f", up to hydra.launcher.array_parallelism={limit}" if limit is not None else ""
        return None, f"(how many run at once is {target.rsplit('.', 1)[-1]}'s to decide{up_to})"
    import joblib  # not at the top: igel-report need not import it

    n_jobs = joblib_settings(launcher).get("n_jobs")
    jobs = joblib.effective_n_jobs(n_jobs)  # -1: all the machine's cores, as joblib counts them, -2: all but one, ...
    given = any(item.startswith("hydra.launcher.n_jobs=") for item in launch)
    setting = f"hydra.launcher.n_jobs={n_jobs}" + ("" if given else ", the joblib launcher's default")
    if isinstance(n_jobs, int) and n_jobs < 0:  # joblib's rule: the machine's cores + 1 + n_jobs, at least one
        cores, others = joblib.cpu_count(), -n_jobs - 1
        setting += f": all {cores} cores of this machine{f' but {others}' if others else ''}"
        setting += ", at least one" if cores - others < 1 else ""
    counted = "one at a time" if jobs == 1 else f"{jobs} at a time"
    if jobs > COST_MODEL_CORES:  # this kind of machine runs no more at once than its cores
        return jobs, f"{COST_MODEL_CORES} at a time, as many as it has cores (joblib: {setting}, runs {jobs} at a time)"
    return jobs, f"{counted} (joblib: {setting})"


def _store(
    parser: argparse.ArgumentParser, arguments: argparse.Namespace, overrides: list[str]
) -> tuple[str, str | None]:
    """--tracking-uri, else a tracking.uri= override, else igel-run's default; and which gave it, for its errors (None:
    the default, check_store_uri's own). A blank one is the command's option error."""
    if arguments.tracking_uri is not None:
        configured, key = arguments.tracking_uri, "--tracking-uri"
    else:
        given = [item.split("=", 1)[1] for item in overrides if item.startswith("tracking.uri=")]
        configured, key = given[-1] if given else None, "tracking.uri"
    try:
        return tracking_uri(configured, key), key if configured is not None else None
    except StoreError as error:
        parser.error(str(error))


def _rerun(arguments: argparse.Namespace, overrides: list[str]) -> str:
    """The options and overrides given, as igel-reproduce takes them: the command a table says runs its missing jobs."""
    options = [("--experiments", arguments.experiments), ("--tracking-uri", arguments.tracking_uri)]
    given = [f"{option} {shlex.quote(str(value))}" for option, value in options if value]
    return " ".join([*given, *map(shlex.quote, overrides)])


def _plans(arguments: argparse.Namespace, tables: list[str], overrides: list[str], errors: list[str]) -> list[Plan]:
    folder = arguments.experiments or default_experiments_dir()
    if folder.is_file():
        raise ConfigError(f"--experiments {folder}: is a file; the option takes the folder of experiments files")
    plans, failed = [], {}
    # expanding the tables' sweeps takes ~30 s once after an install or an edit (then cached_plan reads them back): a
    # bar on a terminal (none in a pipe or a log) says so, where it takes over 2 s
    bar = {"desc": "expand the tables' sweeps", "unit": "table", "delay": 2, "disable": None}
    for path in tqdm(table_files(folder, tables), **bar):
        try:
            plans.append(cached_plan(path, arguments.profile, overrides))
        except ConfigError as error:  # one malformed file does not hide the other tables
            failed[path.stem] = str(error)
    # a bad override fails every table alike: one line, not one per table
    by_cause: dict[str, list[str]] = {}
    for table, message in failed.items():
        by_cause.setdefault(message.rsplit(": ", 1)[-1], []).append(table)
    for tables_alike in by_cause.values():
        others = f" (the same in {', '.join(tables_alike[1:])})" if len(tables_alike) > 1 else ""
        errors.append(f"{tables_alike[0]}: {failed[tables_alike[0]]}{others}")
    return plans


def _check_output(arguments: argparse.Namespace, uri: str) -> None:
    """--output, checked before any job runs: a folder, or a place this user cannot write, is one line now, not a table
    lost after hours of jobs; the store's own database file (`uri`'s), whose runs the tables would overwrite, too."""
    output = arguments.output
    if output is None:
        return
    database = sqlite_file(uri)
    if database is not None and same_file(output, database):
        raise ConfigError(  # -o mlflow.db wrote the tables over the store: every run lost
            f"--output {output} is the MLflow store {uri}: the tables would overwrite its runs; name another file"
        )
    if not arguments.format and output.suffix and output.suffix.lower() not in SUFFIXES:
        raise ConfigError(
            f"--output {output}: no format writes {output.suffix} files ({', '.join(SUFFIXES)}); name it so, or give"
            " --format"
        )
    named = SUFFIXES.get(output.suffix.lower())
    if arguments.format and named and named != arguments.format:  # csv in t.md, unsaid, before
        suffix = next(suffix for suffix, fmt in SUFFIXES.items() if fmt == arguments.format)
        raise ConfigError(
            f"--format {arguments.format} disagrees with --output {output}, a {named} file's name: leave --format out,"
            f" or name the file {suffix}"
        )
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        existed = output.exists()
        with output.open("a"):
            pass
        if not existed:  # a command that fails later leaves no empty file
            output.unlink()
    except OSError as error:
        raise ConfigError(f"--output {output}: cannot write it ({error.strerror or error})") from None


def _write(tables: list[Table], arguments: argparse.Namespace) -> None:
    if not tables:  # every table named had an error, which the command ends with
        return
    fmt = (
        arguments.format or (SUFFIXES.get(arguments.output.suffix.lower()) if arguments.output else None) or "markdown"
    )
    text = render(tables, fmt)
    if arguments.output:
        try:
            arguments.output.write_text(text)
        except OSError as error:  # a full disk: the tables are not lost
            sys.stdout.write(text)
            raise ConfigError(
                f"--output {arguments.output}: cannot write it ({error.strerror or error}); the tables went to stdout"
            ) from None
        counted = "1 table" if len(tables) == 1 else f"{len(tables)} tables"  # it said: wrote 1 tables
        print(f"wrote {counted} to {arguments.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)


class _RunCache:
    """The store's runs per MLflow experiment, read once for all the tables that share it."""

    def __init__(self, uri: str):
        self.uri, self.runs = uri, {}

    def __call__(self, plan: Plan) -> list[StoredRun]:
        return [run for name in plan.experiments for run in self.of(name)]

    def of(self, name: str) -> list[StoredRun]:
        """The runs of one MLflow experiment."""
        if name not in self.runs:
            self.runs[name] = load_runs(self.uri, [name])
        return self.runs[name]


def _fail(prog: str, messages: list[str]) -> int:
    for message in messages:
        print(f"{prog}: error: {message}", file=sys.stderr)
    return 1 if messages else 0


def _close_stale_runs(uri: str) -> None:
    """close_stale_runs for igel-report, which may read a store it cannot write: then it only says so."""
    if not store_exists(uri):  # reading must not make one
        return
    try:
        close_stale_runs(uri)
    except STORE_ERRORS as error:
        if _readable(uri):  # else the read that follows fails, and its error line says why
            log.warning("could not close the stale runs of %s: %s", uri, first_line(error))


@store_call()
def _readable(uri: str) -> bool:
    try:
        mlflow.MlflowClient(tracking_uri=uri).search_experiments(max_results=1)
    except STORE_ERRORS:
        return False
    return True


def _tables(
    plans: list[Plan], runs: _RunCache, rerun: str, errors: list[str], notes: Mapping[str, Sequence[str]] | None = None
) -> list[Table]:
    """The plans' tables; one whose file is wrong for its runs (a misspelled metric) is an error line in `errors`, and
    the other tables are printed."""
    tables = []
    for plan in plans:
        try:
            deleted = deleted_experiments(runs.uri, plan.experiments)  # else its cells read as never run
            tables.append(build_table(plan, runs(plan), [*(notes or {}).get(plan.name, ()), *deleted], rerun))
        except ConfigError as error:
            errors.append(f"{plan.name}: {error}")
    return tables


@contextmanager
def _collected(errors: list[str], uri: str) -> Iterator[None]:
    """The block's user-input and store errors as one line each in `errors`, which the command ends with (exit 1)."""
    try:
        yield
    except IgelError as error:
        errors.append(first_line(error))
    except yaml.YAMLError as error:  # an experiments/ file of --experiments
        errors.append(yaml_problem(error))
    except STORE_ERRORS as error:
        errors.append(f"cannot read the MLflow store {uri} ({first_line(error)})")


def report_main(argv: Sequence[str] | None = None) -> int:
    """igel-report: the paper's tables from the runs in an MLflow store."""
    parser = _parser(
        "igel-report",
        "Print the paper's tables (paper, ours = mean ± std over seeds, Δ) from the runs in an MLflow store.",
        reproduce=False,
    )
    arguments = parser.parse_intermixed_args(argv)
    tables, overrides = _split(arguments.items)
    errors: list[str] = []
    uri, key = _store(parser, arguments, overrides)
    with _collected(errors, uri):
        check_store_uri(uri, key=key)
        _check_output(arguments, uri)
        plans = _plans(arguments, tables or ["all"], overrides, errors)
        if plans and not store_exists(uri):  # its tables list every run as missing: say why (a mistyped place?)
            print(f"igel-report: {no_store(uri)}", file=sys.stderr)
        _close_stale_runs(uri)
        _write(_tables(plans, _RunCache(uri), _rerun(arguments, overrides), errors), arguments)
    return _fail("igel-report", errors)


def reproduce_main(argv: Sequence[str] | None = None) -> int:
    """igel-reproduce: run the jobs of the tables' sweeps that the store lacks, then print the tables."""
    parser = _parser(
        "igel-reproduce",
        "Run the missing jobs of the paper's tables (skipping configs that already have a FINISHED run in the"
        " MLflow store), then print the tables. Interrupt and rerun at will: nothing finished is repeated.",
        reproduce=True,
    )
    arguments = parser.parse_intermixed_args(argv)
    if arguments.dry_run and (arguments.output or arguments.format):  # it wrote nothing there, and said nothing
        given = f"--output {arguments.output}" if arguments.output else f"--format {arguments.format}"
        parser.error(f"{given}: --dry-run prints the runs to do on standard output, no tables (> FILE keeps them)")
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s][%(name)s][%(levelname)s] - %(message)s")
    tables, overrides = _split(arguments.items)
    if not tables:  # the full sweeps of every table take days: running them must be asked for by name
        print("igel-reproduce: error: name the tables to reproduce, or all", file=sys.stderr)
        return 2
    launch, overrides = _launcher_overrides(overrides)
    errors: list[str] = []
    uri, key = _store(parser, arguments, overrides)
    with _collected(errors, uri):
        check_store_uri(uri, key=key)
        _check_output(arguments, uri)
        plans = _plans(arguments, tables, overrides, errors)
        if arguments.dry_run:
            if plans:
                settings = None
                if launch:  # the launcher's settings fail here as they would when the jobs run
                    with hydra_launcher(plans[0], launch) as (_, settings):
                        pass
                _dry_run(plans, _RunCache(uri), launch, settings)
            return _fail("igel-reproduce", errors)
        runner = isolated if arguments.isolate else in_process
        outcomes = {}
        for plan in plans:
            try:
                with sigterm_interrupts():
                    outcomes[plan.name] = launch_plan(plan, uri, launch) if launch else run_plan(plan, uri, runner)
            except KeyboardInterrupt:
                print(f"igel-reproduce: interrupted in {plan.name}; rerun the same command to resume", file=sys.stderr)
                return 130
        release_job_processes()  # the tables' jobs are done: not waited for at the exit
        for name, outcome in outcomes.items():
            errors += [f"{name}: {failure}" for failure in outcome.failed]
            for message in outcome.data_missing:
                print(f"igel-reproduce: {name}: data missing: {message}", file=sys.stderr)
        runs = _RunCache(uri)  # read after the jobs: they added runs
        notes = {name: outcome.notes() for name, outcome in outcomes.items()}
        _write(_tables(plans, runs, _rerun(arguments, [*launch, *overrides]), errors, notes), arguments)
    return _fail("igel-reproduce", errors)


def report() -> None:
    sys.exit(report_main())


def reproduce() -> None:
    sys.exit(reproduce_main())
