"""decide() driving the simulated cluster (planning.simulation.simulated_cluster) from random clusters and goals.

At every decision the safety invariants are checked (`Loop.check`): steps in flight within P, L
and B; never two steps for one partition; never |TR| below min ISR; never a replica added to a
dead, draining or dir-less broker; every message encodes. At the end everything is at its
target: the requested replicas, nothing left on a decommissioned or dead broker, an added broker
holding its fair share of every topic and of the cluster.
"""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction
from functools import partial

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from handler_builders import Loop, alerts, reassign, request

from tests.settings_defaults import default_policy
from planning.model import Broker, Cluster, LogDir, PartitionState, Topic

DIRS = ("/d0", "/d1")


@st.composite
def clusters(draw, min_rf=1):
    n = draw(st.integers(4, 7))
    racks = draw(st.booleans())
    brokers = tuple(Broker(b, rack=f"r{b % 3}" if racks else None, log_dirs=tuple(LogDir(d) for d in DIRS))
                    for b in range(n))
    topics = []
    for t in range(draw(st.integers(1, 2))):
        rf = draw(st.integers(min_rf, 3))
        min_isr = draw(st.integers(1, rf))
        parts = []
        for p in range(draw(st.integers(1, 6))):
            replicas = tuple(draw(st.permutations(range(n)))[:rf])
            parts.append(PartitionState(f"t{t}", p, replicas, replicas, replicas[0],
                                        size_bytes=draw(st.integers(0, 5 * 10**7)),
                                        log_dirs=tuple(draw(st.sampled_from(DIRS)) for _ in replicas)))
        topics.append(Topic(f"t{t}", tuple(parts), min_isr))
    return Cluster(brokers, tuple(topics))


policies = st.builds(
    partial(replace, default_policy()),  # the product's defaults, these drawn
    max_partition_movements=st.integers(1, 4),
    max_leader_movements=st.integers(1, 3),
    max_replica_movements=st.integers(1, 3),
    max_movements_per_broker=st.integers(1, 4),
    broker_add_grace_seconds=st.sampled_from([0.0, 5.0]),
    broker_failure_grace_seconds=st.sampled_from([0.0, 5.0]),
    throttle_bytes_per_sec=st.sampled_from([None, 10**8]),
    balance_mode=st.sampled_from(["bytes", "strict"]),
)

SETTINGS = settings(max_examples=int(__import__("os").environ.get("E2E_EXAMPLES", "25")), deadline=None, suppress_health_check=list(HealthCheck))



def _run_to_idle(loop: Loop) -> None:
    for _ in range(int(3000)):
        loop.step()
        if loop.idle() and not loop.state.broker_added_at_ms and \
                not any(b not in loop.state.healed_brokers for b in loop.state.broker_down_since_ms):
            return
        loop.sim.tick(1.0)
    raise AssertionError(f"not done after 3000 s: {dict(loop.state.reassignments)}")


@SETTINGS
@given(cluster=clusters(), policy=policies, data=st.data())
def test_explicit_reassignments_end_at_their_targets(cluster, policy, data):
    n = len(cluster.brokers)
    targets = {}
    for p in cluster.partitions():
        if data.draw(st.booleans()):
            rf = data.draw(st.integers(max(cluster.min_isr(p.topic), len(p.replicas) - 1), min(n, len(p.replicas) + 1)))
            targets[p.tp] = tuple(data.draw(st.permutations(range(n)))[:rf])
    loop = Loop.start(cluster, policy)
    loop.step()
    if targets:
        loop.step([reassign(targets, loop.now_ms, "r1")])
    tracked = loop.state.plans.get("r1")  # a plan that started or re-targeted some partition
    _run_to_idle(loop)
    assert not loop.violations, loop.violations
    for tp, target in targets.items():
        assert loop.sim.partition(tp).replicas == target
    # One PlanCompleted for the request, once every partition it moved is at its target.
    ended = [a for d in loop.decisions for a in alerts(d, "PlanCompleted")]
    assert len(ended) == (tracked is not None) and not loop.state.plans, (ended, loop.state.plans)
    if ended:
        details = ended[0]["details"]
        assert details["plan_id"] == "r1" and details["completed"] == details["partitions"] == str(tracked.partitions)
        assert details["cancelled"] == details["superseded"] == "0", details


@SETTINGS
@given(cluster=clusters(), policy=policies, data=st.data())
def test_a_decommissioned_broker_ends_empty(cluster, policy, data):
    victim = data.draw(st.integers(0, len(cluster.brokers) - 1))
    loop = Loop.start(cluster, policy)
    loop.step()
    max_rf = max(len(p.replicas) for p in cluster.partitions())
    loop.step([request("Decommission", {"broker_ids": [victim]}, loop.now_ms, "d1")])
    _run_to_idle(loop)
    assert not loop.violations, loop.violations
    if max_rf <= len(cluster.brokers) - 1:
        assert all(victim not in p.replicas for p in loop.sim.snapshot().partitions())


