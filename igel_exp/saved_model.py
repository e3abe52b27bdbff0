"""A trained IGEL model as a product: logged by every run that trains one, loaded by run id or folder, applied to
any graph.

An IGEL model is the fitted encoder (α, δmax, transform, normalisation, relative degrees: the feature layout) and
W. Embedding a graph is encoding it with those settings and one sparse product, no training, so a model embeds
graphs it never saw: a degree above δmax falls into the δmax column, as in the paper's inductive setting, and a
(distance, degree) pair the training graph never had meets a row of W that training left at zero.

Format, version 1: the artifact folder `model/` of an MLflow run (or any folder) holding
  igel-model.json  {"format": "igel-model", "version": 1,
                    "encoder": {"distance", "max_degree", "transform", "normalise", "relative_degrees",
                                "blocks", "n_features"}  (IGELEncoder.frozen(): column
                                block·(α+1)(δmax+1) + distance·(δmax+1) + min(degree, δmax)),
                    "dim": d, "trained_on": {"dataset", "nodes", "edges"}, "config": the run's resolved config}
  weights.pt       a torch state dict: "weight", W (n_features × d, float32), and where the skip-gram trainer
                   learned one, "affine", the [scale, bias] of its logit σ(scale · e_t·e_o + bias)
A reader refuses any other version rather than guess; a change of meaning gets a new version.
"""

from __future__ import annotations

import json
import logging
import pickle
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import igraph as ig
import mlflow
import numpy as np
import scipy.sparse as sp
import torch
from mlflow.entities import Run
from mlflow.exceptions import MlflowException
from omegaconf import DictConfig, OmegaConf

from igel_exp.encoding import IGELEncoder
from igel_exp.errors import ModelError, first_line
from igel_exp.identity import REUSED_TAG, SOURCE_RUN_TAG  # such runs have no model: REUSED_TAG's is used
from igel_exp.models import PRECISIONS, IGELEmbedding, embed_all
from igel_exp.tracking import (
    SWEEP_TAG,
    RunLogger,
    artifact_bars,
    check_store_uri,
    liveness,
    store_call,
    store_exists,
    tracking_uri,
)

log = logging.getLogger(__name__)

FORMAT = "igel-model"
VERSION = 1
ARTIFACT = "model"  # the run's artifact folder
MANIFEST = "igel-model.json"
WEIGHTS = "weights.pt"


