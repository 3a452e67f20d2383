"""Where the bytes a plan must move come from, and the counts it leaves (`planning.placement.
bytes_moves`, WATER and step 2c): a broker that takes replicas and bytes draws from each giver
replicas of the size that brings the giver towards its shares on both, and once the bands are
met, the smallest replicas even the replica counts within what the plan moves already. The
greedy alone (`exact_variables=0`): the exact model would replace it on clusters this small."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_checks import RACK_SHAPES, hard_constraint_violations
from planning.model import Broker, Cluster, PartitionState, Topic
from planning.placement import bytes_balance
from planning.placement.bytes_balance import Tolerances, compute_bands, plan_bytes_balance
from planning.placement.placer import Goal

MB = 1 << 20
TEN = Tolerances(disk=0.1, replicas=0.1, leaders=0.1, topic_spread=None)
GREEDY = {"exact_variables": 0}


def spread(values) -> int:
    return max(values) - min(values)


def added_broker_cluster() -> Cluster:
    """Brokers 0-3 hold what the cluster holds, broker 4 is new (no racks: one group). Broker 0
    holds the most bytes (15 GB) in 60 large replicas; broker 1 holds as many bytes as brokers 2
    and 3 (12 GB), but in twice as many replicas (120 small ones besides)."""
    rnd = random.Random(7)
    placed: list[tuple[int, int]] = []  # (broker, size)
    placed += [(0, rnd.randint(230, 270) * MB) for _ in range(60)]
    placed += [(1, rnd.randint(88, 108) * MB) for _ in range(120)] + [(1, rnd.randint(1, 3) * MB) for _ in range(120)]
    for b in (2, 3):
        placed += [(b, rnd.randint(90, 110) * MB) for _ in range(120)]
    parts = tuple(PartitionState("t", i, (b,), size_bytes=size) for i, (b, size) in enumerate(placed))
    return Cluster(tuple(Broker(b) for b in range(5)), (Topic("t", parts),))


def test_a_new_broker_draws_bytes_from_the_fullest_and_replicas_from_the_most_numerous():
    cluster = added_broker_cluster()
    plan = plan_bytes_balance(cluster, TEN, Goal(heal=False, rebalance=True), **GREEDY)
    assert plan.within_tolerance
    gave_bytes = {b: plan.bytes_before[b] - plan.bytes_after[b] for b in range(4)}
    gave_replicas = {b: plan.replicas_before[b] - plan.replicas_after[b] for b in range(4)}
    # The fullest on bytes gives the most bytes; the one with the most replicas the most replicas.
    assert gave_bytes[0] == max(gave_bytes.values())
    assert gave_replicas[1] == max(gave_replicas.values())
    # So the old brokers end near each other on bytes: within a tenth of a share.
    mean_bytes = sum(plan.bytes_after.values()) / 5
    assert spread([plan.bytes_after[b] for b in range(4)]) <= 0.1 * mean_bytes


def test_a_plan_that_moves_nothing_evens_nothing():
    """Counts 10 % apart, bytes even: every band is met, so no replica moves for the counts alone."""
    parts = [PartitionState("t", i, (i % 2,), size_bytes=(100 if i % 2 else 110) * MB) for i in range(42)]
    parts += [PartitionState("t", 42, (0,), size_bytes=MB), PartitionState("t", 43, (0,), size_bytes=MB)]
    cluster = Cluster((Broker(0), Broker(1)), (Topic("t", tuple(parts)),))
    plan = plan_bytes_balance(cluster, TEN, Goal(heal=False, rebalance=True), **GREEDY)
    assert plan.within_tolerance and not plan.targets


def test_evening_counts_costs_at_most_a_hundredth_of_the_bytes_and_as_many_replicas(monkeypatch):
    cluster = added_broker_cluster()
    goal = Goal(heal=False, rebalance=True)
    evened = plan_bytes_balance(cluster, TEN, goal, **GREEDY)
    monkeypatch.setattr(bytes_balance, "EVEN_COUNTS_SHARE", 0.0)
    plain = plan_bytes_balance(cluster, TEN, goal, **GREEDY)
    assert spread(evened.replicas_after.values()) < spread(plain.replicas_after.values())
    # (It may cost nothing: the smallest replica of a broker may be one the plan moved there.)
    assert evened.bytes_moved <= plain.bytes_moved * 1.01
    assert evened.replica_moves <= 2 * plain.replica_moves


@st.composite
def clusters(draw):
    """12-18 brokers on a rack shape, 150-300 partitions of RF 2-3, sizes over four decades,
    one or two new brokers or none; some partitions hot (bytes in measured)."""
    shape = RACK_SHAPES[draw(st.sampled_from(sorted(RACK_SHAPES)))]
    rnd = random.Random(draw(st.integers(0, 10**6)))
    old = rnd.randint(12, 18)
    new = draw(st.integers(0, 2))
    brokers = tuple(Broker(i, rack=shape(i)) for i in range(old + new))
    traffic = draw(st.booleans())
    parts = []
    for i in range(rnd.randint(150, 300)):
        size = int(10 ** rnd.uniform(0, 4)) * MB
        rate = rnd.choice([0, 0, 0, 10_000, 1_000_000]) if traffic else None
        parts.append(PartitionState(f"t{i % 20}", i, tuple(rnd.sample(range(old), rnd.randint(2, 3))),
                                    size_bytes=size, bytes_in_per_sec=rate))
    topics = {}
    for p in parts:
        topics.setdefault(p.topic, []).append(p)
    return Cluster(brokers, tuple(Topic(t, tuple(ps)) for t, ps in sorted(topics.items())))


@settings(max_examples=25, deadline=None)
@given(cluster=clusters())
def test_evening_counts_and_leaders_never_costs_a_band_or_a_hard_rule(cluster, monkeypatch_session):
    goal = Goal(heal=False, rebalance=True)
    tolerances = Tolerances(disk=0.1, replicas=0.1, leaders=0.1, bytes_in=0.1, network_out=0.1)
    evened = plan_bytes_balance(cluster, tolerances, goal, **GREEDY)
    with monkeypatch_session.context() as patch:
        patch.setattr(bytes_balance, "EVEN_COUNTS_SHARE", 0.0)
        patch.setattr(bytes_balance, "EVEN_LEADERS_FACTOR", 0)
        plain = plan_bytes_balance(cluster, tolerances, goal, **GREEDY)
    assert hard_constraint_violations(cluster, goal, evened) == []
    for name in ("disk", "bytes_in"):
        if name in plain.resources:
            assert evened.resources[name].after.outside <= plain.resources[name].after.outside, name
    # Evened within each closed rack group, relative to each broker's share (shares differ
    # between groups): the spread of count over share never grows, within one replica.
    shares = compute_bands(cluster, tolerances, goal).replica_share
    levels = [{b: n / shares[b] for b, n in plan.replicas_after.items() if shares[b]} for plan in (evened, plain)]
    assert spread(levels[0].values()) <= spread(levels[1].values()) + 1 / min(s for s in shares.values() if s)
    assert evened.resources["leaders"].after.outside <= plain.resources["leaders"].after.outside
    if "bytes_in" not in plain.resources:  # else step 2b, after it, may move other replicas
        assert evened.bytes_moved <= plain.bytes_moved * 1.01 + 1
        assert evened.replica_moves <= 2 * plain.replica_moves
        assert spread(evened.leaders_after.values()) <= spread(plain.leaders_after.values())


@pytest.fixture(scope="module")
def monkeypatch_session():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def test_leaders_come_out_even_for_at_most_twice_the_changes_their_band_needs(monkeypatch):
    """Step 4's finer band: on an add (rack-spread RF 3, 12 brokers + 2 new), the leader counts
    end a leader apart, for at most twice the changes the ±10 % band alone makes."""
    rnd = random.Random(3)
    brokers = tuple(Broker(i, rack=f"/dc{i % 3}") for i in range(14))
    parts = tuple(PartitionState(f"t{i % 12}", i, tuple(rnd.choice(range(k, 12, 3)) for k in rnd.sample(range(3), 3)),
                                 size_bytes=int(10 ** rnd.uniform(0, 3)) * MB) for i in range(600))
    topics = {}
    for p in parts:
        topics.setdefault(p.topic, []).append(p)
    cluster = Cluster(brokers, tuple(Topic(t, tuple(ps)) for t, ps in sorted(topics.items())))
    goal = Goal(heal=False, rebalance=True)
    evened = plan_bytes_balance(cluster, TEN, goal, **GREEDY)
    monkeypatch.setattr(bytes_balance, "EVEN_LEADERS_FACTOR", 0)
    plain = plan_bytes_balance(cluster, TEN, goal, **GREEDY)
    # The same data moves (leaders only differ).
    assert (evened.bytes_moved, evened.replica_moves) == (plain.bytes_moved, plain.replica_moves)
    assert spread(evened.leaders_after.values()) <= 1 < spread(plain.leaders_after.values())
    assert plain.leader_changes < evened.leader_changes <= 2 * plain.leader_changes


def test_a_plan_changing_few_leaders_still_evens_them_within_three_quarters_of_the_band(monkeypatch):
    """Step 4's loosest finer band: a rebalance of 30 brokers (3 DCs, 3,000 partitions of RF 3,
    1 MB-30 GB) changes few leaders, too few to pay for half the band; three quarters of it
    narrows the leader spread for at most twice the band's changes (spread 20 without it)."""
    rnd = random.Random(36)
    by_dc = [[b for b in range(30) if b % 3 == k] for k in range(3)]
    parts = tuple(PartitionState(f"t{i % 12}", i, tuple(rnd.choice(by_dc[k]) for k in rnd.sample(range(3), 3)),
                                 size_bytes=int(10 ** rnd.uniform(0, 4.5)) * MB) for i in range(3000))
    topics = {}
    for p in parts:
        topics.setdefault(p.topic, []).append(p)
    cluster = Cluster(tuple(Broker(i, rack=f"/dc{i % 3}") for i in range(30)),
                      tuple(Topic(t, tuple(ps)) for t, ps in sorted(topics.items())))
    goal = Goal(heal=False, rebalance=True)
    # Step 4 on the data plan this case was found with (seed 36): before EVEN EDGES guided the
    # moves, which changes the leaders' starting point (the step itself does not depend on it).
    ten = replace(TEN, even_edges=False)
    evened = plan_bytes_balance(cluster, ten, goal, **GREEDY)
    monkeypatch.setattr(bytes_balance, "EVEN_LEADERS_BANDS", bytes_balance.EVEN_LEADERS_BANDS[:3])
    halves = plan_bytes_balance(cluster, ten, goal, **GREEDY)
    monkeypatch.setattr(bytes_balance, "EVEN_LEADERS_FACTOR", 0)
    band = plan_bytes_balance(cluster, ten, goal, **GREEDY)
    assert (evened.bytes_moved, evened.replica_moves) == (band.bytes_moved, band.replica_moves)
    assert spread(evened.leaders_after.values()) < spread(halves.leaders_after.values())
    assert halves.leader_changes == band.leader_changes < evened.leader_changes <= 2 * band.leader_changes
