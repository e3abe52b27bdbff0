"""Plain per-node BFS versions of the encodings: slow and obviously correct, for tests and benchmarks."""

from __future__ import annotations

from collections import Counter, deque

import igraph as ig


def ego_distances(neighbours: list[list[int]], source: int, distance: int) -> dict[int, int]:
    """Hop distance from `source` of every node within `distance` hops."""
    seen = {source: 0}
    queue = deque([source])
    while queue:
        u = queue.popleft()
        if seen[u] == distance:
            continue
        for w in neighbours[u]:
            if w not in seen:
                seen[w] = seen[u] + 1
                queue.append(w)
    return seen


def reference_encoding(
    graph: ig.Graph, distance: int, relative_degrees: bool = False, nodes: list[int] | None = None
) -> list[Counter]:
    """Per node (all, or `nodes`), a Counter of (distance, degree) pairs, or of (kind, distance, value)
    with relative degrees; kind is "closer", "further" or "degree", all counted inside the ego graph.
    """
    neighbours = graph.get_adjlist()
    encodings = []
    for source in range(graph.vcount()) if nodes is None else nodes:
        dist = ego_distances(neighbours, source, distance)
        counts: Counter = Counter()
        for u, c in dist.items():
            inside = [dist[w] for w in neighbours[u] if w in dist]
            degree = len(inside)
            if relative_degrees:
                counts["closer", c, sum(d == c - 1 for d in inside)] += 1
                counts["further", c, sum(d == c + 1 for d in inside)] += 1
                counts["degree", c, degree] += 1
            else:
                counts[c, degree] += 1
        encodings.append(counts)
    return encodings
