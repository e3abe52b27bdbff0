"""Pipelines: each composes dataset → encoder → trainer → evaluator → tracker for one paper experiment.

This is the only package that sees all the boxes; each box below it knows only its own job. A pipeline
registers itself under its `task.name`, with the checks it needs beyond the schema (`check_before`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

import torch
from omegaconf import DictConfig, OmegaConf

from igel_exp import schema
from igel_exp.data import DataContext, check_dataset, check_files, resolve_data_root
from igel_exp.errors import BudgetError, ConfigError, IgelError, first_line
from igel_exp.protocol import check_protocol
from igel_exp.tracking import artifact_bars
from igel_exp.training import BUCKETS_NEED_UNIFORM_NOISE, resolve_device, seed_everything, set_threads

Pipeline = Callable[[DictConfig], dict[str, float]]
Check = Callable[[DictConfig], None]
PIPELINES: dict[str, Pipeline] = {}
CHECKS: dict[str, list[Check]] = {}


def pipeline(name: str) -> Callable[[Pipeline], Pipeline]:
    def decorate(function: Pipeline) -> Pipeline:
        PIPELINES[name] = function
        return function

    return decorate


def check_before(*names: str) -> Callable[[Check], Check]:
    """Register a check of the whole config that the pipelines `names` need before their run starts; it raises
    ConfigError (or DataError) naming the keys."""

    def decorate(function: Check) -> Check:
        for name in names:
            CHECKS.setdefault(name, []).append(function)
        return function

    return decorate


def check(config: DictConfig, given: Iterable[str] = ()) -> DictConfig:
    """Everything that can be checked before an MLflow run starts, then the config as the pipelines read it.

    The schema's ranges and keys (igel_exp.schema; `given`: the keys set on the command line), then what needs the
    dataset's name, a user's file or this machine: the dataset is known and its given files readable, the device
    exists, the task's own checks. Named datasets are fetched inside the run: a missing one is the run's recorded
    error, which igel-report shows.
    """
    schema.check(config, given)
    config = schema.plain(config)
    name = config.task.name
    if name not in PIPELINES:
        raise ConfigError(f"task.name={name!r} is unknown; valid tasks: {', '.join(sorted(PIPELINES))}")
    check_protocol(config)  # a protocol without switches for this experiment is refused
    check_dataset(config.dataset, data_context(config))
    resolve_device(config.trainer.device)
    for function in CHECKS.get(name, []):
        function(config)
    return config


def check_data_files(config: DictConfig) -> None:
    """That the files of the (checked) config's dataset are at hand (data.check_files): what `igel-run -m` asks of every
    job before its first, so that a dataset missing from the data root stops the sweep before its first run, not after
    the runs on the others. A single run fetches inside its run (check)."""
    check_files(config.dataset, data_context(config))


def data_context(config: DictConfig) -> DataContext:
    return DataContext(resolve_data_root(config.data.root), bool(config.data.download), int(config.seed))


def run(config: DictConfig, given: Iterable[str] = ()) -> dict[str, float]:
    """Check the config (`given`: the keys set on the command line), then run the pipeline selected by `task.name`;
    returns its final metrics."""
    config = check(config, given)
    seed_everything(config.seed, config.trainer.get("deterministic", True))
    set_threads(config.get("threads"))
    try:
        with artifact_bars(config.progress):  # MLflow draws bars of its own as a run downloads reused embeddings
            return PIPELINES[config.task.name](config)
    except (MemoryError, RuntimeError) as error:  # torch's CPU allocator raises RuntimeError, CUDA's a subclass
        asked = None if isinstance(error, IgelError) else out_of_memory(error)  # a BudgetError is already one line
        if asked is None:
            raise
        keys = ", ".join(key for key in MEMORY_KEYS if OmegaConf.select(config, key) is not None)
        raise BudgetError(f"out of memory ({asked}): a smaller {keys} or graph needs less") from None


# the settings that memory grows with, named by an out-of-memory error where the run has them: IGEL's W has a row per
# (distance, degree) column, (α + 1)(δmax + 1); an epoch's walk starts are walks_per_node × |V|, its walks that times
# walk_length
MEMORY_KEYS = (
    "trainer.dim",
    "encoder.distance",
    "trainer.walks_per_node",
    "trainer.walk_length",
    "trainer.batch_size",
    "trainer.negatives",
)


def out_of_memory(error: BaseException) -> str | None:
    """What an allocation that failed asked for (`29.6 GB`, or its error's first line); None for any other error."""
    text = first_line(error)
    asked = re.search(r"tried to allocate (\d+) bytes", text)  # torch's CPU allocator
    if asked:
        return f"{int(asked.group(1)) / 1e9:,.1f} GB could not be allocated"
    if isinstance(error, MemoryError | torch.OutOfMemoryError) or "out of memory" in text.lower():
        return text
    return None


@check_before("clustering", "link_prediction", "scalability", "sister_cities")
def _skipgram_trainer(config: DictConfig) -> None:
    trainer = config.trainer
    if trainer.objective != "skipgram":
        raise ConfigError(f"task={config.task.name} trains skip-gram embeddings: it needs trainer=skipgram")
    if trainer.batching == "buckets" and trainer.noise != "uniform":  # before the run, not in it (SkipGramTrainer)
        raise ConfigError(BUCKETS_NEED_UNIFORM_NOISE)
    walks = (trainer.walks_per_node, config.encoder.get("return_p", 1.0), config.encoder.get("inout_q", 1.0))
    if trainer.get("walk_stream") is not None and walks != (1, 1.0, 1.0):
        raise ConfigError(
            f"trainer.walk_stream={trainer.walk_stream} replays the authors' walks, one uniform walk per node an epoch:"
            f" it needs trainer.walks_per_node=1 and uniform steps (got {trainer.walks_per_node}, encoder.return_p="
            f"{walks[1]:g}, encoder.inout_q={walks[2]:g}); or trainer.walk_stream=null"
        )
    if trainer.precision != "float32" and config.encoder.name != "igel":
        raise ConfigError(
            f"trainer.precision={trainer.precision} applies to IGEL's products with W: encoder={config.encoder.name}"
            " trains free embeddings, in float32"
        )


@check_before("clustering", "link_prediction", "node_classification", "sister_cities")
def _encodes_structure(config: DictConfig) -> None:
    """IGEL at α = 0 describes every node alike: its 0-hop ego graph is the node alone, of degree 0. Only the
    scalability runs (which time it) and classifiers without IGEL's input (experiment=ppi_features) may have it."""
    encoder = config.encoder
    if encoder.name != "igel" or not config.task.get("use_igel", True):
        return
    for key in ("distance", "encoded_distance"):  # encoded_distance, where set, is the α the features have
        if encoder.get(key) == 0:
            raise ConfigError(
                f"encoder.{key}=0 encodes every node alike (its 0-hop ego graph is the node alone): use α ≥ 1"
            )


@check_before("clustering")
def _k_range(config: DictConfig) -> None:
    if config.task.k_min > config.task.k_max:
        raise ConfigError(f"task.k_min={config.task.k_min} is above task.k_max={config.task.k_max}")


# the pipelines register themselves on import
from igel_exp.pipelines import (  # noqa: E402, F401
    clustering,
    link_prediction,
    node_classification,
    scalability,
    sister_cities,
    transfer,
)
