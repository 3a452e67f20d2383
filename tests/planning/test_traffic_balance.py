"""Bytes in and network out within their bands once traffic is measured
(`planning.placement.traffic_moves`, steps 2b and 4b of the bytes planner)."""

from __future__ import annotations

import random
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st
from placement_checks import hard_constraint_violations

from planning.model import Broker, Cluster, PartitionState, Topic
from planning.placement.bytes_balance import REBALANCE, Tolerances, plan_bytes_balance
from planning.placement.placer import Goal

PLACED = ("disk", "replicas", "leaders")


def brokers(per_dc: int) -> tuple[Broker, ...]:
    return tuple(Broker(i, rack=f"/dc{i % 3}") for i in range(3 * per_dc))


def test_hot_replicas_trade_places_with_quiet_ones_of_the_same_size():
    # Disk, replicas and leaders balanced; every busy partition sits on brokers 0, 1 and 2.
    # Per DC: 12 × 900 + 36 × 10 B/s over 4 brokers, 2,790 each: 3 hot and 3 quiet replicas.
    hot = tuple(PartitionState("hot", i, (0, 1, 2), size_bytes=1000, bytes_in_per_sec=900.0) for i in range(12))
    quiet = tuple(PartitionState("quiet", i, tuple(3 * (1 + i % 3) + k for k in range(3)), size_bytes=1000,
                                 bytes_in_per_sec=10.0) for i in range(36))
    leaders_spread = tuple(replace(p, replicas=p.replicas[i % 3:] + p.replicas[:i % 3]) for i, p in enumerate(hot))
    cluster = Cluster(brokers(4), (Topic("hot", leaders_spread), Topic("quiet", quiet)))
    plan = plan_bytes_balance(cluster, Tolerances(topic_spread=None))
    assert plan.resources["bytes_in"].before.outside > 0
    assert plan.within_tolerance, {k: r.after for k, r in plan.resources.items()}
    assert plan.resources["bytes_in"].after.outside == 0
    # Brokers 0-2 must each shed at least 9 hot replicas (10,800 B/s down to at most 3,069):
    # 27,000 bytes; swaps bring quiet ones back, at most as many again.
    assert 27_000 <= plan.bytes_moved <= 54_000
    assert hard_constraint_violations(cluster, REBALANCE, plan) == []


def test_network_out_is_balanced_by_leadership_alone():
    # Every partition on every broker of a flat 3-broker cluster: no replica can move, and the
    # leaders' counts are even; but broker 0 leads all the partitions that consumers read.
    parts = [PartitionState("t", i, tuple((i + k) % 3 for k in range(3)), size_bytes=10,
                            bytes_in_per_sec=100.0, bytes_out_per_sec=1000.0 if i % 3 == 0 else 0.0)
             for i in range(9)]
    cluster = Cluster(tuple(Broker(i) for i in range(3)), (Topic("t", tuple(parts)),))
    plan = plan_bytes_balance(cluster)
    assert plan.bytes_moved == 0 and plan.resources["network_out"].before.outside > 0
    assert plan.resources["network_out"].after.outside == 0 and plan.within_tolerance
    assert plan.leader_changes > 0 and plan.leaders_after == plan.leaders_before


def test_without_traffic_the_plan_is_the_disk_plan_and_reports_no_traffic():
    rnd = random.Random(3)
    nodes = brokers(3)
    parts = tuple(PartitionState("t", i, tuple(rnd.choice([b.id for b in nodes if b.rack == f"/dc{k}"])
                                                for k in range(3)), size_bytes=rnd.randint(1, 10**6))
                  for i in range(60))
    cluster = Cluster(nodes, (Topic("t", parts),))
    plan = plan_bytes_balance(cluster, exact_variables=0)  # the greedy's plan: no solver budget spent
    assert set(plan.resources) == set(PLACED)
    measured_zero = Cluster(nodes, (Topic("t", tuple(replace(p, bytes_in_per_sec=0.0) for p in parts)),))
    assert plan_bytes_balance(measured_zero, exact_variables=0).targets == plan.targets


@st.composite
def clusters_with_traffic(draw):
    rnd = random.Random(draw(st.integers(0, 10**6)))
    per_dc = draw(st.integers(2, 4))
    nodes = brokers(per_dc)
    by_dc = [[b.id for b in nodes if b.rack == f"/dc{k}"] for k in range(3)]
    topics = []
    for t in range(rnd.randint(1, 4)):
        hot = rnd.choice([1.0, 1.0, 30.0])
        parts = tuple(PartitionState(f"t{t}", i, tuple(rnd.choice(by_dc[k]) for k in rnd.sample(range(3), 3)),
                                     size_bytes=int(10 ** rnd.uniform(2, 6)),
                                     bytes_in_per_sec=hot * 10 ** rnd.uniform(0, 3),
                                     bytes_out_per_sec=rnd.choice([None, 0.0, hot * 10 ** rnd.uniform(0, 3)]))
                      for i in range(rnd.randint(3, 20)))
        topics.append(Topic(f"t{t}", parts))
    added = tuple(Broker(3 * per_dc + k, rack=f"/dc{k}") for k in range(draw(st.integers(0, 1)) * 3))
    tolerance = draw(st.sampled_from([0.1, 0.2]))
    return (Cluster(nodes, tuple(topics)), Goal(add_brokers=added, heal=False, rebalance=True),
            Tolerances(tolerance, tolerance, tolerance, None, bytes_in=tolerance, network_out=tolerance))


