"""Node-classification datasets in GraphSAGE's format, PPI first (paper §4.3, Table PPIResults).

The format (Hamilton, Ying, Leskovec 2017), files `<prefix>-*` in one folder:

- `G.json`: a networkx node-link graph; each node has `val` and `test` flags (both false: training node);
  a link's `source` and `target` are node ids.
- `id_map.json`: node id → row of `feats.npy` (JSON keys are the ids as strings).
- `feats.npy`: one row of node attributes per node (PPI: 56,944 × 50).
- `class_map.json`: node id → list of binary labels (PPI: 121 per node).

The loaded dataset holds the whole graph (vertices in `id_map` row order, so vertex i of PPI is node i)
and, per split, the vertex ids and the subgraph they induce: the inductive pipelines encode and train on
the training subgraph alone and score the others, which they never see in training. Features and labels
are aligned to the whole graph's vertices.

Only the structure of PPI could be obtained for this project: the shared data root holds the three split
graphs as edge lists (`ppi-{train,valid,test}.edgelist.gz`, derived from `ppi-G.json`) and the id map;
`dataset.layout=auto` reads those when `ppi-G.json` is absent, which is enough for the structure-only parts.
"""

from __future__ import annotations

import io
import json
import logging
import os
import tempfile
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import igraph as ig
import numpy as np

from igel_exp.data.edgelist import GraphReport, read_pairs, simple_graph
from igel_exp.data.registry import DataContext, Dataset, register
from igel_exp.data.sources import RemoteFile, fetch, open_binary, verify
from igel_exp.errors import ConfigError, DataError, first_line

log = logging.getLogger(__name__)

SPLITS = ("train", "valid", "test")
LAYOUTS = ("auto", "graphsage", "edgelists")
PPI_URL = "http://snap.stanford.edu/graphsage/ppi.zip"
PPI_FOLDER = "PPI"

# content sha256 (of the decompressed bytes, so a gzip copy verifies too): GraphSAGE's files from the LFS
# pointers of Wattpad/gatas, the edge lists and id map from the project's data manifest (section 5).
PPI_FILES = {
    "ppi-G.json": "7b323bbb677de2538c0b4c17d13a1bf691af6e6d76946035b7649c6c2fce3013",
    "ppi-id_map.json": "5b9f264c242f3078a347f037839105e069739f404fe603c82ca19e2b8e45c04e",
    "ppi-feats.npy": "953149689098eed72c0154fb40a8fff4e634d34c5ad139c7ae9d601db1cad3d3",
    "ppi-class_map.json": "388d404c24704a29b74940ca64df52ef7dc9affb3cfc96345210bf6aa1e31932",
    "ppi-train.edgelist": "1bc19e18a60fe590ded18d4bccf14dde64e35489065d4d1113f6d2e4b6c032bc",
    "ppi-valid.edgelist": "5ee7a2007449958f0242d6aca3357b78bcc618c68b9f02117689c7a6c20ef37c",
    "ppi-test.edgelist": "224cb48a5d6b7cc4b5a6c77ff276d99799ce6f2d951fc46b70e1e94633f8c1ef",
}
# The edge lists are not in ppi.zip: they are the split subgraphs of its ppi-G.json (see the manifest).
IN_ARCHIVE = ("ppi-G.json", "ppi-id_map.json", "ppi-feats.npy", "ppi-class_map.json")


@dataclass
class NodeSplit:
    """One split of a node-classification dataset: its vertices and the subgraph they induce."""

    name: str
    vertices: np.ndarray  # ascending vertex ids of the dataset's whole graph
    graph: ig.Graph  # induced subgraph: its vertex i is vertices[i] of the whole graph (same "name")
    self_loops_removed: int = 0


@dataclass
class NodeDataset(Dataset):
    """A graph with train/valid/test node splits and, when loaded, node features and labels."""

    splits: dict[str, NodeSplit] = field(default_factory=dict)
    features: np.ndarray | None = None  # |V| × f float32, row i = vertex i
    labels: np.ndarray | None = None  # |V| × M uint8 (0/1), row i = vertex i


