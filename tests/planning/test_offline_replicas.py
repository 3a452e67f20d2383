"""Offline leaving replicas (a dead broker, an offline dir): a step sheds them, so healing completes.

The step rule's step that adds a new preferred leader alone keeps every current replica, and one
bounded by R may keep some; a kept replica that can never rejoin the ISR would hold the step
forever. `compute_reachable_step` drops such replicas too, free of R (they are out of sync), and
keeps them when no online replica is in sync (they may hold the only data).
"""

from __future__ import annotations

from dataclasses import replace

from planning.movement.batches import Limits, PlannedStep, compute_batch_decision, count_replica_drops
from planning.model import Broker, Cluster, PartitionState, Topic, TopicPartition
from planning.movement.reassignment import ReassignmentState, start_reassignment
from planning.simulation.driver import KillBroker, run_plan
from planning.simulation.simulated_cluster import SimulationParams
from planning.movement.advance import compute_reachable_step
from planning.movement.partition_steps import Step
from tests.settings_defaults import STALL_TIMEOUT, default_limits

TP = TopicPartition("t", 0)
R1 = default_limits(max_replica_movements=1)


def cluster_of(p: PartitionState, dead=(), brokers=range(6), min_isr=1) -> Cluster:
    return Cluster(tuple(Broker(b, alive=b not in dead) for b in brokers), (Topic("t", (p,), min_isr),))


def after_losing_0_and_1() -> PartitionState:
    """(0, 1, 2) once brokers 0 (the preferred leader) and 1 died: 2 leads, alone in the ISR."""
    return PartitionState("t", 0, (0, 1, 2), isr=(2,), leader=2, offline_replicas=(0, 1), size_bytes=100)


def test_a_new_preferred_leader_step_sheds_both_offline_replicas_with_r_1():
    p = after_losing_0_and_1()
    cluster = cluster_of(p, dead=(0, 1))
    step = compute_reachable_step(start_reassignment("r", TP, p.replicas, (3, 4, 2)), p, cluster, R1)
    assert step == Step(target=(3, 2), adding=(3,), removing=(0, 1), elect_leader=True, leader_movement=True)
    assert count_replica_drops(step, p, cluster) == 0
    assert compute_batch_decision({TP: step}, {}, cluster, R1).started == (PlannedStep(TP, step),)


def test_drops_of_online_or_in_sync_replicas_still_count_against_r():
    p = replace(after_losing_0_and_1(), offline_replicas=(0,))  # broker 1 is back, not caught up yet
    cluster = cluster_of(p, dead=(0,))
    wide = Step(target=(3, 2), adding=(3,), removing=(0, 1), elect_leader=True, leader_movement=True)
    assert count_replica_drops(wide, p, cluster) == 1
    healthy = PartitionState("t", 0, (0, 1, 2), isr=(0, 1, 2), leader=0)
    decision = compute_batch_decision({TP: wide}, {}, cluster_of(healthy), R1)
    assert decision.started == () and "limit R = 1" in decision.deferred[0].reason


def test_nothing_is_shed_when_no_online_replica_is_in_sync():
    # Kafka keeps the last ISR member listed, leaderless: the out-of-sync copies may be all that is left.
    p = PartitionState("t", 0, (0, 1, 2), isr=(2,), leader=None, offline_replicas=(0, 1, 2))
    cluster = cluster_of(p, dead=(0, 1, 2))
    step = compute_reachable_step(start_reassignment("r", TP, p.replicas, (3, 4, 5)), p, cluster, R1)
    assert step.removing == () and {0, 1, 2} <= set(step.target)
    assert compute_batch_decision({TP: step}, {}, cluster, R1).started == ()


def test_healing_two_dead_replicas_with_the_preferred_leader_completes_with_r_1():
    healthy = PartitionState("t", 0, (0, 1, 2), isr=(0, 1, 2), leader=0, size_bytes=100)
    for min_isr in (1, 2):
        report = run_plan(cluster_of(healthy, min_isr=min_isr), {TP: (3, 4, 2)}, Limits(1, 1, 1, 1),
                          SimulationParams(bytes_per_sec=50, max_seconds=100.0),
                          [KillBroker(0.0, 0), KillBroker(0.0, 1)], stall_timeout=STALL_TIMEOUT)
        assert report.invariant_violations == ()
        assert report.finished and report.final_replicas[TP] == (3, 4, 2)
        assert report.reassignments[TP].state is ReassignmentState.DONE
