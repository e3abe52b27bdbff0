"""Paper §4.1 and Appendix A: clustering of unsupervised IGEL embeddings."""

from __future__ import annotations

import logging

from omegaconf import DictConfig

from igel_exp import plots
from igel_exp.data import igraph_seed
from igel_exp.pipelines import pipeline
from igel_exp.pipelines.common import Stages, build_encoder, load, method, train_unsupervised
from igel_exp.tasks.clustering import centrality_correlations, kmeans_by_modularity, louvain, neighbour_similarity
from igel_exp.tracking import tracked_run

log = logging.getLogger(__name__)


@pipeline("clustering")
def clustering(config: DictConfig) -> dict[str, float]:
    """Paper §4.1 / Appendix A: cluster unsupervised IGEL embeddings, pick k by modularity, compare with
    Louvain, and correlate node-to-neighbours similarity with centralities."""
    encoder = build_encoder(config.encoder, config.progress)
    # a range, not a list: task.k_max=10**15 made a list of 10**15 ks before the run (a MemoryError blamed on
    # trainer.dim), and 10**9 one of tens of GB; KMeans takes those up to the number of distinct embeddings
    ks = range(config.task.k_min, config.task.k_max + 1)
    stages = Stages()
    with tracked_run(config, config.name) as logger:
        with stages("load"):
            dataset = load(config)
        logger.metrics(dataset.report.as_metrics())
        embeddings = train_unsupervised(dataset, config, encoder, logger, stages)
        graph = dataset.graph
        with stages("evaluate"):
            selection = kmeans_by_modularity(graph, embeddings, ks, config.seed, config.task.kmeans_n_init)
            with igraph_seed(config.seed):
                communities, louvain_modularity = louvain(graph)
            neighbourhood = config.task.get("score_neighbourhood", "open")
            ties = config.task.get("centrality_ties", "rounding")
            correlations = centrality_correlations(graph, embeddings, neighbourhood, config.progress, ties)
        for k, value in zip(selection.ks, selection.modularity, strict=True):
            logger.metrics({"modularity_by_k": value}, step=k)
        metrics = {
            "best_k": selection.best_k,
            "modularity": max(selection.modularity),
            "louvain_modularity": louvain_modularity,
            "louvain_communities": int(communities.max()) + 1,
            **correlations,
            **stages.metrics(),
        }
        logger.metrics(metrics)
        logger.embeddings(
            embeddings,
            graph,
            cluster=selection.best_labels,
            louvain=communities,
            neighbour_similarity=neighbour_similarity(graph, embeddings, neighbourhood),
        )
        made_by = method(config.encoder)
        if graph.vcount() <= config.task.draw_max_nodes:
            layout = plots.graph_layout(graph, config.seed)
            title = f"{dataset.name}: {made_by}, KMeans k={selection.best_k}"
            logger.figure(plots.graph_clusters(graph, selection.best_labels, layout, title), "clusters.png")
            logger.figure(plots.graph_clusters(graph, communities, layout, f"{dataset.name}: Louvain"), "louvain.png")
        else:
            log.info(
                "clusters.png and louvain.png are not drawn: the graph has %d nodes, more than task.draw_max_nodes=%d"
                " (its layout would take minutes; each node's cluster is in nodes.csv)",
                graph.vcount(),
                config.task.draw_max_nodes,
            )
        logger.figure(
            plots.modularity_by_k(selection.ks, selection.modularity, louvain_modularity, dataset.name, made_by),
            "modularity.png",
        )
    log.info(
        "clustering: best k=%d, modularity %.4f (Louvain %.4f)",
        selection.best_k,
        metrics["modularity"],
        louvain_modularity,
    )
    return metrics
