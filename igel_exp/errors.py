"""Errors caused by the user's input (config, data): the CLI prints them as one line, without a traceback."""

import argparse
import os
from pathlib import Path
from typing import NoReturn


class IgelError(Exception):
    """Base class of user-facing errors."""


class ConfigError(IgelError, ValueError):
    """A config value is invalid; the message names its key."""


class DataError(IgelError, ValueError):
    """A data file is missing or malformed; the message names the file (and line)."""


class ModelError(IgelError, ValueError):
    """A saved IGEL model is absent, unreadable or of another format version; the message names the run or file."""


class BudgetError(IgelError, MemoryError):
    """A run would exceed, or has reached, a configured resource budget; the message names its key."""


class StoreError(IgelError):
    """The MLflow store cannot be opened or written; the message names it."""


class JobTaken(IgelError):
    """A job of igel-reproduce that another command is running, or has finished, since this one listed it: left to it.
    `running`: by a process known to be alive (on this machine, or on another that sends heartbeats), whose end will be
    seen, even by a kill. The message names that run."""

    def __init__(self, message: str, running: bool = True):
        super().__init__(message)
        self.running = running


def yaml_problem(error: BaseException) -> str:
    """A YAML parser's error in one line: the file and line where it stopped, and what it found there."""
    mark = getattr(error, "problem_mark", None)
    where = f"{mark.name}:{mark.line + 1}: " if mark is not None else ""
    return f"{where}not valid YAML ({getattr(error, 'problem', None) or first_line(error)})"


def unopened_log_file(error: BaseException) -> str | None:
    """The one line for logging's ValueError over a log file it could not open (Hydra's job log: `hydra.job.name=a/b`
    puts it in a folder no one made), naming the file; None for any other error."""
    cause = error.__cause__
    logging_s = isinstance(error, ValueError) and str(error).startswith("Unable to configure handler")
    if not (logging_s and isinstance(cause, OSError)):
        return None
    return (
        f"{cause.filename}: {cause.strerror} (Hydra's log file: hydra.job.name names it, in hydra.run.dir"
        " (hydra.sweep.dir with -m))"
    )


def first_line(error: BaseException | str) -> str:
    """An error's first non-blank line, for one-line messages (its type's name when it has none)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


# the attribute an exception carries once it has ended an MLflow run FAILED (tracking.tracked_run): the run's id, which
# the CLI's line for an interrupt names (an interrupt before any run started has none)
FAILED_RUN = "igel_failed_run"


def option_error(prog: str, message: str) -> str:
    """A command's option error as one line, pointing to its --help."""
    return f"{prog}: error: {message} ({prog} --help lists the options)\n"


class OneLineParser(argparse.ArgumentParser):
    """An option error in one line, exit status 2, as the commands' other errors (argparse prints its usage block
    above it)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, option_error(self.prog, message))


def nearest_existing(path: Path) -> Path | None:
    """`path`, or the nearest of its folders that exists (None where none does: a relative path's first part)."""
    return next((folder for folder in [path, *path.parents] if folder.exists()), None)


def same_file(one: str | Path, other: str | Path) -> bool:
    """Whether two paths name one file: the same one where both are there (a symlink, a hard link, a folder mounted
    twice), else the same path once resolved (one not there, or not to be reached)."""
    try:
        return os.path.samefile(one, other)
    except OSError:
        return os.path.realpath(one) == os.path.realpath(other)  # not Path.resolve: it raises at a symlink loop


def file_in_the_way(path: Path) -> Path | None:
    """The file, if any, where `path` or one of its folders would be: no folder can be made there."""
    existing = nearest_existing(path)
    return existing if existing is not None and not existing.is_dir() else None


def output_file(text: str) -> Path | None:
    """An --output option's file (an argparse type); None for `-`, standard output, as for most commands (it wrote a
    file named `-`). A blank name, which Path reads as the working directory, or an existing folder is refused as the
    option's error."""
    if text == "-":
        return None
    if not text.strip():
        raise argparse.ArgumentTypeError("blank: give a file")
    if Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder: give a file")
    blocking = file_in_the_way(Path(text).parent)
    if blocking is not None:  # it said: File exists
        raise argparse.ArgumentTypeError(f"{text} would be in {blocking}, a file: give a file in a folder")
    return Path(text)
