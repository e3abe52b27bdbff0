"""Capitals in the Sister Cities network (paper §4.1 and Appendix B, Table SisterCitiesF1Scores): the cluster
holding the most capitals, read as a binary classifier, against the top-|C| nodes by degree and by PageRank."""

from __future__ import annotations

from collections.abc import Mapping

import igraph as ig
import numpy as np

from igel_exp.errors import ConfigError, DataError
from igel_exp.tasks.clustering import tie_rounding_noise

RANKING_GRAPHS = ("directed", "undirected")


def capital_cluster(labels: np.ndarray, capitals: np.ndarray) -> int:
    """The cluster C with the most capitals (ties: the lowest cluster id, as the authors' argmax over sorted ids).

    labels: (|V|,) non-negative cluster ids; capitals: (|V|,) bool.
    """
    labels, capitals = _check(labels, capitals)
    counts = np.bincount(labels[capitals], minlength=int(labels.max()) + 1)
    return int(np.argmax(counts))


def f1(predicted: np.ndarray, truth: np.ndarray) -> float:
    """F1 of a predicted positive set against the true one, both (|V|,) bool: 2·TP / (|predicted| + |truth|)."""
    denominator = int(predicted.sum()) + int(truth.sum())
    return 2.0 * float(np.sum(predicted & truth)) / denominator if denominator else 0.0


def top_n_f1(scores: np.ndarray, truth: np.ndarray, n: int) -> float:
    """F1 of the n highest-scoring nodes taken as positives, against `truth` (bool, |V|).

    Nodes tied at the cut are taken at random: their share of the remaining places is counted fractionally,
    which is the F1 expected over every order of the ties (degrees tie in the hundreds; the authors' unstable
    sort picked some order of them). Independent of vertex order, so deterministic.
    Scores equal up to float rounding tie: PageRanks that tie exactly differ in igraph's last bits, which picked
    the cut's nodes by that noise (Sister Cities' directed PageRank at |C| 3,317-8,908: F1 up to 0.0004 off).
    """
    scores, truth = tie_rounding_noise(scores).astype(float), np.asarray(truth, dtype=bool)
    if not 0 <= n <= len(scores):
        raise ValueError(f"n={n} is outside 0..{len(scores)}")
    if n == 0:
        return f1(np.zeros_like(truth), truth)
    cut = np.partition(scores, len(scores) - n)[len(scores) - n]  # the n-th highest score
    above, tied = scores > cut, scores == cut
    places = n - int(above.sum())
    true_positives = truth[above].sum() + places * truth[tied].sum() / tied.sum()
    return 2.0 * float(true_positives) / (n + int(truth.sum()))


def capital_scores(
    labels: np.ndarray,
    capitals: np.ndarray,
    rankings: Mapping[str, np.ndarray],
    counted: np.ndarray | None = None,
) -> dict[str, float]:
    """Table SisterCitiesF1Scores for one clustering: |C|, the F1 of C, the F1 of the top-|C| nodes by each
    ranking (keys "degree", "pagerank", …) and the gain of C over the degree ranking, in percent.

    labels: (|V|,) cluster ids; capitals: (|V|,) bool; rankings: name → (|V|,) scores, higher first; counted:
    (|V|,) bool, the nodes that count as members of C (default all; every capital must be one), which fixes |C|.
    """
    labels, capitals = _check(labels, capitals)
    cluster = capital_cluster(labels, capitals)
    members = labels == cluster
    if counted is not None:
        counted = np.asarray(counted, dtype=bool)
        if counted.shape != capitals.shape or (capitals & ~counted).any():
            raise ValueError("`counted` must be a (|V|,) mask that includes every capital")
        members &= counted
    size = int(members.sum())
    result = {
        "cluster_size": float(size),
        "cluster_capitals": float(np.sum(members & capitals)),
        "f1_cluster": f1(members, capitals),
    }
    for name, scores in rankings.items():
        if len(scores) != len(labels):
            raise ValueError(f"ranking {name!r} scores {len(scores)} nodes, the clustering {len(labels)}")
        result[f"f1_top_{name}"] = top_n_f1(scores, capitals, size)
    if "degree" in rankings:
        degree = result["f1_top_degree"]
        # the paper's "%vs Degree F1" column: relative, in percent
        result["gain_vs_degree"] = 100.0 * (result["f1_cluster"] - degree) / degree if degree else float("nan")
    return result


def rankings(graph: ig.Graph, directed_pairs: np.ndarray | None, ranking_graph: str) -> dict[str, np.ndarray]:
    """The degree and PageRank of every node, the baselines' scores.

    `ranking_graph="undirected"` ranks on `graph` (simple, undirected); `"directed"` on the (m × 2) pairs as
    listed, where degree is in + out (a reciprocal partnership counts twice) and PageRank follows the
    direction: the authors' analysis ranked on those, and only they reproduce its PageRank column.
    """
    if ranking_graph == "undirected":
        ranked = graph
    elif ranking_graph == "directed":
        if directed_pairs is None:
            raise ConfigError("task.ranking_graph=directed needs a dataset that lists directed pairs; use undirected")
        ranked = ig.Graph(n=graph.vcount(), edges=np.asarray(directed_pairs).tolist(), directed=True)
    else:
        raise ConfigError(f"task.ranking_graph={ranking_graph!r} is not one of {', '.join(RANKING_GRAPHS)}")
    return {"degree": np.asarray(ranked.degree(), dtype=float), "pagerank": np.asarray(ranked.pagerank())}


def _check(labels: np.ndarray, capitals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    labels, capitals = np.asarray(labels), np.asarray(capitals, dtype=bool)
    if labels.shape != capitals.shape or labels.ndim != 1:
        raise ValueError(f"labels {labels.shape} and capitals {capitals.shape} must be vectors of one length")
    if not capitals.any():
        raise DataError("no node is flagged as a capital: the F1 of the capital cluster is undefined")
    if labels.min() < 0:
        raise ValueError("cluster ids must be non-negative")
    return labels.astype(np.int64), capitals
