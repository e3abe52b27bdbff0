"""Benchmark: one seed of Facebook link prediction end to end, and the skip-gram trainer against gensim.

    pip install ".[bench]"      # gensim: a benchmark-only dependency
    python scripts/bench_link_prediction.py [--data-root DIR] [--device auto|cpu|cuda] [--skip-end-to-end]
                                            [--skip-throughput]

1. End to end: `igel-run experiment=link_prediction` (Facebook, the experiment's defaults, seed 0) in this
   process against a temporary MLflow store; prints the time and peak memory of every stage and the AUC.
2. Throughput on the same walks (one walk of 150 steps from every Facebook node, window 8, 9 negatives,
   d = 256, batches of 250,000 pairs): our trainer's positive pairs per second, with the IGEL model and with
   free embeddings (DeepWalk's model, the one gensim trains), next to gensim Word2Vec's (skip-gram, negative
   sampling, no subsampling) words per second and the positive pairs per second those words hold (gensim
   shrinks each word's window to a uniform 1..window, about half the pairs of ours). Our trainer runs on
   --device (auto: the GPU when there is one, as igel-run's trainer.device=auto); gensim always on the CPU.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from hydra import compose, initialize_config_module

from igel_exp import pipelines
from igel_exp.data import DataContext, load_dataset
from igel_exp.encoding import IGELEncoder
from igel_exp.models import FreeEmbedding, IGELEmbedding
from igel_exp.training import SkipGramTrainer, resolve_device
from igel_exp.walks import END, CSRGraph, positive_pairs, random_walks

REPO = Path(__file__).resolve().parents[1]
WALK_LENGTH, WINDOW, NEGATIVES, DIM, BATCH = 150, 8, 9, 256, 250_000


def data_root(configured: str | None) -> Path:
    for candidate in (configured, os.environ.get("IGEL_DATA_DIR"), REPO.parent / "shared" / "data"):
        if candidate and Path(candidate, "Facebook").is_dir():
            return Path(candidate).resolve()
    raise SystemExit("Facebook not found: pass --data-root or set IGEL_DATA_DIR")


def end_to_end(root: Path, device: torch.device, overrides: list[str]) -> None:
    with tempfile.TemporaryDirectory() as store, initialize_config_module("igel_exp.conf", version_base="1.3"):
        config = compose(
            "config",
            [
                "experiment=link_prediction",
                f"data.root={root}",
                "progress=false",
                f"tracking.uri=sqlite:///{store}/mlflow.db",
                f"task.split_cache={store}/splits",
                f"trainer.device={device}",
                *overrides,
            ],
        )
        os.environ.pop("MLFLOW_TRACKING_URI", None)
        start = time.perf_counter()
        metrics = pipelines.run(config)
        total = time.perf_counter() - start
    settings = " ".join(overrides) or "experiment defaults"
    print(f"Facebook link prediction, seed 0, {settings}, trainer on {device}: AUC {metrics['auc']:.4f}")
    print(f"{'stage':<10} {'seconds':>8} {'peak MiB':>9}")
    for stage in ("load", "split", "encode", "walks", "train", "evaluate"):
        if f"time_{stage}_s" in metrics:
            peak = metrics.get(f"peak_{stage}_mib", float("nan"))
            print(f"{stage:<10} {metrics[f'time_{stage}_s']:>8.2f} {peak:>9.0f}")
    print(f"{'total':<10} {total:>8.2f} {metrics['peak_rss_mib']:>9.0f}  (run, including MLflow logging)")


def gensim_pairs(walks: np.ndarray, window: int) -> float:
    """Expected skip-gram pairs gensim trains on: each word's window is uniform in 1..window."""
    lengths = (walks != END).sum(axis=1)
    total = 0.0
    for length in np.unique(lengths):
        i = np.arange(length)
        reach = np.arange(1, window + 1)[:, None]
        per_word = (np.minimum(reach, i) + np.minimum(reach, length - 1 - i)).mean(axis=0)
        total += per_word.sum() * (lengths == length).sum()
    return total


def throughput(root: Path, device: torch.device) -> None:
    graph = load_dataset({"name": "facebook"}, DataContext(root, False, 0)).graph
    csr = CSRGraph.from_igraph(graph)
    walks = random_walks(
        csr, np.random.default_rng(0).permutation(graph.vcount()), WALK_LENGTH, np.random.default_rng(1)
    )
    features = IGELEncoder(2).fit_transform(graph)
    pairs = positive_pairs(WALK_LENGTH, WINDOW) * len(walks)
    threads = torch.get_num_threads()
    print(
        f"\nthroughput on {len(walks)} walks of {WALK_LENGTH} ({pairs:,} positive pairs), d={DIM}, window "
        f"{WINDOW}, {NEGATIVES} negatives, {threads} CPU threads, our trainer on {device_name(device)}"
    )
    ours = {}
    for name, model in [
        ("igel-exp, IGEL model", IGELEmbedding(features, DIM)),
        ("igel-exp, free embeddings", FreeEmbedding(graph.vcount(), DIM)),
    ]:
        trainer = SkipGramTrainer(1, BATCH, 0.01, NEGATIVES, WINDOW, device, seed=0, progress=False)
        if device.type == "cuda":  # the first step pays CUDA's start-up (context, kernels, cuBLAS): not timed
            trainer.fit(model, lambda rng: [walks[:1]])
        start = time.perf_counter()
        trainer.fit(model, lambda rng: [walks])
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        ours[name] = pairs / (time.perf_counter() - start)
        print(f"{name:<28} {ours[name]:>12,.0f} positive pairs/s")
    try:
        from gensim.models import Word2Vec
    except ImportError:
        print("gensim is not installed (pip install '.[bench]'): no reference")
        return
    sentences = [[str(node) for node in walk[walk != END]] for walk in walks]
    model = Word2Vec(
        vector_size=DIM, window=WINDOW, negative=NEGATIVES, sg=1, hs=0, min_count=0, sample=0, workers=threads, seed=0
    )
    model.build_vocab(sentences)
    start = time.perf_counter()
    model.train(sentences, total_examples=len(sentences), epochs=1)
    seconds = time.perf_counter() - start
    words = int((walks != END).sum())
    reference = gensim_pairs(walks, WINDOW) / seconds
    print(f"{'gensim Word2Vec':<28} {reference:>12,.0f} positive pairs/s ({words / seconds:,.0f} words/s)")
    for name, value in ours.items():
        print(f"ratio {name} / gensim: {value / reference:.2f}× in positive pairs/s")


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "the CPU"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-root")
    parser.add_argument("--device", default="auto", help="our trainer's device (default: auto)")
    parser.add_argument("--skip-end-to-end", action="store_true")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("overrides", nargs="*", help="extra igel-run overrides for the end-to-end run")
    args = parser.parse_args()
    root, device = data_root(args.data_root), resolve_device(args.device)
    if not args.skip_end_to_end:
        end_to_end(root, device, args.overrides)
    if not args.skip_throughput:
        throughput(root, device)


if __name__ == "__main__":
    main()
