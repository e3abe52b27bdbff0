"""Steps shared by the pipelines: stage timing, loading, encoding and unsupervised training."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import numpy as np
import torch
from omegaconf import DictConfig

from igel_exp.data import Dataset, load_dataset
from igel_exp.encoding import IGELEncoder
from igel_exp.errors import ConfigError
from igel_exp.memory import MemoryBudget, PeakMeter
from igel_exp.models import FreeEmbedding, IGELEmbedding, distance_scaled_weight, embed_all, normal_weight
from igel_exp.pipelines import data_context
from igel_exp.saved_model import IGELModel
from igel_exp.tracking import HARDWARE_TAG, RunLogger
from igel_exp.training import (
    MIN_STEPS,
    SkipGramTrainer,
    batch_scale_for,
    compiles,
    emulated_bfloat16,
    hardware,
    resolve_device,
    walks_per_batch,
)
from igel_exp.walks import AuthorsWalker, CSRGraph, DeviceWalker, epoch_walks

log = logging.getLogger(__name__)


class Stages:
    """Wall time, CPU time and peak resident memory per stage: time_<stage>_s, time_<stage>_cpu_s, peak_<stage>_mib.

    Stages may nest (walks are drawn inside train) and be entered many times (walks, once per chunk);
    a stage's peak is the highest resident set of the process while it ran, the memory held from
    earlier stages included. The kernel's high-water mark is reset at every stage boundary (see
    igel_exp.memory; where it cannot be, a stage's peak is the process's peak so far) and folded into
    every open stage, so an enclosing stage keeps the peaks of the stages it contains. `peak_rss_mib`
    is the process's peak from the creation of the Stages on. With a `budget`, its messages name the stage
    in progress.
    """

    def __init__(self, budget: MemoryBudget | None = None):
        self.seconds: dict[str, float] = {}
        # CPU time summed over the process's threads: beside the wall time, it shows a stage that waited for CPUs
        self.cpu_seconds: dict[str, float] = {}
        self.peaks_mib: dict[str, float] = {}
        self.meter = PeakMeter()
        self.budget = budget
        self._open: list[str] = []
        # A process that ran earlier jobs (a reused launcher worker) starts from its resident set now;
        # without resets, from its peak so far.
        self.meter.reset()
        self._process_peak_mib = self.meter.peak_mib()

    @property
    def exact_peaks(self) -> bool:
        """Whether per-stage peaks are their own (resettable high-water mark) or the process's so far."""
        return self.meter.exact

    def _fold(self) -> None:
        """Charge the peak since the last reset to every open stage, then restart the high-water mark."""
        peak = self.meter.peak_mib()
        self._process_peak_mib = max(self._process_peak_mib, peak)
        for name in self._open:
            self.peaks_mib[name] = max(self.peaks_mib.get(name, 0.0), peak)
        self.meter.reset()

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        if self.budget is not None:
            self.budget.raise_if_exceeded()
            outer, self.budget.stage = self.budget.stage, name
        self._fold()
        self._open.append(name)
        start, start_cpu = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start
            self.cpu_seconds[name] = self.cpu_seconds.get(name, 0.0) + time.process_time() - start_cpu
            self._fold()
            self._open.pop()
            if self.budget is not None:
                self.budget.stage = outer

    def timed(self, name: str, items: Iterable) -> Iterator:
        """Yield from `items`, charging the time spent producing them to `name`."""
        iterator = iter(items)
        while True:
            with self(name):
                item = next(iterator, StopIteration)
            if item is StopIteration:
                return
            yield item

    def exclude(self, outer: str, inner: str) -> None:
        """Take the time of `inner`, which ran inside `outer`, out of `outer`'s (its peak stays)."""
        for record in (self.seconds, self.cpu_seconds):
            record[outer] = record.get(outer, 0.0) - record.get(inner, 0.0)

    def metrics(self) -> dict[str, float]:
        self._fold()
        return {
            **{f"time_{name}_s": value for name, value in self.seconds.items()},
            **{f"time_{name}_cpu_s": value for name, value in self.cpu_seconds.items()},
            **{f"peak_{name}_mib": value for name, value in self.peaks_mib.items()},
            "peak_rss_mib": self._process_peak_mib,
        }


