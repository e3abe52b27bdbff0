"""How much the authors' split bug could lift a link-prediction AUC: IGEL trained on our leak-free residual graph
and on the same graph with the leak their code had, scored on the same labelled pairs.

    python scripts/split_leak_check.py [--dataset astroph] [--seed 0] [--leaked 14000] [--edge-negatives 0.005]
                                       [--threads N] [HYDRA_OVERRIDE ...]

The authors matched removed edges in one orientation only, so a cached split read back with another vertex order
(AstroPh's SNAP ids are re-indexed) kept about 14,000 of its positives in the residual graph the embeddings learn
from, and about 0.5 % of its negatives were edges. Here `--leaked` random positives are added back to the
residual graph and `--edge-negatives` of the negatives are swapped for random residual edges; everything else is
`experiment=link_prediction` with its defaults and the overrides given. Prints the test and validation AUC of
both. Runs go to a temporary MLflow store.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import torch
from hydra import compose, initialize_config_module

from igel_exp.data import Dataset
from igel_exp.pipelines.common import Stages, build_encoder, load, train_unsupervised
from igel_exp.pipelines.link_prediction import configured_split
from igel_exp.tasks.link_prediction import EdgeSplit, link_prediction_scores
from igel_exp.tracking import tracked_run


def leaky(split: EdgeSplit, leaked: int, edge_negatives: float, seed: int) -> EdgeSplit:
    """The split with `leaked` positives also in the residual graph and a fraction of negatives that are edges."""
    rng = np.random.default_rng(seed)
    back = split.positives[rng.choice(len(split.positives), min(leaked, len(split.positives)), replace=False)]
    negatives = split.negatives.copy()
    swapped = rng.choice(len(negatives), round(edge_negatives * len(negatives)), replace=False)
    negatives[swapped] = split.residual[rng.choice(len(split.residual), len(swapped), replace=False)]
    return EdgeSplit(split.n_nodes, np.concatenate([split.residual, back]), split.positives, negatives)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="astroph")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--leaked", type=int, default=14_000, help="positives left in the residual graph")
    parser.add_argument("--edge-negatives", type=float, default=0.005, help="fraction of negatives that are edges")
    parser.add_argument("--threads", type=int, help="torch CPU threads")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. encoder.distance=3")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    store = Path(tempfile.mkdtemp(prefix="leak-check-")) / "mlflow.db"
    overrides = [
        "experiment=link_prediction",
        f"dataset={args.dataset}",
        f"seed={args.seed}",
        f"tracking.uri=sqlite:///{store}",
        "progress=false",
        *args.overrides,
    ]
    with initialize_config_module(config_module="igel_exp.conf", version_base="1.3"):
        config = compose(config_name="config", overrides=overrides)
    dataset = load(config)
    split, _, _ = configured_split(dataset, config)
    names = dataset.graph.vs["name"]
    print(f"{args.dataset}, seed {args.seed}, {' '.join(args.overrides) or 'defaults'}")
    for label, variant in [("leak-free", split), ("authors' leak", leaky(split, args.leaked, args.edge_negatives, 0))]:
        residual = Dataset(dataset.name, variant.residual_graph(names), dataset.report)
        with tracked_run(config, "split_leak_check") as logger:
            embeddings = train_unsupervised(residual, config, build_encoder(config.encoder, False), logger, Stages())
        scores = link_prediction_scores(embeddings, variant, config.seed, config.task.validation_fraction)
        print(
            f"{label:<14} residual edges {len(variant.residual):>7}: AUC {scores['auc']:.4f}"
            f" (validation {scores['val_auc']:.4f})",
            flush=True,
        )


if __name__ == "__main__":
    main()
