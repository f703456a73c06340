from mocc.objectives import (BOOTSTRAP, are_neighbours, graph_distances, landmarks, neighbours, traversal_order,
                             validate_weights)
import pytest


def test_thirty_six_landmarks_on_the_simplex():
    L = landmarks()
    assert len(L) == 36 and len(set(L)) == 36
    assert all(abs(sum(w) - 1) < 1e-9 and min(w) >= 0.1 - 1e-9 for w in L)


def test_neighbours_follow_the_papers_examples():
    assert are_neighbours((0.2, 0.4, 0.4), (0.2, 0.5, 0.3))
    assert are_neighbours((0.2, 0.4, 0.4), (0.1, 0.5, 0.4))
    assert not are_neighbours((0.2, 0.4, 0.4), (0.1, 0.3, 0.6))
    assert not are_neighbours((0.2, 0.4, 0.4), (0.2, 0.4, 0.4))
    L = landmarks()
    assert len(neighbours((0.8, 0.1, 0.1), L)) == 2      # a corner
    assert len(neighbours((0.4, 0.3, 0.3), L)) == 6      # interior
    assert graph_distances((0.8, 0.1, 0.1), L)[(0.1, 0.1, 0.8)] == 7


def test_traversal_covers_all_and_walks_outward_from_each_bootstrap_vertex():
    order = traversal_order()
    L = landmarks()
    assert sorted(order) == sorted(L)
    assert order[0] == BOOTSTRAP[0]
    # Each bootstrap vertex claims ceil(36/3) = 12 vertices at non-decreasing distance from itself.
    for i, b in enumerate(BOOTSTRAP):
        region = order[12 * i:12 * (i + 1)]
        assert region[0] == b
        d = graph_distances(b, L)
        dists = [d[v] for v in region]
        assert dists == sorted(dists), (b, dists)
        assert max(dists) <= 3


def test_bad_weights_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="sum to 1"):
        validate_weights((0.5, 0.5, 0.5))
    with pytest.raises(ValueError, match="3 components"):
        validate_weights((0.5, 0.5))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        validate_weights((1.5, -0.5, 0.0))