def build_encoder(config: DictConfig, progress: bool) -> IGELEncoder | None:
    """The IGEL encoder configured by `encoder`, None for the transductive baselines; it uses as many
    threads as torch (the `threads` config key)."""
    if config.name != "igel":
        return None
    encoded = config.get("encoded_distance")
    return IGELEncoder(
        distance=config.distance if encoded is None else encoded,
        transform=config.transform,
        normalise=config.normalise,
        relative_degrees=config.relative_degrees,
        chunk_size=config.chunk_size,
        n_jobs=torch.get_num_threads(),
        progress=progress,
    )


def method(encoder: DictConfig) -> str:
    """What made a run's embeddings, for its figures: `IGEL α=2`, `deepwalk`, `node2vec`."""
    return f"IGEL α={encoder.distance}" if encoder.name == "igel" else str(encoder.name)


def load(config: DictConfig) -> Dataset:
    return load_dataset(config.dataset, data_context(config))


def train_unsupervised(
    dataset: Dataset, config: DictConfig, encoder: IGELEncoder | None, logger: RunLogger, stages: Stages
) -> np.ndarray:
    """Skip-gram embeddings (|V| × d) of the dataset's graph: IGEL's e_n = x_nᵀ W, or free vectors. An IGEL run
    logs its model (igel_exp.saved_model) as the artifact folder `model/`."""
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
        model = IGELEmbedding(features, trainer_config.dim, trainer_config.precision)
        initialise_weight(model, config.encoder, encoder, config.seed)
    tag_device(logger, device, trainer_config.precision)
    neighbours = CSRGraph.from_igraph(graph)
    trainer = skipgram_trainer(trainer_config, neighbours, device, config.seed, config.progress)
    scale = trainer.batch_size // trainer_config.batch_size
    logger.metrics({"batch_scale_used": scale})

    stream = trainer_config.get("walk_stream")  # the authors' walks (pipelines._skipgram_trainer checks it applies)
    replayed = AuthorsWalker(neighbours, stream) if stream is not None else None
    # the graph goes to the device only where the device draws the walks
    walker = DeviceWalker(neighbours, device, config.seed) if device.type != "cpu" and replayed is None else None
    walk_settings = dict(
        walks_per_node=trainer_config.walks_per_node,
        walk_length=trainer_config.walk_length,
        return_p=config.encoder.get("return_p", 1.0),
        inout_q=config.encoder.get("inout_q", 1.0),
    )

    def walks(rng: np.random.Generator):
        if replayed:
            epoch = replayed.epoch(trainer_config.walk_length)
        elif walker:
            epoch = walker.epoch(**walk_settings)
        else:  # on the CPU numpy's walks, as every earlier version drew them (the same seed, the same run)
            epoch = epoch_walks(neighbours, rng=rng, **walk_settings)
        return stages.timed("walks", epoch)

    with stages("train"):
        trainer.fit(
            model,
            walks,
            on_epoch=lambda epoch, values: logger.metrics(values, step=epoch),
            walks_per_epoch=graph.vcount() * trainer_config.walks_per_node,
        )
    stages.exclude("train", "walks")  # the waits for walks, drawn during training (walks.drawn_ahead)
    logger.tags({f"fallback.{key}": why for key, why in trainer.fallbacks.items()})
    logger.metrics({"compiled": float(trainer.compiled and "trainer.compile" not in trainer.fallbacks)})  # as it ran
    if encoder is not None:
        IGELModel.trained(encoder, model, graph, dataset.name, config, trainer.affine).log(logger)
    return embed_all(model, device)


def tag_device(logger: RunLogger, device: torch.device, precision: str) -> None:
    """Tag the run with its device and the hardware it is (training.hardware: timings compare only on the same), and
    warn where trainer.precision=bfloat16 would run emulated there."""
    name = hardware(device)
    log.info("training on %s: %s", device, name)
    logger.tags({"device": device, HARDWARE_TAG: name})
    if precision == "bfloat16" and emulated_bfloat16(device):
        log.warning(
            "trainer.precision=bfloat16 on a CPU without bfloat16 kernels (%s): its products run emulated, some 17 "
            "times as long as float32's; trainer.precision=float32 is the faster here",
            name,
        )


