import bz2
import gzip
import hashlib
import logging
import lzma
import os
import pwd
import random
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import igraph as ig
import pytest

from igel_exp import STALE_PARTIAL_S, user_cache_dir, write_cache_entry
from igel_exp.data import (
    DataContext,
    RemoteFile,
    check_files,
    fetch,
    load_dataset,
    read_edgelist,
    registry,
    resolve_data_root,
)
from igel_exp.errors import ConfigError, DataError

from conftest import shared_data_root

COMPRESSORS = {".gz": gzip, ".bz2": bz2, ".xz": lzma}


def write(path: Path, text: str) -> Path:
    if path.suffix in COMPRESSORS:
        with COMPRESSORS[path.suffix].open(path, "wt") as handle:
            handle.write(text)
    else:
        path.write_text(text)
    return path


def edges_by_name(graph) -> set[frozenset]:
    names = graph.vs["name"]
    return {frozenset((names[a], names[b])) for a, b in graph.get_edgelist()}


@pytest.mark.parametrize("suffix", [".txt", ".gz", ".bz2", ".xz"])
def test_tokens_map_to_vertices_in_order_of_appearance(tmp_path, suffix):
    path = write(tmp_path / f"g{suffix}", "# a comment\nbob alice\n\nalice carol 0.5  # weight ignored\ndave bob\n")
    graph, report = read_edgelist(path, node_ids="token")
    assert graph.vs["name"] == ["bob", "alice", "carol", "dave"]
    assert edges_by_name(graph) == {frozenset(p) for p in [("bob", "alice"), ("alice", "carol"), ("dave", "bob")]}
    assert (report.nodes, report.edges) == (4, 3)


def test_self_loops_and_duplicates_are_dropped_and_reported(tmp_path, caplog):
    path = write(tmp_path / "g.txt", "10 20\n20 10\n10 20\n30 30\n20 40\n")
    with caplog.at_level(logging.INFO):
        graph, report = read_edgelist(path)
    assert graph.vs["name"] == ["10", "20", "30", "40"]  # 30 keeps its vertex, isolated
    assert graph.ecount() == 2 and graph.is_simple() and not graph.is_directed()
    assert (report.self_loops_removed, report.duplicates_removed) == (1, 2)
    assert "dropped 1 self loops and merged 2 duplicate or reversed edges" in caplog.text


def test_parallel_edges_keep_every_line_as_igraph_read_ncol_does(tmp_path):
    path = write(tmp_path / "g.txt", "10 20\n20 10\n10 20\n30 30\n20 40\n")
    graph, report = read_edgelist(path, parallel_edges=True)
    reference = ig.Graph.Read_Ncol(str(path), directed=False)
    reference.delete_edges([edge.index for edge in reference.es if edge.is_loop()])  # we still drop self loops
    assert graph.vs["name"] == reference.vs["name"] == ["10", "20", "30", "40"]
    assert graph.get_edgelist() == reference.get_edgelist() == [(0, 1), (0, 1), (0, 1), (1, 3)]
    assert (report.edges, report.self_loops_removed, report.duplicates_removed) == (4, 1, 0)


def test_astroph_with_parallel_edges_lists_every_pair_both_ways(tmp_path, monkeypatch):
    """From the one-line-per-edge copy: each pair twice, in a seeded order, numbered by first appearance."""
    derived = registry.FILES["astroph_derived"]
    monkeypatch.setitem(registry.FILES, "astroph_derived", RemoteFile(derived.path, derived.url))
    folder = tmp_path / "CA-AstroPh"
    folder.mkdir()
    write(folder / "CA-AstroPh.edgelist.gz", "1 2\n1 3\n2 3\n3 4\n")

    def load(seed: int, **config):
        return load_dataset({"name": "astroph", **config}, DataContext(tmp_path, download=False, seed=seed)).graph

    plain, doubled, again = load(0), load(0, parallel_edges=True), load(0, parallel_edges=True)
    assert plain.ecount() == 4 and doubled.ecount() == 8 and not doubled.is_simple()
    assert sorted(map(sorted, map(tuple, edges_list(doubled)))) == sorted(2 * [sorted(e) for e in edges_list(plain)])
    assert doubled.get_edgelist() == again.get_edgelist()
    assert "64582" in doubled.vs["name"]  # SNAP's node with only a self loop, added back isolated


def edges_list(graph) -> list[tuple[str, str]]:
    names = graph.vs["name"]
    return [(names[a], names[b]) for a, b in graph.get_edgelist()]


