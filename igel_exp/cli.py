"""Console entry points: `igel-run` and `igel-embed`, Hydra apps over the config tree packaged as `igel_exp.conf`
(primary configs `config` and `embed`).

torch, MLflow and the pipelines are imported once the config has composed: a mistyped value fails in a second.
"""

from __future__ import annotations

import errno
import functools
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import hydra
import yaml
from hydra.core.hydra_config import HydraConfig
from hydra.errors import HydraException
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from igel_exp.entry import deliver_held_interrupt, interruptible, raise_held_interrupt
from igel_exp.errors import (
    FAILED_RUN,
    IgelError,
    first_line,
    nearest_existing,
    option_error,
    unopened_log_file,
    yaml_problem,
)
from igel_exp.schema import (
    check_launcher,
    describe,
    not_taken,
    override_keys,
    picked_groups,
    refuse_option_names,
    taken_by,
)

CONFIG_PATH = "pkg://igel_exp.conf"
BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"


@hydra.main(config_path=CONFIG_PATH, config_name="config", version_base="1.3")
def app(config: DictConfig) -> float | None:
    """Run one experiment (or, with -m, one job of a sweep) as an MLflow run."""
    from igel_exp import pipelines

    metrics = _guarded("igel-run", functools.partial(pipelines.run, given=_given()), config)
    objective = config.task.get("objective")
    if objective and objective not in metrics:  # the run is done and stored: say so, fail nothing
        print(
            f"igel-run: warning: task.objective={objective} is not a metric of this run, so a sweeper gets none"
            f" (its metrics: {', '.join(sorted(metrics))})",
            file=sys.stderr,
        )
    return metrics.get(objective) if objective else None


@hydra.main(config_path=CONFIG_PATH, config_name="embed", version_base="1.3")
def embed_app(config: DictConfig) -> None:
    """Embed a graph with the frozen model of an earlier run, as an MLflow run of experiment `embed`."""
    from igel_exp.pipelines.embed import embed as embed_graph

    _guarded("igel-embed", functools.partial(embed_graph, given=_given()), config)


def _given() -> list[str]:
    """The keys a single run's command line sets, which must fit the options it picks (schema.check); none for a
    sweep's job, whose command line is checked as a whole (SweepCheck)."""
    hydra_config = HydraConfig.get()
    overrides = OmegaConf.to_container(hydra_config.overrides.task, resolve=False)  # ${…} in them: the run's to resolve
    return override_keys(overrides) if hydra_config.mode == RunMode.RUN else []


def main() -> None:
    """igel-run: the Hydra app, with a config that fails to compose reported in one line."""
    _warn_repeated_keys("igel-run", _check_options("igel-run", "config"))
    _refuse_deleted_groups("igel-run", "config")
    with one_line_errors("igel-run"):
        app()


def embed() -> None:
    """igel-embed: the Hydra app, with a config that fails to compose reported in one line."""
    _warn_repeated_keys("igel-embed", _check_options("igel-embed", "embed"))
    _refuse_deleted_groups("igel-embed", "embed")
    with one_line_errors("igel-embed"):
        embed_app()


def _placement_hint(message: str) -> str:
    """argparse's message, saying why where overrides are unrecognized: Hydra reads them as one run of arguments, so
    `progress=false --cfg job trainer.epochs=3` leaves the last one out."""
    unrecognized = message.removeprefix("unrecognized arguments: ")
    if unrecognized != message and all("=" in argument for argument in unrecognized.split()):
        return f"{message}: give the options (--cfg, -m, --config-dir, …) before or after all of the overrides"
    return message


def _check_options(program: str, config_name: str) -> list[str]:
    """The command line read by Hydra's own parser first, whose option errors (`--bogus`, `--cfg jobs`) end in one line,
    exit status 2, as igel-report's and igel-reproduce's do: argparse prints its usage block above them. A primary
    config of the program's name (`config_name`.yaml) in --config-dir is refused: Hydra looks there after the package's
    own configs, so the package's would be used and the user's silently ignored, broken or not. Returns the
    overrides."""
    from hydra._internal.utils import get_args_parser

    parser = get_args_parser()
    parser.error = lambda message: parser.exit(2, option_error(program, _placement_hint(message)))
    options = parser.parse_args()
    shadowed = Path(options.config_dir or "", f"{config_name}.yaml")
    if options.config_dir and options.config_name in (None, config_name) and shadowed.is_file():
        parser.exit(
            2,
            f"{program}: error: {shadowed}: --config-dir cannot replace {program}'s own {config_name}.yaml, which Hydra"
            f" reads first: rename yours and pass --config-name with its name\n",
        )
    return options.overrides


