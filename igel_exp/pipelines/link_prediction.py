"""Paper §4.2: link prediction on a residual graph, IGEL beside DeepWalk and node2vec on the same split."""

from __future__ import annotations

import hashlib
import io
import logging
from pathlib import Path

import igraph as ig
import numpy as np
import pandas as pd
from omegaconf import DictConfig

from igel_exp import user_cache_dir, write_cache_entry
from igel_exp.data import Dataset
from igel_exp.errors import ConfigError, DataError
from igel_exp.identity import DATA_TAG
from igel_exp.pipelines import check_before, pipeline
from igel_exp.pipelines.common import Stages, build_encoder, load, train_unsupervised
from igel_exp.tasks.link_prediction import (
    EdgeSplit,
    check_scorable,
    check_split,
    link_prediction_scores,
    read_back_split,
    split_edges,
)
from igel_exp.tracking import tracked_run

log = logging.getLogger(__name__)


def graph_fingerprint(graph: ig.Graph) -> str:
    """sha256 of the edge set written with node names: the same for any vertex or edge order."""
    names = np.asarray(graph.vs["name"], dtype=object)
    pairs = np.sort(names[np.asarray(graph.get_edgelist(), dtype=np.int64).reshape(-1, 2)].astype(str), axis=1)
    lines = sorted(f"{u}\t{v}" for u, v in pairs)
    text = "\n".join(sorted(names.astype(str))) + "\n--\n" + "\n".join(lines)
    return hashlib.sha256(text.encode()).hexdigest()


def data_key(graph: ig.Graph) -> str:
    """The graph's content in 16 hex digits (graph_fingerprint): in a split's cache key, and a link-prediction run's
    DATA_TAG, by which transfer finds runs of the same data, not just of the same dataset.path."""
    return graph_fingerprint(graph)[:16]


def cached_split(
    dataset: Dataset, fraction: float, seed: int, cache: Path | None, data: str | None = None
) -> tuple[EdgeSplit, str, bool]:
    """The split of (graph, fraction, seed), read from the cache when there; (split, its file name, hit). `data`: the
    graph's data_key, where already computed.

    Splits are stored with node names, so a cached split stays right if the graph is read with another
    vertex order, and are checked leak-free against the graph whenever they are read.
    """
    graph = dataset.graph
    # the name in 64 characters: an edge list's is its file's, whose name may take all a file name's 255 bytes
    key = f"{dataset.name[:64]}-{data or data_key(graph)}-removed{fraction!r}-seed{seed}.npz"
    path = (cache or user_cache_dir() / "splits") / key
    names = np.asarray(graph.vs["name"], dtype=str)
    if path.exists():
        try:
            stored = np.load(path)
            # a file copied or renamed: another graph's, fraction's or seed's split (entries written before 2026-11-30
            # hold no key: taken as their names say, as they were)
            if "key" in stored.files and str(stored["key"]) != key:
                raise DataError(f"it holds the split {stored['key']}")
            index = pd.Index(names)
            split = EdgeSplit(
                graph.vcount(), *(index.get_indexer(stored[part].ravel()).reshape(-1, 2) for part in _PARTS)
            )
            check_split(split, graph)
            return split, key, True
        except Exception as error:  # unreadable, cut short, of another graph: made again (and rewritten)
            log.warning("ignoring the cached split %s (%s): splitting again", path, error)
    split = split_edges(graph, fraction, seed)
    stored = io.BytesIO()
    np.savez_compressed(stored, key=np.asarray(key), **{part: names[getattr(split, part)] for part in _PARTS})
    error = write_cache_entry(path, stored.getvalue())
    if error is not None:  # a read-only cache costs only the time to split again
        log.warning("could not cache the split in %s: %s", path.parent, error)
    return split, key, False


_PARTS = ("residual", "positives", "negatives")


SPLITS = ("leak_free", "read_back")


def configured_split(dataset: Dataset, config: DictConfig, data: str | None = None) -> tuple[EdgeSplit, str, bool]:
    """The split task.split asks for with the run's settings (task.removed_fraction, seed, task.split_cache):
    leak-free and cached, or the authors' read-back path (quick to redo: not cached); (split, name, cache hit).
    `data`: the graph's data_key, where already computed."""
    task = config.task
    how = task.get("split", "leak_free")
    if how == "read_back":
        split = read_back_split(dataset.graph, task.removed_fraction, config.seed)
        check_scorable(split, config.seed, task.validation_fraction)
        return split, "read_back", False
    if how != "leak_free":
        raise ConfigError(f"task.split={how!r} is not one of {', '.join(SPLITS)}")
    cache = Path(task.split_cache).expanduser() if task.split_cache else None
    split, key, hit = cached_split(dataset, task.removed_fraction, config.seed, cache, data)
    check_scorable(split, config.seed, task.validation_fraction)  # before training, not after it
    return split, key, hit


@check_before("link_prediction")
def _no_source(config: DictConfig) -> None:
    """task.source and task.source_overrides are transfer's: a link-prediction run that has them ran without them, yet
    logged them as its own (experiment=transfer_link_prediction was meant)."""
    task = config.task
    if task.get("source") is not None or task.get("source_overrides"):
        raise ConfigError(
            f"task.source={task.get('source')} is read by experiment=transfer_link_prediction only; experiment"
            "=link_prediction learns and scores on dataset= alone"
        )


@pipeline("link_prediction")
def link_prediction(config: DictConfig) -> dict[str, float]:
    """Learn embeddings on the residual graph, score held-out edges against non-edges by ROC AUC."""
    encoder = build_encoder(config.encoder, config.progress)
    task = config.task
    stages = Stages()
    with tracked_run(config, config.name) as logger:
        with stages("load"):
            dataset = load(config)
        logger.metrics(dataset.report.as_metrics())
        with stages("split"):
            data = data_key(dataset.graph)
            split, key, hit = configured_split(dataset, config, data)
        logger.metrics(split.sizes())
        logger.tags({"split": key, "split_cache": "hit" if hit else "miss", DATA_TAG: data})
        residual = Dataset(dataset.name, split.residual_graph(dataset.graph.vs["name"]), dataset.report)
        embeddings = train_unsupervised(residual, config, encoder, logger, stages)
        with stages("evaluate"):
            scores = link_prediction_scores(embeddings, split, config.seed, task.validation_fraction, task.classifier)
        metrics = {**scores, **stages.metrics()}
        logger.metrics(metrics)
        logger.embeddings(embeddings, residual.graph)  # the residual graph's vertices (read_back: renumbered)
    log.info(
        "link prediction on %s with %s: AUC %.4f (validation %.4f)",
        dataset.name,
        config.encoder.name,
        scores["auc"],
        scores["val_auc"],
    )
    return metrics
