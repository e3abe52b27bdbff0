"""Where dataset files live: a data root, the public origin of each file, checksummed downloads."""

from __future__ import annotations

import bz2
import gzip
import hashlib
import logging
import lzma
import os
import shutil
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from igel_exp import user_cache_dir
from igel_exp.errors import ConfigError, DataError, file_in_the_way

log = logging.getLogger(__name__)

DATA_DIR_ENV = "IGEL_DATA_DIR"


@dataclass(frozen=True)
class RemoteFile:
    """A dataset file: its path under the data root, its public origin and its checksum.

    `sha256` is of the file's bytes; `content_sha256` of its decompressed content, so that a copy
    re-compressed with other settings (or stored uncompressed) still verifies.
    """

    path: str
    url: str
    sha256: str | None = None
    content_sha256: str | None = None


def default_data_root() -> Path:
    """$IGEL_DATA_DIR, else the user's cache directory."""
    if os.environ.get(DATA_DIR_ENV):
        return Path(os.environ[DATA_DIR_ENV])
    return user_cache_dir()


def resolve_data_root(root: str | os.PathLike | None) -> Path:
    """The configured `data.root`, else the default, made absolute; a file there is refused, naming what set it."""
    resolved = Path(root).expanduser().resolve() if root else default_data_root().expanduser().resolve()
    blocking = file_in_the_way(resolved)
    if blocking is not None:  # the root, or a folder it would be made in (a download said: cannot write)
        source = "data.root" if root else "the cache folder ($XDG_CACHE_HOME/igel-exp)"
        env = os.environ.get(DATA_DIR_ENV)
        if env and Path(env).expanduser().resolve() == resolved:
            source = f"${DATA_DIR_ENV} (data.root's default)"
        where = "is a file" if blocking == resolved else f"lies in {blocking}, a file"
        raise ConfigError(f"{source} {resolved} {where}; the data root is a folder (of Facebook/, PPI/, …)")
    return resolved


# the compressions read as the text they hold, by their magic bytes (pandas' names for them), and how to open each
COMPRESSIONS = {b"\x1f\x8b": "gzip", b"BZh": "bz2", b"\xfd7zXZ\x00": "xz"}
_OPENERS = {"gzip": gzip.open, "bz2": bz2.open, "xz": lzma.open}
# what a decompressor raises on a file cut short or damaged (bz2's is a plain OSError, "Invalid data stream")
DAMAGED = (EOFError, OSError, lzma.LZMAError)


def compression(path: Path) -> str | None:
    """The file's compression by its first bytes, whatever its name: gzip, bz2 or xz (pandas' names), or None."""
    with open(path, "rb") as handle:
        head = handle.read(6)
    return next((name for magic, name in COMPRESSIONS.items() if head.startswith(magic)), None)


def open_binary(path: Path, decompress: bool = True):
    """The file's bytes, decompressed when it is gzip, bzip2 or xz and `decompress` is set."""
    kind = compression(path) if decompress else None
    return _OPENERS[kind](path, "rb") if kind else open(path, "rb")


def _digest(path: Path, decompress: bool) -> str:
    digest = hashlib.sha256()
    with open_binary(path, decompress) as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify(path: Path, spec: RemoteFile) -> None:
    """Raise DataError when `path` does not match the spec's checksum."""
    try:
        if spec.sha256 and _digest(path, decompress=False) != spec.sha256:
            raise DataError(f"{path}: sha256 does not match {spec.sha256}; delete it and fetch {spec.url} again")
        if spec.content_sha256 and _digest(path, decompress=True) != spec.content_sha256:
            raise DataError(
                f"{path}: content sha256 does not match {spec.content_sha256}; delete it and fetch {spec.url} again"
            )
    except DAMAGED as error:
        raise DataError(f"{path}: unreadable ({error}); delete it and fetch {spec.url} again") from error


def local_copy(spec: RemoteFile, root: Path, download: bool) -> Path:
    """Where the copy of `spec` lies under `root`; DataError when it is absent and may not be downloaded."""
    target = root / spec.path
    if not download and not target.exists():
        raise DataError(
            f"{target.name} is missing: download {spec.url} into {target.parent}/ as {target.name}"
            " (or set data.download=true, or point data.root / $IGEL_DATA_DIR at a folder that has it)"
        )
    return target


def fetch(spec: RemoteFile, root: Path, download: bool) -> Path:
    """Local path of a verified copy of `spec` under `root`, downloading it first when allowed."""
    target = local_copy(spec, root, download)
    if not target.exists():
        _download(spec, target)
    verify(target, spec)
    return target


def _download(spec: RemoteFile, target: Path) -> None:
    log.info("downloading %s -> %s", spec.url, target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = tempfile.NamedTemporaryFile(dir=target.parent, prefix=f".{target.name}.", delete=False)
    except OSError as error:
        raise DataError(f"cannot write to {target.parent} ({error}): set data.root to a writable folder") from None
    with tmp:
        partial = Path(tmp.name)
        try:
            with urllib.request.urlopen(spec.url, timeout=60) as response:
                shutil.copyfileobj(response, tmp)
        except OSError as error:
            partial.unlink(missing_ok=True)
            raise DataError(
                f"could not download {spec.url} ({error}); put the file in {target.parent}/ as {target.name}"
            ) from error
    try:
        verify(partial, spec)
    except DataError:
        partial.unlink(missing_ok=True)
        raise DataError(f"download of {spec.url} failed its checksum and was discarded") from None
    partial.replace(target)
