"""Paper §4.3 (Table PPIResults): inductive multi-label node classification with supervised IGEL.

The data flow keeps the unseen graphs unseen: the encoder is fitted on the training split's graph (δmax from
it) and then encodes each split's graph with that δmax; the classifier trains on training nodes only, the
validation nodes pick the epoch (early stopping on micro-F1) and the test nodes are scored once, with the
restored best parameters. Model node ids are the splits stacked: training nodes, then validation, then test.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch
from omegaconf import DictConfig, OmegaConf

from igel_exp.data import Dataset
from igel_exp.data.ppi import SPLITS, NodeDataset
from igel_exp.encoding import IGELEncoder
from igel_exp.errors import ConfigError, DataError
from igel_exp.models import IGELEmbedding, NodeClassifier, predict_labels, restrict_to_seen
from igel_exp.pipelines import check_before, pipeline
from igel_exp.pipelines.common import Stages, build_encoder, load, skipgram_trainer, tag_device
from igel_exp.saved_model import IGELModel
from igel_exp.tasks.node_classification import micro_f1, multilabel_scores
from igel_exp.tracking import RunLogger, run_name_of, tracked_run
from igel_exp.training import SupervisedTrainer, resolve_device
from igel_exp.walks import CSRGraph, epoch_walks

log = logging.getLogger(__name__)

NODE_DATASETS = ("ppi", "graphsage")  # the datasets with node splits and labels (igel_exp.data.ppi)


@pipeline("node_classification")
def node_classification(config: DictConfig) -> dict[str, float]:
    """Train [IGEL ‖ features] → MLP on the training graphs, early-stop on validation, score the test graphs."""
    task, settings = config.task, config.trainer
    use_igel, use_features = bool(task.use_igel), bool(task.use_features)
    encoder = build_encoder(config.encoder, config.progress) if use_igel else None
    device = resolve_device(settings.device)
    stages = Stages()
    inputs = ["features"] if use_features else []
    name = run_name_of(config, *inputs, encoded=use_igel)  # ppi_features: its α = 0 unused
    with tracked_run(config, config.name, name) as logger:
        with stages("load"):
            dataset = _checked(load(config), use_features)
        logger.metrics({**dataset.report.as_metrics(), **_numbers(dataset.report.extra)})
        tag_device(logger, device, settings.precision)
        logger.tags({"dataset_layout": dataset.report.extra.get("layout", "")})
        vertices = np.concatenate([dataset.splits[name].vertices for name in SPLITS])
        bounds = np.cumsum([0] + [len(dataset.splits[name].vertices) for name in SPLITS])
        ranges = {name: np.arange(bounds[i], bounds[i + 1]) for i, name in enumerate(SPLITS)}
        labels = dataset.labels[vertices]
        features, scaling = None, None
        if use_features:
            features, scaling = _features(dataset.features[vertices], ranges["train"], task.standardise_features)

        structure = None
        if use_igel:
            encoded = _encode(encoder, dataset, logger, stages)
            layer = IGELEmbedding(sp.vstack(encoded, format="csr"), settings.dim, settings.precision)
            structure = restrict_to_seen(layer, encoded[0])
            if settings.pretrain.epochs > 0:
                _pretrain(structure, encoded[0], dataset.splits["train"].graph, config, device, logger, stages)
        model = NodeClassifier(
            structure,
            features,
            labels.shape[1],
            hidden=settings.hidden,
            depth=settings.depth,
            activation=settings.activation,
            dropout=settings.dropout,
            precision=settings.precision,
        )
        nodes = {name: torch.as_tensor(ids, device=device) for name, ids in ranges.items()}
        truth = {name: labels[ids].astype(bool) for name, ids in ranges.items()}
        trainer = SupervisedTrainer(
            epochs=settings.epochs,
            batch_size=settings.batch_size,
            lr=settings.lr,
            patience=settings.patience,
            device=device,
            seed=config.seed,
            weight_decay=settings.weight_decay,
            progress=config.progress,
        )
        log.info("training on %s: %d training nodes, %d labels", device, len(ranges["train"]), labels.shape[1])
        with stages("train"):
            result = trainer.fit(
                model,
                nodes["train"],
                labels[ranges["train"]],
                validate=lambda m: micro_f1(truth["valid"], predict_labels(m, nodes["valid"]).cpu().numpy()),
                score_name="valid_micro_f1_by_epoch",
                on_epoch=lambda epoch, values: logger.metrics(values, step=epoch),
            )
        with stages("evaluate"):
            scores = {}
            for name in SPLITS:
                predicted = predict_labels(model, nodes[name]).cpu().numpy()
                scores.update(
                    {f"{name}_{key}": value for key, value in multilabel_scores(truth[name], predicted).items()}
                )
        epoch_times = [values["epoch_time_s"] for values in result.history]
        metrics = {
            **scores,
            "best_epoch": result.best_epoch,
            "epochs_run": result.epochs,
            "stopped_early": float(result.stopped_early),
            "epoch_time_mean_s": float(np.mean(epoch_times)),
            **stages.metrics(),
        }
        logger.metrics(metrics)
        _log_model(model, encoder, scaling, config, logger)
        if structure is not None:  # the IGEL layer alone, as every IGEL run logs it: embeds any graph
            train = dataset.splits["train"].graph
            IGELModel.trained(encoder, structure, train, f"{dataset.name} (train)", config).log(logger)
    log.info(
        "node classification: test micro-F1 %.4f (precision %.4f, recall %.4f), best epoch %d of %d",
        metrics["test_micro_f1"],
        metrics["test_precision"],
        metrics["test_recall"],
        result.best_epoch,
        result.epochs,
    )
    return metrics


@check_before("node_classification")
def _inputs(config: DictConfig) -> None:
    """The classifier has an input, the supervised trainer, an inductive encoder and a dataset with node splits."""
    task = config.task
    if not (task.use_igel or task.use_features):
        raise ConfigError("task.use_igel and task.use_features are both false: the classifier would have no input")
    if config.trainer.objective != "supervised":
        raise ConfigError(
            f"task=node_classification needs trainer=supervised (trainer.objective={config.trainer.objective})"
        )
    if task.use_igel and config.encoder.name != "igel":
        raise ConfigError(
            f"encoder={config.encoder.name} embeds only the nodes it was trained on; task.use_igel needs encoder=igel"
        )
    epochs = config.trainer.get("pretrain", {}).get("epochs", 0)
    if epochs and not task.use_igel:  # it ran no pre-training, yet logged the setting as the run's
        raise ConfigError(f"trainer.pretrain.epochs={epochs} pre-trains IGEL's W, which task.use_igel=false leaves out")
    if config.dataset.name not in NODE_DATASETS:
        raise ConfigError(
            f"dataset={config.dataset.name} has no train/valid/test node splits and labels;"
            " node classification needs dataset=ppi or dataset=graphsage"
        )


def _checked(dataset: Dataset, use_features: bool) -> NodeDataset:
    """The dataset, if it has what node classification needs; otherwise a one-line error naming the key."""
    if not isinstance(dataset, NodeDataset):
        raise ConfigError(
            f"dataset={dataset.name} has no train/valid/test node splits and labels;"
            " node classification needs dataset=ppi or dataset=graphsage"
        )
    if dataset.labels is None:
        raise ConfigError("node classification needs the labels: set dataset.labels=true")
    if use_features and dataset.features is None:
        raise ConfigError("task.use_features=true needs the node features: set dataset.features=true")
    for name in SPLITS:
        if len(dataset.splits[name].vertices) == 0:
            raise DataError(f"{dataset.report.source}: the {name} split has no nodes")
    return dataset


def _numbers(values: dict) -> dict[str, float]:
    return {key: float(value) for key, value in values.items() if isinstance(value, (int, float))}


def _features(matrix: np.ndarray, train: np.ndarray, standardise: bool) -> tuple[np.ndarray, dict | None]:
    """Node features as model inputs, z-scored with the training nodes' mean and deviation when asked (the
    statistics are returned for the model artifact)."""
    if not standardise:
        return matrix, None
    mean, scale = matrix[train].mean(axis=0), matrix[train].std(axis=0)
    scale[scale == 0] = 1.0  # constant features stay constant (zero) instead of dividing by zero
    return ((matrix - mean) / scale).astype(np.float32), {"mean": mean, "scale": scale}


def _encode(encoder: IGELEncoder, dataset: NodeDataset, logger: RunLogger, stages: Stages) -> list[sp.csr_matrix]:
    """IGEL inputs of each split's graph, by an encoder fitted on the training graph alone."""
    with stages("encode_fit"):
        encoder.fit(dataset.splits["train"].graph)
    encoded = []
    for name in SPLITS:
        graph = dataset.splits[name].graph
        with stages(f"encode_{name}"):
            encoded.append(encoder.transform(graph))
        # how far the unseen graphs stray from training: degrees clipped into the δmax bin, and the share of
        # their (distance, degree) entries that training never saw (their rows of W stay zero)
        seen = np.zeros(encoder.n_features, dtype=bool)
        seen[encoded[0].indices] = True
        logger.metrics(
            {
                f"{name}_features_nnz": encoded[-1].nnz,
                f"{name}_nodes_above_max_degree": int((np.asarray(graph.degree()) > encoder.max_degree_).sum()),
                f"{name}_unseen_structure_share": float((~seen[encoded[-1].indices]).mean())
                if encoded[-1].nnz
                else 0.0,
            }
        )
    logger.metrics({"features": encoder.n_features, "max_degree": encoder.max_degree_})
    log.info(
        "encoded α=%d with δmax=%d from the training graph: %s",
        encoder.distance,
        encoder.max_degree_,
        ", ".join(f"{name} {stages.seconds[f'encode_{name}']:.1f}s" for name in SPLITS),
    )
    return encoded


