"""Link prediction on our leak-free split beside a re-enactment of the authors' data path, scored alike.

    python scripts/split_leak_check.py [--dataset astroph] [--seed 0] [--listing both|once] [--threads N]
                                       [HYDRA_OVERRIDE ...]

The authors' code (nur-ag/IGEL `src/graph.py`, `src/link_prediction.py`) read the edge file with igraph's
`Read_Ncol` as an undirected graph without simplifying it, removed half of its edges while it stayed connected,
cached the residual graph with `write_ncol` and read it back, which numbers the vertices anew. Their positives are
the edges of the full graph whose (id, id) pair, in the orientation of the full graph's vertex numbering, is not an
edge of the read-back residual; their negatives are random (id, id) pairs that are not, in that orientation.
Two things follow:

- `--listing both` (SNAP's own layout for ca-AstroPh: every pair on two lines) makes the graph a multigraph with two
  copies of every edge. Removing half of the copies removes both copies of only a quarter of the pairs: the
  residual graph keeps three quarters of the pairs, and that quarter is the only positives besides the leak
  below. `--listing once` (Facebook's file, and ours) keeps half.
- Every residual pair whose end points swap order in the new numbering is not found, so it becomes a positive too
  although the embeddings learn from it: a leak, tens of thousands of pairs.

Here the residual graph keeps one copy of a random spanning forest and loses half of the other edge copies at random
(the authors removed edges one at a time and put back any that disconnected the graph); the read-back numbers the
vertices in order of first appearance in the residual edge list, as `Read_Ncol` does; IGEL trains on the residual
graph simplified (our encoder counts each neighbour once; the authors' counted parallel edges twice). Everything
else is `experiment=link_prediction` with its defaults and the overrides given (the authors' settings on AstroPh:
`encoder.distance=2 trainer.epochs=2`). Prints both splits' sizes and AUCs; runs go to a temporary MLflow store.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import igraph as ig
import numpy as np
import pandas as pd
import torch
from hydra import compose, initialize_config_module

from igel_exp.data import Dataset
from igel_exp.pipelines.common import Stages, build_encoder, load, train_unsupervised
from igel_exp.pipelines.link_prediction import configured_split
from igel_exp.tasks.link_prediction import EdgeSplit, link_prediction_scores, pair_keys, sorted_pairs
from igel_exp.tracking import tracked_run
from igel_exp.training import seed_everything


def first_appearance(ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Renumber vertex ids by first appearance in `ends` (k × 2), as Read_Ncol does: (renumbered ends, ids)."""
    codes, ids = pd.factorize(ends.ravel(), sort=False)
    return codes.reshape(-1, 2), np.asarray(ids)


def oriented_keys(ends: np.ndarray, ids: np.ndarray, n_ids: int) -> np.ndarray:
    """One key per edge: its (id, id) pair in the order of its end points' numbering, as `edges_to_ids` gave it."""
    ordered = np.sort(ends, axis=1)  # igraph lists an undirected edge from its lower-numbered end point
    return ids[ordered[:, 0]] * n_ids + ids[ordered[:, 1]]


def authors_split(graph: ig.Graph, listing: str, seed: int) -> tuple[ig.Graph, EdgeSplit]:
    """The residual graph (simple, vertices numbered as read back) and the labelled pairs of the authors' data path
    on `graph` listed `once` or `both` ways; the split's vertex ids are the residual graph's."""
    rng = np.random.default_rng(seed)
    edges = sorted_pairs(graph.get_edgelist())
    lines = edges
    if listing == "both":  # SNAP's layout: a pair on two lines, u v and v u
        lines = np.concatenate([edges, edges[:, ::-1]])
        lines = lines[rng.permutation(len(lines))]
    ends, ids = first_appearance(lines)  # the full graph as Read_Ncol numbered it; ids: our vertex ids
    n = graph.vcount()
    pair = pair_keys(ids[ends], n)  # the unordered pair of each edge copy
    forest = graph.spanning_tree(weights=rng.random(len(edges)).tolist(), return_tree=False)
    unique, first = np.unique(pair, return_index=True)
    kept_copy = first[np.isin(unique, pair_keys(edges[forest], n))]  # one copy of each forest edge stays
    removable = np.setdiff1d(np.arange(len(ends)), kept_copy)
    removed = np.zeros(len(ends), dtype=bool)
    removed[rng.choice(removable, size=len(ends) // 2, replace=False)] = True
    # write_ncol writes an edge from its lower-numbered end point; Read_Ncol numbers the vertices anew
    residual_ends, residual_ids = first_appearance(ids[np.sort(ends[~removed], axis=1)])
    n_read = len(residual_ids)
    residual_keys = np.unique(oriented_keys(residual_ends, residual_ids, n))
    full_keys = oriented_keys(ends, ids, n)
    positives = full_keys[~np.isin(full_keys, residual_keys)]
    draws = rng.integers(n_read, size=(4 * len(positives), 2))
    draws = residual_ids[draws[:, 0]] * n + residual_ids[draws[:, 1]]
    negatives = draws[~np.isin(draws, residual_keys)][: len(positives)]
    index = pd.Index(residual_ids)

    def renumber(keys: np.ndarray) -> np.ndarray:
        pairs = index.get_indexer(np.stack([keys // n, keys % n], axis=1).ravel()).reshape(-1, 2)
        return pairs[(pairs >= 0).all(axis=1)]  # pairs with an end point the residual graph lost are dropped

    residual = ig.Graph(n=n_read, edges=residual_ends.tolist(), directed=False).simplify()
    residual.vs["name"] = np.asarray(graph.vs["name"], dtype=object)[residual_ids].tolist()
    split = EdgeSplit(n_read, sorted_pairs(residual.get_edgelist()), renumber(positives), renumber(negatives))
    return residual, split


def describe(label: str, split: EdgeSplit) -> str:
    residual = np.sort(pair_keys(split.residual, split.n_nodes))
    positives = pair_keys(split.positives, split.n_nodes)
    leaked = np.isin(positives, residual).sum()
    return (
        f"{label}: residual graph {len(split.residual)} edges; {len(split.positives)} positives"
        f" ({leaked} of them residual edges), {len(split.negatives)} negatives"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="astroph")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--listing", choices=["both", "once"], default="both", help="how the authors' file lists a pair"
    )
    parser.add_argument("--threads", type=int, help="torch CPU threads")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. encoder.distance=2 trainer.epochs=2")
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
    ours, _, _ = configured_split(dataset, config)
    theirs_graph, theirs = authors_split(dataset.graph, args.listing, args.seed)
    print(f"{args.dataset}, seed {args.seed}, {' '.join(args.overrides) or 'defaults'}", flush=True)
    paths = [
        ("leak-free", ours.residual_graph(dataset.graph.vs["name"]), ours),
        (f"authors' path, each pair listed {args.listing}", theirs_graph, theirs),
    ]
    for label, graph, split in paths:
        seed_everything(config.seed, config.trainer.get("deterministic", True))  # as igel-run: the same start
        with tracked_run(config, "split_leak_check") as logger:
            embeddings = train_unsupervised(
                Dataset(dataset.name, graph, dataset.report),
                config,
                build_encoder(config.encoder, False),
                logger,
                Stages(),
            )
        scores = link_prediction_scores(embeddings, split, config.seed, config.task.validation_fraction)
        print(f"{describe(label, split)}: AUC {scores['auc']:.4f} (validation {scores['val_auc']:.4f})", flush=True)


if __name__ == "__main__":
    main()
