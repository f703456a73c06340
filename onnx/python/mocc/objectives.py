"""Landmark objectives and the neighbourhood-ordered traversal (MOCC, EuroSys'22, section 4.2).

A weight vector ``w = <w_thr, w_lat, w_loss>`` has components in (0, 1) summing to 1. The landmarks
are every such vector on a grid of step 0.1 (36 of them). Two landmarks are neighbours when they
differ in at most two components, each by one step; since the sum is fixed, a neighbour moves one
step from one component to another, so each landmark has at most six neighbours.

Algorithm 1 of the paper orders the landmarks for the fast-traversal phase: each bootstrap vertex
in turn claims ``ceil(|V| / |O|)`` of the nearest unvisited landmarks (Dijkstra, unit edges), so the
list walks outward from each bootstrap objective. Difference from the paper's pseudocode: distances
are the true graph distances from the bootstrap vertex over the whole graph (the pseudocode relaxes
only through vertices it has just claimed, so a bootstrap vertex whose neighbourhood another one has
already claimed would find no reachable vertex).
"""

from __future__ import annotations

import heapq
import math
from typing import Iterable

Weights = tuple[float, float, float]

STEP_TENTHS = 1
"""Grid step of the landmarks, in tenths (0.1)."""

BOOTSTRAP: tuple[Weights, ...] = ((0.6, 0.3, 0.1), (0.1, 0.6, 0.3), (0.3, 0.1, 0.6))
"""The paper's three bootstrap objectives (throughput-, latency- and loss-leaning)."""


def _tenths(w: Iterable[float]) -> tuple[int, int, int]:
    t = tuple(int(round(x * 10)) for x in w)
    if len(t) != 3:
        raise ValueError(f"a weight vector has 3 components, got {len(t)}")
    return t  # type: ignore[return-value]


def _weights(t: tuple[int, int, int]) -> Weights:
    return (t[0] / 10, t[1] / 10, t[2] / 10)


def validate_weights(w: Iterable[float]) -> Weights:
    """Return ``w`` as a float triple, or raise ``ValueError`` saying what is wrong with it."""
    w = tuple(float(x) for x in w)
    if len(w) != 3:
        raise ValueError(f"a weight vector has 3 components <w_thr, w_lat, w_loss>, got {len(w)}: {w}")
    if any(not math.isfinite(x) or x < 0 or x > 1 for x in w):
        raise ValueError(f"weights must lie in [0, 1], got {w}")
    if abs(sum(w) - 1.0) > 1e-6:
        raise ValueError(f"weights must sum to 1, got {w} (sum {sum(w):.6f})")
    return w  # type: ignore[return-value]


def landmarks() -> list[Weights]:
    """The 36 landmark objectives, components in {0.1, ..., 0.9} summing to 1, in lexicographic order."""
    out = []
    for a in range(1, 10):
        for b in range(1, 10):
            c = 10 - a - b
            if 1 <= c <= 9:
                out.append(_weights((a, b, c)))
    return out


def are_neighbours(u: Iterable[float], v: Iterable[float]) -> bool:
    """Whether two landmarks differ in at most two components, each by at most one step (and are not equal)."""
    tu, tv = _tenths(u), _tenths(v)
    diff = [abs(a - b) for a, b in zip(tu, tv)]
    return 0 < sum(d > 0 for d in diff) <= 2 and max(diff) <= STEP_TENTHS


def neighbours(w: Iterable[float], vertices: list[Weights]) -> list[Weights]:
    return [v for v in vertices if are_neighbours(w, v)]


def graph_distances(source: Weights, vertices: list[Weights]) -> dict[Weights, int]:
    """Dijkstra with unit edge weights from ``source`` over the landmark graph."""
    dist = {source: 0}
    heap = [(0, vertices.index(source), source)]
    while heap:
        d, _, u = heapq.heappop(heap)
        if d > dist[u]:
            continue
        for v in neighbours(u, vertices):
            if d + 1 < dist.get(v, math.inf):
                dist[v] = d + 1
                heapq.heappush(heap, (d + 1, vertices.index(v), v))
    return dist


def traversal_order(vertices: list[Weights] | None = None,
                    bootstrap: tuple[Weights, ...] = BOOTSTRAP) -> list[Weights]:
    """Algorithm 1: the training order of all landmarks, bootstrap vertices first in their regions.

    Each bootstrap vertex in turn appends itself and then its nearest unvisited vertices (ties broken
    by landmark order) until it has claimed ``ceil(|V| / |O|)`` vertices or the list is full.
    """
    vertices = landmarks() if vertices is None else list(vertices)
    for b in bootstrap:
        if b not in vertices:
            raise ValueError(f"bootstrap objective {b} is not a landmark")
    order: list[Weights] = []
    visited: set[Weights] = set()
    quota = math.ceil(len(vertices) / len(bootstrap))
    for b in bootstrap:
        dist = graph_distances(b, vertices)
        claimed = 0
        if b not in visited:
            order.append(b)
            visited.add(b)
            claimed += 1
        candidates = sorted((d, vertices.index(v), v) for v, d in dist.items() if v not in visited)
        for _, _, v in candidates:
            if claimed >= quota or len(order) == len(vertices):
                break
            if v in visited:
                continue
            order.append(v)
            visited.add(v)
            claimed += 1
    # A disconnected remainder (not possible on the full grid) is appended in landmark order.
    order.extend(v for v in vertices if v not in visited)
    return order
