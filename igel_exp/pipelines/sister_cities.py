"""Paper §4.1 and Appendix B: clusters of unsupervised IGEL embeddings that find capitals in Sister Cities."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
from omegaconf import DictConfig

from igel_exp import plots
from igel_exp.data import Dataset
from igel_exp.encoding import IGELEncoder
from igel_exp.errors import ConfigError
from igel_exp.identity import embedding_key
from igel_exp.pipelines import check_before, pipeline, reuse
from igel_exp.pipelines.common import Stages, build_encoder, load, method, train_unsupervised
from igel_exp.tasks.capitals import capital_cluster, capital_scores, rankings
from igel_exp.tasks.clustering import (
    NotebookKMeans,
    centrality_correlations,
    kmeans_by_modularity,
    neighbour_similarity,
)
from igel_exp.tracking import RunLogger, run_name_of, tracked_run

log = logging.getLogger(__name__)

NODE_COLUMNS = ("label", "country", "lat", "lng", "capital")


@check_before("sister_cities")
def _node_table_needed(config: DictConfig) -> None:
    if config.dataset.name != "sister_cities":
        raise ConfigError(
            f"dataset={config.dataset.name} has no node table: task=sister_cities needs capital flags and coordinates"
            " (dataset=sister_cities)"
        )


@check_before("sister_cities")
def _notebook_kmeans_of_igel(config: DictConfig) -> None:
    notebook = _notebook_kmeans(config)
    if notebook is None:
        return
    if config.encoder.name != "igel":
        raise ConfigError(
            f"task.kmeans_stream={notebook.seed} replays the authors' notebook's KMeans fits of IGEL's embeddings at"
            f" α = 1..4: encoder={config.encoder.name} has no α (task.kmeans_stream=null)"
        )
    notebook.start_seeds(config.task.k)  # α and k within the notebook's fits


@pipeline("sister_cities")
def sister_cities(config: DictConfig) -> dict[str, float]:
    """One (α, k, seed) of Table SisterCitiesF1Scores, and the α row of Table SisterCitiesCorrelations: train
    IGEL, cluster with KMeans into task.k groups, score the cluster with the most capitals against the
    top-|C| cities by degree and PageRank, and correlate node-to-neighbours similarity with centralities."""
    encoder = build_encoder(config.encoder, config.progress)
    k = config.task.k
    alpha = f"α={config.encoder.distance}" if encoder is not None else config.encoder.name
    stages = Stages()
    with tracked_run(config, config.name, run_name_of(config, f"k={k}")) as logger:
        with stages("load"):
            dataset = load(config)
        nodes = _node_table(dataset.nodes, config.dataset.name)
        counted = _counted(nodes, config.task)
        counts = {key: value for key, value in dataset.report.extra.items() if isinstance(value, int)}
        logger.metrics({**dataset.report.as_metrics(), **counts})  # directed pairs, rows missing or duplicated
        embeddings = _embeddings(dataset, config, encoder, logger, stages)
        graph = dataset.graph
        with stages("evaluate"):
            notebook = _notebook_kmeans(config)
            n_init = config.task.kmeans_n_init
            selection = kmeans_by_modularity(graph, embeddings, [k], config.seed, n_init, "task.k", notebook)
            labels = selection.labels[k]
            listed = graph["directed_pairs"] if "directed_pairs" in graph.attributes() else None
            scores = rankings(graph, listed, config.task.ranking_graph)
            capitals = capital_scores(labels, nodes["capital"].to_numpy(), scores, counted)
            neighbourhood = config.task.get("score_neighbourhood", "open")
            ties = config.task.get("centrality_ties", "rounding")
            correlations = centrality_correlations(graph, embeddings, neighbourhood, config.progress, ties)
        metrics = {
            "capitals": int(nodes["capital"].sum()),
            **capitals,
            "modularity": selection.modularity[0],
            **correlations,
            **stages.metrics(),
        }
        logger.metrics(metrics)
        table = pd.DataFrame({"vertex": np.arange(graph.vcount()), **{c: nodes[c] for c in NODE_COLUMNS}})
        table = table.assign(
            cluster=labels,
            degree=scores["degree"],
            pagerank=scores["pagerank"],
            neighbour_similarity=neighbour_similarity(graph, embeddings, neighbourhood),
        )
        logger.table(table, "nodes.csv")
        positive = capital_cluster(labels, nodes["capital"].to_numpy())
        degree = np.asarray(graph.degree(), dtype=float)
        lng, lat = nodes["lng"].to_numpy(), nodes["lat"].to_numpy()
        title = f"{dataset.name}: {method(config.encoder)}, KMeans k={k}, seed {config.seed}"
        logger.figure(
            plots.geo_clusters(lng, lat, labels, degree, nodes["capital"].to_numpy(), positive, f"capitals, {title}"),
            "capitals.png",
        )
        logger.figure(
            plots.geo_clusters(lng, lat, labels, degree, np.ones(len(labels), bool), positive, f"cities, {title}"),
            "cities.png",
        )
    log.info(
        "sister cities %s k=%d: |C|=%d, F1 of C %.3f, top-|C| degree %.3f, PageRank %.3f",
        alpha,
        k,
        capitals["cluster_size"],
        capitals["f1_cluster"],
        capitals["f1_top_degree"],
        capitals["f1_top_pagerank"],
    )
    return metrics


def _embeddings(
    dataset: Dataset, config: DictConfig, encoder: IGELEncoder | None, logger: RunLogger, stages: Stages
) -> np.ndarray:
    """Train, or with task.reuse_embeddings take the embeddings of a finished run that trained the same way
    (the paper clusters one embedding per α with every k); the run that trains logs them."""
    key = embedding_key(config)
    if config.task.reuse_embeddings:
        with stages("reuse"):
            found = reuse.find_embeddings(logger.run.info.experiment_id, key)
        if found is not None:
            run_id, embeddings = found
            log.info("embeddings of run %s reused (same dataset, encoder, trainer, seed and code)", run_id)
            logger.tags({reuse.SOURCE_TAG: run_id})
            return embeddings
    embeddings = train_unsupervised(dataset, config, encoder, logger, stages)
    logger.array(embeddings, reuse.ARTIFACT)
    logger.tags({reuse.KEY_TAG: key})
    return embeddings


def _notebook_kmeans(config: DictConfig) -> NotebookKMeans | None:
    """task.kmeans_stream: null seeds each k's KMeans with the run's seed; a seed replays the starts that the authors'
    notebook drew after set_seed(seed) for IGEL's α (encoder.distance)."""
    seed = config.task.get("kmeans_stream")
    return None if seed is None else NotebookKMeans(config.encoder.get("distance", 0), seed)


CLUSTER_MEMBERS = ("all", "in_table")


def _counted(nodes: pd.DataFrame, task: DictConfig) -> np.ndarray | None:
    """The cities that count as members of C: all, or (task.cluster_members=in_table) those with a node-table row."""
    members = task.get("cluster_members", "all")
    if members not in CLUSTER_MEMBERS:
        raise ConfigError(f"task.cluster_members={members!r} is not one of {', '.join(CLUSTER_MEMBERS)}")
    return nodes["in_table"].to_numpy() if members == "in_table" else None


def _node_table(nodes: pd.DataFrame | None, name: str) -> pd.DataFrame:
    missing = [column for column in NODE_COLUMNS if nodes is None or column not in nodes.columns]
    if missing:
        raise ConfigError(
            f"dataset.name={name!r} has no node table with {', '.join(missing)}: task=sister_cities needs"
            " capital flags and coordinates (dataset=sister_cities)"
        )
    return nodes
