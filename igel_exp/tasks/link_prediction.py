"""Link prediction with the protocol of the node2vec paper (paper §4.2).

Half of the edges are removed while the residual graph keeps its connected components (edges of a random
spanning forest are never removed); as many node pairs that are not edges of the full graph are sampled as
negatives. Embeddings are learned on the residual graph only; a pair is described by the Hadamard product
of its end points' embeddings and a logistic regression trained on one half of the labelled pairs is scored
by ROC AUC on the other half.

Leak-free by construction: pairs are stored as sorted (u < v) vertex pairs, positives are exactly the
removed edges, negatives are checked against the full edge set in both orientations.

`read_back_split` re-enacts the authors' data path instead (task.split=read_back): their residual graph went through
a file and back, and positives were matched as oriented (id, id) pairs, so that residual edges leak into them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import igraph as ig
import numpy as np
import pandas as pd

from igel_exp.errors import ConfigError, DataError


@dataclass(frozen=True)
class EdgeSplit:
    """Vertex pairs (k × 2, u < v) of a link-prediction split of a graph with `n_nodes` vertices."""

    n_nodes: int
    residual: np.ndarray  # the edges kept: the graph embeddings are learned on (parallel copies repeated)
    positives: np.ndarray  # the removed edges
    negatives: np.ndarray  # pairs that are not edges of the full graph
    vertices: np.ndarray | None = None  # the full graph's vertex of each split vertex; None: the same numbering

    def residual_graph(self, names: list[str]) -> ig.Graph:
        """The residual graph; `names`: the full graph's vertex names."""
        graph = ig.Graph(n=self.n_nodes, edges=self.residual, directed=False)
        graph.vs["name"] = (
            list(names) if self.vertices is None else np.asarray(names, dtype=object)[self.vertices].tolist()
        )
        return graph

    def sizes(self) -> dict[str, int]:
        residual = np.unique(pair_keys(self.residual, self.n_nodes))
        return {
            "split_residual_edges": len(self.residual),
            "split_positives": len(self.positives),
            "split_negatives": len(self.negatives),
            "split_positives_in_residual": int(_member(pair_keys(self.positives, self.n_nodes), residual).sum()),
        }


def sorted_pairs(pairs: np.ndarray) -> np.ndarray:
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    return np.sort(pairs, axis=1)


def pair_keys(pairs: np.ndarray, n_nodes: int) -> np.ndarray:
    """One integer per unordered pair: u·|V| + v with u < v."""
    pairs = sorted_pairs(pairs)
    return pairs[:, 0] * n_nodes + pairs[:, 1]


def split_edges(graph: ig.Graph, fraction: float, seed: int) -> EdgeSplit:
    """Remove `fraction` of the edges at random, never an edge of a random spanning forest, and sample as
    many non-edges. Depends only on the graph and the seed.

    With parallel edges (dataset.parallel_edges=true) `fraction` of the pairs go, each with all its copies: a copy
    left behind would make its pair a positive that the embeddings learned on (read_back_split removes copies one
    by one, as the authors did)."""
    rng = np.random.default_rng(seed)
    simple = graph
    if graph.has_multiple():
        simple = graph.copy()
        simple.simplify(multiple=True, loops=False)
    pairs, removed = _removed_edges(simple, fraction, rng)
    negatives = sample_non_edges(pairs, graph.vcount(), int(removed.sum()), rng)
    edges = sorted_pairs(graph.get_edgelist())  # the pairs themselves on a simple graph, else with their copies
    gone = _member(pair_keys(edges, graph.vcount()), np.sort(pair_keys(pairs[removed], graph.vcount())))
    return EdgeSplit(graph.vcount(), edges[~gone], pairs[removed], negatives)