@dataclass(frozen=True)
class _Files:
    """Paths of the format's files in one folder (`name` or `name.gz`, whichever exists)."""

    folder: Path
    prefix: str

    def path(self, suffix: str) -> Path:
        plain = self.folder / f"{self.prefix}-{suffix}"
        compressed = plain.with_name(plain.name + ".gz")
        return compressed if compressed.exists() and not plain.exists() else plain

    def exists(self, suffix: str) -> bool:
        return self.path(suffix).exists()


def _flag(config: Mapping[str, Any], key: str) -> bool:
    value = config.get(key, False)
    if not isinstance(value, bool):
        raise ConfigError(f"dataset.{key} must be true or false, got {value!r}")
    return value


def _ppi_files(config: Mapping[str, Any], context: DataContext) -> tuple[_Files, str, list[str]]:
    """PPI's folder, the layout read (dataset.layout, `auto` resolved by the files present) and the files it needs."""
    layout = config.get("layout", "auto")
    if layout not in LAYOUTS:
        raise ConfigError(f"dataset.layout={layout!r} is not one of {', '.join(LAYOUTS)}")
    files = _Files(context.root / PPI_FOLDER, "ppi")
    if layout == "auto":
        edgelists = all(files.exists(f"{split}.edgelist") for split in SPLITS)
        layout = "edgelists" if edgelists and not files.exists("G.json") else "graphsage"
    structure = ["G.json", "id_map.json"] if layout == "graphsage" else [f"{s}.edgelist" for s in SPLITS]
    if layout == "edgelists":
        structure.append("id_map.json")
    needed = structure + ["feats.npy"] * _flag(config, "features") + ["class_map.json"] * _flag(config, "labels")
    return files, layout, needed


def _ppi_at_hand(config: Mapping[str, Any], context: DataContext) -> None:
    files, _, needed = _ppi_files(config, context)
    _ensure_ppi_files(files, needed, context.download, extract=False)


@register("ppi", files=_ppi_at_hand)
def _ppi(config: Mapping[str, Any], context: DataContext) -> NodeDataset:
    """PPI from `<data root>/PPI/`, checksummed; missing GraphSAGE files are fetched from ppi.zip when allowed."""
    files, layout, needed = _ppi_files(config, context)
    _ensure_ppi_files(files, needed, context.download)
    for suffix in needed:
        verify(
            files.path(suffix), RemoteFile(str(files.path(suffix)), PPI_URL, content_sha256=PPI_FILES[f"ppi-{suffix}"])
        )
    return _read_node_dataset("ppi", files, layout, _flag(config, "features"), _flag(config, "labels"))


def _graphsage_files(config: Mapping[str, Any], context: DataContext | None = None) -> _Files:
    """The files of `dataset.path` and `dataset.prefix`, when those that the flags ask for are all there."""
    if not config.get("path"):
        raise ConfigError("dataset.path is required for dataset=graphsage (the folder holding PREFIX-G.json)")
    prefix = config.get("prefix")
    if not prefix:
        raise ConfigError("dataset.prefix is required for dataset=graphsage (files are named PREFIX-G.json, ...)")
    files = _Files(Path(config["path"]).expanduser(), str(prefix))
    if not files.folder.is_dir():
        raise DataError(f"{files.folder}: no such folder (dataset.path)")
    needed = (
        ["G.json", "id_map.json"]
        + ["feats.npy"] * _flag(config, "features")
        + ["class_map.json"] * _flag(config, "labels")
    )
    missing = [files.path(suffix).name for suffix in needed if not files.exists(suffix)]
    if missing:
        raise DataError(f"{files.folder}: missing {', '.join(missing)} (GraphSAGE format, prefix {prefix!r})")
    return files


