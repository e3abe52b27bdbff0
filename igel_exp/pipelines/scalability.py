"""Paper §4.4: wall time and peak memory of every stage of unsupervised IGEL, on generated graphs.

Stages: generate (the Erdős–Rényi graph; `load` for any other dataset), encode, walks (drawn during
training, each chunk while the one before trains: the time training waited for them, taken out of train's),
train, and total (the whole run, embedding included, but for plan: the memory estimate, which is the harness's,
not IGEL's).
Before the graph is generated, and again before it is encoded, each stage's peak resident memory is
estimated; a run whose estimate is over `task.memory_budget_gib` stops there, and a watchdog stops one
that gets past it anyway (igel_exp.memory).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import igraph as ig
import numpy as np
from omegaconf import DictConfig

from igel_exp.data.registry import erdos_renyi_size
from igel_exp.encoding import grown_chunk
from igel_exp.errors import ConfigError
from igel_exp.memory import MIB, MemoryBudget, rss_mib
from igel_exp.models import IGELEmbedding
from igel_exp.pipelines import pipeline
from igel_exp.pipelines.common import Stages, build_encoder, load, train_unsupervised
from igel_exp.pipelines.isolation import in_child, note_run_id, run_isolated
from igel_exp.tracking import tracked_run
from igel_exp.walks import WALKS_PER_CHUNK

log = logging.getLogger(__name__)

BUDGET_KEY = "task.memory_budget_gib"

# Bytes per item of the memory estimates: growth of the resident set measured on Erdős–Rényi graphs of
# 2^16 to 2^20 nodes, average degree 8, rounded up. They are estimates, not bounds: the watchdog is the bound.
_GENERATED_PER_EDGE = 48  # igraph's edge and index vectors, and G(n, m)'s sampling buffers
_GENERATED_PER_NODE = 96  # index vectors and the string name of every vertex
_EDGE_LIST_PER_EDGE = 192  # graph.get_edgelist(): a Python tuple per edge, then the int64 and CSR copies
_BALL_ENTRY = 192  # encoder work per (source, ego-graph node) of a chunk in flight: products, masks, fields
_FEATURE_NONZERO = 48  # int64 counts, float32 features, their stacked and normalised copies
_MODEL_NONZERO = 40  # a sparse embedding's buffers: X and its transpose (int64 indices, float32 values), their copies
_WALK_STEP = 32  # a chunk of walks being drawn (int64, with the step's temporaries) and the one in training
_BATCH_VALUE = 48  # forward and backward tensors of a batch, per (pair, dimension)


@dataclass(frozen=True)
class MemoryPlan:
    """Estimated peak resident memory (MiB, the process's base included) of the stages to come."""

    encode: float
    train: float
    ball: float  # mean ego-graph size of the sampled nodes
    features_per_node: float  # mean nonzero IGEL features of the sampled nodes

    def as_metrics(self) -> dict[str, float]:
        return {
            "estimate_encode_mib": self.encode,
            "estimate_train_mib": self.train,
            "estimate_ball": self.ball,
            "estimate_features_per_node": self.features_per_node,
        }


def generate_estimate_mib(nodes: int, edges: int) -> float:
    """Estimated growth of the resident set (MiB) while a G(n, m) graph is generated."""
    return (_GENERATED_PER_EDGE * edges + _GENERATED_PER_NODE * nodes) / MIB


def ego_profile(graph: ig.Graph, distance: int, max_degree: int, samples: int, seed: int) -> tuple[float, float]:
    """(mean ego-graph size, mean distinct (distance, degree) pairs) of `samples` random nodes, exact for them."""
    n = graph.vcount()
    if n == 0 or samples < 1:
        return 0.0, 0.0
    nodes = np.random.default_rng(seed).choice(n, size=min(samples, n), replace=False)
    sizes, pairs = [], []
    for node in nodes.tolist():
        ball = sorted(graph.neighborhood(node, order=distance))
        ego = graph.induced_subgraph(ball)  # vertices keep their relative order
        hops = ego.distances(source=ball.index(node))[0]
        degrees = np.minimum(ego.degree(), max_degree).tolist()
        sizes.append(len(ball))
        pairs.append(len(set(zip(hops, degrees, strict=True))))
    return float(np.mean(sizes)), float(np.mean(pairs))


def plan_memory(graph: ig.Graph, config: DictConfig, base_mib: float) -> MemoryPlan:
    """Peaks of encode and train from the graph's size, a sample of its ego graphs and the settings that bound
    each stage's memory: the encoder's chunk size and threads, the walks drawn per chunk, the batch size."""
    n, m = graph.vcount(), graph.ecount()
    trainer, encoder = config.trainer, config.encoder
    edge_list = _EDGE_LIST_PER_EDGE * m  # the encoder's adjacency and the walks' CSR graph are built from it
    if encoder.name == "igel":
        max_degree = int(max(graph.degree(), default=0))
        ball, per_node = ego_profile(graph, encoder.distance, max_degree, config.task.memory_samples, config.seed)
        blocks = 3 if encoder.relative_degrees else 1
        nonzeros = blocks * per_node * n
        chunk = grown_chunk(encoder.chunk_size, n, int(encoder.chunk_size * ball))  # balls that do not overlap
        in_flight = _BALL_ENTRY * min(chunk, n) * ball * len(os.sched_getaffinity(0))  # a chunk a thread
        encode = base_mib + (edge_list + in_flight + _FEATURE_NONZERO * nonzeros) / MIB
        width = blocks * (encoder.distance + 1) * (max_degree + 1)  # ℓ, the features
        weights = width * trainer.dim * 4 * 4  # W, grad, Adam
        dense = IGELEmbedding.keeps_dense(n, width, nonzeros)  # then X is held as float32 |V| × ℓ
        # sparse: an upper bound, as the columns IGELEmbedding keeps dense beside the CSR take less than sparse
        model = (4 * n * width if dense else _MODEL_NONZERO * nonzeros) + 8 * n + weights
        held = 12 * nonzeros  # the features, as scipy keeps them
    else:
        ball = per_node = 0.0
        encode = base_mib
        model = n * trainer.dim * 4 * 4
        held = 0
    walks = _WALK_STEP * min(n * trainer.walks_per_node, WALKS_PER_CHUNK) * trainer.walk_length
    batch = _BATCH_VALUE * trainer.batch_size * trainer.dim
    embeddings = 4 * n * trainer.dim
    train = base_mib + (held + model + edge_list + walks + batch + embeddings) / MIB
    return MemoryPlan(encode=encode, train=train, ball=ball, features_per_node=per_node)


@pipeline("scalability")
def scalability(config: DictConfig) -> dict[str, float]:
    """Paper §4.4: time and peak memory of generate, encode, walks and train on one graph, logged to MLflow.

    With `task.isolate` the run happens in a fresh process (igel_exp.pipelines.isolation)."""
    build_encoder(config.encoder, config.progress)  # bad settings fail here, before any run or process
    if config.dataset.name == "erdos_renyi":
        erdos_renyi_size(config.dataset)
    _budget_mib(config.task.memory_budget_gib)
    if config.task.isolate and not in_child():
        return run_isolated(config, f"set {BUDGET_KEY} below the memory this machine has free")
    return _measure(config)


def _measure(config: DictConfig) -> dict[str, float]:
    encoder = build_encoder(config.encoder, config.progress)
    size = erdos_renyi_size(config.dataset) if config.dataset.name == "erdos_renyi" else None
    budget = MemoryBudget(_budget_mib(config.task.memory_budget_gib), BUDGET_KEY)
    stages = Stages(budget)
    with tracked_run(config, config.name) as logger:
        note_run_id(logger.run_id)
        logger.tags({"memory_peaks": "per stage" if stages.exact_peaks else "process so far", "pid": os.getpid()})
        logger.metrics({"rss_start_mib": rss_mib()})
        first = "generate" if size is not None else "load"
        if size is not None:
            budget.check(first, rss_mib() + generate_estimate_mib(*size), "lower dataset.num_nodes")
        with budget.watch():
            with stages("total"), stages(first):
                dataset = load(config)
            logger.metrics(dataset.report.as_metrics())
            # the memory plan is igel-exp's guard, not IGEL's work: timed on its own (time_plan_s), out of the total,
            # which its sample of α-balls would inflate as the degree and α grow (3 s of 40 at degree 32, α = 3)
            with stages("plan"):
                plan = plan_memory(dataset.graph, config, rss_mib())
            logger.metrics(plan.as_metrics())
            budget.check("encode", plan.encode, "lower encoder.chunk_size, encoder.distance or the graph's size")
            budget.check("train", plan.train, "lower trainer.batch_size or the graph's size")
            with stages("total"):
                train_unsupervised(dataset, config, encoder, logger, stages)
        metrics = stages.metrics()
        if budget.limit_mib is not None:  # the watchdog's own view: its samples, every 50 ms
            metrics["memory_watched_peak_mib"] = budget.peak_seen_mib
        logger.metrics(metrics)
    log.info(
        "scalability: |V|=%d, α=%s: %s; peak %.0f MiB",
        dataset.graph.vcount(),
        config.encoder.get("distance"),
        # in the order the stages ended, the total last (it is timed in two parts, around the plan)
        ", ".join(f"{stage} {s:.1f}s" for stage, s in sorted(stages.seconds.items(), key=lambda kv: kv[0] == "total")),
        metrics["peak_rss_mib"],
    )
    return metrics


def _budget_mib(gib: float | None) -> float | None:
    if gib is None:
        return None
    if isinstance(gib, bool) or not isinstance(gib, (int, float)) or gib <= 0:
        raise ConfigError(f"{BUDGET_KEY} must be a positive number of GiB or null, got {gib!r}")
    return float(gib) * 1024
