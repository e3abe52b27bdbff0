"""Clustering evaluators (paper Section 4.1, Appendices A and B): KMeans with k chosen by modularity,
Louvain for comparison, and the correlation of node-to-neighbours similarity with centralities."""

from __future__ import annotations

import bisect
import hashlib
import io
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import igraph as ig
import numpy as np
from tqdm.auto import tqdm

from igel_exp import user_cache_dir, write_cache_entry
from igel_exp.encoding import adjacency
from igel_exp.errors import ConfigError

log = logging.getLogger(__name__)

CENTRALITIES = ("pagerank", "betweenness", "closeness", "degree")
# scikit-learn and scipy.stats are imported in the functions that use them: they take 1-2 s to import, which every
# isolated job (a fresh process, such as each scalability run) would pay for nothing, the pipelines importing every task


@dataclass
class KMeansSelection:
    """KMeans partitions of the embeddings for each k, scored by their modularity on the graph."""

    ks: list[int]
    modularity: list[float]
    labels: dict[int, np.ndarray]

    @property
    def best_k(self) -> int:
        return self.ks[int(np.argmax(self.modularity))]

    @property
    def best_labels(self) -> np.ndarray:
        return self.labels[self.best_k]


def kmeans_by_modularity(
    graph: ig.Graph,
    embeddings: np.ndarray,
    requested: Sequence[int],
    seed: int,
    n_init: int = 10,
    key: str = "task.k_min",
    notebook: NotebookKMeans | None = None,
) -> KMeansSelection:
    """KMeans for every k `requested` (ascending) up to the number of distinct embeddings (KMeans cannot make more
    clusters than points: it warns and leaves some empty); the best k is the one whose clusters have the highest
    modularity. `key`: the config key that sets the smallest k, which the error names. Each k's KMeans is seeded with
    `seed`, or with `notebook` starts as the authors' notebook drew them."""
    distinct = len(np.unique(embeddings, axis=0))
    # cut at `distinct` by bisection, not by a walk over every k: task.k_max=10**15 is a range of 10**15 ks
    ks = [k for k in requested[: bisect.bisect_right(requested, distinct)] if k >= 1]
    if not ks:
        raise ConfigError(
            f"{key}={requested[0]}: the embeddings hold {distinct} distinct points (nodes encoded alike embed"
            " alike), too few for that many clusters"
        )
    if len(ks) < len(requested):
        log.warning("KMeans: the embeddings hold %d distinct points, so k goes up to %d only", distinct, distinct)
    from sklearn.cluster import KMeans  # see CENTRALITIES

    labels, modularity = {}, []
    for k in ks:
        if notebook is None:
            labels[k] = KMeans(n_clusters=k, n_init=n_init, random_state=seed).fit_predict(embeddings)
        else:
            labels[k] = notebook.labels(embeddings, k, n_init)
        modularity.append(float(graph.modularity(labels[k].tolist())))
    return KMeansSelection(ks, modularity, labels)