@register("graphsage", check=_graphsage_files)
def _graphsage(config: Mapping[str, Any], context: DataContext) -> NodeDataset:
    """Your own dataset in GraphSAGE's format: `dataset.path=DIR dataset.prefix=NAME` (DIR/NAME-G.json, ...)."""
    files = _graphsage_files(config)
    with_features, with_labels = _flag(config, "features"), _flag(config, "labels")
    return _read_node_dataset(files.prefix, files, "graphsage", with_features, with_labels)


def _ensure_ppi_files(files: _Files, needed: list[str], download: bool, extract: bool = True) -> None:
    """Raise one DataError naming every missing file and where to get it, after a download when allowed (`extract`;
    otherwise only where none is allowed)."""
    missing = [suffix for suffix in needed if not files.exists(suffix)]
    if not missing:
        return
    names = ", ".join(f"ppi-{suffix}" for suffix in missing)
    derived = [suffix for suffix in missing if f"ppi-{suffix}" not in IN_ARCHIVE]
    if derived:
        raise DataError(
            f"{files.folder}: missing {names}; the split edge lists are derived from ppi-G.json of {PPI_URL}:"
            " use dataset.layout=graphsage to read that instead"
        )
    where = f"get them from {PPI_URL} (inside its ppi/ folder) and put them in {files.folder}/"
    if not download:
        raise DataError(f"{files.folder}: missing {names}; {where} (or set data.download=true)")
    if not extract:
        return
    try:
        _extract_from_archive(files, [f"ppi-{suffix}" for suffix in missing])
    except DataError as error:
        reason = str(error).split("; ")[0]  # the fetch error's advice would name the archive, not the files
        raise DataError(f"{files.folder}: missing {names}; {where} (download failed: {reason})") from None


def _extract_from_archive(files: _Files, names: list[str]) -> None:
    """Download ppi.zip into the folder, extract `names` from it (checked against their sha256), delete it."""
    archive = fetch(RemoteFile(f"{PPI_FOLDER}/ppi.zip", PPI_URL), files.folder.parent, download=True)
    try:
        with zipfile.ZipFile(archive) as bundle:
            members = {Path(member).name: member for member in bundle.namelist()}
            absent = [name for name in names if name not in members]
            if absent:
                raise DataError(f"{archive} has no {', '.join(absent)}")
            for name in names:
                target = files.folder / name
                with tempfile.NamedTemporaryFile(dir=files.folder, prefix=f".{name}.", delete=False) as tmp:
                    with bundle.open(members[name]) as source:
                        while block := source.read(1 << 20):
                            tmp.write(block)
                partial = Path(tmp.name)
                try:
                    verify(partial, RemoteFile(name, PPI_URL, content_sha256=PPI_FILES[name]))
                except DataError:
                    partial.unlink(missing_ok=True)
                    raise DataError(f"{name} extracted from {archive} failed its checksum and was discarded") from None
                partial.replace(target)
    except zipfile.BadZipFile as error:
        raise DataError(f"{archive} is not a zip archive ({error})") from None
    finally:
        archive.unlink(missing_ok=True)


def _read_node_dataset(name: str, files: _Files, layout: str, with_features: bool, with_labels: bool) -> NodeDataset:
    """Read the graph (GraphSAGE `G.json`, or the split edge lists), then features and labels when asked."""
    id_map = _read_id_map(files.path("id_map.json"))
    if layout == "graphsage":
        ids, split_codes, edges, dropped = _read_node_link(files.path("G.json"))
    else:
        ids, split_codes, edges, dropped = _read_split_edgelists(files)
    source = str(files.path("G.json") if layout == "graphsage" else files.folder)
    rows = _feature_rows(ids, id_map, files.path("id_map.json"), source)
    order = np.argsort(rows, kind="stable")  # vertex i = node of feature row i: for PPI, vertex i is node i
    position = np.empty_like(order)
    position[order] = np.arange(len(order))
    ids, split_codes, rows = [ids[i] for i in order], split_codes[order], rows[order]
    graph, report = simple_graph(position[edges[:, 0]], position[edges[:, 1]], ids, source)
    splits = _split(graph, split_codes, position[edges], report)
    report.extra.update({"layout": layout, "nodes_without_split_flags_dropped": dropped})
    dataset = NodeDataset(name, graph, report, splits=splits)
    if with_features:
        dataset.features = _read_features(files.path("feats.npy"), rows, len(id_map), files.path("id_map.json"))
    if with_labels:
        dataset.labels = _read_labels(files.path("class_map.json"), ids)
    return dataset


