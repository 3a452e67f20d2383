"""Partitions a failed log dir held are kept off its broker until the broker restarts.

Kafka (4.1, seen on the local cluster) keeps such a partition marked as residing in an offline
dir: a replica of it added back to that broker never starts and never joins the ISR, so a step
that does so stalls. `Broker.cannot_host` carries what the product learnt; the placer, the
validation of explicit targets and the simulator honour it.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from hypothesis import given, settings, strategies as st

from placement_checks import hard_constraint_violations, random_spread_cluster
from planning.model import Broker, Cluster, PartitionState, Topic, TopicPartition
from planning.placement.goal import Goal
from planning.placement.placer import plan_placement
from planning.simulation.simulated_cluster import SimulatedCluster, SimulationParams
from planning.validation import validate_targets
from schemas.errors import InvalidReplicaAssignmentError, PlanInfeasibleError


def with_cannot_host(cluster: Cluster, broker_id: int, tps) -> Cluster:
    return cluster.with_brokers(
        replace(b, cannot_host=frozenset(tps)) if b.id == broker_id else b for b in cluster.brokers)


def emptied_broker_cluster() -> Cluster:
    """Broker 1 holds nothing (its dir failed and was healed away); 12 partitions RF 2 on 0, 2, 3."""
    others = (0, 2, 3)
    parts = tuple(PartitionState("t", n, (others[n % 3], others[(n + 1) % 3]), size_bytes=10)
                  for n in range(12))
    return Cluster(tuple(Broker(b) for b in range(4)), (Topic("t", parts),))


def test_a_rebalance_fills_the_broker_with_other_partitions_than_its_failed_dir_held():
    cluster = emptied_broker_cluster()
    goal = Goal(heal=False, rebalance=True)
    unrestricted = plan_placement(cluster, goal)
    onto_1 = {tp for tp, target in unrestricted.targets.items() if 1 in target}
    assert len(onto_1) == 6  # the test means something: these would go to broker 1

    restricted = plan_placement(with_cannot_host(cluster, 1, onto_1), goal)
    onto_1_now = {tp for tp, target in restricted.targets.items() if 1 in target}
    assert not onto_1_now & onto_1
    assert len(onto_1_now) == 6 and restricted.replica_moves == unrestricted.replica_moves


def test_a_broker_that_cannot_host_anything_is_left_empty_rather_than_given_a_stalling_replica():
    cluster = emptied_broker_cluster()
    everything = {p.tp for p in cluster.partitions()}
    plan = plan_placement(with_cannot_host(cluster, 1, everything), Goal(heal=False, rebalance=True))
    assert all(1 not in target for target in plan.targets.values())


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 100_000), brokers=st.integers(3, 9), rf=st.integers(1, 3),
       kind=st.sampled_from(["add", "drain", "kill"]))
def test_no_plan_puts_a_partition_back_on_a_broker_that_cannot_host_it(seed, brokers, rf, kind):
    rnd = random.Random(seed)
    racks = rnd.choice([None, 2, 3])
    pool = [Broker(i, rack=None if racks is None else f"/dc{i % 2}/r{i % racks}") for i in range(brokers)]
    cluster = random_spread_cluster(rnd, pool, 3, 20, min(rf, brokers - 1))
    victim = rnd.randrange(brokers)
    every_tp = [p.tp for p in cluster.partitions()]
    stranded = frozenset(rnd.sample(every_tp, k=rnd.randint(1, len(every_tp))))
    cluster = with_cannot_host(cluster, victim, stranded)
    if kind == "add":
        goal = Goal(add_brokers=(Broker(brokers, rack=None if racks is None else "/dc0/r0"),))
    elif kind == "drain":
        goal = Goal(drain_brokers=frozenset({(victim + 1) % brokers}))
    else:
        dead = (victim + 1) % brokers
        cluster = cluster.with_brokers(replace(b, alive=False) if b.id == dead else b for b in cluster.brokers)
        goal = Goal(heal=True, rebalance=False)
    try:
        plan = plan_placement(cluster, goal)
    except PlanInfeasibleError as refused:  # too few brokers left once the victim is excluded
        assert f"excluded: [{victim}]" in str(refused)
        return
    for tp, target in plan.targets.items():
        if tp in stranded and victim not in cluster.partition(tp).replicas:
            assert victim not in target, f"{tp} put back on broker {victim}: {target}"
    assert hard_constraint_violations(cluster, goal, plan) == []


def test_an_explicit_target_adding_the_replica_back_is_refused_but_keeping_one_is_not():
    tp = TopicPartition("t", 0)
    cluster = with_cannot_host(emptied_broker_cluster(), 1, {tp})
    with pytest.raises(InvalidReplicaAssignmentError) as caught:
        validate_targets(cluster, {tp: (0, 1)})
    assert caught.value.code == "INVALID_REPLICA_ASSIGNMENT"
    assert "broker 1 cannot host" in str(caught.value) and "restart" in str(caught.value)
    validate_targets(cluster, {TopicPartition("t", 1): (0, 1)})  # another partition: fine
    kept = replace(cluster.partition(tp), replicas=(1, 2))  # still listed there (offline)
    cluster = Cluster(cluster.brokers, (Topic("t", (kept,) + cluster.topics[0].partitions[1:]),))
    validate_targets(cluster, {tp: (2, 1)})  # a reorder adds nothing: allowed


def test_the_simulator_never_starts_such_a_replica_until_the_broker_restarts():
    parts = (PartitionState("t", 0, (0, 1), (0, 1), 0, size_bytes=100, log_dirs=("/a", "/b")),)
    brokers = tuple(Broker(b, log_dirs=(replace_dir("/a"), replace_dir("/b"))) for b in range(3))
    sim = SimulatedCluster(Cluster(brokers, (Topic("t", parts),)), SimulationParams(bytes_per_sec=1000))
    tp = parts[0].tp
    sim.fail_log_dir(1, "/b")
    sim.submit_step(tp, (0, 2))  # heal: 1 -> 2
    sim.tick(1.0)
    assert sim.partition(tp).replicas == (0, 2)
    sim.submit_step(tp, (0, 2, 1))  # back onto broker 1, into its healthy dir
    for _ in range(5):
        sim.tick(1.0)
    assert 1 not in sim.partition(tp).isr and sim.reassigning() == (tp,)
    sim.restart_broker(1)
    sim.tick(1.0)
    assert sim.partition(tp).replicas == (0, 2, 1) and not sim.reassigning()


def replace_dir(path: str):
    from planning.model import LogDir

    return LogDir(path)