@dataclass(frozen=True)
class NotebookKMeans:
    """KMeans as the authors' notebook ran it (nur-ag/IGEL notebooks/ClusteringExperiments.ipynb,
    `ClusteringExperiment.clustering_embeddings`: `KMeans(n_clusters=clusters).fit(embeddings)` for clusters = 1..15
    at each α = 1..4 in turn, under scikit-learn 0.22, requirements.txt). Unseeded, it drew from numpy's global
    stream, which `set_seed(seed)` had reset before the last α's training and nothing drew from until the first fit;
    0.22's `KMeans.fit` takes one draw of n_init start seeds from it a fit (`random_state.randint(2**31 - 1,
    size=n_init)`), and each start is k-means++ from a RandomState of its own seed, then Elkan's iterations (Lloyd's
    at k = 1); the start of least inertia wins. `distance`: the α whose fits these are; `seed`: set_seed's."""

    distance: int
    seed: int

    DISTANCES = 4  # MAX_DISTANCE: the notebook's α = 1..4
    KS = 15  # MAX_CLUSTERS: its k = 1..15 at each α

    def labels(self, embeddings: np.ndarray, k: int, n_init: int = 10) -> np.ndarray:
        from sklearn.cluster import KMeans  # see CENTRALITIES

        centred = embeddings - embeddings.mean(axis=0)  # as 0.22's fit centred X before its starts
        best = None
        for start in self.start_seeds(k, n_init):
            centres = kmeans_plusplus_022(centred, k, np.random.RandomState(start))
            fitted = KMeans(k, init=centres, n_init=1, algorithm="elkan" if k > 1 else "lloyd").fit(centred)
            if best is None or fitted.inertia_ < best.inertia_:  # the first of equal inertia, as 0.22 kept
                best = fitted
        return best.labels_

    def start_seeds(self, k: int, n_init: int = 10) -> np.ndarray:
        """The start seeds of the fit at (self.distance, k): the stream's draw after one per earlier fit."""
        if not (1 <= self.distance <= self.DISTANCES and 1 <= k <= self.KS):
            raise ConfigError(
                f"task.kmeans_stream={self.seed} replays the authors' notebook's KMeans fits, α = 1..{self.DISTANCES}"
                f" with k = 1..{self.KS}: encoder.distance={self.distance}, k={k} was none of them"
            )
        stream, high = np.random.RandomState(self.seed), np.iinfo(np.int32).max
        for _ in range(self.KS * (self.distance - 1) + k - 1):
            stream.randint(high, size=n_init)
        return stream.randint(high, size=n_init)


def kmeans_plusplus_022(points: np.ndarray, k: int, stream: np.random.RandomState) -> np.ndarray:
    """k-means++ centres drawn as scikit-learn 0.22's `_k_init` drew them from `stream`: the first point uniform
    (one `randint`), then for each further centre 2 + ⌊ln k⌋ candidates by squared distance to the nearest centre
    (one `random_sample`), the candidate that leaves the least total kept. (Today's `kmeans_plusplus` draws its first
    point otherwise, so it cannot replay 0.22's starts.) Distances in float64, as 0.22 computed float32 data's."""
    data = points.astype(np.float64)
    norms = np.einsum("ij,ij->i", data, data)

    def squared_distances(rows: np.ndarray) -> np.ndarray:
        return np.maximum(norms[rows, None] - 2 * data[rows] @ data.T + norms[None], 0.0)

    trials = 2 + int(np.log(k))
    chosen = [stream.randint(len(data))]
    nearest = squared_distances(np.asarray(chosen))[0]
    for _ in range(1, k):
        wanted = stream.random_sample(trials) * nearest.sum()
        candidates = np.minimum(np.searchsorted(np.cumsum(nearest), wanted), len(data) - 1)
        kept = np.minimum(nearest, squared_distances(candidates))
        best = int(np.argmin(kept.sum(axis=1)))
        chosen.append(int(candidates[best]))
        nearest = kept[best]
    return points[np.asarray(chosen)]


def louvain(graph: ig.Graph) -> tuple[np.ndarray, float]:
    """Louvain communities (igraph's multilevel) and their modularity; seed igraph's RNG around the call."""
    partition = graph.community_multilevel()
    return np.asarray(partition.membership), float(partition.modularity)


NEIGHBOURHOODS = ("open", "closed")
CENTRALITY_TIES = ("rounding", "bits")


def neighbour_similarity(graph: ig.Graph, embeddings: np.ndarray, neighbourhood: str = "open") -> np.ndarray:
    """Per node v, the sum of dot products between e_v and the embeddings of its neighbours (Appendix B): each
    neighbour once, parallel edges or not; `closed` adds v itself (e_v·e_v), as the authors' notebook summed over
    igraph's neighborhood(v, 1)."""
    if neighbourhood not in NEIGHBOURHOODS:
        raise ConfigError(f"task.score_neighbourhood={neighbourhood!r} is not one of {', '.join(NEIGHBOURHOODS)}")
    scores = np.einsum("ij,ij->i", adjacency(graph).astype(embeddings.dtype) @ embeddings, embeddings)
    return scores + np.einsum("ij,ij->i", embeddings, embeddings) if neighbourhood == "closed" else scores


