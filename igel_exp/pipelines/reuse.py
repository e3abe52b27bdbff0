"""Embeddings shared by runs that differ only after training (KMeans' k in Table SisterCitiesF1Scores).

The paper clusters one embedding per α with several k. A sweep over (α, k, seed) keeps one MLflow run per
grid point and trains once per (α, seed): a run whose dataset, encoder, trainer, seed and package source
code match those of a finished run in the same MLflow experiment takes that run's `embeddings.npy`. With
`trainer.deterministic=true` that is bit-identical to training again on the same machine.
"""

from __future__ import annotations

import logging
import tempfile

import mlflow
import numpy as np

from igel_exp.identity import REUSED_TAG
from igel_exp.tracking import store_call

log = logging.getLogger(__name__)

KEY_TAG = "igel.embedding_key"  # on runs that trained and logged embeddings.npy
SOURCE_TAG = REUSED_TAG  # on runs that took them from another run (IGELModel.load follows it to the model)
ARTIFACT = "embeddings.npy"


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
