"""The disk-spread floor: no plan moving at most so many bytes between brokers ends with a lower
coefficient of variation, and the floor is reached by a transfer of exactly those bytes."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planning.placement.spread_floor import compute_cv_floor, compute_plan_cv_floor, compute_water_filled


def cv(values) -> float:
    mean = sum(values) / len(values)
    if mean <= 0:
        return 0.0
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values)) / mean


def test_three_empty_brokers_added_to_a_flat_cluster_end_at_what_the_budget_gives_them():
    # 30 brokers of 100 bytes, 3 new: the budget 270 puts 90 on each new broker and takes 9 off
    # each old one (the final mean is 90.9).
    before = [100] * 30 + [0] * 3
    filled = compute_water_filled(before, 0, 270)
    assert filled == pytest.approx([91.0] * 30 + [90.0] * 3)
    assert compute_cv_floor(before, 0, 270) == pytest.approx(cv(filled))
    assert compute_cv_floor(before, 0, 10**6) == pytest.approx(0.0, abs=1e-12)
    assert compute_cv_floor(before, 0, 0) == pytest.approx(cv(before))


def test_what_arrives_from_a_drained_broker_lands_on_the_emptiest_first():
    filled = compute_water_filled([50, 100, 150], 60, 0)  # 60 must land; nothing else moves
    assert filled == pytest.approx([105, 105, 150])


def test_bad_budget_is_refused():
    with pytest.raises(ValueError, match="at least 0"):
        compute_water_filled([1, 2], 0, -1)


transfers = st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(1, 40)), max_size=12)


def transferred(before, moves) -> tuple[list[int], int]:
    """The brokers' bytes after `moves` (source, target, amount; indices wrapped, each at most
    what its source holds), and the bytes moved."""
    n = len(before)
    held = list(before)
    moved = 0
    for source, target, amount in moves:
        source, target = source % n, target % n
        amount = min(amount, held[source])
        if source == target or amount == 0:
            continue
        held[source] -= amount
        held[target] += amount
        moved += amount
    return held, moved


@settings(max_examples=400, deadline=None)
@given(before=st.lists(st.integers(0, 200), min_size=1, max_size=6), moves=transfers,
       arriving=st.lists(st.tuples(st.integers(0, 5), st.integers(1, 60)), max_size=3))
def test_no_plan_moving_as_few_bytes_ends_below_the_floor(before, moves, arriving):
    """Any sequence of transfers between the brokers (each at most what its source holds) plus
    bytes landing from outside: its CV is at or above the floor for the bytes it moved."""
    n = len(before)
    held, moved = transferred(before, moves)
    landed = 0
    for target, amount in arriving:
        held[target % n] += amount
        landed += amount
    assert cv(held) >= compute_cv_floor(before, landed, moved) - 1e-9


@settings(max_examples=300, deadline=None)
@given(before=st.lists(st.integers(0, 10**6), min_size=1, max_size=40), arriving=st.integers(-10**5, 10**6),
       budget=st.integers(0, 10**7))
def test_the_floor_is_a_transfer_of_at_most_the_budget_and_never_rises_with_it(before, arriving, budget):
    arriving = max(arriving, -sum(before))
    filled = compute_water_filled(before, arriving, budget)
    assert sum(filled) == pytest.approx(sum(before) + arriving, rel=1e-9, abs=1e-6)
    taken = sum(max(0.0, b - f) for b, f in zip(before, filled))
    assert taken <= budget + max(-arriving, 0) + 1e-6
    assert compute_cv_floor(before, arriving, budget) <= compute_cv_floor(before, arriving, budget // 2) + 1e-12


def test_closed_groups_even_out_on_their_own():
    # Two closed groups (3 DCs, RF 3 style): bytes cannot even out between them. A budget of 60
    # goes where it helps, inside the first: its two full brokers give 30 each to the empty one.
    before, groups = [100, 100, 0, 50, 50, 50], ["a", "a", "a", "b", "b", "b"]
    assert compute_plan_cv_floor(before, before, 60, groups) == pytest.approx(cv([70, 70, 60, 50, 50, 50]))
    # Without the groups, the same budget could lower the first group to the second's level.
    assert compute_plan_cv_floor(before, before, 60) < compute_plan_cv_floor(before, before, 60, groups)
    # No budget flattens across the groups: the floor stays at the spread between them.
    assert compute_plan_cv_floor(before, before, 10**6, groups) == pytest.approx(cv([200 / 3] * 3 + [50] * 3))


def test_a_drained_brokers_bytes_land_in_its_own_group():
    # Broker 0 of group "a" is drained (not listed); its 90 bytes must land in "a", on the emptiest.
    before, groups = [10, 40, 40, 40], ["a", "b", "b", "b"]
    after = [100, 40, 40, 40]
    assert compute_plan_cv_floor(before, after, 90, groups) == pytest.approx(cv(after))
    # One group: the 90 bytes would have been spread evenly over all four.
    assert compute_plan_cv_floor(before, after, 90) == pytest.approx(0.0, abs=1e-12)


@settings(max_examples=400, deadline=None)
@given(before=st.lists(st.integers(0, 200), min_size=1, max_size=7), labels=st.lists(st.integers(0, 2), min_size=7,
       max_size=7), moves=transfers, arriving=st.lists(st.tuples(st.integers(0, 6), st.integers(-60, 60)), max_size=3))
def test_no_plan_ends_below_the_floor_of_its_groups(before, labels, moves, arriving):
    """Any transfers, inside groups or across them, and bytes landing or dropped: the plan's CV is
    at or above the grouped floor for its bytes before, after and moved."""
    n = len(before)
    groups = labels[:n]
    held, moved = transferred(before, moves)
    for target, amount in arriving:
        target %= n
        amount = max(amount, -held[target])  # a drop takes at most what the broker holds
        held[target] += amount
        moved += max(amount, 0)  # what lands is moved; what is dropped is not
    floor = compute_plan_cv_floor(before, held, moved, groups)
    assert cv(held) >= floor - 1e-9
    assert floor >= compute_plan_cv_floor(before, held, moved) - 1e-9  # the groups only tighten it


@settings(max_examples=150, deadline=None)
@given(first=st.lists(st.integers(0, 300), min_size=1, max_size=5), second=st.lists(st.integers(0, 300), min_size=1,
       max_size=5), budget=st.integers(0, 800))
def test_the_budget_is_shared_between_two_groups_as_well_as_any_split(first, second, budget):
    """Against brute force: every split of the budget between two groups (each water-filled on its
    own) ends at or above the floor, and the best split on a fine grid is within a hair of it."""
    before = first + second
    groups = [0] * len(first) + [1] * len(second)
    floor = compute_plan_cv_floor(before, before, budget, groups)
    splits = [compute_water_filled(first, 0, budget * k / 200) + compute_water_filled(second, 0, budget * (200 - k) / 200)
              for k in range(201)]
    best = min(cv(values) for values in splits)
    assert floor <= best + 1e-9
    assert best - floor <= 0.02 * max(best, 1e-9) + 1e-6