# the centralities of the last graphs seen, by their edges: a sweep's runs on one graph, which Hydra's basic and
# joblib launchers run in one process (or a few), compute them once
_REMEMBERED: dict[str, dict[str, np.ndarray]] = {}
REMEMBERED_GRAPHS = 4
CENTRALITY_CACHE_ENTRIES = 64  # graphs whose centralities the user's cache keeps (Sister Cities': 0.4 MB)


def centralities(graph: ig.Graph, progress: bool = False) -> dict[str, np.ndarray]:
    """PageRank, betweenness, closeness and degree of every node, computed once per graph: kept in the process and in
    the user's cache (centralities/), keyed by the graph's edges, igraph's version and this module's code. Sister
    Cities' betweenness and closeness take 10-13 s of a 35 s run on a 2-core machine, every run (each igel-run, each job
    of a cluster sweep is a process of its own); read back, some milliseconds. With `progress`, a bar for each of
    betweenness and closeness while they are computed (AstroPh's: minutes)."""
    key = _centrality_key(graph)
    if key not in _REMEMBERED:
        if len(_REMEMBERED) >= REMEMBERED_GRAPHS:
            del _REMEMBERED[next(iter(_REMEMBERED))]  # the oldest
        entry = user_cache_dir() / "centralities" / f"{key[:32]}.npz"
        _REMEMBERED[key] = _cached_centralities(graph, entry, progress)
    return {name: values.copy() for name, values in _REMEMBERED[key].items()}


def _centrality_key(graph: ig.Graph) -> str:
    edges = np.asarray(graph.get_edgelist(), dtype=np.int64)
    digest = hashlib.sha256(f"{ig.__version__} {graph.vcount()} {graph.is_directed()}".encode())
    digest.update(Path(__file__).read_bytes())  # a change to closeness (or to what is computed) computes anew
    digest.update(edges.tobytes())
    return digest.hexdigest()


def _cached_centralities(graph: ig.Graph, entry: Path, progress: bool) -> dict[str, np.ndarray]:
    try:
        with np.load(entry, allow_pickle=False) as stored:
            found = {name: stored[name] for name in CENTRALITIES}
            kept_for = str(stored["key"])  # an entry copied or renamed is another graph's
        if kept_for == entry.stem and all(values.shape == (graph.vcount(),) for values in found.values()):
            return found
    except Exception:  # absent, unreadable, half-written by a crash: computed anew
        pass
    computed = {"pagerank": np.asarray(graph.pagerank())}
    with igraph_progress("betweenness", progress):
        computed["betweenness"] = np.asarray(graph.betweenness())
    with igraph_progress("closeness", progress):
        computed["closeness"] = closeness(graph)
    computed["degree"] = np.asarray(graph.degree(), dtype=float)
    stored = io.BytesIO()
    np.savez(stored, key=np.asarray(entry.stem), **computed)
    error = write_cache_entry(entry, stored.getvalue(), CENTRALITY_CACHE_ENTRIES)
    if error is not None:  # every run on this graph computes them again: say why once a process
        log.warning("could not keep the centralities in %s (%s): each run computes them", entry.parent, error)
    return computed


@contextmanager
def igraph_progress(description: str, enabled: bool) -> Iterator[None]:
    """A progress bar, in percent, fed by igraph's C core while the block runs: its betweenness and closeness report
    each source node they are done with (AstroPh's betweenness, over 18,772 sources, takes minutes)."""
    if not enabled:
        yield
        return
    shape = "{desc}: {percentage:3.0f}%|{bar}| [{elapsed}<{remaining}]"
    with tqdm(total=100, desc=description, bar_format=shape) as bar:

        def advance(message: str, percentage: float) -> None:
            bar.update(min(percentage, 100.0) - bar.n)

        ig.set_progress_handler(advance)
        try:
            yield
        finally:
            ig.set_progress_handler(None)


