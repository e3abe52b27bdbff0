"""The device benchmark: on a GPU machine, one command under 10 minutes gives every figure of the trainer's targets.

    ../shared/tools/device-pack.sh --gensim Facebook CA-AstroPh    # on a machine with this project's dependencies
    python scripts/bench_gpu.py [--data-root DIR] [--device cuda] [--budget 540] [--repeats 3] [--seeds 0 ...]
                                [--only PART ...]

Prints the device's name, then, each part skipped (saying so) when the time left in --budget cannot hold it:
  tests        the maths tests on the device: `pytest tests/test_models.py tests/test_walks.py -k <device type>`
               (their GPU variants, which CI cannot run), its summary line and any failures
  throughput   our trainer on Facebook's walks (d = 256, the authors' batches of 250,000 pairs), the IGEL model and
               free embeddings, with CUDA graphs, without them, with trainer.batch_scale=4, and the IGEL model with
               batch_scale=4 at trainer.precision=bfloat16; beside gensim on all the machine's cores; best of
               --repeats each (scripts/bench_link_prediction.py)
  facebook     Facebook link prediction end to end, each of --seeds (default 0): the defaults (the authors' batches),
               batch_scale=2 and batch_scale=4 (AUC, time per stage)
  astroph      AstroPh link prediction (α = 3, 8 epochs), each of --seeds: the same three
  scalability  experiment=scalability at 2^20 nodes, degree 8, α = 2, all cores for the encoder: the whole run, with
               batch_scale=64, then with the authors' batches (of 25,000 pairs: 350,000 steps; docs/experiments.md)
"""

from __future__ import annotations

import argparse
import functools
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

import torch
from bench_link_prediction import data_root, end_to_end, machine, run_experiment, throughput

from igel_exp.training import hardware, resolve_device

PARTS = ("tests", "throughput", "facebook", "astroph", "scalability")
# the link prediction parts, run once per seed of --seeds: each one's overrides and title
PER_SEED = {"facebook": ([], "Facebook"), "astroph": (["dataset=astroph"], "AstroPh")}
# seconds each part needs at most on an H100/H200, twice what it took on an H200 (a part starts only when that much of
# the budget is left; the link prediction parts' per seed); the last four took 139 s there (the scalability part
# then ran batch_scale=64 alone), the tests 12 s; the authors' batches at 2^20 nodes took 66 s (84 s before the
# encoder grew its chunks)
NEEDS = {"tests": 30, "throughput": 60, "facebook": 50, "astroph": 130, "scalability": 250}
REPO = Path(__file__).resolve().parents[1]


def maths_tests(device: torch.device) -> None:
    """The device's variants of the maths tests, in a process of their own; their summary (and failures) printed."""
    files = ["tests/test_models.py", "tests/test_walks.py"]
    command = [sys.executable, "-m", "pytest", "-q", "-rf", "-p", "no:cacheprovider", "-k", device.type, *files]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    lines = result.stdout.strip().splitlines()
    print("\n".join(line for line in lines if line.startswith("FAILED")) or "no failures")
    print(f"maths tests on {hardware(device)}: {lines[-1] if lines else result.stderr.strip()[-300:]}", flush=True)


def scalability(root, device: torch.device, nodes: int, batch_scale: int) -> None:
    overrides = [
        "experiment=scalability",
        f"dataset.num_nodes={nodes}",
        "dataset.average_degree=8",
        "encoder.distance=2",
        f"threads={os.cpu_count()}",
        "task.isolate=false",
        "task.memory_budget_gib=null",
        f"trainer.batch_scale={batch_scale}",
    ]
    metrics, total = run_experiment(root, device, overrides)
    stages = ", ".join(
        f"{stage} {metrics[f'time_{stage}_s']:.1f} s" for stage in ("generate", "encode", "walks", "train")
        if f"time_{stage}_s" in metrics
    )  # fmt: skip
    batches = f"batch_scale={batch_scale}" if batch_scale > 1 else "the authors' batches"
    print(f"scalability, {nodes:,} nodes, degree 8, α = 2, {batches}: whole run {total:.1f} s ({stages})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-root")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--budget", type=float, default=540, help="seconds for all parts (default 540)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="the link prediction runs' seeds (default 0)")
    parser.add_argument("--only", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--scalability-nodes", type=int, default=2**20, help=argparse.SUPPRESS)  # CPU smoke tests
    args = parser.parse_args()
    start = time.perf_counter()
    root, device = data_root(args.data_root), resolve_device(args.device)
    print(f"device: {hardware(device)}; CPU: {machine()}; torch {torch.__version__}", flush=True)
    variants = [
        [f"seed={seed}", *extra]
        for seed in args.seeds
        for extra in ([], ["trainer.batch_scale=2"], ["trainer.batch_scale=4"])
    ]
    work = {  # each part's runs, each run on its own: a failure prints its traceback and the next run goes on
        "tests": [lambda: maths_tests(device)],
        "throughput": [
            lambda: throughput(
                root,
                device,
                args.repeats,
                {
                    "": {},
                    " (no CUDA graphs)": {"cuda_graphs": False},
                    " (batch_scale 4)": {"batch_scale": 4},
                    " (batch_scale 4, bfloat16)": {"batch_scale": 4, "precision": "bfloat16"},
                },
            )
        ],
        "scalability": [functools.partial(scalability, root, device, args.scalability_nodes, k) for k in (64, 1)],
    }
    for part, (dataset, title) in PER_SEED.items():
        work[part] = [functools.partial(end_to_end, root, device, [*dataset, *extra], title) for extra in variants]
    for part in args.only:
        left = args.budget - (time.perf_counter() - start)
        need = NEEDS[part] * (len(args.seeds) if part in PER_SEED else 1)
        if left < need:
            print(f"{part}: skipped, {left:.0f} s of the budget left (it needs up to {need} s)", flush=True)
            continue
        print(f"\n== {part}", flush=True)
        for run in work[part]:
            try:
                run()
            except Exception:  # the device is lent for minutes: one failure must not cost the other figures
                print(f"{part}: a run failed, the part goes on\n{traceback.format_exc(limit=-6)}", flush=True)
    print(f"\nall parts: {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
