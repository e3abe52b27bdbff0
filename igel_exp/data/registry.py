"""Named datasets, selected in configs as `dataset=<name>`; each loader returns a simple undirected graph."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import igraph as ig
import numpy as np
import pandas as pd

from igel_exp.data.edgelist import GraphReport, read_edgelist, read_pairs, readable_file, simple_graph
from igel_exp.data.sources import RemoteFile, fetch, local_copy
from igel_exp.errors import ConfigError, DataError


@dataclass
class Dataset:
    name: str
    graph: ig.Graph  # undirected, simple unless dataset.parallel_edges; vertex attribute "name": the node's id
    report: GraphReport
    nodes: pd.DataFrame | None = None  # per-vertex attributes (row i = vertex i), for datasets that have them


@dataclass(frozen=True)
class DataContext:
    root: Path
    download: bool
    seed: int


Loader = Callable[[Mapping[str, Any], DataContext], Dataset]
Check = Callable[[Mapping[str, Any], DataContext], None]
DATASETS: dict[str, Loader] = {}
CHECKS: dict[str, Check] = {}  # what a dataset can check before a run starts (the user's own files, sizes)
FILE_CHECKS: dict[str, Check] = {}  # whether a named dataset's files are at hand (check_files)
SEEDED: set[str] = set()  # datasets whose graph the run's seed draws: their settings alone do not name the graph

FILES = {
    "facebook": RemoteFile(
        path="Facebook/Facebook.edgelist.gz",
        url="https://snap.stanford.edu/data/facebook_combined.txt.gz",
        content_sha256="f41c026ed8af3cc3359f1ca5573d0605fb09ae0eefa34544b820fd8c6e2ef296",
    ),
    # SNAP's original lists every pair in both directions, with self loops and '#' headers.
    "astroph": RemoteFile(
        path="CA-AstroPh/ca-AstroPh.txt.gz",
        url="https://snap.stanford.edu/data/ca-AstroPh.txt.gz",
        sha256="51bf1e2cace269b884481a8502474efa67c0fd01d998ff7f5a154d7d3e527f27",
    ),
    # The same graph, one line per undirected edge, self loops removed: node 64582, which has only a
    # self loop, must be added back as an isolated node to keep SNAP's 18,772 nodes.
    "astroph_derived": RemoteFile(
        path="CA-AstroPh/CA-AstroPh.edgelist.gz",
        url="https://snap.stanford.edu/data/ca-AstroPh.txt.gz",
        content_sha256="02e59110b9166d9da7364f0eb83123a3860288bf4a030c24432e8786cd9f0a05",
    ),
}
ASTROPH_SELF_LOOP_ONLY_NODE = "64582"


def register(
    name: str, check: Check | None = None, files: Check | None = None, seeded: bool = False
) -> Callable[[Loader], Loader]:
    """Register a loader under `name`, with the `check` it can make before a run starts (no reading of the data) and,
    for a named dataset, `files`: DataError where a file it needs is absent from the data root and may not be
    downloaded (check_files); `seeded`: the run's seed draws the graph (SEEDED)."""

    def decorate(loader: Loader) -> Loader:
        DATASETS[name] = loader
        if seeded:
            SEEDED.add(name)
        if check is not None:
            CHECKS[name] = check
        if files is not None:
            FILE_CHECKS[name] = files
        return loader

    return decorate


def files_at_hand(*specs: RemoteFile) -> Check:
    """The `files` check of a named dataset made of these files."""

    def check(config: Mapping[str, Any], context: DataContext) -> None:
        for spec in specs:
            local_copy(spec, context.root, context.download)

    return check


def check_dataset(config: Mapping[str, Any], context: DataContext) -> None:
    """Raise ConfigError or DataError, naming the key or the file, for what is wrong with the dataset section
    before anything is read: an unknown name, a user's file that is missing or unreadable, impossible sizes."""
    name = config.get("name")
    if name not in DATASETS:
        raise ConfigError(f"dataset.name={name!r} is unknown; valid datasets: {', '.join(sorted(DATASETS))}")
    if name in CHECKS:
        CHECKS[name](config, context)


def check_files(config: Mapping[str, Any], context: DataContext) -> None:
    """DataError naming the first file of a named dataset (of a config check_dataset passed) that is neither under the
    data root nor to be downloaded (data.download=false), as loading it would fail. What a sweep and igel-embed check
    before their first run; a single igel-run fetches inside its run, and a missing dataset is that run's recorded
    error."""
    if config.get("name") in FILE_CHECKS:
        FILE_CHECKS[config["name"]](config, context)