def _removed_edges(graph: ig.Graph, fraction: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The graph's edges (sorted pairs, in edge order; parallel copies each) and a mask of the `fraction` of them
    removed at random, never an edge of a random spanning forest: the residual graph keeps its components."""
    if not 0.0 < fraction < 1.0:
        raise ConfigError(f"task.removed_fraction must be in (0, 1), got {fraction!r}")
    edges = sorted_pairs(graph.get_edgelist())
    removed_count = round(fraction * len(edges))
    # the minimum spanning forest under random weights is a random spanning forest
    forest = graph.spanning_tree(weights=rng.random(len(edges)).tolist(), return_tree=False)
    removable = np.setdiff1d(np.arange(len(edges)), np.asarray(forest, dtype=np.int64))
    if removed_count == 0:
        raise DataError(
            f"the graph is too small for the link-prediction protocol: {fraction:.0%} of its {len(edges)} edges rounds"
            " to none to remove and predict"
        )
    if len(removable) < removed_count:
        raise DataError(
            f"the graph is too small or too sparse for the link-prediction protocol: removing {fraction:.0%} of"
            f" its {len(edges)} edges ({removed_count}) while it stays connected needs that many edges outside a"
            f" spanning forest, it has {len(removable)}"
        )
    removed = np.zeros(len(edges), dtype=bool)
    removed[rng.choice(removable, size=removed_count, replace=False)] = True
    return edges, removed


def read_back_split(graph: ig.Graph, fraction: float, seed: int) -> EdgeSplit:
    """The authors' link-prediction data path (nur-ag/IGEL src/link_prediction.py:57-93, src/graph.py:6-93) on
    `graph` as their loader built it (dataset.parallel_edges=true): vertices numbered as igraph's Read_Ncol numbered
    the file, one edge per line, in file order. The split's vertices are those of the residual graph read back.

    `fraction` of the edges (parallel copies counted one by one) are removed, never an edge of a random spanning
    forest (they removed edges one at a time and put back any whose removal disconnected its ends). The residual
    graph is written as write_ncol writes it (each edge from its lower-numbered end, in edge order) and read back,
    which numbers the vertices anew by first appearance. Positives: the full graph's (id, id) pairs, oriented by
    the full graph's numbering, that are not a residual pair oriented by the new one; a residual edge whose ends
    swapped order is one (the leak). Negatives: as many random (id, id) pairs of residual vertices, self pairs
    included, that are neither, in that orientation (generate_negative_edges).
    """
    rng = np.random.default_rng(seed)
    n = graph.vcount()
    ends, removed = _removed_edges(graph, fraction, rng)
    codes, vertices = pd.factorize(ends[~removed].ravel(), sort=False)  # Read_Ncol's numbering of the file
    residual = codes.reshape(-1, 2)
    n_read = len(vertices)

    def oriented(pairs: np.ndarray) -> np.ndarray:  # (id, id) of read-back pairs, oriented by the new numbering
        ordered = np.sort(pairs, axis=1)
        return vertices[ordered[:, 0]] * n + vertices[ordered[:, 1]]

    known = np.unique(oriented(residual))
    full = ends[:, 0] * n + ends[:, 1]  # igraph lists an edge from its lower-numbered end
    positives = full[~np.isin(full, known)]
    known = np.union1d(known, positives)
    negatives = np.empty(0, dtype=np.int64)
    while len(negatives) < len(positives):
        draws = rng.integers(n_read, size=(2 * (len(positives) - len(negatives)) + 16, 2))
        keys = vertices[draws[:, 0]] * n + vertices[draws[:, 1]]
        negatives = np.concatenate([negatives, keys[~np.isin(keys, known)]])
    index = pd.Index(vertices)

    def renumber(keys: np.ndarray) -> np.ndarray:  # to the residual graph's numbering; lost end points drop a pair
        pairs = index.get_indexer(np.stack([keys // n, keys % n], axis=1).ravel()).reshape(-1, 2)
        return pairs[(pairs >= 0).all(axis=1)]

    return EdgeSplit(
        n_read, sorted_pairs(residual), renumber(positives), renumber(negatives[: len(positives)]), vertices
    )


def sample_non_edges(edges: np.ndarray, n_nodes: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """`count` distinct uniformly random pairs u < v, u ≠ v, that are not edges."""
    possible = n_nodes * (n_nodes - 1) // 2 - len(edges)
    if count > possible:
        raise DataError(
            f"the graph is too dense for the link-prediction protocol: its {count} removed edges need as many"
            f" non-adjacent pairs as negatives, it has {possible} (a smaller task.removed_fraction removes fewer)"
        )
    existing = np.sort(pair_keys(edges, n_nodes))
    chosen = np.empty(0, dtype=np.int64)
    while len(chosen) < count:
        draw = rng.integers(n_nodes, size=(2 * (count - len(chosen)) + 16, 2))
        draw = draw[draw[:, 0] != draw[:, 1]]
        keys = pair_keys(draw, n_nodes)
        keys = keys[~_member(keys, existing)]
        candidates = np.concatenate([chosen, keys])
        _, first = np.unique(candidates, return_index=True)
        chosen = candidates[np.sort(first)][:count]  # keep draw order: reproducible
    return np.stack([chosen // n_nodes, chosen % n_nodes], axis=1)


def _member(keys: np.ndarray, sorted_keys: np.ndarray) -> np.ndarray:
    if not len(sorted_keys):
        return np.zeros(len(keys), dtype=bool)
    found = np.minimum(np.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)
    return sorted_keys[found] == keys


def check_split(split: EdgeSplit, graph: ig.Graph) -> None:
    """Raise DataError unless `split` is a leak-free split of `graph` (used on splits read from a cache)."""
    n = graph.vcount()
    full = np.sort(pair_keys(graph.get_edgelist(), n))
    residual = np.sort(pair_keys(split.residual, n))
    positives, negatives = pair_keys(split.positives, n), pair_keys(split.negatives, n)
    pairs = (split.residual, split.positives, split.negatives)
    problems = {
        # a cached pair whose name the graph lacks reads as -1, whose keys pass for a non-edge: a negative scored with
        # the last vertex's embedding
        "a pair names a node that the graph lacks": any(((part < 0) | (part >= n)).any() for part in pairs),
        "a positive is an edge of the residual graph": _member(positives, residual).any(),
        "a positive is not an edge of the graph": not _member(positives, full).all(),
        "a negative is an edge of the graph": _member(negatives, full).any(),
        "the residual graph is not a subgraph": not _member(residual, full).all(),
        # the pairs, each with all its copies (a graph with parallel edges) in the residual graph or none
        "residual and positives do not add up to the graph": len(np.unique(residual)) + len(positives)
        != len(np.unique(full))
        or len(residual) != _member(full, np.unique(residual)).sum(),
    }
    failed = [problem for problem, bad in problems.items() if bad]
    if split.n_nodes != n or failed:
        raise DataError(f"link-prediction split does not fit the graph: {'; '.join(failed) or 'vertex count'}")


def hadamard_features(embeddings: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """Pair features: the element-wise product of the two end points' embeddings."""
    return embeddings[pairs[:, 0]] * embeddings[pairs[:, 1]]


def link_prediction_scores(
    embeddings: np.ndarray,
    split: EdgeSplit,
    seed: int,
    validation_fraction: float = 0.25,
    classifier: str = "logistic_regression",
) -> dict[str, float]:
    """ROC AUC of a `classifier` (CLASSIFIERS) on Hadamard features.

    The labelled pairs are shuffled (by `seed`, the same for every method) and halved: the classifier
    trains on the first half and `auc` is its score on the second. `val_auc` holds out the last
    `validation_fraction` of the training half instead, for choosing hyper-parameters without the test pairs.
    """
    if classifier not in CLASSIFIERS:
        raise ConfigError(f"task.classifier={classifier!r} is not one of {', '.join(CLASSIFIERS)}")
    labels, rows = _scored_rows(split, seed, validation_fraction)
    features = hadamard_features(embeddings, np.concatenate([split.positives, split.negatives]))
    # imported here: scikit-learn takes 1-2 s to import, which every isolated job (a fresh process, such as each
    # scalability run) would pay for nothing, the pipelines importing every task
    from sklearn.metrics import roc_auc_score

    def auc(fit_rows: np.ndarray, score_rows: np.ndarray) -> float:
        score = CLASSIFIERS[classifier](features[fit_rows], labels[fit_rows], seed)
        return float(roc_auc_score(labels[score_rows], score(features[score_rows])))

    scores = {"auc": auc(rows["train"], rows["test"]), "val_auc": auc(rows["fit"], rows["validation"])}
    return {**scores, "test_pairs": float(len(rows["test"]))}


Scorer = Callable[[np.ndarray], np.ndarray]


def logistic_regression(features: np.ndarray, labels: np.ndarray, seed: int) -> Scorer:
    """The paper's classifier: scikit-learn's L2-regularised logistic regression on standardised features
    (docs/experiments.md says why standardised); deterministic, so `seed` is unused."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    model.fit(features, labels)
    return model.decision_function


def adam_linear(features: np.ndarray, labels: np.ndarray, seed: int) -> Scorer:
    """The authors' classifier (nur-ag/IGEL at f1fd43d, src/link_prediction.py:27-48 and src/run_lp_experiment.py:22):
    a torch linear layer on the raw Hadamard features, its weights as nn.Linear draws them (from `seed`), trained on
    the mean binary cross-entropy by Adam (lr 0.05, no weight decay) for 30 epochs of batches of 2,048 pairs in one
    fixed order. Their early stopping on the training loss (patience 25) cannot stop 30 epochs in time to matter, and
    its checkpoint went to /dev/null: the last epoch's layer is the one scored."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    layer = torch.nn.Linear(features.shape[1], 1)
    bound = features.shape[1] ** -0.5  # nn.Linear's own bound: kaiming_uniform_(a=√5) gives 1/√fan_in
    with torch.no_grad():
        for parameter in layer.parameters():
            parameter.uniform_(-bound, bound, generator=generator)
    epochs, batch, lr = 30, 2048, 0.05  # their LP_TRAINING_OPTIONS
    optimiser = torch.optim.Adam(layer.parameters(), lr=lr)
    x = torch.from_numpy(np.ascontiguousarray(features, dtype=np.float32))
    y = torch.from_numpy(labels.astype(np.float32)).reshape(-1, 1)
    for _ in range(epochs):
        for start in range(0, len(x), batch):
            optimiser.zero_grad()
            logits = layer(x[start : start + batch])
            torch.nn.functional.binary_cross_entropy_with_logits(logits, y[start : start + batch]).backward()
            optimiser.step()

    def score(rows: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return layer(torch.from_numpy(np.ascontiguousarray(rows, dtype=np.float32))).numpy().ravel()

    return score


# task.classifier: the paper's (faithful) and the authors' (protocol=authors)
CLASSIFIERS: dict[str, Callable[[np.ndarray, np.ndarray, int], Scorer]] = {
    "logistic_regression": logistic_regression,
    "adam_linear": adam_linear,
}


def _scored_rows(split: EdgeSplit, seed: int, validation_fraction: float) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The labelled pairs' labels (positives, then negatives) and the rows of each part link_prediction_scores uses:
    `train` and `test`, the halves, and `fit` and `validation`, the training half less its held-out fraction."""
    labels = np.concatenate([np.ones(len(split.positives)), np.zeros(len(split.negatives))])
    order = np.random.default_rng(seed).permutation(len(labels))
    train, test = np.split(order, [len(order) // 2])
    held_out = max(1, round(validation_fraction * len(train)))
    return labels, {"train": train, "test": test, "fit": train[:-held_out], "validation": train[-held_out:]}


def check_scorable(split: EdgeSplit, seed: int, validation_fraction: float) -> None:
    """Raise ConfigError, naming the key to change, where a part of the labelled pairs that link_prediction_scores
    fits a classifier on or scores holds one class only (or none): scikit-learn's traceback after training, or an AUC
    of NaN in a finished run."""
    labels, rows = _scored_rows(split, seed, validation_fraction)
    for part, kept in rows.items():
        if len(np.unique(labels[kept])) == 2:
            continue
        if part in ("fit", "validation"):
            change = "lower it" if part == "fit" else "raise it"
            raise ConfigError(
                f"task.validation_fraction={validation_fraction}: the classifier's {part} pairs ({len(kept)} of the"
                f" training half's {len(rows['train'])}) hold one class only: {change}"
            )
        raise ConfigError(
            f"the split's {len(labels)} labelled pairs are too few: the classifier's {part} half holds one class only;"
            " raise task.removed_fraction"
        )
