"""A byte budget chooses the disk band (`planning.placement.bytes_budget`): the plan moves at
most the budget, with the tightest band that allows, and is the bytes planner's own plan at the
band it reports; the bound it searches with (`bytes_model.DiskBound`) is the closed form's."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from placement_checks import RACK_SHAPES, hard_constraint_violations
from planning.model import Broker, Cluster, PartitionState, Topic
from planning.placement.bytes_balance import (Tolerances, compute_balance_model,
                                              plan_bytes_balance)
from planning.placement.bytes_budget import compute_budget_tolerances, plan_within_budget
from planning.placement.bytes_model import DiskBound, compute_disk_bands
from planning.placement.placer import Goal

MB = 1 << 20
GREEDY = {"exact_variables": 0}
TOLERANCES = Tolerances(disk=0.1, replicas=0.1, leaders=0.1)
REBALANCE = Goal(heal=False, rebalance=True)


def build(seed: int, old: int = 15, new: int = 1, partitions: int = 400) -> Cluster:
    """Three DCs, RF 3 one replica in each, sizes over four decades, `new` empty brokers."""
    rnd = random.Random(seed)
    brokers = tuple(Broker(i, rack=f"/dc{i % 3}") for i in range(old + new))
    by_dc = [[b for b in range(old) if b % 3 == k] for k in range(3)]
    parts = [PartitionState(f"t{i % 10}", i, tuple(rnd.choice(by_dc[k]) for k in rnd.sample(range(3), 3)),
                            size_bytes=int(10 ** rnd.uniform(0, 4)) * MB) for i in range(partitions)]
    topics: dict[str, list] = {}
    for p in parts:
        topics.setdefault(p.topic, []).append(p)
    return Cluster(brokers, tuple(Topic(t, tuple(ps)) for t, ps in sorted(topics.items())))


def cv(values) -> float:
    values = list(values)
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values)) / mean


def walked_bound(model, blo, bhi) -> int:
    """The closed form as it reads, walking the partitions for each band (the reference)."""
    load = {b: 0 for b in model.brokers}
    leaving = {b: [] for b in model.brokers}
    for part in model.parts:
        for b in part.kept:
            load[b] += part.size
            if part.movable:
                leaving[b].append(part.size)
    bound = 0
    for g, members in model.group_members.items():
        held = sum(load[b] for b in members)
        deficit = sum(max(0, blo[b] - load[b]) for b in members)
        departures = 0
        for b in members:
            excess = load[b] - bhi[b]
            if excess > 0:
                smaller = sum(s for s in leaving[b] if s < excess)
                larger = [s for s in leaving[b] if s >= excess]
                departures += min(larger) if smaller < excess and larger else excess
        bound += max(deficit, departures + model.group_bytes[g] - held)
    return bound


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10**6), shape=st.sampled_from(sorted(RACK_SHAPES)),
       tolerance=st.integers(1, 1000), drain=st.booleans())
def test_the_disk_bound_for_any_band_is_the_closed_form(seed, shape, tolerance, drain):
    rnd = random.Random(seed)
    rack = RACK_SHAPES[shape]
    brokers = tuple(Broker(i, rack=rack(i)) for i in range(rnd.randint(6, 14)))
    parts = tuple(PartitionState("t", i, tuple(rnd.sample(range(len(brokers)), rnd.randint(1, 3))),
                                 size_bytes=int(10 ** rnd.uniform(0, 4)) * MB) for i in range(rnd.randint(20, 120)))
    cluster = Cluster(brokers, (Topic("t", parts),))
    goal = Goal(heal=False, rebalance=True, drain_brokers=frozenset({0}) if drain else frozenset())
    model = compute_balance_model(cluster, replace(TOLERANCES, disk=tolerance / 1000), goal)
    assert model.closed_form_bound() == walked_bound(model, model.blo, model.bhi)
    bands = compute_disk_bands(model.byte_share, tolerance / 1000)
    assert DiskBound(model).at(*bands) == walked_bound(model, *bands)


def test_a_larger_budget_buys_a_tighter_band_and_a_smaller_one_a_looser_band():
    cluster = build(1)
    plain = plan_bytes_balance(cluster, TOLERANCES, REBALANCE, **GREEDY)
    assert plain.bytes_moved > 0 and plain.byte_budget is None and plain.disk_tolerance == 0.1
    rich = plan_within_budget(cluster, 2 * plain.bytes_moved, TOLERANCES, REBALANCE, **GREEDY)
    poor = plan_within_budget(cluster, plain.bytes_moved // 2, TOLERANCES, REBALANCE, **GREEDY)
    assert rich.byte_budget == 2 * plain.bytes_moved and rich.bytes_moved <= rich.byte_budget
    assert poor.bytes_moved <= poor.byte_budget == plain.bytes_moved // 2
    assert rich.disk_tolerance < 0.1 < poor.disk_tolerance
    # The budget buys evenness: the disks end more even with more bytes, less with fewer.
    spreads = [cv(plan.bytes_after.values()) for plan in (rich, plain, poor)]
    assert spreads == sorted(spreads) and spreads[0] < spreads[2]
    # Within its own band (shares differ between the DCs: 6, 5 and 5 brokers hold a third each).
    assert rich.within_tolerance and all(abs(rich.bytes_after[b] - share) <= rich.disk_tolerance * share + 1
                                         for b, share in rich.disk_shares.items())


def test_the_plan_is_the_planners_own_at_the_band_it_reports_and_a_tighter_band_costs_more():
    cluster = build(2, new=2)
    plain = plan_bytes_balance(cluster, TOLERANCES, REBALANCE, **GREEDY)
    budget = plain.bytes_moved * 21 // 20
    plan = plan_within_budget(cluster, budget, TOLERANCES, REBALANCE, **GREEDY)
    assert 0.01 < plan.disk_tolerance < 0.1  # not at the search's end: a tighter band exists
    again = plan_bytes_balance(cluster, compute_budget_tolerances(TOLERANCES, plan.disk_tolerance), REBALANCE,
                               byte_budget=budget, **GREEDY)
    assert dict(plan.targets) == dict(again.targets) and plan.bytes_moved == again.bytes_moved <= budget
    tighter = plan_bytes_balance(cluster, replace(TOLERANCES, disk=round(plan.disk_tolerance - 0.001, 3)),
                                 REBALANCE, byte_budget=budget, **GREEDY)
    # The search aims below the budget by step 2c's share, then uses the room the plan left
    # (USE THE ROOM): the next band in is over the budget.
    assert tighter.bytes_moved > budget >= plan.bytes_moved


def test_a_drain_beyond_the_budget_still_drains_and_says_so():
    cluster = build(3, new=0)
    goal = Goal(heal=False, rebalance=True, drain_brokers=frozenset({4}))
    plan = plan_within_budget(cluster, 10 * MB, TOLERANCES, goal, **GREEDY)
    assert plan.replicas_after.get(4, 0) == 0 and plan.forced_bytes > 10 * MB
    assert plan.bytes_moved > plan.byte_budget and plan.disk_tolerance == 1.0
    assert any("above the budget of 10,485,760" in w for w in plan.warnings), plan.warnings
    assert hard_constraint_violations(cluster, goal, plan) == []


def test_a_drain_at_its_own_bytes_spreads_its_small_replicas_by_counts_and_keeps_the_disks_at_their_floor():
    """Regression (bench (c), a broker removed, at the drain's own bytes: Cruise Control's
    budget): placed largest first for the disks, the removed broker's many small replicas went to
    the emptiest broker while it stayed the emptiest (a replica of a megabyte hardly changes it),
    replica spread 241-251 against Cruise Control's 199-208. Here broker 1 is 10 GB emptier than
    2 and 3, and the 30 replicas leaving broker 0 are of 1 MB: they end the brokers at 21 / 21 /
    21 replicas (23 / 20 / 20 before: broker 1 took them until its count bound stopped it)."""
    big = [PartitionState("big", b, (b,), size_bytes=(90 if b == 1 else 100) * 1024 * MB) for b in (1, 2, 3)]
    bulk = [PartitionState("bulk", i, (1 + i % 3,), size_bytes=MB) for i in range(30)]
    small = [PartitionState("small", i, (0,), size_bytes=MB) for i in range(30)]
    cluster = Cluster(tuple(Broker(b) for b in range(4)),
                      (Topic("big", tuple(big)), Topic("bulk", tuple(bulk)), Topic("small", tuple(small))))
    goal = Goal(heal=False, rebalance=True, drain_brokers=frozenset({0}))
    plan = plan_within_budget(cluster, 30 * MB, TOLERANCES, goal, **GREEDY)
    assert plan.bytes_moved == 30 * MB and plan.replicas_after.get(0, 0) == 0
    assert [plan.replicas_after[b] for b in (1, 2, 3)] == [21, 21, 21]
    assert hard_constraint_violations(cluster, goal, plan) == []


def test_a_budget_changes_nothing_for_a_goal_that_does_not_rebalance():
    cluster = build(4, new=0)
    goal = Goal(heal=False, rebalance=False, drain_brokers=frozenset({2}))
    assert (dict(plan_within_budget(cluster, 1, TOLERANCES, goal, **GREEDY).targets)
            == dict(plan_bytes_balance(cluster, TOLERANCES, goal, **GREEDY).targets))
    with pytest.raises(ValueError, match="at least 0"):
        plan_within_budget(cluster, -1, TOLERANCES, goal)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10**6), new=st.integers(0, 2), share=st.floats(0.0, 3.0), drain=st.booleans())
# A budget of exactly the plain plan's bytes keeps the operator's band (±10 %), which the search
# passed by: step 2c's share put its bound above the aim (seed 0: ±10.1 % came back), or the first
# plan overshot and the next step jumped over it (seed 1419: ±9.7 % overshot, ±10.4 % came back).
@example(seed=0, new=0, share=1.0, drain=False)
@example(seed=1419, new=1, share=1.0, drain=False)
def test_a_budgeted_plan_keeps_every_rule_and_the_budget_whenever_the_widest_band_can(seed, new, share, drain):
    cluster = build(seed, old=rnd_old(seed), new=new, partitions=200)
    goal = Goal(heal=False, rebalance=True, drain_brokers=frozenset({1}) if drain else frozenset())
    plain = plan_bytes_balance(cluster, TOLERANCES, goal, **GREEDY)
    budget = int(share * plain.bytes_moved)
    plan = plan_within_budget(cluster, budget, TOLERANCES, goal, **GREEDY)
    assert hard_constraint_violations(cluster, goal, plan) == []
    assert 0.01 <= plan.disk_tolerance <= 1.0
    if plan.bytes_moved > budget:  # only when nothing fits: the widest band's plan moves more too
        assert any("above the budget" in w for w in plan.warnings)
        widest = plan_bytes_balance(cluster, compute_budget_tolerances(TOLERANCES, 1.0), goal, byte_budget=budget,
                                    **GREEDY)
        assert widest.bytes_moved > budget and plan.disk_tolerance == 1.0
    if budget >= plain.bytes_moved and plan.bytes_moved <= budget:
        assert plan.disk_tolerance <= 0.1  # at least the band the default plan reached


def rnd_old(seed: int) -> int:
    return 9 + seed % 7


def test_a_budget_below_what_the_count_band_needs_loosens_it_with_the_disk_band():
    """A new broker needs replicas as well as bytes: a budget too small for its count band widens
    that band with the disk band instead of breaking the budget (leaders move no data: kept)."""
    cluster = build(5, new=1)
    plain = plan_bytes_balance(cluster, TOLERANCES, REBALANCE, **GREEDY)
    budget = plain.bytes_moved // 20
    plan = plan_within_budget(cluster, budget, TOLERANCES, REBALANCE, **GREEDY)
    assert 0 < plan.bytes_moved <= budget and plan.disk_tolerance > 0.5
    assert plan.replicas_after[15] < plain.replicas_after[15]  # the new broker takes fewer replicas
    loose = compute_budget_tolerances(TOLERANCES, 0.6)
    assert (loose.disk, loose.replicas, loose.leaders) == (0.6, 0.6, 0.1)
    assert compute_budget_tolerances(TOLERANCES, 0.05).replicas == 0.1  # never tightened


def test_new_brokers_keep_the_operators_low_edge_while_a_budget_widens_the_band():
    """Brokers are added to take their share: a budget that widens the band widens it for the old
    brokers first (Cruise Control's plan, for the bytes ours moved with new brokers at 0.88x,
    fills them to 0.92-0.99x and leaves old brokers lower); only a budget too small for that
    widens new brokers' edge too, and the budget still holds."""
    cluster = build(6, new=1)
    new = (15,)
    plain = plan_bytes_balance(cluster, TOLERANCES, REBALANCE, **GREEDY)
    budget = plain.bytes_moved * 9 // 10
    plan = plan_within_budget(cluster, budget, TOLERANCES, REBALANCE, **GREEDY)
    assert plan.bytes_moved <= budget and plan.disk_tolerance > 0.1
    for b in new:
        assert plan.bytes_after[b] >= math.ceil(0.9 * plan.disk_shares[b]), (b, plan.bytes_after[b] / plan.disk_shares[b])
    # The plan is the planner's own at the bands it reached: old brokers at the reported band,
    # new ones at the operator's low edge.
    again = plan_bytes_balance(cluster, compute_budget_tolerances(TOLERANCES, plan.disk_tolerance, 0.1), REBALANCE,
                               byte_budget=budget, **GREEDY)
    assert dict(plan.targets) == dict(again.targets)
    # Without the edge, the same band leaves a new broker below it (what the search did before).
    loose = plan_bytes_balance(cluster, compute_budget_tolerances(TOLERANCES, plan.disk_tolerance), REBALANCE,
                               byte_budget=budget, **GREEDY)
    assert min(loose.bytes_after[b] / loose.disk_shares[b] for b in new) < 0.9
    # A budget too small to fill them: their edge is the band's, as before, and the budget holds.
    poor_budget = plain.bytes_moved // 5
    poor = plan_within_budget(cluster, poor_budget, TOLERANCES, REBALANCE, **GREEDY)
    assert poor.bytes_moved <= poor_budget and all(poor.bytes_after[b] < 0.9 * poor.disk_shares[b] for b in new)
    same = plan_bytes_balance(cluster, compute_budget_tolerances(TOLERANCES, poor.disk_tolerance), REBALANCE,
                              byte_budget=poor_budget, **GREEDY)
    assert dict(poor.targets) == dict(same.targets)