def _read_json(path: Path) -> Any:
    try:
        with open_binary(path) as handle:
            return json.load(handle)
    except (OSError, EOFError, ValueError) as error:
        raise DataError(f"{path}: not readable as JSON ({first_line(error)})") from None


def _read_id_map(path: Path) -> dict[str, int]:
    data = _read_json(path)
    if not isinstance(data, dict) or not all(isinstance(v, int) and not isinstance(v, bool) for v in data.values()):
        raise DataError(f"{path}: expected a JSON object mapping node ids to integer feature rows")
    return data


def _read_node_link(path: Path) -> tuple[list[str], np.ndarray, np.ndarray, int]:
    """Node ids (as strings), split code per node (0 train, 1 valid, 2 test), edges as node positions (m × 2)
    and the number of nodes dropped for lacking their `val`/`test` flags (GraphSAGE's loader drops them too)."""
    data = _read_json(path)
    if not isinstance(data, dict) or "nodes" not in data or not ({"links", "edges"} & data.keys()):
        raise DataError(f"{path}: not a networkx node-link graph (expected 'nodes' and 'links')")
    nodes, links = data["nodes"], data.get("links", data.get("edges"))
    try:
        raw_ids = [node["id"] for node in nodes]
        flagged = [("val" in node and "test" in node) for node in nodes]
        val = np.array([_split_flag(path, node, "val") for node in nodes], dtype=bool)
        test = np.array([_split_flag(path, node, "test") for node in nodes], dtype=bool)
        link_ends = [(link["source"], link["target"]) for link in links]
    except (KeyError, TypeError) as error:
        raise DataError(f"{path}: a node without 'id' or a link without 'source'/'target' ({error!r})") from None
    both = np.flatnonzero(val & test)
    if len(both):
        raise DataError(f"{path}: node {raw_ids[both[0]]} is flagged both val and test ({len(both)} such nodes)")
    ids = [str(node_id) for node_id in raw_ids]
    if len(set(ids)) != len(ids):
        raise DataError(f"{path}: repeated node ids")
    index = {node_id: i for i, node_id in enumerate(ids)}
    try:
        ends = np.array([[index[str(u)], index[str(v)]] for u, v in link_ends], dtype=np.int64).reshape(-1, 2)
    except KeyError as error:
        raise DataError(f"{path}: a link refers to node {error.args[0]}, which is not in 'nodes'") from None
    keep = np.array(flagged, dtype=bool)
    if len(keep) and not keep.any():
        raise DataError(f"{path}: no node has the 'val' and 'test' flags that mark the splits")
    dropped = int((~keep).sum())
    codes = np.where(test, 2, np.where(val, 1, 0)).astype(np.int8)
    if dropped:
        log.warning("%s: dropped %d nodes without val/test flags (and their links), as GraphSAGE does", path, dropped)
        new_index = np.cumsum(keep) - 1
        ends = new_index[ends[keep[ends].all(axis=1)]]
        ids, codes = [i for i, k in zip(ids, keep, strict=True) if k], codes[keep]
    return ids, codes, ends, dropped


def _split_flag(path: Path, node: dict, flag: str) -> bool:
    """A node's `val` or `test` flag (absent: false); anything but a JSON boolean (or 0/1) is refused: the string
    "false" is true to Python, which made every such node a validation node."""
    value = node.get(flag, False)
    if value in (True, False) and not isinstance(value, float | str):
        return bool(value)
    raise DataError(f"{path}: node {node.get('id')!r}: '{flag}' must be true or false, got {value!r}")