def _warn_repeated_keys(program: str, overrides: list[str]) -> None:
    """A key set twice on the command line (`seed=1 … seed=2`, `+key` or `~key` included) is said in one line: Hydra
    keeps the last without a word, and a sweep's `-m seed=0,1,2 … seed=3` runs a third of what its line seems to ask.
    Not refused: scripts that add an override to a list of their own rely on the last one winning. Overrides that
    Hydra's grammar cannot read are left to Hydra's own error."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    parser, seen = OverridesParser.create(), {}
    for argument in overrides:
        try:
            (override,) = parser.parse_overrides([argument])
        except OverrideParseException:
            continue
        key = override.key_or_group + ("" if override.package is None else f"@{override.package}")
        if key in seen:
            print(
                f"{program}: warning: {key} is set twice ({seen[key]}, then {argument}): Hydra keeps the last",
                file=sys.stderr,
            )
        seen[key] = argument


def _refuse_deleted_groups(program: str, config_name: str) -> None:
    """`~trainer` (or `~dataset=…`) on the command line: a group whose option the config must pick is refused in one
    line. Hydra would compose without it and fail on whatever reads it first, naming something else (a key of the
    group, an interpolation of the defaults list)."""
    picked = picked_groups(config_name)
    for argument in sys.argv[1:]:
        group = argument[1:].partition("=")[0] if argument.startswith("~") else None
        if group in picked:
            sys.exit(
                f"{program}: error: {argument}: {group} cannot be left out; choose one of its options ({group}=OPTION,"
                " listed by --help)"
            )


def _guarded(program: str, work: Callable[[DictConfig], dict], config: DictConfig) -> dict:
    """`work(config)`; user input problems and interrupts end the process with one line, no traceback."""
    from igel_exp.tracking import LAUNCHER_ENV, job_interrupts, watch_parent

    _work_from_launch_directory()
    launcher = os.environ.get(LAUNCHER_ENV)  # a sweep's job in a worker process stops if its launcher is killed
    try:
        deliver_held_interrupt()  # a Ctrl-C while the command started (igel_exp.entry): before any run
        # in a Slurm job, an interrupt ends as an error that submitit records
        with job_interrupts(), watch_parent(int(launcher) if launcher else None):
            return work(config)
    except (IgelError, OmegaConfBaseException) as error:
        # user input problems: one line, no traceback; the MLflow run (if any) is already FAILED
        sys.exit(f"{program}: error: {_in_sweep_job()}{describe(error)}")
    except KeyboardInterrupt as error:  # Ctrl-C or SIGTERM: the run in progress, if any, is already FAILED
        ended = getattr(error, FAILED_RUN, None)
        print(f"{program}: interrupted" + (f"; its run {ended} ended FAILED" if ended else ""), file=sys.stderr)
        sys.exit(130)


def _in_sweep_job() -> str:
    """`the job OVERRIDES: ` in a job of a sweep, whose error line then says which job failed (joblib's run at once);
    nothing in a single run."""
    from igel_exp.plan import shown

    hydra_config = HydraConfig.get()
    return f"the job {shown(hydra_config.overrides.task)}: " if hydra_config.mode == RunMode.MULTIRUN else ""


def _work_from_launch_directory() -> None:
    """Undo hydra.job.chdir=true, which starts a job in its output folder: every relative path of a config
    (dataset.path, data.root, task.split_cache, the default ./mlflow.db store) names a file of the folder the command
    was started in, and a sweep's runs must reach the store that holds its parent run. Hydra writes its own files
    by absolute paths, and returns to its folder after the job."""
    launched = HydraConfig.get().runtime.cwd
    if os.getcwd() != launched:
        os.chdir(launched)


@contextmanager
def one_line_errors(prog: str) -> Iterator[None]:
    """Report Hydra's composition errors (a value of the wrong type, an unknown option) as one line naming the key.

    Hydra prints them over several lines unless $HYDRA_FULL_ERROR is set, and then it raises them: it is set for
    the block, so that they reach this handler. Whoever set it already gets Hydra's full traceback.
    """
    if os.environ.get("HYDRA_FULL_ERROR") == "1":
        yield
        return
    os.environ["HYDRA_FULL_ERROR"] = "1"
    try:
        yield
    except (HydraException, OmegaConfBaseException, IgelError) as error:
        sys.exit(f"{prog}: error: {describe(error)}")
    except OSError as error:  # Hydra's own files: outputs/ in a folder this user cannot write
        sys.exit(f"{prog}: error: {_hydra_files(error)}")
    except yaml.YAMLError as error:  # a config file of --config-dir
        sys.exit(f"{prog}: error: {yaml_problem(error)}")
    except ValueError as error:  # Hydra's own, for overrides its grammar takes but it cannot apply (`=5`)
        # or logging's, for Hydra's log file (hydra.job.name=a/b)
        line = unopened_log_file(error) or (first_line(error) if _raised_in_hydra(error) else None)
        if line is None:
            raise
        sys.exit(f"{prog}: error: {line}")
    except KeyboardInterrupt:  # before a run started (torch's import) or between a sweep's jobs: nothing to end
        print(f"{prog}: interrupted", file=sys.stderr)
        sys.exit(130)
    finally:
        os.environ.pop("HYDRA_FULL_ERROR", None)


def _check_folder(path: Path) -> None:
    """Raise OSError where the folder could not be made (a file in its way, no permission), making none: Hydra makes it,
    and a sweep started in the same second (the same folder) may be making it now."""
    existing = nearest_existing(path)  # a relative path's parents end at ".", which exists
    if not existing.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "Not a directory", str(path))
    if existing != path and not os.access(existing, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, "Permission denied", str(existing))


def _hydra_files(error: OSError) -> str:
    return f"{error.filename}: {error.strerror} (hydra.run.dir, or hydra.sweep.dir with -m, sets where Hydra writes)"


def _raised_in_hydra(error: BaseException) -> bool:
    """Whether the innermost frame of the error's traceback is Hydra's code."""
    frames = list(traceback.walk_tb(error.__traceback__))
    return bool(frames) and "hydra" in Path(frames[-1][0].f_code.co_filename).parts


class SweepCheck(Callback):
    """Checks every job of an `igel-run -m` (or `igel-embed -m`: `program`) sweep before the first one starts, and
    before the sweep's MLflow store and parent run are made (conf/config.yaml and conf/embed.yaml list it first): a
    bad value in the tenth job stops the sweep at once, with one line, not after nine runs. The configs first, then
    what they need at hand: the datasets' files (with data.download=false) and igel-embed's source runs' models.
    Sweepers other than Hydra's basic one expand their sweeps themselves: their jobs are each checked before their
    run only."""

    def __init__(self, program: str = "igel-run"):
        self.program = program

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            check_launcher(config.hydra.launcher)
            _check_folder(Path(config.hydra.sweep.dir))  # Hydra makes it at the first job: after the parent run
        except IgelError as error:
            sys.exit(f"{self.program}: error: {error}")
        except OSError as error:
            sys.exit(f"{self.program}: error: {_hydra_files(error)}")
        if config.hydra.sweeper.get("_target_") != BASIC_SWEEPER:
            return
        with interruptible():  # torch's import takes seconds
            from tqdm.auto import tqdm

            from igel_exp import pipelines
            from igel_exp.pipelines import embed
            from igel_exp.plan import shown, sweep_jobs

        if self.program == "igel-embed":
            check, at_hand = embed.check, embed.check_source
        else:
            check, at_hand = pipelines.check, pipelines.check_data_files
        prefix = f"{self.program}: error:"

        def job_check(function: Callable[[DictConfig], Any], overrides: list[str], job: DictConfig) -> Any:
            raise_held_interrupt()  # Ctrl-C, held back while the command starts (igel_exp.entry), stops the check
            try:
                return function(job)
            except IgelError as error:
                sys.exit(f"{prefix} the job {shown(overrides)}: {error}")

        # SystemExit: Hydra turns a callback's exceptions into warnings and goes on
        try:
            given = override_keys(config.hydra.overrides.task)
            refuse_option_names(given)
            unused = set(given)  # the command line's keys that no job's options take
            jobs = []
            # a bar where the check takes long (a grid of thousands: some 20 ms a job)
            bar = {"desc": "check the sweep", "unit": "job", "delay": 2, "disable": not config.get("progress", True)}
            for overrides, job in tqdm(sweep_jobs(config), **bar):  # composition errors name the job's overrides
                jobs.append((overrides, job_check(check, overrides, job)))
                unused &= set(not_taken(job, given))
            if not jobs:
                sys.exit(f"{prefix} the sweep has no jobs (a sweep over an empty range or list?)")
            for key in (key for key in given if key in unused):
                sys.exit(f"{prefix} no job of the sweep takes {key}; {taken_by(key)}")
            for overrides, job in jobs:
                job_check(at_hand, overrides, job)
        except (HydraException, OmegaConfBaseException, IgelError) as error:
            sys.exit(f"{prefix} {describe(error)}")


if __name__ == "__main__":
    main()