def _pretrain(
    structure: IGELEmbedding,
    train_features: sp.csr_matrix,
    graph,
    config: DictConfig,
    device: torch.device,
    logger: RunLogger,
    stages: Stages,
) -> None:
    """Skip-gram pre-training of W on the training graph (paper §3.4.2), copied into the classifier's W.

    A separate embedding over the training nodes alone is trained, so that negatives are drawn from training
    nodes only; with `freeze`, W then stays fixed while the MLP trains.
    """
    settings = config.trainer.pretrain
    model = IGELEmbedding(train_features, config.trainer.dim)
    neighbours = CSRGraph.from_igraph(graph)
    trainer = skipgram_trainer(settings, neighbours, device, config.seed, config.progress, "trainer.pretrain")

    def walks(rng: np.random.Generator):
        return stages.timed(
            "pretrain_walks", epoch_walks(neighbours, settings.walks_per_node, settings.walk_length, rng)
        )

    with stages("pretrain"):
        trainer.fit(
            model,
            walks,
            on_epoch=lambda epoch, values: logger.metrics({f"pretrain_{k}": v for k, v in values.items()}, step=epoch),
        )
    with torch.no_grad():
        structure.weight.copy_(model.weight.to(structure.weight.device))
    structure.weight.requires_grad_(not settings.freeze)


def _log_model(
    model: NodeClassifier, encoder: IGELEncoder | None, scaling: dict | None, config: DictConfig, logger: RunLogger
) -> None:
    """model.pt: the whole classifier's parameters (W and the MLP) with what re-encoding an unseen graph needs."""
    checkpoint = {
        "parameters": {name: value.detach().cpu() for name, value in model.named_parameters()},
        "encoder": None if encoder is None else encoder.frozen(),
        "feature_scaling": scaling,
        "trainer": OmegaConf.to_container(config.trainer, resolve=True),
        "task": OmegaConf.to_container(config.task, resolve=True),
    }
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "model.pt"
        torch.save(checkpoint, path)
        logger.file(path)
