"""Cancel, supersede and additional requests (`planning.movement.cancel`), including the two Kafka
examples of its module docstring."""

from __future__ import annotations

import pytest

from planning.movement.batches import Limits
from planning.movement.cancel import (
    CancelScope,
    compute_cancel,
    compute_cancel_observed,
    compute_partition_after_cancel,
    compute_reassign_request,
)
from planning.model import Broker, Cluster, PartitionState, Topic, TopicPartition
from planning.movement.reassignment import (
    ReassignmentState,
    confirm_cancel,
    mark_step_seen,
    start_reassignment,
    start_step,
)
from planning.simulation.driver import CancelReassignments, run_plan
from planning.simulation.simulated_cluster import SimulatedCluster, SimulationParams
from planning.movement.advance import compute_stepping
from planning.movement.partition_steps import Step
from schemas.errors import NoReassignmentInProgressError
from tests.settings_defaults import STALL_TIMEOUT, default_limits

TP = TopicPartition("t", 0)


def one_partition_cluster(replicas=(1, 2, 3), brokers=range(1, 7), size=100):
    p = PartitionState("t", 0, tuple(replicas), tuple(replicas), replicas[0], size_bytes=size)
    return Cluster(tuple(Broker(b) for b in brokers), (Topic("t", (p,), 1),))


def test_spec_example_one_step_as_kafka_sees_it():
    sim = SimulatedCluster(one_partition_cluster(), SimulationParams(bytes_per_sec=100))
    sim.submit_step(TP, (4, 3, 2))
    p = sim.partition(TP)
    assert (p.replicas, p.isr, p.adding, p.removing) == ((1, 4, 3, 2), (1, 2, 3), (4,), (1,))
    sim.tick(1.0)  # 4 copies the 100 bytes and joins the ISR; Kafka then drops 1
    p = sim.partition(TP)
    assert (p.replicas, set(p.isr), p.adding, p.removing) == ((4, 3, 2), {2, 3, 4}, (), ())


def test_spec_example_cancel_reverts_to_the_original_replicas():
    sim = SimulatedCluster(one_partition_cluster(), SimulationParams(bytes_per_sec=10))
    sim.submit_step(TP, (3, 4, 5))
    p = sim.partition(TP)
    assert (p.replicas, p.adding, p.removing) == ((1, 2, 3, 4, 5), (4, 5), (1, 2))
    sim.tick(1.0)
    sim.cancel(TP)
    p = sim.partition(TP)
    assert (p.replicas, p.isr, p.adding, p.removing) == ((1, 2, 3), (1, 2, 3), (), ())
    # The same revert as a pure function, with 4 already in the ISR.
    moving = PartitionState("t", 0, (1, 2, 3, 4, 5), (1, 2, 3, 4), 1, adding=(4, 5), removing=(1, 2))
    after = compute_partition_after_cancel(moving)
    assert (after.replicas, after.isr, after.adding, after.removing) == ((1, 2, 3), (1, 2, 3), (), ())


def test_cancelling_nothing_in_progress_is_an_error():
    with pytest.raises(NoReassignmentInProgressError):
        compute_cancel({}, CancelScope())
    record = start_reassignment("r", TP, (1, 2, 3), (4, 5, 6))
    with pytest.raises(NoReassignmentInProgressError):
        compute_cancel({TP: record}, CancelScope("other"))
    with pytest.raises(NoReassignmentInProgressError):
        SimulatedCluster(one_partition_cluster()).cancel(TP)


def test_cancel_with_step_in_flight_cancels_in_kafka_then_reverts_or_keeps():
    record = start_step(start_reassignment("r", TP, (1, 2, 3), (4, 5, 6)), Step((4, 1, 2, 3), (4,), (), True, True), 0.0)
    decision = compute_cancel({TP: record}, CancelScope("t", 0))
    assert decision.cancel_in_kafka == (TP,)
    cancelling = decision.reassignments[TP]
    assert cancelling.state is ReassignmentState.CANCELLING and not cancelling.wants_next_step
    still_moving = PartitionState("t", 0, (1, 2, 3, 4), (1, 2, 3), 1, adding=(4,))
    assert compute_cancel_observed(cancelling, still_moving) == cancelling
    seen = mark_step_seen(cancelling)  # what compute_stepping does with the view above
    reverted = compute_cancel_observed(seen, compute_partition_after_cancel(still_moving))
    assert reverted.state is ReassignmentState.REVERTING and reverted.final_target == (1, 2, 3)
    kept = mark_step_seen(compute_cancel({TP: record}, keep=True).reassignments[TP])
    assert compute_cancel_observed(kept, PartitionState("t", 0, (1, 2, 3))).state is ReassignmentState.DONE


def test_an_unchanged_view_of_a_step_never_seen_is_not_taken_for_a_revert():
    # Found by the demo: a step that only drops a replica, (4, 5, 3) -> (5, 3), completes in Kafka
    # before the watcher's next poll; a cancel right after met the stale view (4, 5, 3), took it
    # for a revert and reported "back at its original replicas" while Kafka held (5, 3).
    step = Step((5, 3), adding=(), removing=(4,))
    record = start_step(start_reassignment("r", TP, (4, 5, 3), (5, 3)), step, 0.0)
    cancelling = compute_cancel({TP: record}, CancelScope("t", 0)).reassignments[TP]
    stale = PartitionState("t", 0, (4, 5, 3), (4, 5, 3), 4)
    assert compute_cancel_observed(cancelling, stale) == cancelling, "the stale view proves nothing"
    reverting = compute_cancel_observed(cancelling, PartitionState("t", 0, (5, 3), (5, 3), 5))
    assert reverting.state is ReassignmentState.REVERTING and reverting.final_target == (4, 5, 3)
    confirmed = confirm_cancel(cancelling, 1)  # the executor: CancelReassignment applied
    assert compute_cancel_observed(confirmed, stale).state is ReassignmentState.REVERTING
    assert confirm_cancel(cancelling, 2) == cancelling, "another step's cancel confirms nothing"
    assert compute_cancel_observed(cancelling, stale, stalled=True).state is ReassignmentState.REVERTING
    cluster = Cluster(tuple(Broker(b) for b in range(1, 7)), (Topic("t", (stale,), 1),))
    still = compute_stepping({TP: cancelling}, cluster, default_limits(), 1.0, STALL_TIMEOUT).reassignments[TP]
    assert still.state is ReassignmentState.CANCELLING and still.in_flight.number == 1


