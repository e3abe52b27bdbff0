"""Figures logged as run artifacts. Plotting only: the numbers come from the task evaluators."""

from __future__ import annotations

from dataclasses import dataclass

import igraph as ig
import matplotlib

matplotlib.use("Agg")  # headless: figures are only ever written to files
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.collections import LineCollection  # noqa: E402


@dataclass
class GraphLayout:
    """Where a drawing of a graph puts its nodes, and their sizes: computed once for all of a run's drawings, which then
    show each node in one place (the force-directed layout is most of a drawing's cost: 15 s for Facebook's 4,039
    nodes, over 6 minutes for AstroPh's 18,772, on this project's 2-core machine)."""

    coords: np.ndarray  # |V| × 2
    sizes: np.ndarray  # |V|, in points²


def graph_layout(graph: ig.Graph, seed: int) -> GraphLayout:
    """A seeded force-directed layout, nodes sized by harmonic centrality (as in the paper's Figure
    MiserablesClustering)."""
    coords = np.asarray(graph.layout_fruchterman_reingold(seed=_seed_layout(graph, seed)).coords)
    sizes = np.asarray(graph.harmonic_centrality(), dtype=float)
    return GraphLayout(coords, 20 + 180 * (sizes - sizes.min()) / max(np.ptp(sizes), 1e-12))


def graph_clusters(graph: ig.Graph, labels: np.ndarray, layout: GraphLayout, title: str) -> plt.Figure:
    """The graph drawn at `layout`, nodes coloured by cluster."""
    coords, sizes = layout.coords, layout.sizes
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


def modularity_by_k(
    ks: list[int], modularity: list[float], reference: float | None, graph: str, method: str
) -> plt.Figure:
    """Modularity of the KMeans clusters of `method`'s embeddings (IGEL α=1, deepwalk) against k, the best k marked
    (paper Figure MiserablesModularity)."""
    figure, axes = plt.subplots(figsize=(6, 4))
    title = f"{graph}, {method}"
    axes.plot(ks, modularity, marker="o", label=f"{method} + KMeans")
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


def geo_clusters(
    lng: np.ndarray,
    lat: np.ndarray,
    labels: np.ndarray,
    degree: np.ndarray,
    shown: np.ndarray,
    positive: int | None,
    title: str,
) -> plt.Figure:
    """Cities at their longitude/latitude, the `shown` ones (bool mask) coloured by cluster with a radius
    proportional to degree, the rest as a faint map of the world (paper Figures SisterCities and
    SisterCitiesClusters). Nodes without coordinates (NaN) are left out; `positive` marks the cluster C."""
    located = np.isfinite(lng) & np.isfinite(lat)
    shown = shown & located
    figure, axes = plt.subplots(figsize=(12, 6.5))
    axes.scatter(lng[located & ~shown], lat[located & ~shown], s=1, c="0.85", linewidths=0, zorder=1)
    radius = 1 + 17 * degree / max(float(degree[shown].max(initial=0)), 1.0)  # radius ∝ degree, as the paper's
    sizes = radius**2  # scatter sizes are areas (pt²)
    colours = plt.get_cmap("tab10")
    clusters, counts = np.unique(labels[shown], return_counts=True)
    for rank, cluster in enumerate(clusters[np.argsort(-counts, kind="stable")]):  # small clusters drawn on top
        points = shown & (labels == cluster)
        name = f"{cluster} (C)" if cluster == positive else str(cluster)
        axes.scatter(
            lng[points],
            lat[points],
            s=sizes[points],
            color=colours(int(cluster) % 10),
            alpha=0.75,
            edgecolors="k",
            linewidths=0.3,
            label=f"cluster {name}: {int(points.sum())}",
            zorder=2 + rank,
        )
    axes.set_xlim(-180, 180)
    axes.set_ylim(-60, 85)
    axes.set_xlabel("longitude")
    axes.set_ylabel("latitude")
    axes.set_title(title)
    legend = axes.legend(loc="lower left", fontsize="small")
    for handle in legend.legend_handles:  # one marker size in the legend, whatever the first city's degree
        handle.set_sizes([40])
    figure.tight_layout()
    return figure


def _seed_layout(graph: ig.Graph, seed: int) -> np.ndarray:
    """A seeded initial position, so the drawing is reproducible."""
    return np.random.default_rng(seed).random((graph.vcount(), 2)).tolist()


def scalability_panels(panels: list[dict], ylabel: str) -> plt.Figure:
    """Side-by-side log-log panels of a measure against a graph parameter, one curve per α (paper Figure
    ScalabilityResults). Each panel is a dict: `table` (a seed_means table: series, x, mean, std, n),
    `slopes` ({series: fitted log-log slope}), `fit` ((x_min, x_max) of the fit, drawn dashed), `xlabel`,
    `title`. Error bars are one standard deviation over seeds."""
    figure, axes_row = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.5), squeeze=False)
    colours = plt.get_cmap("tab10")
    for axes, panel in zip(axes_row[0], panels, strict=True):
        table = panel["table"]
        if table.empty:
            axes.text(0.5, 0.5, "no finished runs", ha="center", va="center", transform=axes.transAxes)
        for i, (series, points) in enumerate(table.groupby("series")):
            slope = panel["slopes"].get(series, float("nan"))
            label = f"α = {series}" + ("" if np.isnan(slope) else f" (slope {slope:.2f})")
            axes.errorbar(
                points.x, points["mean"], yerr=points["std"], marker="o", capsize=3, color=colours(i), label=label
            )
            low, high = panel["fit"]
            inside = points[(points.x >= low) & (points.x <= high)]
            if not np.isnan(slope) and len(inside) >= 2:
                xs = np.array([inside.x.min(), inside.x.max()], dtype=float)
                # the fitted line through the points' geometric centre, to show the slope against the data
                centre_x, centre_y = np.exp(np.log(inside.x).mean()), np.exp(np.log(inside["mean"]).mean())
                axes.plot(xs, centre_y * (xs / centre_x) ** slope, "--", color=colours(i), alpha=0.6, linewidth=1)
        axes.set_xscale("log", base=2)
        axes.set_yscale("log")
        axes.set_xlabel(panel["xlabel"])
        axes.set_ylabel(ylabel)
        axes.set_title(panel["title"])
        axes.grid(True, which="both", alpha=0.3)
        if not table.empty:
            axes.legend(fontsize="small")
    figure.tight_layout()
    return figure