@pytest.mark.parametrize(
    "text, node_ids, message",
    [
        (
            "1 2\n2 x\n",
            "int",
            r"g.txt:2: node id 'x' is not an integer \(set dataset.node_ids=token for arbitrary ids\)$",
        ),
        # a header, which node_ids=token would read as an edge
        (
            "source target\n1 2\n",
            "int",
            r"g.txt:1: node id 'source' is not an integer \(.*; a header line starts with #\)$",
        ),
        ("1 2\n1_000 7\n", "int", r"g.txt:2: node id '1_000' is not an integer"),  # which int() reads as 1000
        ("1e3 2\n1000 3\n", "int", r"g.txt:1: node id '1e3' is not an integer"),  # pandas read it as node 1000
        ("# 1.5 ok here\n1.0 2\n", "int", r"g.txt:2: node id '1.0' is not an integer"),  # and this as 1
        ("True False\n", "int", r"g.txt:1: node id 'True' is not an integer"),  # and these as 1 and 0
        ("# header\n1 2\n3\n", "int", r"g.txt:3: expected two node ids, found one column"),
        ("a b\nc\n", "token", r"g.txt:2: expected two node ids"),
        ("", "int", r"g.txt: the edge list file is empty"),
        ("# only comments\n\n", "token", r"g.txt: no edges"),
        ("5 5\n7 7\n", "int", r"g.txt: no edges once its 2 self loops are dropped"),  # the run's "no pairs" before
        ("1 2\n2 12345678901234567890\n", "int", r"g.txt:2: node id 12345678901234567890 does not fit in 64 bits"),
        ("1 -9223372036854775809\n", "int", r"g.txt:1: node id -9223372036854775809 does not fit in 64 bits"),
        ("1 2\n\x00\x9f\x92\x01 7\n", "token", r"g.txt: binary data \(NUL bytes\), not a text edge list"),
        ("1 2\n\x9f\x92 7\n", "int", r"g.txt:2: not UTF-8 text \(invalid start byte\): save the file as UTF-8"),
        # Latin-1 text: read with its bytes replaced, café and cafè were one node
        ("caf\xe9 a\ncaf\xe8 b\na b\n", "token", r"g.txt:1: not UTF-8 text \(invalid continuation byte\)"),
    ],
)
def test_malformed_files_name_the_file_and_line(tmp_path, text, node_ids, message):
    path = tmp_path / "g.txt"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(DataError, match=message) as error:
        read_edgelist(path, node_ids=node_ids)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("text", "warned"), [("source target\nalice bob\nbob carol\n", True), ("alice bob\nbob carol\n", False)]
)
def test_a_header_read_as_an_edge_of_tokens_is_warned_of(tmp_path, caplog, text, warned):
    """node_ids=int refuses a header line (not an integer); tokens read it as an edge of two nodes of their own."""
    graph, _ = read_edgelist(write(tmp_path / "g.txt", text), node_ids="token")
    assert graph.ecount() == text.count("\n")
    messages = [record.getMessage() for record in caplog.records if record.levelname == "WARNING"]
    expected = (
        f"{tmp_path / 'g.txt'}: the first edge, source target, shares no node with any other line: if it is a header"
    )
    assert [message.startswith(expected) for message in messages] == ([True] if warned else [])


@pytest.mark.parametrize("blank", ["\xa0", "\f", "\v"], ids=["no-break space", "form feed", "vertical tab"])
def test_token_ids_split_at_any_blank_whichever_parser_reads_the_file(tmp_path, blank):
    """pandas' C parser splits at spaces and tabs only: with a weight column, `c<no-break space>d 1` was the edge
    (c d, 1), the weight a node, where the line-by-line parser splits at every blank (c, d)."""
    path = tmp_path / "g.txt"
    path.write_bytes(f"a b 1\nb c 1\nc{blank}d 1\n".encode())
    graph, _ = read_edgelist(path, node_ids="token")
    assert edges_list(graph) == [("a", "b"), ("b", "c"), ("c", "d")]


