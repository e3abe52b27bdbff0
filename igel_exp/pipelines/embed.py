"""igel-embed: a graph embedded by the frozen IGEL model of an earlier run, logged as a run of experiment `embed`.

No training: the model (igel_exp.saved_model) encodes the graph with its own α and δmax, and one sparse product
gives the embeddings. The model is loaded before the run starts, so a source_run without a model leaves no run.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable

import numpy as np
import scipy.sparse as sp
from omegaconf import DictConfig

from igel_exp import schema
from igel_exp.data import check_dataset, check_files
from igel_exp.data.registry import SEEDED
from igel_exp.errors import ModelError, same_file
from igel_exp.identity import SOURCE_RUN_TAG
from igel_exp.pipelines import data_context
from igel_exp.pipelines.common import Stages, load
from igel_exp.saved_model import IGELModel, model_folder
from igel_exp.tracking import run_name_of, tracked_run
from igel_exp.training import set_threads

log = logging.getLogger(__name__)


def check(config: DictConfig, given: Iterable[str] = ()) -> DictConfig:
    """What can be checked before the model is loaded and the run starts, as igel-run's pipelines.check does (the
    keys' types and ranges, the command line's keys `given` against the options picked), and that the dataset's files
    are at hand (a named dataset's too: no run is recorded for a missing one); then the config as embed reads it."""
    schema.check(config, given)
    config = schema.plain(config)
    context = data_context(config)
    check_dataset(config.dataset, context)
    check_files(config.dataset, context)
    return config


def check_source(config: DictConfig) -> None:
    """That the (checked) config's source_run has a model that embeds: what `igel-embed -m` asks of every job before its
    first (the sweep check's line names the job, hence source_run)."""
    IGELModel.load(str(config.source_run), config.tracking.uri, progress=False).check_embeds()


def embed(config: DictConfig, given: Iterable[str] = ()) -> dict[str, float]:
    """Embed `dataset` with the model of `source_run`; logs embeddings.npy, nodes.csv and the clamped nodes. The
    config is checked first (check): a bad one makes no run."""
    config = check(config, given)
    set_threads(config.get("threads"))
    stages = Stages()
    with stages("load_model"):
        model = source_model(str(config.source_run), config.tracking.uri, config.progress)
    trained_with = _read_otherwise(model, config)
    if trained_with:
        log.warning(
            "the model's run read dataset=%s with %s: add that to embed the graph it was trained on",
            config.dataset.name,
            " ".join(trained_with),
        )
    folder = model_folder(str(config.source_run))  # where it is, whichever folder a later command runs in
    source = str(config.source_run) if folder is None else str(folder.absolute())
    with tracked_run(config, config.name, run_name_of(config, model.alpha)) as logger:
        logger.tags({SOURCE_RUN_TAG: source})
        with stages("load"):
            dataset = load(config)
        logger.metrics(dataset.report.as_metrics())
        graph = dataset.graph
        with stages("encode"):
            features = model.encoder.transform(graph)
        with stages("embed"):
            embeddings = model.embed_features(features)
        metrics = {**inductive_metrics(model, graph, features), **stages.metrics()}
        logger.metrics(metrics)
        logger.embeddings(embeddings, graph, degree=np.asarray(graph.degree(), dtype=np.int64))
    if metrics["unseen_nodes"]:  # rows of zeros, which no later step tells from an embedding
        log.warning(
            "%d nodes are embedded as the zero vector: none of their (distance, degree) structures was in the model's"
            " training graph (an isolated node, where that graph had none); the metric unseen_nodes counts them",
            metrics["unseen_nodes"],
        )
    log.info(
        "embedded %s (%d nodes) with the model of %s: %d nodes above δmax=%d clamped; encode %.2fs, embed %.2fs;"
        " embeddings.npy and nodes.csv in run %s, at %s",
        dataset.name,
        graph.vcount(),
        source,
        metrics["clamped_nodes"],
        model.max_degree,
        stages.seconds["encode"],
        stages.seconds["embed"],
        logger.run_id,
        logger.run.info.artifact_uri,  # where to read them (README, "Train once, embed anything")
    )
    return metrics


# the keys that name a dataset's files (an edge list's or a GraphSAGE folder's path, its prefix): other files are
# another graph, which a model embeds on purpose (IGEL is inductive), so no setting of its reading is the model's
FILES = ("path", "prefix")
# the dataset's files, and what a dataset reads beside its graph (PPI's node features and labels): no setting of the
# graph's reading, which is what a model's run and an embedding must share
NOT_THE_GRAPH = (*FILES, "features", "labels")


def _read_otherwise(model: IGELModel, config: DictConfig) -> list[str]:
    """The settings (but the file) with which the model's run read the dataset this run embeds, as overrides, where they
    differ: a protocol=authors Sister Cities model embedded dataset=sister_cities without its parallel edges, unsaid;
    and the seed of a graph that the seed draws (miserables_cloned's bridge: a seed=1 run's graph, re-embedded at
    igel-embed's seed=0, was another graph). None where this run embeds another graph than the model's run's: another
    dataset, or another file (dataset=edgelist dataset.path=OTHER)."""
    dataset = config.dataset
    trained = model.config.get("dataset") if isinstance(model.config, dict) else None
    if not isinstance(trained, dict) or not _same_files(trained, dataset):
        return []
    differ = [key for key in dataset if key not in NOT_THE_GRAPH and trained.get(key, dataset[key]) != dataset[key]]
    overrides = [f"dataset.{key}={json.dumps(trained[key])}" for key in differ]
    seed = model.config.get("seed", config.seed)
    if dataset.name in SEEDED and seed != config.seed:
        overrides.append(f"seed={json.dumps(seed)}")
    return overrides


def _same_files(trained: dict, dataset: DictConfig) -> bool:
    """Whether the model's run read the dataset this run embeds from the same files: the same option, and each key of
    FILES the same (a path the same file, _same_path)."""
    if trained.get("name") != dataset.name:
        return False
    for key in FILES:
        if key not in dataset:
            continue
        given, was = dataset[key], trained.get(key)
        if not (_same_path(was, given) if key == "path" else was == given):
            return False
    return True


def _same_path(trained: object, given: str) -> bool:
    """Whether the model's run's dataset.path and this run's name one file (errors.same_file). A relative path of the
    model's run (its config keeps the path as given) is read from the folder igel-embed runs in, as its own is: where
    the model's run ran is not recorded."""
    # expanded as the datasets read them
    return isinstance(trained, str) and same_file(os.path.expanduser(trained), os.path.expanduser(given))


def source_model(source: str, uri: str | None, progress: bool = True) -> IGELModel:
    """IGELModel.load, its one-line error naming the config key."""
    try:
        model = IGELModel.load(source, uri, progress)
        model.check_embeds()  # before the run starts
        return model
    except ModelError as error:
        raise ModelError(f"source_run={source}: {error}") from None


def inductive_metrics(model: IGELModel, graph, features: sp.csr_matrix) -> dict[str, float]:
    """How far a graph strays from the model's training graph: nodes above δmax (counted at δmax), the share of
    its feature entries that training never saw, and the nodes all of whose entries it never saw (zero vectors)."""
    return {
        "max_degree": model.max_degree,
        "graph_max_degree": int(max(graph.degree(), default=0)),
        "clamped_nodes": model.clamped_nodes(graph),
        "unseen_structure_share": model.unseen_share(features),
        "unseen_nodes": model.unseen_nodes(features),
    }
