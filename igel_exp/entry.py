"""The console scripts' entry points: each imports its command, then runs it, and a Ctrl-C that lands while the
imports (Hydra's, torch's) take their second, or before the command's own handlers are in place, ends in one line
(`PROGRAM: interrupted`, exit 130) instead of a traceback. Nothing else is imported here."""

import importlib
import sys


def _run(program: str, module: str, function: str) -> None:
    try:
        getattr(importlib.import_module(module), function)()
    except KeyboardInterrupt:  # the commands end their runs FAILED themselves; this is before any
        print(f"{program}: interrupted", file=sys.stderr)
        sys.exit(130)


def igel_run() -> None:
    _run("igel-run", "igel_exp.cli", "main")


def igel_embed() -> None:
    _run("igel-embed", "igel_exp.cli", "embed")


def igel_reproduce() -> None:
    _run("igel-reproduce", "igel_exp.reproduce", "reproduce")


def igel_report() -> None:
    _run("igel-report", "igel_exp.reproduce", "report")


def igel_scalability_plot() -> None:
    _run("igel-scalability-plot", "igel_exp.scalability_plot", "main")