def _read_split_edgelists(files: _Files) -> tuple[list[str], np.ndarray, np.ndarray, int]:
    """The three split edge lists (`u v` integer ids); a split's nodes are the ids its file mentions."""
    ids, codes, ends = [], [], []
    for code, split in enumerate(SPLITS):
        path = files.path(f"{split}.edgelist")
        pairs = np.column_stack(read_pairs(path))
        nodes = np.unique(pairs)
        ids.append(nodes)
        codes.append(np.full(len(nodes), code, dtype=np.int8))
        ends.append(pairs)
    all_ids = np.concatenate(ids)
    unique, counts = np.unique(all_ids, return_counts=True)
    if (counts > 1).any():
        raise DataError(f"{files.folder}: node {unique[counts > 1][0]} appears in more than one split's edge list")
    positions = np.searchsorted(np.sort(all_ids), np.concatenate(ends))
    order = np.argsort(all_ids)
    return [str(i) for i in all_ids], np.concatenate(codes), order[positions], 0


def _feature_rows(ids: list[str], id_map: Mapping[str, int], id_map_path: Path, source: str) -> np.ndarray:
    missing = [node_id for node_id in ids if node_id not in id_map]
    if missing:
        raise DataError(f"{id_map_path}: no entry for node {missing[0]} of {source} ({len(missing)} nodes missing)")
    rows = np.array([id_map[node_id] for node_id in ids], dtype=np.int64)
    if (rows < 0).any():  # numpy would read a negative row from the end
        bad = int(np.flatnonzero(rows < 0)[0])
        raise DataError(f"{id_map_path}: node {ids[bad]} maps to row {rows[bad]}; feature rows are numbered from 0")
    if len(np.unique(rows)) != len(rows):
        raise DataError(f"{id_map_path}: two nodes map to the same feature row")
    return rows


def _split(graph: ig.Graph, codes: np.ndarray, ends: np.ndarray, report: GraphReport) -> dict[str, NodeSplit]:
    """The induced subgraph of each split; self loops and edges across splits are counted (and not kept)."""
    loops = ends[:, 0] == ends[:, 1]
    across = int((codes[ends[:, 0]] != codes[ends[:, 1]]).sum())
    if across:
        log.warning(
            "%s: %d edges join nodes of different splits; the split subgraphs leave them out", report.source, across
        )
    splits = {}
    for code, name in enumerate(SPLITS):
        vertices = np.flatnonzero(codes == code)
        subgraph = graph.induced_subgraph(vertices)
        self_loops = int((loops & (codes[ends[:, 0]] == code)).sum())
        splits[name] = NodeSplit(name, vertices, subgraph, self_loops)
        report.extra.update(
            {
                f"{name}_nodes": len(vertices),
                f"{name}_edges": subgraph.ecount(),
                f"{name}_self_loops_removed": self_loops,
            }
        )
        log.info(
            "%s split: %d nodes, %d edges (%d self loops dropped)", name, len(vertices), subgraph.ecount(), self_loops
        )
    report.extra["edges_across_splits"] = across
    return splits