@pytest.mark.parametrize("suffix", COMPRESSORS)
def test_a_damaged_compressed_edge_list_is_one_line(tmp_path, suffix):
    lines = "".join(f"{i} {i * 7919 % 100_003}\n" for i in range(20_000))
    whole = COMPRESSORS[suffix].compress(lines.encode())
    kind = {".gz": "gzip", ".bz2": "bz2", ".xz": "xz"}[suffix]
    path = tmp_path / f"g.txt{suffix}"
    path.write_bytes(whole[: len(whole) // 2])  # cut short, as by an interrupted download
    with pytest.raises(DataError, match=f"{path}: a damaged {kind} file") as error:
        read_edgelist(path)
    assert "\n" not in str(error.value)
    if suffix == ".gz":
        path.write_bytes(whole + b"<html>")  # more after its end: was "cannot read it (Not a gzipped file (b'<h'))"
        with pytest.raises(DataError, match=rf"^{path}: a damaged gzip file \(bytes after its compressed data\)$"):
            read_edgelist(path)


def test_an_archive_is_named_with_what_to_do(tmp_path):
    """zip, zstd and 7z files were "binary data (NUL bytes)": what they are, and what igel-run reads instead."""
    with zipfile.ZipFile(tmp_path / "g.zip", "w") as archive:
        archive.writestr("g.txt", "1 2\n2 3\n")
    (tmp_path / "g.txt.zst").write_bytes(b"\x28\xb5\x2f\xfd" + bytes(64))
    for name, what in [("g.zip", "a zip archive"), ("g.txt.zst", "zstd data")]:
        with pytest.raises(DataError) as error:
            read_edgelist(tmp_path / name)
        assert str(error.value) == (
            f"{tmp_path / name}: {what}, not a text edge list: unpack the edge list, or compress it with gzip, bzip2 or"
            " xz (read as they are)"
        )


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32"])
def test_utf16_text_is_named_with_what_to_do(tmp_path, encoding):
    """Windows' "Unicode" text reads as NUL bytes: it was called binary data."""
    path = tmp_path / "g.txt"
    path.write_bytes("a b\nb c\n".encode(encoding))
    wide = encoding[:6].upper()
    with pytest.raises(DataError, match=rf"^{path}: {wide} text, not UTF-8: save the file as UTF-8$"):
        read_edgelist(path, node_ids="token")


def test_quotes_are_characters_of_a_token_and_a_byte_order_mark_is_skipped(tmp_path):
    """pandas read "x" as x (a node merged with another) and "a b" as one token; an integer file that starts with a
    UTF-8 byte order mark was refused (node id '\ufeff1')."""
    graph, _ = read_edgelist(write(tmp_path / "quoted.txt", 'x y\n"x" z\nz y\n"a b" c\n'), "token")
    assert graph.vs["name"] == ["x", "y", '"x"', "z", '"a', 'b"']
    (tmp_path / "bom.txt").write_bytes(b"\xef\xbb\xbf1 2\n2 3\n")
    for node_ids in ("int", "token"):
        assert read_edgelist(tmp_path / "bom.txt", node_ids)[0].vs["name"] == ["1", "2", "3"]


def test_ids_at_the_int64_bounds_are_read(tmp_path):
    graph, _ = read_edgelist(write(tmp_path / "g.txt", "9223372036854775807 -9223372036854775808\n1 x\n"), "token")
    assert graph.vs["name"] == ["9223372036854775807", "-9223372036854775808", "1", "x"]
    graph, _ = read_edgelist(write(tmp_path / "g.txt", "9223372036854775807 -9223372036854775808\n"))
    assert graph.vs["name"] == ["9223372036854775807", "-9223372036854775808"]


def test_missing_file_and_bad_option(tmp_path):
    with pytest.raises(DataError, match="nope.txt: edge list file not found"):
        read_edgelist(tmp_path / "nope.txt")
    with pytest.raises(DataError, match="dataset.node_ids"):
        read_edgelist(write(tmp_path / "g.txt", "1 2\n"), node_ids="names")


def test_a_folder_or_a_fifo_is_refused_without_being_opened(tmp_path):
    with pytest.raises(DataError, match=f"^{tmp_path}: is a directory; give the edge list file$"):
        read_edgelist(tmp_path)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)  # opening it to read would wait for a writer for ever
    with pytest.raises(DataError, match="pipe: not a regular file \\(a FIFO, socket or device\\)"):
        read_edgelist(fifo)


def test_ragged_rows_are_parsed_on_the_slow_path(tmp_path):
    graph, _ = read_edgelist(write(tmp_path / "g.txt", "1 2\n2 3 0.7 extra\n3 1\n"))
    assert graph.vcount() == 3 and graph.ecount() == 3


def context(tmp_path, seed=0, download=False):
    return DataContext(tmp_path, download=download, seed=seed)


def test_les_miserables_and_its_clone(tmp_path):
    plain = load_dataset({"name": "miserables"}, context(tmp_path)).graph
    assert (plain.vcount(), plain.ecount()) == (77, 254)
    cloned = [load_dataset({"name": "miserables_cloned"}, context(tmp_path, seed)).graph for seed in (0, 0, 1)]
    assert (cloned[0].vcount(), cloned[0].ecount()) == (154, 509)
    assert cloned[0].is_connected()
    bridges = [{e for e in g.get_edgelist() if (e[0] < 77) != (e[1] < 77)} for g in cloned]
    assert len(bridges[0]) == 1 and bridges[0] == bridges[1] and bridges[2] != bridges[0]  # the seed picks the bridge
    assert edges_by_name(cloned[0].induced_subgraph(range(77))) == {
        frozenset(f"{n}#1" for n in pair) for pair in edges_by_name(plain)
    }


def _authors_clone(graph: ig.Graph, seed: int) -> ig.Graph:
    """nur-ag/IGEL src/graph.py clone_bridge_graph(G) as their notebook ran it after random.seed(SEED): a copy of G's
    edges on vertices n..2n-1, then one bridge between random vertices of each copy."""
    n = graph.vcount()
    random.seed(seed)
    cloned = graph.copy()
    cloned.add_vertices(n)
    cloned.add_edges([(u + n, v + n) for u, v in graph.get_edgelist()])
    cloned.add_edges([(random.randint(0, n - 1), random.randint(0, n - 1) + n)])
    return cloned


def test_the_authors_clone_is_their_graph_for_every_seed(tmp_path):
    """dataset.bridge_stream: the bridge their notebook drew, on vertices numbered as theirs (Read_Ncol's order of
    Miserables.edgelist where the data root has it; networkx's, from which the file was written, otherwise)."""
    root = shared_data_root()
    theirs = load_dataset({"name": "miserables"}, context(tmp_path)).graph
    if root is not None and (root / "Miserables" / "Miserables.edgelist").is_file():
        theirs = ig.Graph.Read_Ncol(str(root / "Miserables" / "Miserables.edgelist"), names=True, directed=False)

    def edges(graph: ig.Graph) -> set[tuple[int, int]]:
        return {tuple(sorted(edge)) for edge in graph.get_edgelist()}

    def cloned(stream: int, seed: int) -> ig.Graph:
        return load_dataset({"name": "miserables_cloned", "bridge_stream": stream}, context(tmp_path, seed)).graph

    expected = edges(_authors_clone(theirs, 1))
    assert edges(cloned(1, seed=0)) == edges(cloned(1, seed=3)) == expected
    assert edges(cloned(2, seed=0)) != expected  # another stream, another bridge


def test_erdos_renyi_is_seeded_and_sized(tmp_path):
    config = {"name": "erdos_renyi", "num_nodes": 500, "average_degree": 6}
    graphs = [load_dataset(config, context(tmp_path, seed)).graph for seed in (1, 1, 2)]
    assert (graphs[0].vcount(), graphs[0].ecount()) == (500, 1500)
    assert graphs[0].get_edgelist() == graphs[1].get_edgelist() != graphs[2].get_edgelist()


@pytest.mark.parametrize(
    "config, key",
    [
        ({"num_nodes": -3, "average_degree": 2}, "dataset.num_nodes"),
        ({"num_nodes": 10, "average_degree": -1}, "dataset.average_degree"),
        ({"num_nodes": 10, "average_degree": 12}, "dataset.average_degree=12 needs 60 edges"),
        # beyond 2^27 nodes igraph's sampler failed inside the run, with a traceback
        ({"num_nodes": 2**27 + 1, "average_degree": 8}, "dataset.num_nodes=134217729: igraph samples a G"),
    ],
)
def test_erdos_renyi_rejects_impossible_sizes(tmp_path, config, key):
    with pytest.raises(ConfigError, match=key):
        load_dataset({"name": "erdos_renyi", **config}, context(tmp_path))


def test_unknown_dataset_lists_the_valid_ones(tmp_path):
    with pytest.raises(ConfigError, match="valid datasets: .*facebook.*miserables"):
        load_dataset({"name": "cora"}, context(tmp_path))


def test_edgelist_dataset_needs_a_path(tmp_path):
    with pytest.raises(ConfigError, match="dataset.path"):
        load_dataset({"name": "edgelist"}, context(tmp_path))


def remote(tmp_path: Path, text: str, compress: bool) -> tuple[RemoteFile, Path]:
    origin = write(tmp_path / ("origin.txt.gz" if compress else "origin.txt"), text)
    content = hashlib.sha256(text.encode()).hexdigest()
    return RemoteFile(path="Toy/toy.edgelist.gz", url=origin.as_uri(), content_sha256=content), origin


def test_fetch_downloads_verifies_and_caches(tmp_path):
    spec, origin = remote(tmp_path, "0 1\n1 2\n", compress=True)
    root = tmp_path / "root"
    path = fetch(spec, root, download=True)
    assert path == root / "Toy" / "toy.edgelist.gz" and path.read_bytes() == origin.read_bytes()
    origin.unlink()  # a second fetch uses the verified local copy
    assert fetch(spec, root, download=False) == path


def test_offline_and_missing_names_file_url_and_folder(tmp_path):
    spec, _ = remote(tmp_path, "0 1\n", compress=False)
    with pytest.raises(DataError) as error:
        fetch(spec, tmp_path / "root", download=False)
    message = str(error.value)
    assert "toy.edgelist.gz" in message and spec.url in message and str(tmp_path / "root" / "Toy") in message


def test_corrupted_download_fails_its_checksum_and_is_not_kept(tmp_path):
    spec, _ = remote(tmp_path, "0 1\n", compress=True)
    bad = RemoteFile(spec.path, spec.url, content_sha256="0" * 64)
    with pytest.raises(DataError, match="failed its checksum"):
        fetch(bad, tmp_path / "root", download=True)
    assert not list((tmp_path / "root" / "Toy").iterdir())


def test_corrupted_local_copy_is_refused(tmp_path):
    spec, _ = remote(tmp_path, "0 1\n", compress=True)
    local = tmp_path / "root" / "Toy"
    local.mkdir(parents=True)
    write(local / "toy.edgelist.gz", "0 2\n")
    with pytest.raises(DataError, match="content sha256 does not match"):
        fetch(spec, tmp_path / "root", download=False)


NAMED = [
    ({"name": "facebook"}, "Facebook.edgelist.gz is missing: download"),
    ({"name": "astroph"}, "ca-AstroPh.txt.gz is missing: download"),
    ({"name": "sister_cities"}, "SisterCity.edgelist.gz is missing: download"),
    ({"name": "ppi", "layout": "graphsage", "features": True}, "missing ppi-G.json, ppi-id_map.json, ppi-feats.npy;"),
    ({"name": "ppi"}, "missing ppi-G.json, ppi-id_map.json; get them from"),
]


@pytest.mark.parametrize("config, line", NAMED)
def test_check_files_fails_where_loading_would_on_a_missing_file(tmp_path, config, line):
    """A sweep checks a named dataset's files before its first run (check_files): the same error as its loader's."""
    offline = DataContext(tmp_path / "empty", download=False, seed=0)
    with pytest.raises(DataError) as checked:
        check_files(config, offline)
    with pytest.raises(DataError) as loaded:
        load_dataset(config, offline)
    assert line in str(checked.value) and str(checked.value) == str(loaded.value)
    check_files(config, DataContext(tmp_path / "empty", download=True, seed=0))  # the run would download them
    assert not (tmp_path / "empty").exists()


def test_check_files_names_the_one_file_a_dataset_lacks_and_takes_astroph_derived_copy(tmp_path):
    offline = DataContext(tmp_path, download=False, seed=0)
    for folder in ("SisterCity", "CA-AstroPh"):
        (tmp_path / folder).mkdir()
    write(tmp_path / "SisterCity" / "SisterCity.edgelist.gz", "0 1\n")
    with pytest.raises(DataError, match="^GraphNodeTable.csv.gz is missing: download"):
        check_files({"name": "sister_cities"}, offline)
    write(tmp_path / "CA-AstroPh" / "CA-AstroPh.edgelist.gz", "0 1\n")  # what the loader reads without SNAP's file
    check_files({"name": "astroph"}, offline)
    check_files({"name": "miserables"}, offline)  # generated or shipped: nothing to find
    check_files({"name": "erdos_renyi", "num_nodes": 8, "average_degree": 2}, offline)


@pytest.mark.data
@pytest.mark.parametrize("name", ["facebook", "astroph", "sister_cities", "ppi"])
def test_check_files_passes_on_the_shared_data_root(data_root, name):
    check_files({"name": name}, DataContext(data_root, download=False, seed=0))


def test_data_root_from_config_env_or_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("IGEL_DATA_DIR", str(tmp_path / "env"))
    assert resolve_data_root(None) == tmp_path / "env"
    assert resolve_data_root(str(tmp_path / "cfg")) == tmp_path / "cfg"
    monkeypatch.delenv("IGEL_DATA_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert resolve_data_root(None) == tmp_path / "cache" / "igel-exp"
    (tmp_path / "file").touch()
    with pytest.raises(ConfigError, match=rf"^data.root {tmp_path / 'file'} is a file; the data root is a folder"):
        resolve_data_root(str(tmp_path / "file"))
    monkeypatch.setenv("IGEL_DATA_DIR", str(tmp_path / "file"))
    with pytest.raises(ConfigError, match=r"^\$IGEL_DATA_DIR \(data.root's default\) .* is a file"):
        resolve_data_root(str(tmp_path / "file"))  # as the config's ${oc.env:IGEL_DATA_DIR} passes it
    # a root in a file's place (a FAILED run: cannot write; with data.download=false, advice to download into it)
    inside = rf"{tmp_path / 'file' / 'igel-exp'} lies in {tmp_path / 'file'}, a file; the data root is a folder"
    with pytest.raises(ConfigError, match=rf"^data.root {inside}"):
        resolve_data_root(str(tmp_path / "file" / "igel-exp"))
    monkeypatch.delenv("IGEL_DATA_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))
    with pytest.raises(ConfigError, match=rf"^the cache folder \(\$XDG_CACHE_HOME/igel-exp\) {inside}"):
        resolve_data_root(None)


def test_the_users_cache_is_absolute_and_found_without_a_home(monkeypatch):
    """The XDG specification ignores a relative $XDG_CACHE_HOME (it put the cache in whichever folder a command ran
    in); a user with no $HOME and no passwd entry (a container's) had a RuntimeError traceback."""
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")
    assert user_cache_dir() == Path.home() / ".cache" / "igel-exp"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.delenv("HOME", raising=False)

    def no_entry(uid):
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    monkeypatch.setattr(pwd, "getpwuid", no_entry)
    with pytest.raises(RuntimeError):
        Path.home()  # as in such a container
    cache = user_cache_dir()
    assert cache.is_absolute() and cache.parent.name == f"igel-exp-cache-{os.getuid()}"


def test_a_cache_entry_interrupted_or_killed_mid_write_leaves_no_part_behind(tmp_path, monkeypatch):
    """Ctrl-C between writing a cache entry and putting it in place left its `.partial` file for good, as does a writer
    killed outright; each holds a whole entry (a plan, a split, a graph's centralities)."""
    entry = tmp_path / "cache" / "a.pkl"

    def interrupted(source, target):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_cache_entry(entry, b"entry")
    monkeypatch.undo()
    assert list(entry.parent.iterdir()) == []
    killed, writing = (entry.with_name(f"b.pkl.{pid}.partial") for pid in (1, 2))  # writing: another process, now
    for partial in (killed, writing):
        partial.write_bytes(b"part")
    long_ago = time.time() - 2 * STALE_PARTIAL_S
    os.utime(killed, (long_ago, long_ago))
    assert write_cache_entry(entry, b"entry") is None
    assert sorted(path.name for path in entry.parent.iterdir()) == ["a.pkl", writing.name]


@pytest.mark.data
@pytest.mark.parametrize("name, nodes, edges", [("facebook", 4039, 88234), ("astroph", 18772, 198050)])
def test_real_graphs_from_the_shared_layout(data_root, name, nodes, edges):
    graph = load_dataset({"name": name}, DataContext(data_root, download=False, seed=0)).graph
    assert (graph.vcount(), graph.ecount()) == (nodes, edges)
    assert graph.is_simple() and not graph.is_directed()


def test_an_unreadable_file_is_one_line_before_any_run(tmp_path, obeys_permissions):
    path = write(tmp_path / "g.txt", "1 2\n")
    path.chmod(0)
    script = (
        "import sys; from pathlib import Path; from igel_exp.data import DataContext, check_dataset, read_edgelist\n"
        "from igel_exp.errors import DataError\n"
        "for read in (lambda: check_dataset({'name': 'edgelist', 'path': sys.argv[1]}, DataContext(Path(), False, 0)),"
        " lambda: read_edgelist(sys.argv[1])):\n"
        "    try:\n        read()\n    except DataError as error:\n        print(error)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, preexec_fn=obeys_permissions
    )
    assert result.stdout.splitlines() == [f"{path}: permission denied: this user cannot read the edge list file"] * 2, (
        result.stderr
    )
