"""Edge-list files and simple undirected igraph graphs built from them."""

from __future__ import annotations

import codecs
import csv
import io
import logging
import os
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import igraph as ig
import numpy as np
import pandas as pd

from igel_exp.data.sources import DAMAGED, compression, open_binary
from igel_exp.errors import DataError

log = logging.getLogger(__name__)

NODE_ID_KINDS = ("int", "token")


@dataclass
class GraphReport:
    """What building a simple graph changed, for the log and the run's metrics."""

    source: str
    nodes: int = 0
    edges: int = 0
    self_loops_removed: int = 0
    duplicates_removed: int = 0
    extra: dict = field(default_factory=dict)

    def as_metrics(self) -> dict[str, int]:
        return {
            "graph_nodes": self.nodes,
            "graph_edges": self.edges,
            "graph_self_loops_removed": self.self_loops_removed,
            "graph_duplicates_removed": self.duplicates_removed,
        }


def simple_graph(
    sources: np.ndarray, targets: np.ndarray, names: list, source: str, parallel_edges: bool = False
) -> tuple[ig.Graph, GraphReport]:
    """Undirected simple graph on len(names) vertices; self loops dropped, repeated or reversed pairs merged.

    With `parallel_edges` every pair is an edge, in the order given, as igraph's Read_Ncol reads a file: repeated
    or reversed pairs stay parallel edges (dataset.parallel_edges; self loops are still dropped).
    """
    sources, targets = np.asarray(sources, dtype=np.int64), np.asarray(targets, dtype=np.int64)
    loops = sources == targets
    low, high = np.minimum(sources, targets)[~loops], np.maximum(sources, targets)[~loops]
    pairs = np.stack([low, high], axis=1) if len(low) else np.empty((0, 2), dtype=np.int64)
    if not parallel_edges:
        pairs = np.unique(pairs, axis=0)
    graph = ig.Graph(n=len(names), edges=pairs, directed=False)
    graph.vs["name"] = [str(name) for name in names]  # igraph reads integer names as vertex ids
    report = GraphReport(
        source=source,
        nodes=graph.vcount(),
        edges=graph.ecount(),
        self_loops_removed=int(loops.sum()),
        duplicates_removed=int(len(low) - len(pairs)),
    )
    if report.self_loops_removed and not report.edges:
        raise DataError(f"{source}: no edges once its {report.self_loops_removed} self loops are dropped")
    if report.self_loops_removed or report.duplicates_removed:
        log.info(
            "%s: dropped %d self loops and merged %d duplicate or reversed edges",
            source,
            report.self_loops_removed,
            report.duplicates_removed,
        )
    log.info("%s: %d nodes, %d edges", source, report.nodes, report.edges)
    return graph, report


def read_edgelist(
    path: str | Path, node_ids: str = "int", parallel_edges: bool = False
) -> tuple[ig.Graph, GraphReport]:
    """Read a whitespace-separated edge list (plain, or gzip, bzip2 or xz compressed; '#' comments) into a simple
    undirected graph (with `parallel_edges`, repeated or reversed lines stay parallel edges, as igraph's Read_Ncol reads
    them).

    Node ids are integers (`node_ids="int"`) or any tokens (`"token"`); either way vertices are numbered in
    order of first appearance, as Read_Ncol numbers them, and keep their id as the "name" attribute. Columns after
    the second (weights) are ignored. Malformed files raise DataError naming the file and line.
    """
    path = readable_file(Path(path), "edge list")
    if node_ids not in NODE_ID_KINDS:
        raise DataError(f"dataset.node_ids={node_ids!r} is not one of {', '.join(NODE_ID_KINDS)}")
    kind = compression(path)
    try:
        _refuse_binary(path)
        columns = read_pairs(path, node_ids)
    except (*DAMAGED, zlib.error) as error:
        if kind is None or (isinstance(error, OSError) and error.errno is not None):  # unreadable, or gone since
            raise DataError(f"{path}: cannot read it ({getattr(error, 'strerror', None) or error})") from None
        # gzip reads on past a member's end for another member: bytes there that are not one fail as "not gzipped"
        reason = "bytes after its compressed data" if "Not a gzipped file" in str(error) else error
        raise DataError(f"{path}: a damaged {kind} file ({reason})") from None
    ends, names = pd.factorize(pd.Series(np.column_stack(columns).ravel()), sort=False)
    if node_ids == "token":
        _warn_of_a_header(path, ends, names)
    return simple_graph(ends[0::2], ends[1::2], names.tolist(), str(path), parallel_edges)