def _read_features(path: Path, rows: np.ndarray, n_mapped: int, id_map_path: Path) -> np.ndarray:
    """The feature rows of the graph's vertices, float32 (|V| × f)."""
    try:
        with open_binary(path) as handle:
            matrix = np.load(io.BytesIO(handle.read()), allow_pickle=False)
    except (OSError, EOFError, ValueError) as error:
        raise DataError(f"{path}: not a readable .npy array ({first_line(error)})") from None
    if matrix.ndim != 2:
        raise DataError(f"{path}: expected a 2-D array (nodes × features), got shape {matrix.shape}")
    if not (np.issubdtype(matrix.dtype, np.number) or matrix.dtype == bool):
        raise DataError(f"{path}: expected numbers, got an array of {matrix.dtype}")
    if np.issubdtype(matrix.dtype, np.inexact) and not np.isfinite(matrix).all():
        bad = int(np.flatnonzero(~np.isfinite(matrix).all(axis=1))[0])
        raise DataError(f"{path}: row {bad} holds values that are not finite (NaN or infinite)")
    if matrix.shape[0] != n_mapped or rows.max(initial=-1) >= matrix.shape[0]:
        raise DataError(
            f"{path}: {matrix.shape[0]} rows, but {id_map_path.name} maps {n_mapped} nodes to rows"
            f" 0..{rows.max(initial=-1)} (one row per node expected)"
        )
    with np.errstate(over="ignore"):  # an overflow is refused below, in one line
        rows_float32 = np.ascontiguousarray(matrix[rows], dtype=np.float32)
    if not np.isfinite(rows_float32).all():  # finite in float64, beyond float32's range: blamed on W after training
        bad = int(rows[np.flatnonzero(~np.isfinite(rows_float32).all(axis=1))[0]])
        raise DataError(f"{path}: row {bad} holds values beyond float32's range (±3.4e38)")
    return rows_float32


def _read_labels(path: Path, ids: list[str]) -> np.ndarray:
    """Binary label vectors of the graph's vertices (|V| × M uint8); every vertex needs one of the same length."""
    class_map = _read_json(path)
    if not isinstance(class_map, dict):
        raise DataError(f"{path}: expected a JSON object mapping node ids to label lists")
    missing = [node_id for node_id in ids if node_id not in class_map]
    if missing:
        raise DataError(f"{path}: no labels for node {missing[0]} ({len(missing)} graph nodes have none)")
    vectors = [class_map[node_id] for node_id in ids]
    if not all(isinstance(vector, list) for vector in vectors):
        bad = next(i for i, vector in enumerate(vectors) if not isinstance(vector, list))
        raise DataError(f"{path}: node {ids[bad]} has {vectors[bad]!r}; expected a list of binary labels (multi-label)")
    lengths = np.fromiter((len(vector) for vector in vectors), dtype=np.int64, count=len(vectors))
    if len(lengths) and (lengths != lengths[0]).any():
        bad = int(np.flatnonzero(lengths != lengths[0])[0])
        raise DataError(
            f"{path}: label vectors of different lengths: node {ids[0]} has {lengths[0]} labels,"
            f" node {ids[bad]} has {lengths[bad]}"
        )
    if len(lengths) and lengths[0] == 0:
        raise DataError(f"{path}: every node's label list is empty; nothing to classify")
    try:
        labels = np.array(vectors, dtype=np.float64)
    except (TypeError, ValueError):
        labels = None
    if labels is None or (len(ids) and labels.ndim != 2):  # lists in the lists, or text
        raise DataError(f"{path}: node {ids[0]} has {vectors[0]!r}; expected a flat list of 0s and 1s")
    labels = labels.reshape(len(ids), -1 if len(ids) else 0)
    if not np.isin(labels, (0, 1)).all():
        bad = int(np.flatnonzero(~np.isin(labels, (0, 1)).all(axis=1))[0])
        raise DataError(f"{path}: node {ids[bad]} has labels other than 0 and 1")
    return labels.astype(np.uint8)