def closeness(graph: ig.Graph) -> np.ndarray:
    """Closeness (|V| - 1) / Σ_u d(v, u) with d = |V| for unreachable u, as in igraph ≤ 0.9 (the authors' 0.7).

    Since 0.10 (igraph PR #1630) igraph averages over reachable nodes only, which on a disconnected graph
    (Sister Cities has 1,786 components) ranks a city of a two-node component first; on a connected graph
    both are the same.
    """
    n = graph.vcount()
    component = np.asarray(graph.connected_components().membership, dtype=np.int64)
    reachable = np.bincount(component, minlength=n)[component]  # the node itself included
    # igraph's unnormalised closeness is 1 / (sum of distances to reachable nodes), NaN for isolated nodes;
    # the sums are integers, so rint recovers them exactly
    inverse = np.nan_to_num(np.asarray(graph.closeness(normalized=False), dtype=float), nan=np.inf)
    with np.errstate(divide="ignore"):
        distances = np.rint(1.0 / inverse)
    return (n - 1) / np.maximum(distances + (n - reachable) * n, 1)


def centrality_correlations(
    graph: ig.Graph, embeddings: np.ndarray, neighbourhood: str = "open", progress: bool = False, ties: str = "rounding"
) -> dict[str, float]:
    """Spearman ρ (and p-value) between node-to-neighbours similarity (`neighbourhood`: open or closed) and each
    centrality, computed on `graph` as it is (parallel edges count in PageRank, betweenness and degree); with
    `progress`, bars while centralities are computed. `ties` (task.centrality_ties): `rounding` ranks centralities
    equal up to float rounding as ties (tie_rounding_noise), `bits` ranks them as computed."""
    if ties not in CENTRALITY_TIES:
        raise ConfigError(f"task.centrality_ties={ties!r} is not one of {', '.join(CENTRALITY_TIES)}")
    score = neighbour_similarity(graph, embeddings, neighbourhood)
    result = {}
    if constant(score):
        log.warning("no centrality correlations: every node's similarity to its neighbours is the same")
        return result
    from scipy.stats import spearmanr  # see CENTRALITIES

    for name, values in centralities(graph, progress).items():
        ranks = tie_rounding_noise(values)
        if ranks.max() == 0:  # a ring's PageRank: its ranks would be those of rounding noise, or ρ NaN
            log.warning("spearman_%s is not logged: every node has the same %s, which ranks nothing", name, name)
            continue
        rho, p_value = spearmanr(score, ranks if ties == "rounding" else values)
        result[f"spearman_{name}"] = float(rho)
        result[f"spearman_{name}_p"] = float(p_value)
    return result


def tie_rounding_noise(values: np.ndarray, relative: float = 1e-9) -> np.ndarray:
    """Dense ranks of `values` in which values equal up to float rounding (sorted neighbours within `relative` of
    each other, math.isclose's default) share one rank.

    Spearman's ρ gives tied values their mean rank; igraph's PageRank (and betweenness) of nodes that tie exactly,
    such as the 2,602 cities of Sister Cities' two-city components, differ in the last bits, which ranked them by
    rounding noise: ρ with PageRank was 0.6947 (ARPACK's noise: 0.6938) where the ties give 0.6983.
    """
    values = np.asarray(values, dtype=float)
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    steps = np.diff(ordered) > relative * np.maximum(np.abs(ordered[1:]), np.abs(ordered[:-1]))
    ranks = np.empty(len(values), dtype=np.int64)
    ranks[order] = np.concatenate([[0], np.cumsum(steps)])
    return ranks


def constant(values: np.ndarray) -> bool:
    """Whether `values` are all equal up to float rounding (a relative spread of at most 1e-9)."""
    return bool(np.ptp(values) <= 1e-9 * max(float(np.abs(values).max()), np.finfo(float).tiny))