@dataclass
class IGELModel:
    """A fitted encoder and W (n_features × d); `affine` is the skip-gram logit's [scale, bias] when learned."""

    encoder: IGELEncoder
    weight: torch.Tensor
    affine: torch.Tensor | None = None
    trained_on: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        for name, value in [("W", self.weight), ("the logit's scale and bias", self.affine)]:
            if value is not None and not (isinstance(value, torch.Tensor) and value.is_floating_point()):
                raise ModelError(f"{name} is a {type(value).__name__}, not a tensor of floats")
        self.weight = self.weight.detach().to("cpu", torch.float32).clone()
        self.affine = None if self.affine is None else self.affine.detach().to("cpu", torch.float32).clone()
        for name, value in [("W", self.weight), ("the logit's scale and bias", self.affine)]:
            if value is not None and not torch.isfinite(value).all():  # it would embed every graph as NaN
                raise ModelError(f"{name} holds values that are not finite in float32 (NaN, infinite or beyond 3.4e38)")
        if isinstance(self.config, DictConfig):
            self.config = OmegaConf.to_container(self.config, resolve=True)
        if self.weight.ndim != 2 or self.weight.shape[0] != self.encoder.n_features or not self.weight.shape[1]:
            raise ModelError(
                f"W is {tuple(self.weight.shape)}, the encoder gives {self.encoder.n_features} features (rows of W),"
                " and W needs at least one column"
            )
        _precision(self.config)  # a config the run could not have had is refused with the model

    @classmethod
    def trained(
        cls,
        encoder: IGELEncoder,
        embedding: IGELEmbedding,
        graph: ig.Graph,
        name: str,
        config: DictConfig,
        affine: torch.Tensor | None = None,
    ) -> IGELModel:
        """The model of a run: its encoder, its IGELEmbedding's W and the graph `name` it was trained on."""
        trained_on = {"dataset": name, "nodes": graph.vcount(), "edges": graph.ecount()}
        return cls(encoder, embedding.weight, affine, trained_on, config)

    @property
    def dim(self) -> int:
        return int(self.weight.shape[1])

    @property
    def precision(self) -> str:
        """The trainer.precision of the products with W (float32 for models saved before the key existed)."""
        return _precision(self.config)

    @property
    def alpha(self) -> str:
        """The model's α as run names say it: its run's encoder.distance, with the α of its encodings where they differ
        (`α=2 (α=1 encodings)`: the authors' protocol reuses α = 1 encodings, encoder.encoded_distance)."""
        trained, encoded = self.config.get("encoder", {}).get("distance", self.encoder.distance), self.encoder.distance
        return f"α={trained}" if trained == encoded else f"α={trained} (α={encoded} encodings)"

    @property
    def max_degree(self) -> int:
        """δmax: larger degrees are counted as δmax."""
        return int(self.encoder.max_degree_)

    def embed(self, graph: ig.Graph, device: str | torch.device = "cpu") -> np.ndarray:
        """Embeddings (|V| × d, float32) of the graph's nodes in vertex order: encoding, then one product. A graph
        with parallel edges is refused where the model's run merged its own (dataset.parallel_edges=false)."""
        self._check_parallel_edges(graph)
        return self.embed_features(self.encoder.transform(graph), device)

    def _check_parallel_edges(self, graph: ig.Graph) -> None:
        """ValueError for parallel edges where the model's run merged them: the encoder counts each in the degrees (the
        authors' multigraphs), so igraph's Read_Edgelist of a file listing each edge both ways doubled every degree,
        unsaid, where igel-embed's reading of the file merges them."""
        dataset = self.config.get("dataset") if isinstance(self.config, dict) else None
        kept = isinstance(dataset, dict) and dataset.get("parallel_edges") is True
        if kept or not isinstance(graph, ig.Graph) or graph.is_directed() or not graph.has_multiple():
            return  # the encoder names a graph of another library, or a directed one
        merged = graph.copy()
        merged.simplify(multiple=True, loops=False)
        raise ValueError(
            f"the graph has {graph.ecount() - merged.ecount()} parallel edges (repeated or reversed pairs), which IGEL"
            " counts in its degrees, and the model's run merged its own (dataset.parallel_edges=false): merge them"
            " (graph.simplify(loops=False)), or embed them knowingly: model.embed_features(model.encoder.transform(g))"
        )

    def embed_features(self, features: sp.csr_matrix, device: str | torch.device = "cpu") -> np.ndarray:
        """Embeddings of nodes encoded by `encoder.transform`, computed by the layer a run trains, at its
        trainer.precision (bit-identical to the run's embeddings on the same CPU)."""
        self.check_embeds()
        if features.shape[1] != self.encoder.n_features:
            raise ModelError(f"the features have {features.shape[1]} columns, the model {self.encoder.n_features}")
        with torch.random.fork_rng(devices=[]):  # the layer draws an initial W, overwritten: keep the caller's RNG
            layer = IGELEmbedding(features, self.dim, self.precision)
        with torch.no_grad():
            layer.weight.copy_(self.weight)
        device = torch.device(device)
        return embed_all(layer.to(device), device)

    def check_embeds(self) -> None:
        """ModelError where the model cannot tell nodes apart: at α = 0 (a scalability run's, which times it) every
        node's ego graph is the node alone, so every graph would be embedded as one point."""
        if self.encoder.distance == 0:
            raise ModelError(
                "its model has α = 0, which encodes every node alike (the node alone, of degree 0): embed with a model"
                " trained at encoder.distance ≥ 1"
            )

    def unseen_share(self, features: sp.csr_matrix) -> float:
        """Share of the features' nonzero entries whose row of W is zero: (distance, degree) pairs that training
        never saw (their rows get no gradient), which add nothing to an embedding."""
        if not features.nnz:
            return 0.0
        unseen = ~self.weight.any(dim=1).numpy()
        return float(unseen[features.indices].mean())

    def unseen_nodes(self, features: sp.csr_matrix) -> int:
        """Nodes none of whose structures training saw (an isolated node, where the training graph had none): each of
        their features meets a zero row of W, so their embedding is the zero vector."""
        seen = self.weight.any(dim=1).numpy()[features.indices].astype(np.float32)
        seen_per_node = sp.csr_matrix((seen, features.indices, features.indptr), shape=features.shape).sum(axis=1)
        return int((np.asarray(seen_per_node).ravel() == 0).sum())

    def clamped_nodes(self, graph: ig.Graph) -> int:
        """Nodes whose degree exceeds δmax: in every ego graph where more than δmax of their neighbours lie, the
        encoder counts them at δmax."""
        return int((np.asarray(graph.degree(), dtype=np.int64) > self.max_degree).sum())

    def save(self, folder: str | Path) -> Path:
        """Write igel-model.json and weights.pt into `folder` (created); returns it."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        manifest = {
            "format": FORMAT,
            "version": VERSION,
            "encoder": self.encoder.frozen(),
            "dim": self.dim,
            "trained_on": self.trained_on,
            "config": self.config,
        }
        (folder / MANIFEST).write_text(json.dumps(manifest, indent=1, default=str) + "\n")
        state = {"weight": self.weight, **({"affine": self.affine} if self.affine is not None else {})}
        torch.save(state, folder / WEIGHTS)
        return folder

    def log(self, logger: RunLogger) -> None:
        """Log the model as the run's artifact folder `model/`."""
        with tempfile.TemporaryDirectory() as folder:
            logger.folder(self.save(folder), ARTIFACT)

    @classmethod
    def load(cls, source: str | Path, uri: str | None = None, progress: bool = True) -> IGELModel:
        """The model in a folder (one holding igel-model.json, or its `model/` subfolder), or of an MLflow run id
        in the store at `uri` (default: tracking.tracking_uri's), downloaded under MLflow's progress bar where
        `progress`. Raises ModelError with one line saying why not."""
        folder = model_folder(source)
        if folder is not None:
            return cls.read(folder)
        uri = tracking_uri(uri)
        check_store_uri(uri)
        if not store_exists(uri):  # looking in it must not make one
            raise ModelError(f"{str(source)!r} is neither a model folder nor a run of an MLflow store: none at {uri}")
        with tempfile.TemporaryDirectory() as scratch, artifact_bars(progress):
            folder = _download(str(source), uri, Path(scratch))
            try:
                return cls.read(folder)
            except ModelError as error:  # it named the download's folder, gone by the time it is read
                raise ModelError(str(error).replace(str(folder), f"run {source}: {ARTIFACT}")) from None

    @classmethod
    def read(cls, folder: Path) -> IGELModel:
        """The model saved in `folder` by `save`."""
        where = folder / MANIFEST
        try:
            manifest = json.loads(where.read_text())
        except (OSError, ValueError, RecursionError) as error:  # RecursionError: nested deeper than Python reads
            raise ModelError(f"{where}: unreadable ({error})") from None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise ModelError(f'{where}: not an IGEL model file (no "format": "{FORMAT}")')
        if manifest.get("version") != VERSION or isinstance(manifest.get("version"), bool):  # true == 1 in Python
            raise ModelError(
                f"{where}: IGEL model format version {manifest.get('version')!r}; this igel-exp reads version {VERSION}"
            )
        trained_on = manifest.get("trained_on", {})  # none: a malformed model, below
        if not isinstance(trained_on, dict):  # IGELModel.trained_on, the user's record of the graph ({} if unknown)
            raise ModelError(
                f"{where}: trained_on is {json.dumps(trained_on)}, not an object such as"
                ' {"dataset": …, "nodes": …, "edges": …}'
            )
        try:
            encoder = IGELEncoder.from_frozen(manifest["encoder"], n_jobs=torch.get_num_threads())
            state = torch.load(folder / WEIGHTS, map_location="cpu", weights_only=True)
            if not isinstance(state, dict):
                raise TypeError(f'{WEIGHTS} holds a {type(state).__name__}, not a state dict with "weight"')
            model = cls(encoder, state["weight"], state.get("affine"), manifest["trained_on"], manifest["config"])
            if model.weight.shape[1:] != (manifest["dim"],):
                raise ValueError(f"W is {tuple(model.weight.shape)} but dim is {manifest['dim']!r}")
            return model
        except (OSError, KeyError, TypeError, ValueError, RuntimeError, EOFError, pickle.UnpicklingError) as error:
            raise ModelError(f"{folder}: a malformed IGEL model ({type(error).__name__}: {error})") from None