def write_graphsage(
    folder: str | os.PathLike,
    prefix: str,
    graph: ig.Graph,
    split_of: np.ndarray,
    features: np.ndarray | None = None,
    labels: np.ndarray | None = None,
) -> Path:
    """Write a graph in GraphSAGE's format (`split_of[i]`: 0 train, 1 valid, 2 test for vertex i; node ids and
    feature rows are the vertex ids). Used to build format fixtures and to run the pipeline on known labels."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    split_of = np.asarray(split_of)
    nodes = [{"test": bool(code == 2), "id": i, "val": bool(code == 1)} for i, code in enumerate(split_of.tolist())]
    links = [{"source": u, "target": v} for u, v in graph.get_edgelist()]
    document = {"directed": False, "graph": {}, "nodes": nodes, "links": links, "multigraph": False}
    (folder / f"{prefix}-G.json").write_text(json.dumps(document))
    (folder / f"{prefix}-id_map.json").write_text(json.dumps({str(i): i for i in range(graph.vcount())}))
    if features is not None:
        np.save(folder / f"{prefix}-feats.npy", np.asarray(features))
    if labels is not None:
        class_map = {str(i): [int(value) for value in row] for i, row in enumerate(np.asarray(labels))}
        (folder / f"{prefix}-class_map.json").write_text(json.dumps(class_map))
    return folder


# Labels that are known functions of a node's neighbourhood: learned on some graphs, they must transfer to
# unseen ones (the inductive check on real structure, while PPI's own labels are unavailable). A node's degree
# and local clustering are visible to IGEL from α = 1; its neighbours' full degrees only from α = 2.
STRUCTURAL_LABELS = (
    ("degree", 5),
    ("degree", 15),
    ("degree", 35),
    ("degree", 70),
    ("clustering", 0.08),
    ("clustering", 0.15),
    ("clustering", 0.25),
    ("max_neighbour_degree", 150),
    ("max_neighbour_degree", 300),
)


def structural_labels(graph: ig.Graph) -> tuple[np.ndarray, list[str]]:
    """0/1 labels (|V| × 9, uint8) of degree, local clustering and largest neighbour degree above thresholds
    set near PPI's quartiles, and their names (e.g. "degree>=15")."""
    degree = np.asarray(graph.degree(), dtype=np.float64)
    edges = np.asarray(graph.get_edgelist(), dtype=np.int64).reshape(-1, 2)
    largest = np.zeros(graph.vcount())
    np.maximum.at(largest, edges[:, 0], degree[edges[:, 1]])
    np.maximum.at(largest, edges[:, 1], degree[edges[:, 0]])
    values = {
        "degree": degree,
        "clustering": np.asarray(graph.transitivity_local_undirected(mode="zero"), dtype=np.float64),
        "max_neighbour_degree": largest,
    }
    labels = np.stack([values[kind] >= threshold for kind, threshold in STRUCTURAL_LABELS], axis=1)
    return labels.astype(np.uint8), [f"{kind}>={threshold}" for kind, threshold in STRUCTURAL_LABELS]


def write_structure_check(
    dataset: NodeDataset, folder: str | os.PathLike, train_graphs: int = 20, seed: int = 0, prefix: str = "ppi"
) -> tuple[np.ndarray, np.ndarray]:
    """Write a structure-only dataset (e.g. PPI's edge lists) back in GraphSAGE's format with the structural
    labels and 50 Gaussian-noise features; training keeps only its first `train_graphs` graphs (the largest
    components, in id order). Returns the split code (0 train, 1 valid, 2 test) and labels of each written node.
    """
    train = dataset.splits["train"]
    # PPI's 20 training tissue graphs are the 20 largest components, over contiguous id ranges
    components = sorted(train.graph.connected_components(), key=len, reverse=True)[:20]
    starts = sorted(int(train.vertices[min(component)]) for component in components)
    starts.append(int(train.vertices[-1]) + 1)
    codes = np.full(dataset.graph.vcount(), -1)
    for code, name in enumerate(SPLITS):
        codes[dataset.splits[name].vertices] = code
    keep = (codes > 0) | ((codes == 0) & (np.arange(len(codes)) < starts[min(train_graphs, len(starts) - 1)]))
    graph = dataset.graph.induced_subgraph(np.flatnonzero(keep))
    labels, _ = structural_labels(graph)
    noise = np.random.default_rng(seed).normal(size=(graph.vcount(), 50))
    write_graphsage(folder, prefix, graph, codes[keep], noise, labels)
    return codes[keep], labels