def test_a_step_that_completed_before_the_cancel_counts_and_the_revert_starts_from_its_target():
    # The cancel module's first example, completed before the cancel reached Kafka
    # (NO_REASSIGNMENT_IN_PROGRESS).
    step = Step((4, 3, 2), adding=(4,), removing=(1,), elect_leader=True, leader_movement=True)
    record = start_step(start_reassignment("r", TP, (1, 2, 3), (4, 3, 2)), step, 0.0)
    cancelling = compute_cancel({TP: record}, CancelScope("t", 0)).reassignments[TP]
    done = PartitionState("t", 0, (4, 3, 2), (4, 3, 2), 4)
    reverting = compute_cancel_observed(cancelling, done)
    assert reverting.state is ReassignmentState.REVERTING and reverting.final_target == (1, 2, 3)
    assert reverting.steps_done == 1 and reverting.next_step_number == 2, "step 1's command id is used"
    cluster = Cluster(tuple(Broker(b) for b in range(1, 7)), (Topic("t", (done,), 1),))
    revert = compute_stepping({TP: cancelling}, cluster, default_limits(max_replica_movements=1), 1.0,
                              STALL_TIMEOUT).reassignments[TP]
    assert revert.in_flight.number == 2
    assert revert.in_flight.step.adding == (1,), "from (4, 3, 2), not from the stale (1, 2, 3)"


def test_supersede_keeps_the_step_in_flight_and_the_original_replicas():
    record = start_step(start_reassignment("r", TP, (1, 2, 3), (4, 5, 6)), Step((4, 1, 2, 3), (4,)), 0.0)
    updated = compute_reassign_request({TP: record}, {TP: (4, 2, 6)}, {TP: (1, 2, 3, 4)}, "req2")[TP]
    assert updated.final_target == (4, 2, 6)
    assert updated.in_flight == record.in_flight and updated.original_replicas == (1, 2, 3)


def test_additional_partitions_join_without_disturbing_running_ones():
    other = TopicPartition("t", 1)
    record = start_step(start_reassignment("r", TP, (1, 2, 3), (4, 5, 6)), Step((4, 1, 2, 3), (4,)), 5.0)
    updated = compute_reassign_request({TP: record}, {other: (2, 3, 4)}, {other: (1, 2, 3)}, "req2")
    assert updated[TP] is record
    assert updated[other].final_target == (2, 3, 4) and updated[other].in_flight is None
    assert compute_reassign_request({}, {other: (1, 2, 3)}, {other: (1, 2, 3)}, "noop") == {}


def cluster_of_partitions(n=6, brokers=8, size=1000):
    parts = tuple(PartitionState("t", i, (i % 4, (i + 1) % 4, (i + 2) % 4), (i % 4, (i + 1) % 4, (i + 2) % 4),
                                 i % 4, size_bytes=size) for i in range(n))
    return Cluster(tuple(Broker(b) for b in range(brokers)), (Topic("t", parts, 2),))


@pytest.mark.parametrize("keep", [False, True])
def test_cancel_all_mid_run_reverts_or_stops_and_keeps_the_invariants(keep):
    cluster = cluster_of_partitions()
    targets = {p.tp: (4 + p.partition % 4, 4 + (p.partition + 1) % 4, 4 + (p.partition + 2) % 4)
               for p in cluster.partitions()}
    report = run_plan(cluster, targets, Limits(3, 2, 1, 2), SimulationParams(bytes_per_sec=500),
                      events=[CancelReassignments(3.0, keep=keep)], stall_timeout=STALL_TIMEOUT)
    assert report.invariant_violations == () and report.finished
    for tp, record in report.reassignments.items():
        assert record.state is ReassignmentState.DONE
        if record.reason.startswith("cancelled"):
            if not keep:
                assert report.final_replicas[tp] == record.original_replicas
        else:
            assert report.final_replicas[tp] == targets[tp]
    assert any(r.reason.startswith("cancelled") for r in report.reassignments.values())


def test_cancel_one_topic_leaves_the_other_moving():
    base = cluster_of_partitions(4)
    other = Topic("u", tuple(PartitionState("u", p.partition, p.replicas, p.isr, p.leader, size_bytes=1000)
                             for p in base.topics[0].partitions), 2)
    cluster = Cluster(base.brokers, base.topics + (other,))
    targets = {p.tp: (5, 6, 7) for p in cluster.partitions()}
    report = run_plan(cluster, targets, Limits(2, 2, 1, 2), SimulationParams(bytes_per_sec=500),
                      events=[CancelReassignments(2.0, CancelScope("u"))], stall_timeout=STALL_TIMEOUT)
    assert report.invariant_violations == ()
    for tp in targets:
        if tp.topic == "t":
            assert report.final_replicas[tp] == (5, 6, 7)
        else:
            assert report.final_replicas[tp] == cluster.partition(tp).replicas
