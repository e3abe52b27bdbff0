"""Sister Cities (Kaltenbrunner et al., IWSOS 2013; paper §4.1, Appendix B): the partnership graph between
cities and the node table that places each city and flags the 179 country capitals."""

from __future__ import annotations

import csv
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import igraph as ig
import numpy as np
import pandas as pd

from igel_exp.data.edgelist import GraphReport, read_pairs, simple_graph
from igel_exp.data.registry import DataContext, Dataset, files_at_hand, register
from igel_exp.data.sources import RemoteFile, compression, fetch
from igel_exp.errors import DataError, first_line

# The authors' copies (nur-ag/IGEL data/SisterCity, pinned to the commit whose blobs the manifest checks).
# GitHub serves them uncompressed; `content_sha256` is of the uncompressed bytes, so the gzip copies of the
# shared data root and a plain download kept under the same name both verify (readers go by magic bytes).
_ORIGIN = "https://raw.githubusercontent.com/nur-ag/IGEL/f97b39da884489d0d205812269f00e5cf5dceaa9/data/SisterCity"
FILES = {
    "edges": RemoteFile(
        path="SisterCity/SisterCity.edgelist.gz",
        url=f"{_ORIGIN}/SisterCity.edgelist",
        content_sha256="fa60bdd9baf4d6e5eab70a0b6b84e954507756705ec49d32abcd8cda5698ea08",
    ),
    "nodes": RemoteFile(
        path="SisterCity/GraphNodeTable.csv.gz",
        url=f"{_ORIGIN}/GraphNodeTable.csv",
        content_sha256="2cadeb5d9f46ee3cd271a3a826a2c2cbf81a95adc05c6f4817742be6259bbaf3",
    ),
}
NODE_COLUMNS = ("Id", "Label", "Country", "Lat", "Lng", "IsCapital")


@register("sister_cities", files=files_at_hand(*FILES.values()))
def _sister_cities(config: Mapping[str, Any], context: DataContext) -> Dataset:
    """The undirected simple graph (vertex i is graph id i) and its node table aligned to vertex order."""
    edges_path = fetch(FILES["edges"], context.root, context.download)
    nodes_path = fetch(FILES["nodes"], context.root, context.download)
    graph, report = read_sister_cities_graph(edges_path, bool(config.get("parallel_edges", False)))
    nodes, duplicates = read_node_table(nodes_path, graph.vcount())
    graph.vs["label"] = nodes["label"].tolist()
    report.extra.update(
        {
            "capitals": int(nodes["capital"].sum()),
            "nodes_without_table_row": int((~nodes["in_table"]).sum()),
            "node_table_duplicate_rows": duplicates,
        }
    )
    return Dataset("sister_cities", graph, report, nodes=nodes)


def read_sister_cities_graph(path: Path, parallel_edges: bool = False) -> tuple[ig.Graph, GraphReport]:
    """`u v` lines of directed partnerships, ids 0..n-1, as an undirected simple graph (reciprocal pairs
    merged, as in the paper's 15,225 edges; with `parallel_edges` one edge per line, as igraph's Read_Ncol reads
    the file: 19,761); vertex i is id i, so the node table aligns by id. The pairs as listed are kept as the graph
    attribute "directed_pairs" (m × 2)."""
    sources, targets = read_pairs(path)
    if min(sources.min(), targets.min()) < 0:
        raise DataError(f"{path}: expected non-negative node ids on every line")
    n = int(max(sources.max(), targets.max())) + 1
    graph, report = simple_graph(sources, targets, list(range(n)), str(path), parallel_edges)
    # kept for the degree / PageRank baselines, which the authors ranked on the pairs as listed
    graph["directed_pairs"] = np.column_stack([sources, targets])
    report.extra["directed_pairs"] = len(sources)
    return graph, report


def read_node_table(path: Path, n_nodes: int) -> tuple[pd.DataFrame, int]:
    """GraphNodeTable.csv as one row per vertex 0..n_nodes-1: label, country, lat, lng, capital, in_table.

    Four ids appear twice. Three are identical rows; Xian (4575) differs only in its coordinates, about 9 km
    apart. The first row of each id is kept, as a dict built by reading the file in order would; rows of one
    id that disagree on label, country or capital flag are refused. Vertices without a row (204) get an
    empty label, NaN coordinates and capital = False: the capital labels are the authors' flags as they are.
    Returns the table and the number of duplicate rows dropped.
    """
    try:
        table = pd.read_csv(
            path,
            sep="\t",
            quoting=csv.QUOTE_NONE,  # city names carry quotes and apostrophes as plain characters
            dtype={"Id": np.int64, "Label": str, "Country": str, "Lat": float, "Lng": float, "IsCapital": np.int64},
            keep_default_na=False,  # a city called "NA" is a name, not a missing value
            compression=compression(path),
        )
    except (ValueError, pd.errors.ParserError, pd.errors.EmptyDataError) as error:
        raise DataError(f"{path}: unreadable node table ({first_line(error)})") from None
    if tuple(table.columns) != NODE_COLUMNS:
        raise DataError(f"{path}: expected the columns {', '.join(NODE_COLUMNS)}, found {', '.join(table.columns)}")
    if not table["IsCapital"].isin([0, 1]).all():
        raise DataError(f"{path}: IsCapital must be 0 or 1")
    outside = table.loc[(table["Id"] < 0) | (table["Id"] >= n_nodes), "Id"]
    if len(outside):
        raise DataError(f"{path}: id {outside.iloc[0]} is not a vertex of the {n_nodes}-node graph")
    conflicting = table.groupby("Id")[["Label", "Country", "IsCapital"]].nunique().gt(1).any(axis=1)
    if conflicting.any():
        raise DataError(f"{path}: id {conflicting.idxmax()} appears twice with a different label, country or flag")
    unique = table.drop_duplicates("Id", keep="first").set_index("Id")
    nodes = pd.DataFrame(
        {
            "label": unique["Label"].reindex(range(n_nodes), fill_value=""),
            "country": unique["Country"].reindex(range(n_nodes), fill_value=""),
            "lat": unique["Lat"].reindex(range(n_nodes)),
            "lng": unique["Lng"].reindex(range(n_nodes)),
            "capital": unique["IsCapital"].reindex(range(n_nodes), fill_value=0).astype(bool),
            "in_table": pd.Series(True, index=unique.index).reindex(range(n_nodes), fill_value=False),
        }
    ).reset_index(drop=True)
    return nodes, len(table) - len(unique)
