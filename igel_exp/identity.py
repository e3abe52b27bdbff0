"""What makes two runs the same run: a hash of the resolved config, seed included (GraphGym's habit).

Every run carries its hash as the MLflow tag `igel.config_hash` (set by `tracking.tracked_run`), so a run of
`igel-run`, of `igel-run -m` or of `igel-reproduce` with the same settings is recognised as the same run,
and `igel-reproduce` skips the jobs whose hash already has a FINISHED run.

Left out of the hash are the keys that say where a run is stored, where its inputs live or how it is watched
and executed, never what it computes. Data files are checksummed, so their folder cannot change a result;
thread counts and devices change timings and the last bits of floating-point sums, not the experiment (the
timing tables are measurements of whatever machine ran them, which no config key captures either).
The package's source code is not in the hash: a code change does not invalidate earlier runs (use a fresh
MLflow store, or delete the runs, to recompute them).

The embeddings a run trains have an identity of their own (`embedding_key`, for task.reuse_embeddings): the sections
of the config that training reads, and the package's source code, but its evaluators'.

A key added to the configs after runs were made is left out while it holds the value that computes what the runs
before it computed (ADDED_DEFAULTS): those runs keep their identity, and a run that sets it otherwise gets a new one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

HASH_TAG = "igel.config_hash"
REUSED_TAG = "igel.embeddings_from"  # a run that took its embeddings from another run (pipelines.reuse): no training
SOURCE_RUN_TAG = "igel.source_run"  # the run (or folder) whose model made a run's embeddings (igel-embed, transfer)
DATA_TAG = "igel.data"  # a link-prediction run's graph, by content (pipelines.link_prediction.graph_fingerprint)
NOT_IDENTITY = (
    "reproduce",  # the experiments/ file's reference data (paper values, captions): not a run setting
    "progress",  # progress bars
    "threads",  # CPU threads: speed only
    "tracking",  # where the run is stored
    "data.root",  # where the (checksummed) data files are
    "data.download",  # whether missing files may be fetched (they are checked against the same sha256)
    "trainer.device",  # where the maths runs; `auto` is what configs say anyway
    "task.split_cache",  # where link-prediction splits are cached (the split depends on the seed only)
    "task.reuse_embeddings",  # takes bit-identical embeddings from an earlier run instead of training again
    "task.memory_budget_gib",  # a ceiling: a run that finished under it measured the same as without it
    "task.memory_samples",  # ego graphs sampled for the memory estimates: the estimates only
    "task.isolate",  # whether a scalability run gets a fresh process: how it is executed, not what it measures
    "task.draw_max_nodes",  # which figures a clustering run draws: none of its numbers
    "trainer.cuda_graphs",  # whether a GPU replays captured steps: the same kernels either way
    "trainer.compile",  # whether the CPU runs the step as fused C++: timings and the last bits, as threads do
)
# key → the value it had in effect before the key existed; at that value it is not part of the identity, so that the
# runs recorded before the key existed keep theirs
ADDED_DEFAULTS = {
    "protocol": "faithful",  # conf/protocol: the paper's computation, or the authors' code path
    "dataset.parallel_edges": False,
    "dataset.bridge_stream": None,
    "encoder.encoded_distance": None,
    "encoder.weight_init": "normal",
    "encoder.weight_seed": None,
    "task.score_neighbourhood": "open",
    "task.centrality_ties": "rounding",
    "task.cluster_members": "all",
    "task.kmeans_stream": None,
    "task.split": "leak_free",
    "task.classifier": "logistic_regression",
    "task.source": None,  # experiment=transfer_link_prediction's model source: link prediction has none
    "task.source_overrides": [],
    "trainer.logit_init": "fixed",
    "trainer.batch_scale": 1,
    "trainer.precision": "float32",
    "trainer.batching": "walks",
    "trainer.walk_stream": None,
}
HASH_LENGTH = 16  # hex digits: 64 bits, no collision in any store of realistic size


def identity(config: DictConfig | Mapping[str, Any], without: Iterable[str] = ()) -> dict[str, Any]:
    """The resolved config as plain data, minus NOT_IDENTITY, the dotted keys in `without` and the ADDED_DEFAULTS
    keys that hold their default."""
    if isinstance(config, DictConfig):
        plain = OmegaConf.to_container(config, resolve=True, throw_on_missing=False, enum_to_str=True)
    else:
        plain = json.loads(json.dumps(config, default=str))  # a deep copy we may prune
    for dotted in (*NOT_IDENTITY, *without):
        _drop(plain, dotted)
    for dotted, default in ADDED_DEFAULTS.items():
        _drop(plain, dotted, only_if=default)
    return plain


_ANY = object()


def _drop(plain: dict, dotted: str, only_if: Any = _ANY) -> None:
    """Remove the dotted key from nested dicts (when it holds `only_if`, if given)."""
    *parents, leaf = dotted.split(".")
    node = plain
    for key in parents:
        node = node.get(key) if isinstance(node, dict) else None
    if isinstance(node, dict) and leaf in node and (only_if is _ANY or node[leaf] == only_if):
        del node[leaf]


def config_hash(config: DictConfig | Mapping[str, Any], without: Iterable[str] = ()) -> str:
    """Hex digest of `identity(config, without)`; `without=("seed",)` names a grid point (its seeds pooled)."""
    text = json.dumps(identity(config, without), sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:HASH_LENGTH]


# what determines the embeddings; data.root and data.download do not (files are checksummed)
TRAINING_SECTIONS = ("dataset", "encoder", "trainer", "seed")
# downstream of the embeddings by design (evaluators, figures): changing them keeps the embeddings valid
DOWNSTREAM = ("tasks/", "plots.py")
PACKAGE = Path(__file__).resolve().parent


def embedding_key(config: DictConfig) -> str:
    """sha256 of the training sections of the resolved config and of the package's source code."""
    resolved = OmegaConf.to_container(config, resolve=True, enum_to_str=True)
    sections = {name: resolved.get(name) for name in TRAINING_SECTIONS}
    digest = hashlib.sha256(json.dumps(sections, sort_keys=True, default=str).encode())
    digest.update(source_fingerprint(PACKAGE).encode())
    return digest.hexdigest()


@cache
def source_fingerprint(package: Path) -> str:
    """A code change invalidates earlier embeddings: hash every module of the package but the downstream ones
    (a module added later counts, so the fingerprint errs on the side of training again). Read once a process."""
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        if path.relative_to(package).as_posix().startswith(DOWNSTREAM):
            continue
        digest.update(str(path.relative_to(package)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()
