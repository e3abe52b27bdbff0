"""The console scripts' entry points. Each holds Ctrl-C back while its command starts (the imports of Hydra, torch and
MLflow take a second, and OmegaConf, interrupted as it builds its structured configs, raised some other error than
KeyboardInterrupt, in a traceback, or lost the interrupt): igel-run and igel-embed deliver a held interrupt as their
work begins, before any run (`deliver_held_interrupt`), the other commands once imported. An interrupt then ends in
one line, `PROGRAM: interrupted`, exit 130. Nothing else is imported here."""

import contextlib
import importlib
import signal
import sys
from collections.abc import Iterator

_held: list[int] = []  # the Ctrl-C held back while the command started


def _hold(signum: int, frame: object) -> None:
    _held.append(signum)


def raise_held_interrupt() -> None:
    """Raise the interrupt held back, if any, and keep holding: between the steps of a long start (a sweep's check of
    its jobs), so that Ctrl-C stops it there and never inside OmegaConf."""
    if _held:
        _held.clear()
        raise KeyboardInterrupt("Ctrl-C while the command started")


def deliver_held_interrupt() -> None:
    """Give Ctrl-C back its default handler (where it is still held back) and raise the interrupt held, if any."""
    if signal.getsignal(signal.SIGINT) is _hold:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    raise_held_interrupt()


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """Within: Ctrl-C interrupts at once, where it is held back otherwise (a long import, safe to interrupt)."""
    held = signal.getsignal(signal.SIGINT) is _hold
    deliver_held_interrupt()
    try:
        yield
    finally:
        if held:
            signal.signal(signal.SIGINT, _hold)


def _run(program: str, module: str, function: str, held_until_work: bool = False) -> None:
    signal.signal(signal.SIGINT, _hold)
    try:
        command = getattr(importlib.import_module(module), function)
        if not held_until_work:
            deliver_held_interrupt()
        command()
    except KeyboardInterrupt:  # the commands end their runs FAILED themselves; this is before any
        print(f"{program}: interrupted", file=sys.stderr)
        sys.exit(130)


def igel_run() -> None:
    _run("igel-run", "igel_exp.cli", "main", held_until_work=True)


def igel_embed() -> None:
    _run("igel-embed", "igel_exp.cli", "embed", held_until_work=True)


def igel_reproduce() -> None:
    _run("igel-reproduce", "igel_exp.reproduce", "reproduce")


def igel_report() -> None:
    _run("igel-report", "igel_exp.reproduce", "report")


def igel_scalability_plot() -> None:
    _run("igel-scalability-plot", "igel_exp.scalability_plot", "main")


def isolated_job() -> None:
    """The process of an isolated job (igel_exp.pipelines.isolation; its folder is the first argument): Ctrl-C is held
    while it imports, as a command's, and ends it with the interrupted status, the parent's to report in one line (it
    printed a KeyboardInterrupt traceback from inside an import)."""
    signal.signal(signal.SIGINT, _hold)
    isolation = importlib.import_module("igel_exp.pipelines.isolation")
    importlib.import_module("igel_exp.pipelines")  # torch, and the schema's structured configs
    try:
        deliver_held_interrupt()
    except KeyboardInterrupt:
        sys.exit(isolation.INTERRUPTED)
    sys.exit(isolation.child_main(sys.argv[1]))