@settings(max_examples=15, deadline=None)
@given(case=clusters_with_traffic())
def test_traffic_never_breaks_a_hard_rule_nor_a_band_the_disk_plan_met(case):
    """How far traffic gets is the benchmark's to show (a hot partition can make a band
    unreachable); what must hold whatever the traffic is asserted here."""
    cluster, goal, tolerances = case
    plan = plan_bytes_balance(cluster, tolerances, goal, exact_variables=0)
    assert hard_constraint_violations(cluster, goal, plan) == []
    quiet = Cluster(cluster.brokers, tuple(
        Topic(t.name, tuple(replace(p, bytes_in_per_sec=None, bytes_out_per_sec=None) for p in t.partitions))
        for t in cluster.topics))
    disk_only = plan_bytes_balance(quiet, tolerances, goal, exact_variables=0)
    for name in PLACED:  # steps 2b and 4b leave no band of the disk plan broken
        if disk_only.resources[name].after.outside == 0:
            assert plan.resources[name].after.outside == 0, name
    assert {"bytes_in", "network_out"} <= set(plan.resources)
    assert plan == plan_bytes_balance(cluster, tolerances, goal, exact_variables=0)  # deterministic


@settings(max_examples=15, deadline=None)
@given(case=clusters_with_traffic())
def test_a_shared_ledger_gives_the_plan_a_second_ledger_gives(case):
    """Step 2b reads the greedy's ledger (`Ledger`'s invariant holds move by move, shrink
    included) instead of building a second one from the parts: the same plan either way (2c,
    after it, then reads the ledger 2b moved on)."""
    import planning.placement.bytes_balance as bytes_balance
    from planning.placement.bytes_ledger import Ledger
    from planning.placement.traffic_moves import BytesIn

    cluster, goal, tolerances = case
    shared = plan_bytes_balance(cluster, tolerances, goal, exact_variables=0)
    original, original_even = bytes_balance.balance_bytes_in, bytes_balance.even_counts
    seen, second = [], []

    def with_a_second_ledger(model, ledger, rates):
        fresh = Ledger(model, *model.loads())
        second.append(fresh)
        seen.append((ledger.load == fresh.load, ledger.count == fresh.count, ledger.items == fresh.items,
                     ledger.sizes == fresh.sizes, (ledger.lb_total, ledger.cb_total) == (fresh.lb_total, fresh.cb_total),
                     (ledger.g_held, ledger.g_exc, ledger.g_def) == (fresh.g_held, fresh.g_exc, fresh.g_def),
                     (ledger.gc_held, ledger.gc_exc, ledger.gc_def) == (fresh.gc_held, fresh.gc_exc, fresh.gc_def)))
        return original(model, fresh, rates)

    def evened_on_the_second(model, ledger, budget, moves, bytes_in):
        if second:
            ledger = second[-1]
            bytes_in = BytesIn(model, ledger, bytes_in.rate) if bytes_in is not None else None
        return original_even(model, ledger, budget, moves, bytes_in)

    bytes_balance.balance_bytes_in, bytes_balance.even_counts = with_a_second_ledger, evened_on_the_second
    try:
        two = plan_bytes_balance(cluster, tolerances, goal, exact_variables=0)
    finally:
        bytes_balance.balance_bytes_in, bytes_balance.even_counts = original, original_even
    assert all(all(checks) for checks in seen), seen
    assert shared == two


