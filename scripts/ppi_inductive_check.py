"""Inductive sanity check of experiment=ppi on the real PPI graphs, with labels that are known functions of
structure (PPI's own features and labels are not available to this project).

    python scripts/ppi_inductive_check.py [--data-root DIR] [--train-graphs 20] [--epochs 60] [--patience 15]
                                          [--rows graph_a1 features graph_features_a1] [--workdir DIR]
                                          [--threads N] [HYDRA_OVERRIDE ...]

The real split graphs (20 training tissue graphs, or the first --train-graphs of them; 2 validation, 2 test)
are written in GraphSAGE's format with the 9 structural labels of `igel_exp.data.ppi.structural_labels`
(degree, local clustering and largest-neighbour-degree thresholds) and 50 Gaussian-noise features. Each row
then runs the real pipeline (`experiment=ppi_<row> dataset=graphsage`): the encoder is fitted on the training
graphs, the classifier early-stops on the validation graphs and is scored on the unseen test graphs. IGEL
rows must transfer the structure-to-label map to the test graphs (high micro-F1); the features-only row sees
noise and sits near the level of predicting every label positive (printed first). Prints one line per row: test and
validation micro-F1, best epoch, mean epoch time, encoding time per split. Runs go to an MLflow store in the
work directory (a temporary one by default).
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import numpy as np
import torch
from hydra import compose, initialize_config_module

from igel_exp import pipelines
from igel_exp.data import DataContext, load_dataset
from igel_exp.data.ppi import SPLITS, write_structure_check
from igel_exp.tasks.node_classification import micro_f1

REPO = Path(__file__).resolve().parents[1]
ROWS = ("graph_a1", "features", "graph_features_a1", "graph_a2", "graph_features_a2")


def data_root(configured: str | None) -> Path:
    for candidate in (configured, os.environ.get("IGEL_DATA_DIR"), REPO.parent / "shared" / "data"):
        if candidate and Path(candidate, "PPI").is_dir():
            return Path(candidate)
    raise SystemExit("no PPI folder: pass --data-root or set IGEL_DATA_DIR")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root")
    parser.add_argument("--train-graphs", type=int, default=20)
    parser.add_argument("--epochs", type=int, default=60)
    parser.add_argument("--patience", type=int, default=15)
    parser.add_argument("--rows", nargs="+", default=list(ROWS[:3]), choices=ROWS)
    parser.add_argument("--workdir", help="keep the generated files and the MLflow store here")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, help="torch CPU threads (on a busy machine, 1 is often fastest)")
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides for every row, e.g. trainer.device=cuda")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="ppi-check-"))
    structure = load_dataset({"name": "ppi"}, DataContext(data_root(args.data_root), download=False, seed=args.seed))
    codes, labels = write_structure_check(structure, workdir / "data", args.train_graphs, args.seed)
    sizes = {name: int((codes == code).sum()) for code, name in enumerate(SPLITS)}
    print(f"data: {workdir / 'data'}; nodes per split: {sizes}; MLflow: {workdir / 'mlflow.db'}")
    test = labels[codes == SPLITS.index("test")]
    print(f"test micro-F1 of predicting every label positive: {micro_f1(test, np.ones_like(test)):.4f}")
    common = [
        "dataset=graphsage",
        f"dataset.path={workdir / 'data'}",
        "dataset.prefix=ppi",
        f"trainer.epochs={args.epochs}",
        f"trainer.patience={args.patience}",
        f"seed={args.seed}",
        f"tracking.uri=sqlite:///{workdir / 'mlflow.db'}",
        "progress=false",
        *args.overrides,
    ]
    print(
        f"{'row':<20} {'test F1':>8} {'valid F1':>8} {'best':>5} {'epochs':>6} {'epoch s':>8}"
        "  encode s (train/valid/test)"
    )
    for row in args.rows:
        with initialize_config_module(config_module="igel_exp.conf", version_base="1.3"):
            config = compose(config_name="config", overrides=[f"experiment=ppi_{row}", *common])
        metrics = pipelines.run(config)
        encode = "/".join(f"{metrics.get(f'time_encode_{name}_s', 0.0):.1f}" for name in SPLITS)
        print(
            f"{row:<20} {metrics['test_micro_f1']:8.4f} {metrics['valid_micro_f1']:8.4f} {metrics['best_epoch']:5.0f}"
            f" {metrics['epochs_run']:6.0f} {metrics['epoch_time_mean_s']:8.2f}  {encode}",
            flush=True,
        )


if __name__ == "__main__":
    main()