def _warn_of_a_header(path: Path, ends: np.ndarray, names: pd.Index) -> None:
    """Warn where the first edge's two tokens (vertices 0 and 1) are on no other line: most likely a header, which
    node_ids=int refuses (not an integer) but tokens read as an edge of two nodes of their own."""
    if len(ends) > 2 and names.size > 1 and not np.isin(ends[2:], (0, 1)).any():
        log.warning(
            "%s: the first edge, %s %s, shares no node with any other line: if it is a header, start it with # (it is"
            " read as an edge)",
            path,
            names[0],
            names[1],
        )


def readable_file(path: Path, what: str) -> Path:
    """`path`, when it is a regular file this process may read; otherwise DataError naming it and saying why (a FIFO
    is refused here because opening one waits for a writer)."""
    if not path.exists():
        raise DataError(f"{path}: {what} file not found")
    if path.is_dir():
        raise DataError(f"{path}: is a directory; give the {what} file")
    if not path.is_file():
        raise DataError(f"{path}: not a regular file (a FIFO, socket or device); give the {what} file")
    if not os.access(path, os.R_OK):
        raise DataError(f"{path}: permission denied: this user cannot read the {what} file")
    if path.stat().st_size == 0:
        raise DataError(f"{path}: the {what} file is empty")
    return path


# byte-order marks of the wide encodings, UTF-32's first (its little-endian mark begins with UTF-16's)
WIDE_TEXT = {codecs.BOM_UTF32_LE: "UTF-32", codecs.BOM_UTF32_BE: "UTF-32", codecs.BOM_UTF16_LE: "UTF-16",
             codecs.BOM_UTF16_BE: "UTF-16"}  # fmt: skip


# packed files that are not read as text, by their magic bytes
ARCHIVES = {
    b"PK\x03\x04": "a zip archive",
    b"\x28\xb5\x2f\xfd": "zstd data",
    b"7z\xbc\xaf\x27\x1c": "a 7z archive",
}
ARCHIVES_READ = "unpack the edge list, or compress it with gzip, bzip2 or xz (read as they are)"