def _reference_best_in_change(model, state, b):
    """Step 2b's choice as first written: every candidate priced (no cost cut-off), the
    violation summed over a dict of the brokers touched."""
    import bisect

    from planning.placement.traffic_moves import _CANDIDATES, _EPSILON, _PEERS, _SCAN

    def gain(change):
        delta = {}
        for index, s, d in change:
            size, rate = model.parts[index].size, state.rate[index]
            for broker, sign in ((s, -1), (d, 1)):
                entry = delta.setdefault(broker, [0, 0, 0])
                entry[0] += sign * size
                entry[1] += sign
                entry[2] += sign * rate
        placed = traffic = 0.0
        for broker, (dl, dc, dr) in delta.items():
            load, count, rate = state.ledger.load[broker], state.ledger.count[broker], state.load[broker]
            (p0, t0), (p1, t1) = (state.violation(broker, load, count, rate),
                                  state.violation(broker, load + dl, count + dc, rate + dr))
            placed += p0 - p1
            traffic += t0 - t1
        return 0.0 if placed < -_EPSILON else placed + traffic

    def cheaper(best, change):
        gained = gain(change)
        if gained <= _EPSILON:
            return best
        cost = sum(model.parts[index].size for index, _, _ in change)
        key = (cost / gained, cost, tuple(index for index, _, _ in change))
        return (key, change) if best is None or key < best[0] else best

    hot = state.load[b] > state.high[b]
    ratio = {c: state.load[c] / state.unit[c] for c in model.group_members[model.group[b]]}
    peers = sorted((c for c in ratio if c != b), key=lambda c: (ratio[c] if hot else -ratio[c], c))[:_PEERS]
    parts, ledger = model.parts, state.ledger
    best = None
    for peer in peers:
        giver, taker = (b, peer) if hot else (peer, b)
        for rate, index in reversed(state.busiest(giver)[-_CANDIDATES:]):
            part = parts[index]
            if not model.fits(part, giver, taker):
                continue
            if model.may_take(part.topic, taker):
                best = cheaper(best, ((index, giver, taker),))
            start = bisect.bisect_left(ledger.sizes[taker], part.size)
            for size, other in ledger.items[taker][max(0, start - _SCAN):start + _SCAN]:
                back = parts[other]
                if state.rate[other] >= rate or other == index or not model.fits(back, taker, giver):
                    continue
                if back.topic != part.topic and not (model.may_take(part.topic, taker)
                                                     and model.may_take(back.topic, giver)):
                    continue
                best = cheaper(best, ((index, giver, taker), (other, taker, giver)))
    return None if best is None else best[1]


@settings(max_examples=20, deadline=None)
@given(case=clusters_with_traffic())
def test_bytes_in_changes_priced_per_pair_and_cut_by_cost_are_the_ones_every_candidate_priced_gives(case):
    """Step 2b prices a change from its pair's violations read once and passes over a change
    whose cost alone loses to the best so far: at every step the change chosen is the one
    pricing every candidate chooses, so the plan is too."""
    import planning.placement.traffic_moves as traffic_moves

    cluster, goal, tolerances = case
    fast = traffic_moves._best_in_change
    steps = []

    def both(model, state, b):
        chosen = fast(model, state, b)
        steps.append((chosen, _reference_best_in_change(model, state, b)))
        return chosen

    traffic_moves._best_in_change = both
    try:
        plan = plan_bytes_balance(cluster, tolerances, goal, exact_variables=0)
    finally:
        traffic_moves._best_in_change = fast
    assert all(chosen == reference for chosen, reference in steps), steps
    assert hard_constraint_violations(cluster, goal, plan) == []


def test_a_trade_finds_its_way_back_past_the_takers_quietest_leaderships():
    # Regression: a trade's give-back was sought among the taker's 12 quietest leaderships only.
    # Broker 1 leads a partition of 160 B/s that broker 0 follows; the only partition broker 0
    # leads and broker 1 follows (20 B/s) is its 21st quietest. Leader counts are exact (21
    # each), so only that trade (160 over, 20 back) brings both into the network-out band.
    def part(topic, i, replicas, out):
        return PartitionState(topic, i, replicas, size_bytes=1, bytes_in_per_sec=0.0, bytes_out_per_sec=float(out))
    topics = (
        Topic("a", tuple(part("a", i, (0, 2), 10) for i in range(20))),  # led by 0: 200
        Topic("b", (part("b", 0, (0, 1), 20),)),  # led by 0, followed by 1
        Topic("h", (part("h", 0, (1, 0), 160),)),  # led by 1, followed by 0
        Topic("c", tuple(part("c", i, (1, 2), 20) for i in range(20))),  # led by 1: 560 in all
        Topic("d", tuple(part("d", i, (2, i % 2), 380 / 21) for i in range(21))),  # led by 2: 380
    )
    cluster = Cluster(tuple(Broker(i) for i in range(3)), topics)
    tolerances = Tolerances(disk=10.0, replicas=10.0, leaders=0.0, topic_spread=None)
    plan = plan_bytes_balance(cluster, tolerances, REBALANCE)
    assert plan.bytes_moved == 0 and plan.resources["network_out"].before.outside == 2
    assert plan.resources["network_out"].after.outside == 0, plan.resources["network_out"].after
    assert plan.leaders_after == plan.leaders_before == {0: 21, 1: 21, 2: 21}


def test_a_partition_hotter_than_any_band_is_named_in_the_plans_warnings():
    # One partition's leader alone carries 3x a broker's share of network out: wherever it
    # leads, that broker is outside its band; the plan says which partition and why.
    parts = [PartitionState("t", i, tuple((i + k) % 3 for k in range(3)), size_bytes=10, bytes_in_per_sec=1.0,
                            bytes_out_per_sec=3000.0 if i == 0 else 10.0) for i in range(9)]
    plan = plan_bytes_balance(Cluster(tuple(Broker(i) for i in range(3)), (Topic("t", tuple(parts)),)))
    hot = [w for w in plan.warnings if "network_out alone" in w]
    assert len(hot) == 1 and "t-0 (" in hot[0] and "1 partitions" in hot[0], plan.warnings
    assert not plan.within_tolerance
    assert not any("bytes_in alone" in w for w in plan.warnings)