def model_folder(source: str | Path) -> Path | None:
    """The folder holding igel-model.json that `source` names (the folder, its `model/` subfolder, or the file); None
    where it names none (a run id)."""
    path = Path(source).expanduser()  # a folder as a shell would read it (`source_run=~/model`, quoted)
    for folder in (path, path / ARTIFACT, path.parent if path.name == MANIFEST else None):
        if folder is not None and (folder / MANIFEST).is_file():
            return folder
    return None


def _precision(config: Any) -> str:
    """The trainer.precision of a model's run config (float32 for models saved before the key existed); ModelError for
    a config its run could not have had."""
    trainer = config.get("trainer") if isinstance(config, dict) else None
    if trainer is not None and not isinstance(trainer, dict):
        raise ModelError(f"its config's trainer is {trainer!r}, not a section")
    precision = (trainer or {}).get("precision", "float32")
    if precision not in PRECISIONS:
        raise ModelError(f"its config's trainer.precision={precision!r} is not one of {', '.join(PRECISIONS)}")
    return precision


@store_call()
def _download(run_id: str, uri: str, scratch: Path, followed: bool = False) -> Path:
    """The run's model folder, downloaded into `scratch`; a run that reused another's embeddings gives that one's."""
    client = mlflow.MlflowClient(tracking_uri=uri)
    try:
        run = client.get_run(run_id)
    except MlflowException:
        raise ModelError(f"{run_id!r} is neither a model folder nor a run of the MLflow store {uri}") from None
    if run.info.lifecycle_stage == "deleted":
        raise ModelError(f"run {run_id} is deleted: restore it (mlflow runs restore --run-id {run_id}) or train again")
    logged = bool(client.list_artifacts(run_id, ARTIFACT))
    if logged and run.info.status != "FINISHED":  # it ended after training (Ctrl-C in its evaluation)
        log.warning("run %s is %s: its model was logged when its training ended; it is used", run_id, run.info.status)
    if not logged and run.data.tags.get(SWEEP_TAG) == run_id:  # the sweep's top-level run in MLflow's lists
        raise ModelError(f"run {run_id} is the parent run of a sweep, which trains nothing: {_jobs(client, run)}")
    if not logged:
        reused = run.data.tags.get(REUSED_TAG)
        if reused and not followed:
            return _download(reused, uri, scratch, followed=True)
        encoder = run.data.params.get("encoder.name", "no encoder")
        experiment = client.get_experiment(run.info.experiment_id).name
        source = run.data.tags.get(SOURCE_RUN_TAG)
        why = "only runs that train encoder=igel log one"
        if source:  # igel-embed's and transfer's runs embed with another run's model
            why = f"its embeddings came from the model of {source} (tag {SOURCE_RUN_TAG}): use source_run={source}"
        elif run.data.params.get("task.use_igel") == "False":  # experiment=ppi_features: encoder=igel, never used
            why = "it ran with task.use_igel=false (the node features alone), which trains no IGEL layer"
        elif encoder == "igel" and run.info.status == "RUNNING" and liveness(run) is False:  # killed (kill -9)
            why = "the run is RUNNING, but its process is gone: it will log none; train again"
        elif encoder == "igel" and run.info.status != "FINISHED":  # it ended, or is, before its model was logged
            why = f"the run is {run.info.status}, and logs its model once trained"
        elif encoder == "igel" and not client.list_artifacts(run_id):  # a copied or moved store: absolute places
            why = (
                f"its artifacts are not at {run.info.artifact_uri}, where the store says they are (moved, or removed?)"
            )
        elif encoder == "igel":
            why = f"it logged none ({run.info.artifact_uri} has no {ARTIFACT}/)"
        raise ModelError(f"run {run_id} (experiment {experiment}, encoder={encoder}) has no IGEL model: {why}")
    try:
        return Path(client.download_artifacts(run_id, ARTIFACT, str(scratch)))
    except (OSError, MlflowException) as error:
        raise ModelError(f"run {run_id}: its model could not be read ({first_line(error)})") from None


def _jobs(client: mlflow.MlflowClient, parent: Run, shown: int = 3) -> str:
    """Which of a sweep's jobs' runs to give instead of its parent: those that trained encoder=igel, named."""
    jobs = client.search_runs(
        [parent.info.experiment_id],
        filter_string=f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'",
        order_by=["attributes.start_time ASC"],
    )
    igel = [job for job in jobs if job.data.params.get("encoder.name") == "igel"]
    if not igel:
        return f"none of its {len(jobs)} jobs' runs trained encoder=igel, which logs a model"
    named = ", ".join(f"{job.info.run_id} ({job.info.run_name})" for job in igel[:shown])
    more = f" and {len(igel) - shown} more (its jobs' runs are nested under it)" if len(igel) > shown else ""
    return f"give one of its jobs' runs: {named}{more}"
