"""Figures logged as run artifacts. Plotting only: the numbers come from the task evaluators."""

from __future__ import annotations

import igraph as ig
import matplotlib

matplotlib.use("Agg")  # headless: figures are only ever written to files
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.collections import LineCollection  # noqa: E402


def graph_clusters(graph: ig.Graph, labels: np.ndarray, seed: int, title: str) -> plt.Figure:
    """The graph drawn with a seeded force-directed layout, nodes coloured by cluster and sized by
    harmonic centrality (as in the paper's Figure MiserablesClustering)."""
    coords = np.asarray(graph.layout_fruchterman_reingold(seed=_seed_layout(graph, seed)).coords)
    sizes = np.asarray(graph.harmonic_centrality(), dtype=float)
    sizes = 20 + 180 * (sizes - sizes.min()) / max(np.ptp(sizes), 1e-12)
    figure, axes = plt.subplots(figsize=(9, 7))
    edges = np.asarray(graph.get_edgelist(), dtype=np.int64).reshape(-1, 2)
    axes.add_collection(LineCollection(coords[edges], colors="0.7", linewidths=0.5, zorder=1))
    scatter = axes.scatter(
        coords[:, 0], coords[:, 1], c=labels, s=sizes, cmap="tab10", edgecolors="k", linewidths=0.3, zorder=2
    )
    axes.legend(*scatter.legend_elements(), title="cluster", loc="best", fontsize="small")
    axes.set_title(title)
    axes.set_axis_off()
    figure.tight_layout()
    return figure


def modularity_by_k(ks: list[int], modularity: list[float], reference: float | None, title: str) -> plt.Figure:
    """Modularity of the KMeans clusters against k, the best k marked (paper Figure MiserablesModularity)."""
    figure, axes = plt.subplots(figsize=(6, 4))
    axes.plot(ks, modularity, marker="o", label="IGEL + KMeans")
    best = int(np.argmax(modularity))
    axes.plot([ks[best]], [modularity[best]], "rs", markersize=10, label=f"best k = {ks[best]}")
    if reference is not None:
        axes.axhline(reference, color="0.5", linestyle="--", label=f"Louvain ({reference:.3f})")
    axes.set_xlabel("number of clusters k")
    axes.set_ylabel("modularity")
    axes.set_title(title)
    axes.legend()
    figure.tight_layout()
    return figure


def _seed_layout(graph: ig.Graph, seed: int) -> np.ndarray:
    """A seeded initial position, so the drawing is reproducible."""
    return np.random.default_rng(seed).random((graph.vcount(), 2)).tolist()
