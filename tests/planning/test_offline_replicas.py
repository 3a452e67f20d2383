"""Offline leaving replicas (a dead broker, an offline dir): a step sheds them, so healing completes.

The step rule's step that adds a new preferred leader alone keeps every current replica, and one
bounded by R may keep some; a kept replica that can never rejoin the ISR would hold the step
forever. `compute_reachable_step` drops such replicas too, free of R (they are out of sync), and
keeps them when no online replica is in sync (they may hold the only data). An eligible leader
replica (KIP-966) is a clean copy: shed only by a step that adds a replica.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, strategies as st

from planning.movement.batches import Limits, PlannedStep, compute_batch_decision, count_replica_drops
from planning.model import Broker, Cluster, PartitionState, Topic, TopicPartition
from planning.movement.reassignment import ReassignmentState, start_reassignment
from planning.simulation.driver import KillBroker, run_plan
from planning.simulation.simulated_cluster import SimulationParams
from planning.movement.advance import compute_reachable_step
from planning.movement.partition_steps import Step, compute_next_step
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


# Eligible leader replicas (KIP-966): out of the ISR but clean; shed only when traded for a new replica.

def test_an_offline_eligible_leader_is_shed_by_a_step_that_adds_a_replica():
    # Min ISR 3: broker 0 died (ISR [1, 2], ELR [0]... then 1: ISR [2], ELR [0, 1]).
    p = replace(after_losing_0_and_1(), eligible_leaders=(0, 1))
    cluster = cluster_of(p, dead=(0, 1), min_isr=3)
    step = compute_reachable_step(start_reassignment("r", TP, p.replicas, (3, 4, 2)), p, cluster, R1)
    # Under min ISR 3 both new replicas come at once; Kafka keeps 0 and 1 until 3 and 4 are in
    # sync: the clean copies are traded for in-sync ones, never given up.
    assert step == Step(target=(3, 4, 2), adding=(3, 4), removing=(0, 1), elect_leader=True, leader_movement=True)
    assert count_replica_drops(step, p, cluster) == 0
    assert compute_batch_decision({TP: step}, {}, cluster, R1).started == (PlannedStep(TP, step),)


def surplus_after_adding() -> PartitionState:
    """(3, 0, 1, 2) → (3, 2), R = 1, min ISR 3: the adding is done; then 0 and 1 died, 1 eligible."""
    return PartitionState("t", 0, (3, 0, 1, 2), isr=(3, 2), leader=3, offline_replicas=(0, 1),
                          eligible_leaders=(1,), size_bytes=100)


def test_a_step_that_adds_nothing_keeps_an_offline_eligible_leader_and_waits():
    p = surplus_after_adding()
    cluster = cluster_of(p, dead=(0, 1), min_isr=3)
    step = compute_reachable_step(start_reassignment("r", TP, p.replicas, (3, 2)), p, cluster, R1)
    # 0 (out of sync, not clean) goes first and is shed; 1, a clean copy, is not given up for nothing.
    assert step.removing == (0,) and 1 in step.target
    decision = compute_batch_decision({TP: step}, {}, cluster, R1)
    assert decision.started == ()
    assert "eligible leader replica on broker 1" in decision.deferred[0].reason
    # Its broker back (in the ELR, not yet in the ISR): the kept replica is online, the step may start.
    back = replace(p, offline_replicas=(0,))
    assert compute_batch_decision({TP: step}, {}, cluster_of(back, dead=(0,), min_isr=3), R1).started


def test_without_eligible_leaders_the_same_step_sheds_both():
    p = replace(surplus_after_adding(), eligible_leaders=())
    cluster = cluster_of(p, dead=(0, 1), min_isr=3)
    step = compute_reachable_step(start_reassignment("r", TP, p.replicas, (3, 2)), p, cluster, R1)
    assert step == Step(target=(3, 2), removing=(0, 1))
    assert count_replica_drops(step, p, cluster) == 0


def test_dropping_an_offline_eligible_leader_without_adding_counts_against_r():
    p = surplus_after_adding()
    cluster = cluster_of(p, dead=(0, 1), min_isr=3)
    assert count_replica_drops(Step(target=(3, 2), removing=(0, 1)), p, cluster) == 1
    assert count_replica_drops(Step(target=(3, 2, 5), adding=(5,), removing=(0, 1)), p, cluster) == 0


def test_eligible_leaders_are_dropped_after_the_other_out_of_sync_replicas():
    # 0 and 1 out of sync, 0 eligible: 1 goes first (CR order alone would drop 0).
    assert compute_next_step((0, 1, 2, 3), (2, 3), (2, 3), 1, 1, eligible_leaders=(0,)).removing == (1,)
    assert compute_next_step((0, 1, 2, 3), (2, 3), (2, 3), 1, 1).removing == (0,)
    # ...and before the in-sync ones.
    assert compute_next_step((0, 1, 2, 3), (2, 3), (1, 2, 3), 1, 1, eligible_leaders=(0,)).removing == (0,)


@given(st.data())
def test_a_clean_copy_is_only_shed_when_a_replica_is_added(data):
    brokers = list(range(7))
    replicas = tuple(data.draw(st.permutations(brokers))[:data.draw(st.integers(2, 5))])
    final = tuple(data.draw(st.permutations(brokers))[:data.draw(st.integers(1, 4))])
    isr = tuple(b for b in replicas if data.draw(st.booleans(), label=f"in sync {b}"))
    eligible = tuple(b for b in replicas if b not in isr and data.draw(st.booleans(), label=f"eligible {b}"))
    dead = tuple(b for b in brokers if data.draw(st.booleans(), label=f"dead {b}"))
    p = PartitionState("t", 0, replicas, isr=isr, leader=isr[0] if isr else None,
                       offline_replicas=tuple(b for b in replicas if b in dead), eligible_leaders=eligible)
    cluster = cluster_of(p, dead=dead, brokers=brokers, min_isr=data.draw(st.integers(1, 3)))
    r = data.draw(st.integers(1, 3))
    plain = compute_next_step(replicas, final, isr, r, cluster.min_isr("t"), leader=p.leader, eligible_leaders=eligible)
    step = compute_reachable_step(start_reassignment("r", TP, replicas, final), p, cluster,
                                  default_limits(max_replica_movements=r))
    if step is None:
        return
    shed = set(step.removing) - set(plain.removing)  # what the reachable rule dropped beyond the plan
    assert all(b not in final and b not in isr and b in dead for b in shed)
    if not step.adding:
        assert not shed & set(eligible)