def initialise_weight(model: IGELEmbedding, settings: DictConfig, encoder: IGELEncoder, seed: int) -> None:
    """encoder.weight_init: `normal` is the model's own; `distance_scaled` is the authors' W at encoder.distance's
    size and scale (models.distance_scaled_weight); rows of structures the graph lacks stay zero either way.

    The authors' W is drawn right after seeding torch with encoder.weight_seed (null: the run's seed), as their
    notebook seeded before building each model (nur-ag/IGEL notebooks/ClusteringExperiments.ipynb,
    train_igel_embeddings: set_seed(SEED)); the logit's scale and bias are torch's next two draws
    (trainer.logit_init=uniform). So with their seed, 1, both start where theirs did, whatever seed the negatives
    (and, without trainer.walk_stream, the walks) take. A normal W is drawn anew from encoder.weight_seed where one is
    set.
    """
    how, weight_seed = settings.get("weight_init", "normal"), settings.get("weight_seed")
    if how not in ("normal", "distance_scaled"):
        raise ConfigError(f"encoder.weight_init={how!r} is not one of normal, distance_scaled")
    if how == "normal" and weight_seed is None:
        return  # the model's own, drawn from the run's seed
    unseen = model.weight.abs().sum(dim=1) == 0  # IGELEmbedding zeroes the rows no node has
    torch.manual_seed(seed if weight_seed is None else weight_seed)
    rows, dim = model.weight.shape
    if how == "normal":
        weight = normal_weight(rows, dim)
    else:
        blocks = 3 if encoder.relative_degrees else 1
        weight = distance_scaled_weight(settings.distance, encoder.max_degree_, dim, encoder.distance, blocks=blocks)
    with torch.no_grad():
        model.weight.copy_(weight.to(model.weight))
        model.weight[unseen] = 0.0


def skipgram_trainer(
    settings: DictConfig, graph: CSRGraph, device: torch.device, seed: int, progress: bool, section: str = "trainer"
) -> SkipGramTrainer:
    """The skip-gram trainer a config section describes (`section`: `trainer`, or PPI's `trainer.pretrain`) on
    `graph`; a `batch_scale` above 1 is capped where the run would take too few steps (training.batch_scale_for), and
    `compile=auto` compiles the step where the run takes enough of them (training.compiles)."""

    per_batch = walks_per_batch(settings.batch_size, settings.walk_length, settings.window, settings.negatives)
    steps = settings.epochs * -(-graph.n_nodes * settings.walks_per_node // per_batch)  # at the authors' batches
    most = settings.get("batch_scale", 1)
    scale = batch_scale_for(most, steps)
    if scale < most:
        log.warning(
            "trainer.batch_scale=%d capped to %d: larger batches would leave the run fewer than %d Adam steps (%d at"
            " the authors' batches)", most, scale, MIN_STEPS, steps,
        )  # fmt: skip
    elif most > 1:
        log.info("trainer.batch_scale=%d: batches %d times larger (%d steps at the authors')", most, scale, steps)
    steps //= scale
    compiled = compiles(settings.get("compile", False), steps, device)
    if settings.get("compile") == "auto":
        log.info("trainer.compile=auto: the step %s compiled (%d steps)", "is" if compiled else "is not", steps)
    return SkipGramTrainer(
        epochs=settings.epochs,
        batch_size=settings.batch_size,
        lr=settings.lr,
        negatives=settings.negatives,
        window=settings.window,
        device=device,
        seed=seed,
        noise=noise_distribution(graph, settings.noise),
        logit_affine=settings.get("logit_affine", True),
        logit_init=settings.get("logit_init", "fixed"),
        progress=progress,
        batch_scale=scale,
        cuda_graphs=settings.get("cuda_graphs", True),
        batching=settings.get("batching", "walks"),
        compiled=compiled,
        section=section,
    )


def noise_distribution(graph: CSRGraph, kind: str) -> np.ndarray | None:
    """Noise distribution of the negatives: uniform (the authors') or degree^0.75 (word2vec's unigram^0.75)."""
    if kind == "uniform":
        return None
    if kind == "degree":
        return graph.degree.astype(np.float64) ** 0.75
    raise ConfigError(f"trainer.noise={kind!r} is not one of uniform, degree")
