"""igel-exp: run, sweep and reproduce IGEL (Inductive Graph Embeddings through Locality Encodings) experiments."""

import contextlib
import logging
import os
import tempfile
import time
from pathlib import Path

__version__ = "0.1.0"


def user_cache_dir() -> Path:
    """igel-exp's folder in the user's cache ($XDG_CACHE_HOME or ~/.cache): downloaded datasets (the default data
    root), link prediction splits (splits/), reproduction plans (plans/) and graphs' centralities (centralities/)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME", ""))
    if not cache.is_absolute():  # unset, or relative: which the XDG specification says to ignore
        try:
            cache = Path.home() / ".cache"
        except (RuntimeError, KeyError):  # no $HOME and no passwd entry (a container's user): the temporary folder's
            cache = Path(tempfile.gettempdir()) / f"igel-exp-cache-{os.getuid()}"
    return cache / "igel-exp"


STALE_PARTIAL_S = 3600  # a part-written entry this old was left by a killed writer: a write takes seconds


def write_cache_entry(entry: Path, data: bytes, newest: int | None = None) -> OSError | None:
    """Write a cache entry whole: another process reads the old one or the new one, never part of one. With `newest`,
    drop the oldest entries of its folder (of its suffix) beyond that many; part-written entries that killed writers
    left are dropped too. A cache that cannot be written is only a slower next run: the error is returned (and logged
    at debug level)."""
    partial = entry.with_name(f"{entry.name}.{os.getpid()}.partial")
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        partial.write_bytes(data)
        os.replace(partial, entry)
        _prune(entry, newest)
        return None
    except OSError as error:
        logging.getLogger(__name__).debug("cache %s not written: %s", entry.parent, error)
        return error
    finally:  # an interrupt (Ctrl-C) too leaves no part-written entry
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)


def _prune(entry: Path, newest: int | None) -> None:
    now = time.time()
    for stale in entry.parent.glob("*.partial"):
        with contextlib.suppress(OSError):  # another process may prune it first
            if now - stale.stat().st_mtime > STALE_PARTIAL_S:
                stale.unlink()
    if newest is not None:
        kept = sorted(entry.parent.glob(f"*{entry.suffix}"), key=lambda old: old.stat().st_mtime, reverse=True)
        for stale in kept[newest:]:
            stale.unlink(missing_ok=True)


def __getattr__(name: str):
    # `from igel_exp import IGELModel` without importing torch and MLflow for every `import igel_exp`
    if name == "IGELModel":
        from igel_exp.saved_model import IGELModel

        return IGELModel
    raise AttributeError(f"module 'igel_exp' has no attribute {name!r}")