def load_dataset(config: Mapping[str, Any], context: DataContext) -> Dataset:
    """Load the dataset named by `config["name"]` with the rest of `config` as its parameters."""
    name = config.get("name")
    if name not in DATASETS:
        raise ConfigError(f"dataset.name={name!r} is unknown; valid datasets: {', '.join(sorted(DATASETS))}")
    return DATASETS[name](config, context)


@contextmanager
def igraph_seed(seed: int):
    """Seed igraph's random generators (generators, Louvain) for the duration of the block."""
    ig.set_random_number_generator(random.Random(seed))
    try:
        yield
    finally:
        ig.set_random_number_generator(random)


def miserables_graph() -> tuple[ig.Graph, GraphReport]:
    """Les Misérables co-appearance graph (77 nodes, 254 edges), as shipped by networkx."""
    import networkx as nx  # here, not above: its import is 0.4 s of every command's start, and only this graph needs it

    nx_graph = nx.les_miserables_graph()
    names = list(nx_graph.nodes)
    index = {name: i for i, name in enumerate(names)}
    edges = np.array([(index[u], index[v]) for u, v in nx_graph.edges], dtype=np.int64)
    return simple_graph(edges[:, 0], edges[:, 1], names, "networkx les_miserables_graph")


@register("miserables")
def _miserables(config: Mapping[str, Any], context: DataContext) -> Dataset:
    graph, report = miserables_graph()
    return Dataset("miserables", graph, report)


@register("miserables_cloned", seeded=True)
def _miserables_cloned(config: Mapping[str, Any], context: DataContext) -> Dataset:
    """Two copies of Les Misérables joined by one edge between random nodes of each copy (paper 4.1)."""
    graph, _ = miserables_graph()
    n = graph.vcount()
    edges = np.asarray(graph.get_edgelist(), dtype=np.int64)
    bridge = np.array([_bridge(n, config.get("bridge_stream"), context.seed)])
    all_edges = np.concatenate([edges, edges + n, bridge])
    names = [f"{name}#1" for name in graph.vs["name"]] + [f"{name}#2" for name in graph.vs["name"]]
    cloned, report = simple_graph(all_edges[:, 0], all_edges[:, 1], names, "cloned les_miserables_graph")
    report.extra["bridge"] = f"{names[bridge[0, 0]]}--{names[bridge[0, 1]]}"
    return Dataset("miserables_cloned", cloned, report)


def _bridge(n: int, stream: int | None, seed: int) -> tuple[int, int]:
    """The bridge's ends, one in each copy: from the run's seed, or (dataset.bridge_stream) as the authors'
    clone_bridge_graph drew them after random.seed(stream) (nur-ag/IGEL src/graph.py:126-128, two randint(0, n - 1)),
    on vertices numbered alike: ours are networkx's order, which is Read_Ncol's of their Miserables.edgelist."""
    if stream is None:
        rng = np.random.default_rng(seed)
        return int(rng.integers(n)), n + int(rng.integers(n))
    drawn = random.Random(stream)
    return drawn.randint(0, n - 1), n + drawn.randint(0, n - 1)


def _edgelist_path(config: Mapping[str, Any], context: DataContext | None = None) -> Path:
    path = config.get("path")
    if not path:
        raise ConfigError("dataset.path is required for dataset=edgelist (dataset.path=FILE)")
    return readable_file(Path(path).expanduser(), "edge list")


@register("edgelist", check=_edgelist_path)
def _edgelist(config: Mapping[str, Any], context: DataContext) -> Dataset:
    path = _edgelist_path(config)
    graph, report = read_edgelist(path, config.get("node_ids", "int"), bool(config.get("parallel_edges", False)))
    return Dataset(path.name, graph, report)


@register("facebook", files=files_at_hand(FILES["facebook"]))
def _facebook(config: Mapping[str, Any], context: DataContext) -> Dataset:
    path = fetch(FILES["facebook"], context.root, context.download)
    graph, report = read_edgelist(path, parallel_edges=bool(config.get("parallel_edges", False)))
    return Dataset("facebook", graph, report)


def _astroph_file(context: DataContext) -> RemoteFile:
    """SNAP's file, or the derived copy where the root has that and not SNAP's."""
    derived = FILES["astroph_derived"]
    if (context.root / derived.path).exists() and not (context.root / FILES["astroph"].path).exists():
        return derived
    return FILES["astroph"]


