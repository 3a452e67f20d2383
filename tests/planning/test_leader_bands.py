"""Leaders within a band (`planning.placement.leader_bands`): the broker flow and its matching
reach the row flow's optimum (same band penalties, same changes), and every row is led by one
of its members."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from planning.placement.leader_bands import _by_broker, _by_row, compute_band_leaders


@st.composite
def leader_problems(draw):
    n = draw(st.integers(2, 7))
    row_count = draw(st.integers(1, 40))
    rows, columns, costs = [], [], []
    for row in range(row_count):
        members = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=min(n, 4), unique=True))
        settled = draw(st.booleans())
        for i, j in enumerate(members):
            rows.append(row)
            columns.append(j)
            costs.append(0 if settled and i == 0 else draw(st.sampled_from([1, 2])))
    low = np.array(draw(st.lists(st.integers(0, row_count), min_size=n, max_size=n)), dtype=np.int64)
    high = low + np.array(draw(st.lists(st.integers(0, 4), min_size=n, max_size=n)), dtype=np.int64)
    big_m = draw(st.sampled_from([2 * row_count + 1, 16]))
    return (row_count, np.array(rows, dtype=np.int64), np.array(columns, dtype=np.int64),
            np.array(costs, dtype=np.int64), n, low, high, big_m)


def objective(problem, picked) -> int:
    row_count, rows, columns, costs, n, low, high, big_m = problem
    cost = {(int(r), int(c)): int(k) for r, c, k in zip(rows, columns, costs)}
    total = sum(cost[(row, int(j))] for row, j in enumerate(picked))
    counts = np.bincount(picked, minlength=n)
    capacity = np.bincount(columns, minlength=n)
    lo = np.clip(low, 0, capacity)
    hi = np.clip(high, lo, capacity)
    return total + big_m * int((np.maximum(0, lo - counts) + np.maximum(0, counts - hi)).sum())


@settings(max_examples=300, deadline=None)
@given(problem=leader_problems())
def test_the_broker_flow_reaches_the_row_flows_optimum(problem):
    row_count, rows, columns = problem[:3]
    exact = _by_row(*problem)
    fast = _by_broker(*problem)
    chosen = compute_band_leaders(*problem)
    members = {(int(r), int(c)) for r, c in zip(rows, columns)}
    for picked in [p for p in (fast, chosen) if p is not None]:
        assert all((row, int(j)) in members for row, j in enumerate(picked))
        assert objective(problem, picked) == objective(problem, exact)
    assert list(chosen) == list(compute_band_leaders(*problem))  # deterministic


def test_a_worked_example():
    """Module docstring: broker 0 leads {0,1,2}, {0,1,3}, {0,2,3}; broker 1 must lead one."""
    rows = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2])
    columns = np.array([0, 1, 2, 0, 1, 3, 0, 2, 3])
    costs = np.array([0, 1, 1, 0, 1, 1, 0, 1, 1])
    low = np.array([0, 1, 0, 0])
    high = np.array([3, 3, 3, 3])
    picked = compute_band_leaders(3, rows, columns, costs, 4, low, high, 7)
    assert list(picked) == [1, 0, 0]
