"""Benchmark: one seed of Facebook link prediction end to end, and the skip-gram trainer against gensim.

    pip install ".[bench]"      # gensim: a benchmark-only dependency
    python scripts/bench_link_prediction.py [--data-root DIR] [--device auto|cpu|cuda] [--repeats 3]
                                            [--skip-end-to-end] [--skip-throughput] [OVERRIDE ...]

1. End to end: `igel-run experiment=link_prediction` (Facebook, the experiment's defaults, seed 0, plus any
   OVERRIDE such as trainer.batch_scale=16) in this process against a temporary MLflow store whose tables exist (as
   for every run after a user's first); prints the time and peak memory of every stage and the AUC.
2. Throughput on the same walks (one walk of 150 steps from every Facebook node, window 8, 9 negatives,
   d = 256, batches of 250,000 pairs): our trainer's positive pairs per second, with the IGEL model and with
   free embeddings (DeepWalk's model, the one gensim trains), and with the IGEL model at trainer.precision=bfloat16
   (where the CPU has bfloat16 kernels), next to gensim Word2Vec's (skip-gram, negative sampling, no subsampling, on
   all the machine's cores) words per second and the positive pairs per second those words hold (gensim shrinks each
   word's window to a uniform 1..window, about half the pairs of ours). Each side is timed --repeats times,
   alternating, and its best is kept: on a shared machine gensim swings 2× from run to run. Our trainer runs on
   --device (auto: the GPU when there is one, as igel-run's trainer.device=auto); gensim always on the CPU.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import mlflow
import numpy as np
import torch
from hydra import compose, initialize_config_module

from igel_exp import pipelines
from igel_exp.data import DataContext, load_dataset
from igel_exp.encoding import IGELEncoder
from igel_exp.models import FreeEmbedding, IGELEmbedding
from igel_exp.training import SkipGramTrainer, emulated_bfloat16, hardware, resolve_device
from igel_exp.walks import END, CSRGraph, positive_pairs, random_walks

REPO = Path(__file__).resolve().parents[1]
WALK_LENGTH, WINDOW, NEGATIVES, DIM, BATCH = 150, 8, 9, 256, 250_000
STAGES = ("load", "split", "encode", "walks", "train", "evaluate")


def data_root(configured: str | None) -> Path:
    for candidate in (configured, os.environ.get("IGEL_DATA_DIR"), REPO.parent / "shared" / "data"):
        if candidate and Path(candidate, "Facebook").is_dir():
            return Path(candidate).resolve()
    raise SystemExit("Facebook not found: pass --data-root or set IGEL_DATA_DIR")


def run_experiment(root: Path, device: torch.device, overrides: list[str]) -> tuple[dict[str, float], float]:
    """One igel-run in this process against a temporary store (`{store}` in an override is its folder): its final
    metrics and its wall time. The store's tables are made before the clock starts, as they are for every run after
    a user's first (making them, MLflow's migrations, takes 1-2 s once)."""
    with tempfile.TemporaryDirectory() as store, initialize_config_module("igel_exp.conf", version_base="1.3"):
        config = compose(
            "config",
            [
                f"data.root={root}",
                "progress=false",
                f"tracking.uri=sqlite:///{store}/mlflow.db",
                f"trainer.device={device}",
                *(override.format(store=store) for override in overrides),
            ],
        )
        os.environ.pop("MLFLOW_TRACKING_URI", None)
        mlflow.MlflowClient(config.tracking.uri).search_experiments(max_results=1)
        start = time.perf_counter()
        metrics = pipelines.run(config)
        return metrics, time.perf_counter() - start


def end_to_end(root: Path, device: torch.device, overrides: list[str], title: str = "Facebook") -> None:
    metrics, total = run_experiment(
        root, device, ["experiment=link_prediction", "task.split_cache={store}/splits", *overrides]
    )
    settings = " ".join(overrides) or "experiment defaults"
    seed = "" if any(override.startswith("seed=") for override in overrides) else "seed 0, "
    print(f"{title} link prediction, {seed}{settings}, trainer on {hardware(device)}: AUC {metrics['auc']:.4f}")
    print(f"{'stage':<10} {'seconds':>8} {'peak MiB':>9}")
    for stage in STAGES:
        if f"time_{stage}_s" in metrics:
            peak = metrics.get(f"peak_{stage}_mib", float("nan"))
            print(f"{stage:<10} {metrics[f'time_{stage}_s']:>8.2f} {peak:>9.0f}")
    print(f"{'total':<10} {total:>8.2f} {metrics['peak_rss_mib']:>9.0f}  (run, including MLflow logging)", flush=True)


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


def throughput(
    root: Path, device: torch.device, repeats: int = 3, settings: dict[str, dict] | None = None
) -> dict[str, float]:
    """Best positive pairs per second of each trainer setting (name → SkipGramTrainer keywords, and the IGEL model's
    `precision`) and of gensim."""
    graph = load_dataset({"name": "facebook"}, DataContext(root, False, 0)).graph
    csr = CSRGraph.from_igraph(graph)
    walks = random_walks(
        csr, np.random.default_rng(0).permutation(graph.vcount()), WALK_LENGTH, np.random.default_rng(1)
    )
    features = IGELEncoder(2).fit_transform(graph)
    pairs = positive_pairs(WALK_LENGTH, WINDOW) * len(walks)
    cores = os.cpu_count() or 1
    print(
        f"\nthroughput on {len(walks)} walks of {WALK_LENGTH} ({pairs:,} positive pairs), d={DIM}, window {WINDOW},"
        f" {NEGATIVES} negatives, batches of {BATCH:,} pairs; our trainer on {hardware(device)}"
        f" ({torch.get_num_threads()} CPU threads), gensim on {cores} cores; best of {repeats}"
    )
    settings = settings or {"": {}}
    runs = {}
    for label, options in settings.items():
        options = dict(options)
        precision = options.pop("precision", "float32")
        runs[f"igel-exp, IGEL model{label}"] = (
            lambda precision=precision: IGELEmbedding(features, DIM, precision),
            options,
        )
        if precision == "float32":  # free embeddings have no products with features
            runs[f"igel-exp, free embeddings{label}"] = (lambda: FreeEmbedding(graph.vcount(), DIM), options)
    best = dict.fromkeys([*runs, "gensim Word2Vec"], 0.0)
    sentences = [[str(node) for node in walk[walk != END]] for walk in walks]
    for _ in range(repeats):
        for name, (build, options) in runs.items():
            best[name] = max(best[name], pairs / _time_ours(build(), walks, device, options))
        best["gensim Word2Vec"] = max(best["gensim Word2Vec"], _gensim(sentences, walks, cores))
    for name, value in best.items():
        print(f"{name:<44} {value:>14,.0f} positive pairs/s")
    for name, value in best.items():
        if name != "gensim Word2Vec" and best["gensim Word2Vec"]:
            print(f"ratio {name} / gensim: {value / best['gensim Word2Vec']:.2f}×")
    return best


def _time_ours(model: torch.nn.Module, walks: np.ndarray, device: torch.device, options: dict) -> float:
    trainer = SkipGramTrainer(1, BATCH, 0.01, NEGATIVES, WINDOW, device, seed=0, progress=False, **options)
    if device.type == "cuda":  # the first steps pay CUDA's start-up and the graphs' capture: not timed
        trainer.fit(model, lambda rng: [walks[:400]])
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    trainer.fit(model, lambda rng: [walks])  # fit reads the loss back at the end of the epoch: all work is done
    return time.perf_counter() - start


def _gensim(sentences: list[list[str]], walks: np.ndarray, cores: int) -> float:
    try:
        from gensim.models import Word2Vec
    except ImportError:
        print("gensim is not installed (pip install '.[bench]'): no reference")
        return 0.0
    model = Word2Vec(
        vector_size=DIM, window=WINDOW, negative=NEGATIVES, sg=1, hs=0, min_count=0, sample=0, workers=cores, seed=0
    )
    model.build_vocab(sentences)
    start = time.perf_counter()
    model.train(sentences, total_examples=len(sentences), epochs=1)
    return gensim_pairs(walks, WINDOW) / (time.perf_counter() - start)


def machine() -> str:
    """The CPU and its float32 products' speed on one thread (gemm_rate): how figures of different hosts compare."""
    return f"{hardware()}, float32 products at {gemm_rate():.0f} GFLOP/s on one thread"


