"""Bytes, rate and time left (planning.movement.eta)."""

from __future__ import annotations

from planning.model import Cluster, PartitionState, Topic, TopicPartition
from hypothesis import given, strategies as st

from planning.movement.eta import (
    FinishedWork,
    ReplicationMeter,
    add_finished_work,
    advance_meter,
    compute_completed_step_bytes,
    compute_finished_work,
    compute_rate,
    compute_reassignment_bytes,
    compute_time_left,
)
from planning.movement.partition_steps import Step
from planning.movement.reassignment import Reassignment, StepInFlight

TP = TopicPartition("t", 0)


def test_bytes_count_the_replicas_the_final_target_adds_and_those_already_in_sync():
    record = Reassignment("r", TP, (1, 2, 3), (4, 5, 3))
    moving = PartitionState("t", 0, (1, 2, 3, 4), (1, 2, 3), 1, size_bytes=100, adding=(4,))
    assert compute_reassignment_bytes(record, moving).to_move == 200
    assert compute_reassignment_bytes(record, moving).moved == 0
    caught_up = PartitionState("t", 0, (4, 2, 3), (4, 2, 3), 4, size_bytes=100)
    bytes_ = compute_reassignment_bytes(record, caught_up)
    assert (bytes_.to_move, bytes_.moved, bytes_.left) == (200, 100, 100)
    assert compute_reassignment_bytes(record, None).to_move == 0  # a partition not observed


def test_completed_steps_are_counted_once_with_their_adding_replicas():
    step = Step((4, 2, 3), adding=(4,), removing=(1,))
    running = Reassignment("r", TP, (1, 2, 3), (4, 5, 3), in_flight=StepInFlight(step, 1, 0.0))
    done = Reassignment("r", TP, (1, 2, 3), (4, 5, 3), steps_done=1)
    cluster = Cluster((), (Topic("t", (PartitionState("t", 0, (4, 2, 3), (4, 2, 3), 4, size_bytes=100),)),))
    assert compute_completed_step_bytes({TP: running}, [TP], cluster) == 100
    assert compute_completed_step_bytes({TP: running}, [], cluster) == 0
    assert compute_completed_step_bytes({TP: done}, [TP], cluster) == 0  # nothing was in flight


def test_the_meter_starts_with_the_movement_measures_completed_steps_and_restarts_when_idle():
    meter = advance_meter(ReplicationMeter(), 0, moving=True, now_ms=1_000)
    assert meter == ReplicationMeter(1_000, 0) and compute_rate(meter, 5_000) is None  # nothing done yet
    meter = advance_meter(meter, 4_000, moving=True, now_ms=5_000)
    assert compute_rate(meter, 5_000) == 1_000.0  # 4,000 B in 4 s
    assert compute_rate(meter, 9_000) == 500.0
    assert advance_meter(meter, 0, moving=False, now_ms=9_000) == ReplicationMeter()


def test_time_left_is_bytes_over_the_rate_or_over_a_share_of_it():
    assert compute_time_left(1_000, 100.0) == 10.0
    assert compute_time_left(1_000, 100.0, share=4) == 40.0
    assert compute_time_left(0, None) == 0.0
    assert compute_time_left(1_000, None) is None


def test_ended_reassignments_count_with_their_steps_and_bytes_to_move():
    """What the movement's overall progress needs of the reassignments that left the state."""
    at_target = PartitionState("t", 0, (4, 5, 3), (4, 5, 3), 4, size_bytes=100)
    cluster = Cluster((), (Topic("t", (at_target,)),))
    completed = Reassignment("r", TP, (1, 2, 3), (4, 5, 3), steps_done=2)
    deleted = Reassignment("d", TopicPartition("gone", 0), (1, 2, 3), (4, 2, 3), steps_done=1)
    assert compute_finished_work([completed, deleted], cluster) == FinishedWork(2, 3, 200)  # gone weighs nothing
    assert compute_finished_work([], cluster) == FinishedWork()


def test_a_meter_stored_before_the_finished_fields_loads_with_zeros():
    assert ReplicationMeter(*[5, 100]) == ReplicationMeter(5, 100, 0, 0, 0)


DECISION = st.tuples(st.integers(0, 10**6), st.booleans(), st.integers(0, 3), st.integers(0, 9), st.integers(0, 10**6))


@given(st.lists(DECISION, max_size=30), st.lists(st.integers(0, 2), max_size=30))
def test_the_meter_counts_what_ended_since_the_movement_began_and_resets_with_it(decisions, given_up):
    """A sequence of decisions (copied, moving, ended: count, steps, bytes), some preceded in the
    same batch by reassignments ended elsewhere (a step given up): the meter holds the sums since
    the last decision with nothing moving, and its start is that movement's first decision."""
    meter = ReplicationMeter()
    expected = [0, 0, 0, 0]
    began = None
    for i, (copied, moving, count, steps, size) in enumerate(decisions):
        elsewhere = given_up[i] if i < len(given_up) else 0
        meter = add_finished_work(meter, FinishedWork(elsewhere, elsewhere, elsewhere * 10))
        ended = FinishedWork(count, steps, size) if count else FinishedWork()
        meter = advance_meter(meter, copied, moving, i * 1_000, ended)
        if not moving:
            expected, began = [0, 0, 0, 0], None
            assert meter == ReplicationMeter()
            continue
        began = i * 1_000 if began is None else began
        expected = [expected[0] + copied, expected[1] + ended.reassignments + elsewhere,
                    expected[2] + ended.steps + elsewhere, expected[3] + ended.bytes + elsewhere * 10]
        assert meter.since_ms == began
        assert [meter.bytes_copied, meter.finished, meter.finished_steps, meter.finished_bytes] == expected
