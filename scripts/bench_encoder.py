"""Benchmark: the vectorised IGEL encoder against the plain per-node Python BFS reference, same process.

    python scripts/bench_encoder.py [--data-root DIR] [--distances 1 2 3] [--reference-nodes N]
    python scripts/bench_encoder.py --chunks NODES [--distances 1 2] [--threads T] [--repeats 2]

Graphs: Facebook from the data root ($IGEL_DATA_DIR, else ../shared/data beside the repo) and an
Erdős–Rényi graph. For each α it prints the encoder's best-of-3 wall time and its peak traced memory,
the reference's time (over all nodes, or extrapolated from a sample of --reference-nodes), and the
ratio. The encoder's output is checked against the reference on the nodes the reference encoded.

With --chunks: the encoder as it chunks a large graph (its chunks grown where their balls span little of the graph,
encoding.grown_chunk) against chunks of encoder.chunk_size's 256 sources, on an Erdős–Rényi graph of NODES nodes and
average degree 8, T threads (default: every core); each α alternating, best of --repeats each, the counts checked
equal.
"""

from __future__ import annotations

import argparse
import os
import time
import tracemalloc
from pathlib import Path

import igraph as ig
import numpy as np

from igel_exp import encoding
from igel_exp.data import DataContext, load_dataset
from igel_exp.encoding import IGELEncoder
from igel_exp.reference import reference_encoding
from igel_exp.training import hardware

REPO = Path(__file__).resolve().parents[1]


def data_root(configured: str | None) -> Path | None:
    for candidate in (configured, os.environ.get("IGEL_DATA_DIR"), REPO.parent / "shared" / "data"):
        if candidate and Path(candidate, "Facebook").is_dir():
            return Path(candidate)
    return None


def time_encoder(graph: ig.Graph, distance: int, repeats: int = 3):
    encoder = IGELEncoder(distance).fit(graph)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        counts = encoder.counts(graph)
        best = min(best, time.perf_counter() - start)
    tracemalloc.start()
    encoder.counts(graph)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return encoder, counts, best, peak


def time_reference(graph: ig.Graph, distance: int, sample: int | None, seed: int = 0):
    nodes = None
    if sample is not None and sample < graph.vcount():
        nodes = sorted(np.random.default_rng(seed).choice(graph.vcount(), size=sample, replace=False).tolist())
    start = time.perf_counter()
    reference = reference_encoding(graph, distance, nodes=nodes)
    elapsed = time.perf_counter() - start
    encoded = graph.vcount() if nodes is None else len(nodes)
    return nodes, reference, elapsed * graph.vcount() / encoded, encoded


def check(encoder: IGELEncoder, counts, nodes, reference) -> None:
    width = encoder.max_degree_ + 1
    rows = range(counts.shape[0]) if nodes is None else nodes
    for row, expected in zip(rows, reference, strict=True):
        line = counts[row]
        got = {(int(c) // width, int(c) % width): int(v) for c, v in zip(line.indices, line.data, strict=True)}
        want: dict = {}
        for (c, degree), count in expected.items():
            key = (c, min(degree, encoder.max_degree_))
            want[key] = want.get(key, 0) + count
        assert got == want, f"encoder differs from the reference on node {row}"


def compare_chunks(nodes: int, distances: list[int], threads: int, repeats: int) -> None:
    graph = ig.Graph.Erdos_Renyi(n=nodes, m=4 * nodes)
    adjacency = encoding.adjacency(graph, multiplicity=True)
    print(f"Erdős–Rényi, {nodes:,} nodes, degree 8; {threads} threads; best of {repeats}", flush=True)
    grown = encoding._MAX_GROWTH
    for distance in distances:
        best, counts, chunk = {}, {}, {}
        for _ in range(repeats):
            for growth in (1, grown):  # 1: every chunk as encoder.chunk_size asks
                encoding._MAX_GROWTH = growth
                try:
                    encoder = IGELEncoder(distance, n_jobs=threads).fit(graph)
                    start = time.perf_counter()
                    counts[growth] = encoder.counts(graph)
                    best[growth] = min(best.get(growth, float("inf")), time.perf_counter() - start)
                    chunk[growth] = encoder._chunk(adjacency)
                finally:
                    encoding._MAX_GROWTH = grown
        assert (counts[1] != counts[grown]).nnz == 0, "the chunkings' counts differ"
        print(
            f"α = {distance}: chunks of {chunk[grown]:,} {best[grown]:.2f} s, of {chunk[1]:,} {best[1]:.2f} s:"
            f" {best[1] / best[grown]:.2f}×",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-root")
    parser.add_argument("--distances", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument(
        "--reference-nodes",
        type=int,
        default=None,
        help="encode only this many random nodes with the reference (default: all for α ≤ 2, 200 for α = 3)",
    )
    parser.add_argument("--er-nodes", type=int, default=20000)
    parser.add_argument("--er-degree", type=float, default=10.0)
    parser.add_argument("--chunks", type=int, metavar="NODES", help="grown chunks against fixed ones (above)")
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    print(f"machine: {hardware()}", flush=True)
    if args.chunks:
        compare_chunks(args.chunks, args.distances, args.threads, args.repeats)
        return

    graphs = {}
    root = data_root(args.data_root)
    if root is None:
        print("Facebook not found (set --data-root or IGEL_DATA_DIR): benchmarking the generated graph only")
    else:
        graphs["facebook"] = load_dataset({"name": "facebook"}, DataContext(root, False, 0)).graph
    er = {"name": "erdos_renyi", "num_nodes": args.er_nodes, "average_degree": args.er_degree}
    graphs[f"erdos_renyi({args.er_nodes}, {args.er_degree:g})"] = load_dataset(
        er, DataContext(Path("."), False, 0)
    ).graph

    print(f"threads: {len(os.sched_getaffinity(0))}")
    header = (
        f"{'graph':<26} {'α':>2} {'encoder s':>10} {'peak MiB':>9} {'reference s':>12} {'ref nodes':>9} {'ratio':>8}"
    )
    print(header)
    print("-" * len(header))
    for name, graph in graphs.items():
        for distance in args.distances:
            encoder, counts, seconds, peak = time_encoder(graph, distance)
            sample = args.reference_nodes if args.reference_nodes is not None else (None if distance <= 2 else 200)
            nodes, reference, reference_seconds, encoded = time_reference(graph, distance, sample)
            check(encoder, counts, nodes, reference)
            mark = "" if encoded == graph.vcount() else "*"
            print(
                f"{name:<26} {distance:>2} {seconds:>10.3f} {peak / 2**20:>9.1f} {reference_seconds:>11.2f}{mark:1}"
                f" {encoded:>9} {reference_seconds / seconds:>7.1f}×"
            )
    print("* reference time extrapolated from the sampled nodes; encoder output checked equal on them")


if __name__ == "__main__":
    main()
