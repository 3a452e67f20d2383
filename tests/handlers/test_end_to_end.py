"""decide() driving the simulated cluster (planning.simulation.simulator) from random clusters and goals.

At every decision the SPEC 6 safety invariants are checked (`Loop.check`): steps in flight within
P, L and B; never two steps for one partition; never |TR| below min ISR; never a replica added to
a dead, draining or dir-less broker; every message encodes. At the end everything is at its
target: the requested replicas, nothing left on a decommissioned or dead broker, load on an
added broker.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from handler_builders import Loop, reassign, request

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
    _run_to_idle(loop)
    assert not loop.violations, loop.violations
    for tp, target in targets.items():
        assert loop.sim.partition(tp).replicas == target


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


@SETTINGS
@given(cluster=clusters(), policy=policies)
def test_an_added_broker_takes_load(cluster, policy):
    loop = Loop.start(cluster, policy)
    loop.step()
    new = Broker(len(cluster.brokers), rack=cluster.brokers[0].rack, log_dirs=tuple(LogDir(d) for d in DIRS))
    loop.sim.add_broker(new)
    _run_to_idle(loop)
    assert not loop.violations, loop.violations
    total = sum(len(p.replicas) for p in cluster.partitions())
    held = sum(new.id in p.replicas for p in loop.sim.snapshot().partitions())
    assert held >= total // (len(cluster.brokers) + 1) - 1 or held >= 1 or total < len(cluster.brokers) + 1


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
