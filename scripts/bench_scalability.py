"""Benchmark: every stage of experiment=scalability at sizes where a full run would take hours on a small machine.

    python scripts/bench_scalability.py [--nodes 65536 262144 1048576] [--distances 1 2 3] [--degree 8]
                                        [--train-walks 8192] [--threads N] [--timeout 1800] [OVERRIDE ...]

Each (|V|, α) runs in a fresh process through the pipeline's own code (generate, encode, train_unsupervised),
with the paper's scalability settings, except that training sees only the first --train-walks walks of one
epoch: its throughput (positive pairs per second of train time) projects the 3 epochs of a full run. One full
epoch of walks is drawn besides, untrained, to time that stage (a full run draws each chunk while the one before
trains: its projection counts each epoch's first chunk). Printed per point: wall and CPU time and peak
resident memory of every stage, the throughput, the projected full run and which stage dominates it; a point
that fails or passes --timeout prints why. CPU time beside wall time shows waiting for a busy machine's CPUs.
OVERRIDEs apply to every point, as igel-run's would: `trainer.compile=true` times the compiled step (its slice
includes the compilation, 7-11 s the first time on a machine, then a few seconds from Inductor's disk cache).
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import time

import numpy as np
import torch

from igel_exp.training import hardware

ORDER = ["generate", "encode", "walks", "train"]


def measure(nodes: int, distance: int, degree: float, train_walks: int, threads: int | None, extra: list[str]) -> dict:
    from hydra import compose, initialize_config_module

    from igel_exp.pipelines import common
    from igel_exp.pipelines.common import Stages, build_encoder, load, train_unsupervised
    from igel_exp.training import seed_everything
    from igel_exp.walks import WALKS_PER_CHUNK, CSRGraph, epoch_walks, positive_pairs

    overrides = [
        "experiment=scalability",
        f"dataset.num_nodes={nodes}",
        f"dataset.average_degree={degree}",
        f"encoder.distance={distance}",
        "trainer.epochs=1",
        *([f"threads={threads}"] if threads else []),
        *extra,
    ]
    with initialize_config_module(config_module="igel_exp.conf", version_base="1.3"):
        config = compose(config_name="config", overrides=overrides)
    epochs = 3  # the paper's; the slice below trains one
    trainer = config.trainer
    seed_everything(config.seed, trainer.deterministic)
    if config.get("threads"):  # as igel_exp.pipelines.run does
        torch.set_num_threads(int(config.threads))
    trained = {}

    class Logger:  # what train_unsupervised logs, kept instead of sent to MLflow
        def metrics(self, values, step=None):
            trained.update(values)

        def tags(self, values):
            pass

        def folder(self, path, name):  # the saved model: not timed here
            pass

    full_epoch = common.epoch_walks
    # training sees the first `train_walks` walks of its epoch only: the pipeline's code, a slice of its work
    common.epoch_walks = lambda *args, **kwargs: itertools.islice(
        full_epoch(*args, **{**kwargs, "walks_per_chunk": train_walks}), 1
    )
    stages = Stages()
    with stages("total"):
        with stages("generate"):
            dataset = load(config)
        train_unsupervised(dataset, config, build_encoder(config.encoder, False), Logger(), stages)
    neighbours = CSRGraph.from_igraph(dataset.graph)
    walk_stages = Stages()
    with walk_stages("walks"):
        for _ in epoch_walks(neighbours, trainer.walks_per_node, trainer.walk_length, np.random.default_rng(0)):
            pass
    metrics = {**stages.metrics(), **walk_stages.metrics(), "peak_rss_mib": stages.metrics()["peak_rss_mib"]}
    pairs = trained.get("positive_pairs", 0.0)
    throughput = pairs / max(metrics["time_train_s"], 1e-9)
    full_pairs = nodes * trainer.walks_per_node * positive_pairs(trainer.walk_length, trainer.window)
    chunks = -(-nodes * trainer.walks_per_node // WALKS_PER_CHUNK)
    projected = {
        "generate": metrics["time_generate_s"],
        "encode": metrics["time_encode_s"],
        # a run draws each chunk while the one before trains (walks.drawn_ahead): it waits for an epoch's first
        "walks": epochs * metrics["time_walks_s"] / chunks,
        "train": epochs * full_pairs / throughput if throughput else float("inf"),
    }
    return {
        "nodes": nodes,
        "distance": distance,
        "edges": dataset.graph.ecount(),
        "time": {stage: metrics.get(f"time_{stage}_s", 0.0) for stage in ORDER},
        "cpu": {stage: metrics.get(f"time_{stage}_cpu_s", 0.0) for stage in ORDER},
        "peak_mib": {stage: metrics.get(f"peak_{stage}_mib", 0.0) for stage in ORDER},
        "peak_rss_mib": metrics["peak_rss_mib"],
        "trained_pairs": pairs,
        "pairs_per_s": throughput,
        "projected_s": projected,
    }


def report(point: dict) -> str:
    projected = point["projected_s"]
    total = sum(projected.values())
    top = max(projected, key=projected.get)
    lines = [
        f"|V| = {point['nodes']:,} ({point['edges']:,} edges), α = {point['distance']}:"
        f" peak {point['peak_rss_mib']:,.0f} MiB",
        "  stage      wall s    cpu s   peak MiB   (walks: one full epoch; train: the slice)",
    ]
    for stage in ORDER:
        lines.append(
            f"  {stage:9s}{point['time'][stage]:8.1f} {point['cpu'][stage]:8.1f} {point['peak_mib'][stage]:10,.0f}"
        )
    lines.append(f"  train: {point['trained_pairs']:,.0f} positive pairs at {point['pairs_per_s']:,.0f} pairs/s")
    shares = ", ".join(f"{stage} {seconds:,.0f} s ({seconds / total:.0%})" for stage, seconds in projected.items())
    lines.append(f"  projected full run (3 epochs): {total:,.0f} s = {shares}; {top} dominates")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[2**16, 2**18, 2**20])
    parser.add_argument("--distances", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--degree", type=float, default=8)
    parser.add_argument("--train-walks", type=int, default=8192, help="walks trained on, to time the trainer")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per point before it is stopped")
    parser.add_argument("--threads", type=int, help="CPU threads (default: the experiment's, 1)")
    parser.add_argument("--point", type=str, help=argparse.SUPPRESS)  # internal: measure one point, print JSON
    parser.add_argument("overrides", nargs="*", help="igel-run overrides for every point, e.g. trainer.compile=true")
    args = parser.parse_args()
    if args.point:
        nodes, distance = map(int, args.point.split(","))
        print(json.dumps(measure(nodes, distance, args.degree, args.train_walks, args.threads, args.overrides)))
        return
    print(f"machine: {hardware()}", flush=True)
    for nodes, distance in itertools.product(args.nodes, args.distances):
        command = [sys.executable, __file__, "--point", f"{nodes},{distance}", "--degree", str(args.degree)]
        command += ["--train-walks", str(args.train_walks)] + (["--threads", str(args.threads)] if args.threads else [])
        command += args.overrides
        start = time.perf_counter()
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            print(f"|V| = {nodes:,}, α = {distance}: stopped after {args.timeout:.0f} s\n", flush=True)
            continue
        if done.returncode != 0:
            reason = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit status {done.returncode}"
            print(f"|V| = {nodes:,}, α = {distance}: failed after {time.perf_counter() - start:.0f} s: {reason}\n")
            continue
        point = json.loads(done.stdout.strip().splitlines()[-1])
        print(report(point) + "\n", flush=True)


if __name__ == "__main__":
    main()