def gemm_rate(repeats: int = 5) -> float:
    """float32 GFLOP/s of one CPU thread on Facebook's largest product (4,039 × 364 by 364 × 256), best of `repeats`:
    the speed that bounds the IGEL model's steps here, printed so that figures taken on different hosts compare (this
    project's 2-core machine has given 31 and some 80)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    left, right = torch.rand(4039, 364), torch.rand(364, 256)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        left @ right
        best = min(best, time.perf_counter() - start)
    torch.set_num_threads(threads)
    return 2 * 4039 * 364 * 256 / best / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-root")
    parser.add_argument("--device", default="auto", help="our trainer's device (default: auto)")
    parser.add_argument("--repeats", type=int, default=3, help="timings of each side, the best kept (default 3)")
    parser.add_argument("--skip-end-to-end", action="store_true")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("overrides", nargs="*", help="extra igel-run overrides for the end-to-end run")
    args = parser.parse_args()
    root, device = data_root(args.data_root), resolve_device(args.device)
    print(f"machine: {machine()}")
    if not args.skip_end_to_end:
        end_to_end(root, device, args.overrides)
    if not args.skip_throughput:
        settings = {"": {}, " (bfloat16)": {"precision": "bfloat16"}}
        if emulated_bfloat16(device):  # some 2 minutes a repeat for nothing: float32 is the faster there
            print("\nbfloat16 not timed: this CPU has no bfloat16 kernels (its products run emulated)")
            del settings[" (bfloat16)"]
        throughput(root, device, args.repeats, settings)


if __name__ == "__main__":
    main()