def _refuse_binary(path: Path) -> None:
    """A file with NUL bytes in its first block is not a text edge list (with node_ids=token it would parse). UTF-16
    text (Windows' "Unicode", PowerShell 5's `>`) has them too: it is named, with what to do."""
    with open_binary(path) as handle:
        block = handle.read(1 << 16)
    if b"\0" not in block:
        return
    even = block[: len(block) // 2 * 2]
    wide = next((name for mark, name in WIDE_TEXT.items() if block.startswith(mark)), None)
    if wide is None and (not any(even[1::2]) or not any(even[0::2])):  # ASCII as UTF-16 without a mark
        wide = "UTF-16"
    if wide is not None:
        raise DataError(f"{path}: {wide} text, not UTF-8: save the file as UTF-8")
    archive = next((what for magic, what in ARCHIVES.items() if block.startswith(magic)), None)
    if archive is not None:
        raise DataError(f"{path}: {archive}, not a text edge list: {ARCHIVES_READ}")
    raise DataError(f"{path}: binary data (NUL bytes), not a text edge list")


def read_pairs(path: Path, node_ids: str = "int") -> tuple[np.ndarray, np.ndarray]:
    """The first two columns of a whitespace-separated edge list (plain, or gzip, bzip2 or xz compressed; '#'
    comments): int64 ids, or tokens with `node_ids="token"`. A malformed file raises DataError naming the file and
    line."""
    columns = _read_two_columns(path, node_ids) or _parse_line_by_line(path, node_ids)
    if node_ids == "int":
        return tuple(column.astype(np.int64) for column in columns)
    return columns


def _read_two_columns(path: Path, node_ids: str) -> tuple[np.ndarray, np.ndarray] | None:
    """Both id columns, or None when the file is not a clean two-or-more-column edge list."""
    if node_ids == "int" and not _integer_text(path):  # pandas would read 1e3, 1.0 and True as integers
        return None
    dtype = np.int64 if node_ids == "int" else str
    try:
        frame = pd.read_csv(
            path,
            sep=r"\s+",
            comment="#",
            header=None,
            usecols=[0, 1],
            dtype={0: dtype, 1: dtype},
            compression=compression(path),
            engine="c",
            quoting=csv.QUOTE_NONE,  # a quote is a character of a token: "x" is not x, "a b" two tokens
        )
    except (ValueError, pd.errors.ParserError, pd.errors.EmptyDataError, OverflowError):
        return None
    if frame.empty or frame.isna().any().any():
        return None
    if node_ids == "token" and any(frame[column].str.contains(r"\s").any() for column in (0, 1)):
        return None  # a blank the C parser does not split at (no-break space, \f, \v): the line-by-line path does
    return frame[0].to_numpy(), frame[1].to_numpy()


_INTEGER_TEXT = np.zeros(256, dtype=bool)
_INTEGER_TEXT[[*b"0123456789+-#", *b" \t\r\n\v\f"]] = True


def _integer_text(path: Path) -> bool:
    """Whether the file holds nothing but integers, blanks and # comments: 3 numpy passes over its bytes (0.4 s for
    AstroPh's 198,050 lines read as strings and matched instead)."""
    with open_binary(path) as handle:
        text = np.frombuffer(handle.read().removeprefix(codecs.BOM_UTF8), dtype=np.uint8)  # pandas skips a BOM too
    other = ~_INTEGER_TEXT[text]
    if not other.any():
        return True
    line = np.cumsum(text == ord("\n"))  # each byte's line
    last_comment = np.maximum.accumulate(np.where(text == ord("#"), line, -1))  # the line of the last # so far
    return not (other & (last_comment != line)).any()  # every other byte is in a comment


def _parse_line_by_line(path: Path, node_ids: str) -> tuple[np.ndarray, np.ndarray]:
    """Slow path for files the C parser rejects: parse them or raise naming the first bad line."""
    ends: list = []
    with open_binary(path) as handle:
        data = handle.read()
    try:  # strictly: replacing undecodable bytes would give two different ids one name
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        number = data.count(b"\n", 0, error.start) + 1
        raise DataError(f"{path}:{number}: not UTF-8 text ({error.reason}): save the file as UTF-8") from None
    for number, line in enumerate(io.StringIO(text, newline=None), start=1):  # any line ending, as text files
        tokens = line.split("#", 1)[0].split()
        if not tokens:
            continue
        if len(tokens) < 2:
            raise DataError(f"{path}:{number}: expected two node ids, found one column: {line.strip()!r}")
        if node_ids == "int":
            tokens = [_as_int(token, path, number) for token in tokens[:2]]
        ends.extend(tokens[:2])
    if not ends:
        raise DataError(f"{path}: no edges (the file is empty or holds only comments)")
    column = np.array(ends, dtype=object)
    return column[0::2], column[1::2]


INT64 = np.iinfo(np.int64)


def _as_int(token: str, path: Path, number: int) -> int:
    try:
        if not re.fullmatch(r"[+-]?[0-9]+", token):  # int() also reads 1_000 and non-ASCII digits
            raise ValueError(token)
        value = int(token)
    except ValueError:
        # the first line may be a header, which node_ids=token would read as an edge: its remedy is a comment
        header = "; a header line starts with #" if number == 1 else ""
        raise DataError(
            f"{path}:{number}: node id {token!r} is not an integer (set dataset.node_ids=token for arbitrary ids"
            f"{header})"
        ) from None
    if not INT64.min <= value <= INT64.max:
        raise DataError(
            f"{path}:{number}: node id {token} does not fit in 64 bits (set dataset.node_ids=token to read ids as text)"
        )
    return value
