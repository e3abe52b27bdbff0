"""Steps shared by the pipelines: stage timing, loading, encoding and unsupervised training."""

from __future__ import annotations

import logging
import resource
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import numpy as np
from omegaconf import DictConfig

from igel_exp.data import DataContext, Dataset, load_dataset, resolve_data_root
from igel_exp.encoding import IGELEncoder
from igel_exp.errors import ConfigError
from igel_exp.models import FreeEmbedding, IGELEmbedding, embed_all
from igel_exp.tracking import RunLogger
from igel_exp.training import SkipGramTrainer, resolve_device
from igel_exp.walks import CSRGraph, epoch_pairs

log = logging.getLogger(__name__)


class Stages:
    """Wall time per stage, logged as time_<stage>_s metrics."""

    def __init__(self):
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start

    def timed(self, name: str, items: Iterable) -> Iterator:
        """Yield from `items`, charging the time spent producing them to `name`."""
        iterator = iter(items)
        while True:
            with self(name):
                item = next(iterator, StopIteration)
            if item is StopIteration:
                return
            yield item

    def metrics(self) -> dict[str, float]:
        peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        return {**{f"time_{name}_s": value for name, value in self.seconds.items()}, "peak_rss_mib": peak_mib}


def build_encoder(config: DictConfig, progress: bool) -> IGELEncoder | None:
    """The IGEL encoder configured by `encoder`, None for the transductive baselines."""
    if config.name != "igel":
        return None
    return IGELEncoder(
        distance=config.distance,
        transform=config.transform,
        normalise=config.normalise,
        relative_degrees=config.relative_degrees,
        chunk_size=config.chunk_size,
        progress=progress,
    )


def load(config: DictConfig) -> Dataset:
    context = DataContext(resolve_data_root(config.data.root), bool(config.data.download), int(config.seed))
    return load_dataset(config.dataset, context)


def train_unsupervised(
    dataset: Dataset, config: DictConfig, encoder: IGELEncoder | None, logger: RunLogger, stages: Stages
) -> np.ndarray:
    """Skip-gram embeddings (|V| × d) of the dataset's graph: IGEL's e_n = x_nᵀ W, or free vectors."""
    trainer_config = config.trainer
    device = resolve_device(trainer_config.device)
    graph = dataset.graph
    if encoder is None:
        model = FreeEmbedding(graph.vcount(), trainer_config.dim)
    else:
        with stages("encode"):
            features = encoder.fit_transform(graph)
        logger.metrics(
            {"features": encoder.n_features, "features_nnz": features.nnz, "max_degree": encoder.max_degree_}
        )
        model = IGELEmbedding(features, trainer_config.dim)
    log.info("training on %s", device)
    logger.tags({"device": device})
    neighbours = CSRGraph.from_igraph(graph)
    trainer = SkipGramTrainer(
        epochs=trainer_config.epochs,
        batch_size=trainer_config.batch_size,
        lr=trainer_config.lr,
        negatives=trainer_config.negatives,
        device=device,
        seed=config.seed,
        noise=_noise(neighbours, trainer_config.noise),
        progress=config.progress,
    )

    def pairs(rng: np.random.Generator):
        walk_pairs = epoch_pairs(
            neighbours,
            trainer_config.walks_per_node,
            trainer_config.walk_length,
            trainer_config.window,
            rng,
            return_p=config.encoder.get("return_p", 1.0),
            inout_q=config.encoder.get("inout_q", 1.0),
        )
        return stages.timed("walks", walk_pairs)

    with stages("train"):
        trainer.fit(model, pairs, on_epoch=lambda epoch, values: logger.metrics(values, step=epoch))
    stages.seconds["train"] -= stages.seconds.get("walks", 0.0)  # walks are drawn lazily inside training
    return embed_all(model, device)


def _noise(graph: CSRGraph, kind: str) -> np.ndarray | None:
    """Noise distribution of the negatives: uniform (the authors') or degree^0.75 (word2vec's unigram^0.75)."""
    if kind == "uniform":
        return None
    if kind == "degree":
        return graph.degree.astype(np.float64) ** 0.75
    raise ConfigError(f"trainer.noise={kind!r} is not one of uniform, degree")
