"""Datasets: the registry of named graphs, edge-list reading, the data root and checksummed downloads."""

from igel_exp.data.edgelist import GraphReport, read_edgelist, simple_graph
from igel_exp.data.registry import (
    DATASETS,
    DataContext,
    Dataset,
    check_dataset,
    check_files,
    igraph_seed,
    load_dataset,
)
from igel_exp.data.sources import RemoteFile, fetch, resolve_data_root

__all__ = [
    "DATASETS",
    "DataContext",
    "Dataset",
    "check_dataset",
    "check_files",
    "GraphReport",
    "RemoteFile",
    "fetch",
    "igraph_seed",
    "load_dataset",
    "read_edgelist",
    "resolve_data_root",
    "simple_graph",
]

from igel_exp.data import (
    ppi,  # noqa: E402, F401  (registers ppi and graphsage)
    sister_cities,  # noqa: E402, F401  (registers the loader)
)
