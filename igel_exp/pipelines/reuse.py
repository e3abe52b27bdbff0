"""Embeddings shared by runs that differ only after training (KMeans' k in Table SisterCitiesF1Scores).

The paper clusters one embedding per α with several k. A sweep over (α, k, seed) keeps one MLflow run per
grid point and trains once per (α, seed): a run whose dataset, encoder, trainer, seed and package source
code match those of a finished run in the same MLflow experiment takes that run's `embeddings.npy`. With
`trainer.deterministic=true` that is bit-identical to training again on the same machine.
"""

from __future__ import annotations

import hashlib
import json
import logging
import tempfile
from functools import cache
from pathlib import Path

import mlflow
import numpy as np
from omegaconf import DictConfig, OmegaConf

from igel_exp.identity import REUSED_TAG
from igel_exp.tracking import store_call

log = logging.getLogger(__name__)

KEY_TAG = "igel.embedding_key"  # on runs that trained and logged embeddings.npy
SOURCE_TAG = REUSED_TAG  # on runs that took them from another run (IGELModel.load follows it to the model)
ARTIFACT = "embeddings.npy"
# what determines the embeddings; data.root and data.download do not (files are checksummed)
TRAINING_SECTIONS = ("dataset", "encoder", "trainer", "seed")
# downstream of the embeddings by design (evaluators, figures): changing them keeps the embeddings valid
DOWNSTREAM = ("tasks/", "plots.py")
PACKAGE = Path(__file__).resolve().parents[1]


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


@store_call()
def find_embeddings(experiment_id: str, key: str) -> tuple[str, np.ndarray] | None:
    """The id and embeddings of the earliest finished run of the experiment tagged with `key`, if any."""
    runs = mlflow.search_runs(
        experiment_ids=[experiment_id],
        filter_string=f"tags.`{KEY_TAG}` = '{key}' and attributes.status = 'FINISHED'",
        order_by=["attributes.start_time ASC"],
        max_results=1,
        output_format="list",
    )
    if not runs:
        return None
    run_id = runs[0].info.run_id
    with tempfile.TemporaryDirectory() as folder:
        try:
            path = mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path=ARTIFACT, dst_path=folder)
        except (OSError, mlflow.exceptions.MlflowException) as error:  # artifact store moved or pruned
            log.warning("run %s has no readable %s (%s): training again", run_id, ARTIFACT, error)
            return None
        return run_id, np.load(path)
