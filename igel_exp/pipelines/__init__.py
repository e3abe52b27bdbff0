"""Pipelines: each composes dataset → encoder → trainer → evaluator → tracker for one paper experiment.

This is the only package that sees all the boxes; each box below it knows only its own job. A pipeline
registers itself under its `task.name`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from omegaconf import DictConfig

from igel_exp.errors import ConfigError
from igel_exp.protocol import check_protocol
from igel_exp.training import seed_everything

Pipeline = Callable[[DictConfig], dict[str, float]]
PIPELINES: dict[str, Pipeline] = {}


def pipeline(name: str) -> Callable[[Pipeline], Pipeline]:
    def decorate(function: Pipeline) -> Pipeline:
        PIPELINES[name] = function
        return function

    return decorate


def run(config: DictConfig) -> dict[str, float]:
    """Run the pipeline selected by `task.name`; returns its final metrics."""
    name = config.task.name
    if name not in PIPELINES:
        raise ConfigError(f"task.name={name!r} is unknown; valid tasks: {', '.join(sorted(PIPELINES))}")
    check_protocol(config)  # before any MLflow run: a protocol without switches here is refused
    seed_everything(config.seed, config.trainer.get("deterministic", True))
    if config.get("threads"):
        torch.set_num_threads(int(config.threads))
    return PIPELINES[name](config)


# the pipelines register themselves on import
from igel_exp.pipelines import (  # noqa: E402, F401
    clustering,
    link_prediction,
    node_classification,
    scalability,
    sister_cities,
)