def _fair_shares(cluster: Cluster, broker_id: int) -> tuple[dict[str, Fraction], Fraction]:
    """`broker_id`'s ideal share of each topic and of the cluster, worked out here for the layout
    `clusters()` draws (racks r0-r2 by id % 3, or none; RF at most 3; every broker eligible), not
    with the planner's code. Without racks a broker's share of a topic of T replicas is T / n.
    With racks, each partition puts at most one replica in a rack (it has at most 3 replicas and
    there are 3 racks), so a rack holds between 0 and P of a topic's P partitions' replicas, and
    exactly P when RF is 3; within that, a topic's replicas go to the racks in proportion to
    their broker counts (water-filling: a rack that would take more than P is held at P and the
    rest goes to the others); inside a rack its brokers share evenly. The cluster share is the
    sum of the topic shares. The planner keeps every broker between floor and ceil of both."""
    rack_of = {b.id: b.rack for b in cluster.brokers}
    size = {r: sum(1 for b in cluster.brokers if b.rack == r) for r in set(rack_of.values())}
    shares: dict[str, Fraction] = {}
    for topic in cluster.topics:
        count = len(topic.partitions)
        total = sum(len(p.replicas) for p in topic.partitions)
        if rack_of[broker_id] is None:
            shares[topic.name] = Fraction(total, len(cluster.brokers))
            continue
        full: set = set()  # racks held at one replica per partition
        level = Fraction(0)
        while len(full) < len(size):
            level = Fraction(total - count * len(full), sum(c for r, c in size.items() if r not in full))
            over = {r for r, c in size.items() if r not in full and level * c >= count}
            if not over:
                break
            full |= over
        rack = rack_of[broker_id]
        held = count if rack in full else level * size[rack]
        shares[topic.name] = held / size[rack]
    return shares, sum(shares.values(), Fraction(0))


# decide() executes a plan only in mode "auto" and while not paused: `policies` keeps the
# product's default mode and draws no pause, and every limit it draws is at least 1, so steps
# always run; this test also draws the two modes in which a plan is made and nothing moves.
EXECUTING_OR_NOT = st.sampled_from(("auto", "auto", "auto", "observe", "approve"))


@SETTINGS
@given(cluster=clusters(), policy=policies, mode=EXECUTING_OR_NOT)
def test_an_added_broker_takes_load(cluster, policy, mode):
    """Rule 2 of `handlers.triggers` ("Broker added"): a rebalance of the whole cluster, which
    brings the new broker to floor/ceil of its share of every topic and of the cluster (`strict`),
    or within its replica band of its share (`bytes`)."""
    policy = replace(policy, mode=mode)
    loop = Loop.start(cluster, policy)
    loop.step()
    new = Broker(len(cluster.brokers), rack=cluster.brokers[0].rack, log_dirs=tuple(LogDir(d) for d in DIRS))
    loop.sim.add_broker(new)
    _run_to_idle(loop)
    assert not loop.violations, loop.violations
    after = loop.sim.snapshot()
    placed = {p.tp: p.replicas for p in after.partitions()}
    if policy.mode != "auto" or policy.paused:
        # observe: a PlanCreated alert; approve: a proposal nobody approves. Nothing moves.
        assert placed == {p.tp: p.replicas for p in cluster.partitions()}
        return
    assert min(policy.max_partition_movements, policy.max_leader_movements, policy.max_replica_movements,
               policy.max_movements_per_broker) >= 1  # else nothing could move
    topic_shares, cluster_share = _fair_shares(after, new.id)
    held = {t.name: sum(new.id in p.replicas for p in t.partitions) for t in after.topics}
    if policy.balance_mode == "bytes":
        # within its replica band: (1 - t) of its share at least, rounded outwards
        total = sum(held.values())
        low = math.floor((1 - policy.balance_replica_tolerance) * cluster_share)
        assert total >= low, (total, cluster_share, placed)
        return
    for name, share in topic_shares.items():
        assert math.floor(share) <= held[name] <= math.ceil(share), (name, held, topic_shares, placed)
    total = sum(held.values())
    assert math.floor(cluster_share) <= total <= math.ceil(cluster_share), (total, cluster_share, placed)


@SETTINGS
@given(cluster=clusters(min_rf=2), policy=policies, data=st.data())
def test_a_dead_broker_is_healed_when_the_cluster_allows(cluster, policy, data):
    victim = data.draw(st.integers(0, len(cluster.brokers) - 1))
    loop = Loop.start(cluster, policy)
    loop.step()
    loop.sim.kill_broker(victim)
    _run_to_idle(loop)
    assert not loop.violations, loop.violations
    live = len(cluster.brokers) - 1
    if len(cluster.brokers) * policy.self_healing_max_failed_fraction > 1:
        if all(len(p.replicas) <= live for p in cluster.partitions()):
            left = [p.tp for p in loop.sim.snapshot().partitions() if victim in p.replicas]
            assert not left, left
