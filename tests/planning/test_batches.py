"""The rolling batch rule (`planning.movement.batches`): limits, order, and the guards."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planning.movement.batches import Limits, PlannedStep, compute_batch, compute_batch_decision
from planning.model import Broker, Cluster, LogDir, PartitionState, Topic, TopicPartition
from planning.movement.partition_steps import Step, compute_next_step
from schemas.errors import InvalidConfigError
from tests.settings_defaults import default_limits

BIG = Limits(100, 100, 4, 100)


def cluster_of(partitions, brokers=range(10), min_isr=1, dead=(), draining=()):
    return Cluster(
        tuple(Broker(b, alive=b not in dead, draining=b in draining, log_dirs=(LogDir("/a"), LogDir("/b")))
              for b in brokers),
        (Topic("t", tuple(partitions), min_isr),),
    )


def part(n, replicas=(0, 1, 2), isr=None, size=None, log_dirs=()):
    return PartitionState("t", n, tuple(replicas), tuple(replicas if isr is None else isr), replicas[0],
                          size_bytes=size, log_dirs=tuple(log_dirs))


def next_step(partition, final, r=4, m=1):
    return compute_next_step(partition.replicas, final, partition.isr, r, m)


def tp(n):
    return TopicPartition("t", n)


@pytest.mark.parametrize("field", ["max_partition_movements", "max_leader_movements", "max_replica_movements",
                                   "max_movements_per_broker"])
def test_every_limit_must_be_at_least_one(field):
    with pytest.raises(InvalidConfigError, match="at least 1"):
        replace(default_limits(), **{field: 0})


def test_limits_from_kafka_style_config():
    base = default_limits()
    limits = Limits.from_config({"reassignment.max.concurrent.partition.movements": "7"}, base)
    assert limits.max_partition_movements == 7 and limits.max_replica_movements == base.max_replica_movements
    with pytest.raises(InvalidConfigError):
        Limits.from_config({"reassignment.max.concurrent.leader.movements": "many"}, base)


def test_partition_limit_counts_steps_in_flight():
    parts = [part(n, size=n) for n in range(5)]
    cluster = cluster_of(parts)
    candidates = {p.tp: next_step(p, (0, 1, 3)) for p in parts[1:]}
    in_flight = {tp(0): next_step(parts[0], (0, 1, 4))}
    started = compute_batch(candidates, in_flight, cluster, Limits(3, 100, 4, 100))
    assert [s.tp for s in started] == [tp(1), tp(2)]


def test_example_of_the_module_docstring():
    parts = [part(0, size=9_000_000), part(1, size=1_000_000), part(2, size=10**9)]
    cluster = cluster_of(parts)
    candidates = {tp(0): next_step(parts[0], (1, 0, 2)), tp(1): next_step(parts[1], (2, 1, 0)),
                  tp(2): next_step(parts[2], (0, 1, 3))}
    decision = compute_batch_decision(candidates, {}, cluster, Limits(2, 1, 4, 100))
    assert [s.tp for s in decision.started] == [tp(1), tp(2)]
    assert [d.tp for d in decision.deferred] == [tp(0)] and "L = 1" in decision.deferred[0].reason


def test_per_broker_limit_counts_adds_and_drops():
    parts = [part(0, (0, 1, 2)), part(1, (3, 4, 5)), part(2, (6, 7, 8))]
    cluster = cluster_of(parts)
    candidates = {tp(0): next_step(parts[0], (0, 1, 9)),  # drops 2, adds 9
                  tp(1): next_step(parts[1], (3, 4, 2)),  # adds to 2: second movement on 2
                  tp(2): next_step(parts[2], (6, 7, 9))}  # adds to 9: second movement on 9
    decision = compute_batch_decision(candidates, {}, cluster, Limits(100, 100, 4, 1))
    assert [s.tp for s in decision.started] == [tp(0)]
    assert all("B = 1" in d.reason for d in decision.deferred)


def test_never_two_steps_for_one_partition():
    p = part(0)
    cluster = cluster_of([p])
    step = next_step(p, (0, 1, 3))
    assert compute_batch({tp(0): step}, {tp(0): step}, cluster, BIG) == ()
    kafka_busy = PartitionState("t", 0, (0, 1, 2, 3), (0, 1, 2), 0, adding=(3,), removing=(2,))
    assert compute_batch({tp(0): step}, {}, cluster_of([kafka_busy]), BIG) == ()


def test_order_urgent_then_leader_movements_then_smallest_with_unknown_size_last():
    parts = [part(0, size=5), part(1, size=1), part(2, size=None), part(3, size=100),
             part(4, (0, 1, 2), isr=(0,), size=10**12)]
    cluster = cluster_of(parts, min_isr=2)
    candidates = {tp(0): next_step(parts[0], (0, 1, 3)), tp(1): next_step(parts[1], (0, 1, 4)),
                  tp(2): next_step(parts[2], (0, 1, 5)), tp(3): next_step(parts[3], (6, 1, 2)),
                  tp(4): next_step(parts[4], (0, 1, 7), m=2)}
    assert [s.tp for s in compute_batch(candidates, {}, cluster, BIG)] == [tp(4), tp(3), tp(1), tp(0), tp(2)]


def test_only_a_step_restoring_min_isr_may_exceed_r():
    under = part(0, (0, 1, 2), isr=(0,))
    cluster = cluster_of([under], min_isr=3)
    step = next_step(under, (0, 3, 4), r=1, m=3)
    assert len(step.adding) == 2
    assert [s.tp for s in compute_batch({tp(0): step}, {}, cluster, Limits(1, 1, 1, 100))] == [tp(0)]
    healthy = part(1)
    wide = Step(target=(0, 3, 4), adding=(3, 4), removing=(1, 2))
    decision = compute_batch_decision({tp(1): wide}, {}, cluster_of([healthy]), Limits(10, 10, 1, 10))
    assert decision.started == () and "R = 1" in decision.deferred[0].reason


def test_refuses_dead_draining_and_offline_targets_and_steps_below_min_isr():
    p = part(0, (0, 1, 2), log_dirs=("/a", "/a", "/a"))
    to_dead = next_step(p, (0, 1, 3))
    to_draining = next_step(p, (0, 1, 4))
    assert compute_batch({tp(0): to_dead}, {}, cluster_of([p], dead=(3,)), BIG) == ()
    assert compute_batch({tp(0): to_draining}, {}, cluster_of([p], draining=(4,)), BIG) == ()
    offline_dir = Cluster(
        tuple(Broker(b, log_dirs=(LogDir("/a", online=b != 5), LogDir("/b"))) for b in range(6)),
        (Topic("t", (p,), 1),))
    planned = PlannedStep(tp(0), next_step(p, (0, 1, 5)), target_log_dirs=((5, "/a"),))
    assert compute_batch([planned], [], offline_dir, BIG) == ()
    shrink = next_step(p, (0, 1))
    assert compute_batch({tp(0): shrink}, {}, cluster_of([p], min_isr=3), BIG) == ()
    assert compute_batch({tp(0): shrink}, {}, cluster_of([p], min_isr=2), BIG) != ()


def test_a_step_keeping_a_replica_on_a_dead_broker_waits():
    p = part(0, (0, 1, 2), isr=(0, 1))
    keeps_dead = next_step(p, (5, 0, 1))  # new leader first: adds 5 alone, keeps 2
    assert 2 in keeps_dead.target
    decision = compute_batch_decision({tp(0): keeps_dead}, {}, cluster_of([p], dead=(2,)), BIG)
    assert decision.started == () and "offline" in decision.deferred[0].reason
    drops_dead = next_step(p, (0, 1, 5))
    assert compute_batch({tp(0): drops_dead}, {}, cluster_of([p], dead=(2,)), BIG) != ()


@st.composite
def batch_inputs(draw):
    n_brokers = draw(st.integers(3, 8))
    parts, candidates, in_flight = [], {}, {}
    for n in range(draw(st.integers(1, 15))):
        replicas = tuple(draw(st.permutations(range(n_brokers)))[: draw(st.integers(1, 3))])
        final = tuple(draw(st.permutations(range(n_brokers)))[: len(replicas)])
        p = part(n, replicas, size=draw(st.one_of(st.none(), st.integers(0, 10**6))))
        parts.append(p)
        step = next_step(p, final, r=draw(st.integers(1, 3)))
        if step is not None:
            (in_flight if draw(st.booleans()) else candidates)[p.tp] = step
    limits = Limits(draw(st.integers(1, 10)), draw(st.integers(1, 5)), 3, draw(st.integers(1, 4)))
    return cluster_of(parts, brokers=range(n_brokers)), candidates, in_flight, limits


@settings(max_examples=150, deadline=None)
@given(batch_inputs())
def test_a_batch_never_adds_beyond_the_limits(inputs):
    cluster, candidates, in_flight, limits = inputs
    started = compute_batch(candidates, in_flight, cluster, limits)
    assert not {s.tp for s in started} & set(in_flight)
    assert len({s.tp for s in started}) == len(started)
    total = list(in_flight.values()) + [s.step for s in started]
    # Limits are never exceeded by what this decision adds (in flight may already exceed a lowered limit).
    if started:
        assert len(total) <= max(limits.max_partition_movements, len(in_flight))
        assert sum(s.leader_movement for s in total) <= max(
            limits.max_leader_movements, sum(s.leader_movement for s in in_flight.values()))
        for broker in {b for s in started for b in s.step.moved_brokers}:
            assert sum(broker in s.moved_brokers for s in total) <= max(
                limits.max_movements_per_broker, sum(broker in s.moved_brokers for s in in_flight.values()))