def _astroph_at_hand(config: Mapping[str, Any], context: DataContext) -> None:
    local_copy(_astroph_file(context), context.root, context.download)


@register("astroph", files=_astroph_at_hand)
def _astroph(config: Mapping[str, Any], context: DataContext) -> Dataset:
    """arXiv AstroPh from SNAP's file, or the derived one-line-per-edge copy when that is what the root has.

    With dataset.parallel_edges every pair of SNAP's listing is two parallel edges, as Read_Ncol reads SNAP's file
    (each pair on two lines, u v and v u); from the derived copy, its lines and their reverses are listed in an
    order drawn from the run's seed, and numbered, as Read_Ncol would, by first appearance.
    """
    parallel = bool(config.get("parallel_edges", False))
    source = _astroph_file(context)
    if source is FILES["astroph_derived"]:
        path = fetch(source, context.root, download=False)
        if parallel:
            graph, report = _both_ways(path, context.seed)
        else:
            graph, report = read_edgelist(path)
        # the only node of SNAP's file that has nothing but a self loop, lost when self loops were removed
        return Dataset("astroph", _with_isolated(graph, report, ASTROPH_SELF_LOOP_ONLY_NODE), report)
    path = fetch(source, context.root, context.download)
    graph, report = read_edgelist(path, parallel_edges=parallel)
    return Dataset("astroph", graph, report)


def _both_ways(path: Path, seed: int) -> tuple[ig.Graph, GraphReport]:
    """The edge list's pairs each listed twice, u v and v u, in a random order, read with parallel edges."""
    sources, targets = read_pairs(path)
    lines = np.concatenate([np.column_stack([sources, targets]), np.column_stack([targets, sources])])
    lines = lines[np.random.default_rng(seed).permutation(len(lines))]
    ends, names = pd.factorize(pd.Series(lines.ravel()), sort=False)
    return simple_graph(ends[0::2], ends[1::2], [str(name) for name in names], str(path), parallel_edges=True)


def _with_isolated(graph: ig.Graph, report: GraphReport, name: str) -> ig.Graph:
    if name in set(graph.vs["name"]):
        raise DataError(f"{report.source}: node {name} was expected to be absent")
    graph.add_vertex(name=name)
    report.nodes = graph.vcount()
    return graph


MAX_ERDOS_RENYI_NODES = 2**27  # beyond, ig.Graph.Erdos_Renyi fails: "Sampling interval too large"


def erdos_renyi_size(config: Mapping[str, Any]) -> tuple[int, int]:
    """(nodes, edges) of the G(n, m) that `config` asks for, m = round(n · average_degree / 2); checked."""
    n, degree = config.get("num_nodes"), config.get("average_degree")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(f"dataset.num_nodes must be a positive integer, got {n!r}")
    if isinstance(degree, bool) or not isinstance(degree, (int, float)) or degree < 0:
        raise ConfigError(f"dataset.average_degree must be a non-negative number, got {degree!r}")
    if n > MAX_ERDOS_RENYI_NODES:
        raise ConfigError(
            f"dataset.num_nodes={n}: igraph samples a G(n, m) of at most {MAX_ERDOS_RENYI_NODES:,} nodes (2^27: its"
            " n(n-1)/2 node pairs must stay below 2^53)"
        )
    edges = round(n * degree / 2)
    if edges == 0:  # the walks would hold no pair: a FAILED run that named no key
        raise ConfigError(
            f"dataset.average_degree={degree} gives dataset.num_nodes={n} nodes no edge (m = round(n · degree / 2) = 0)"
        )
    if edges > n * (n - 1) // 2:
        raise ConfigError(
            f"dataset.average_degree={degree} needs {edges} edges, more than the {n * (n - 1) // 2} pairs"
            f" of dataset.num_nodes={n}"
        )
    return n, edges


@register("erdos_renyi", check=lambda config, context: erdos_renyi_size(config) and None, seeded=True)
def _erdos_renyi(config: Mapping[str, Any], context: DataContext) -> Dataset:
    """G(n, m) with m = round(n · average_degree / 2), seeded by the run's seed."""
    n, edges = erdos_renyi_size(config)
    with igraph_seed(context.seed):
        graph = ig.Graph.Erdos_Renyi(n=n, m=edges)
    graph.vs["name"] = [str(i) for i in range(n)]
    report = GraphReport(source=f"G(n={n}, m={edges})", nodes=n, edges=graph.ecount())
    return Dataset("erdos_renyi", graph, report)
