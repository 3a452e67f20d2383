"""Bytes, rate and time left (planning.movement.eta; issue 16 item 5)."""

from __future__ import annotations

from planning.model import Cluster, PartitionState, Topic, TopicPartition
from planning.movement.eta import (
    ReplicationMeter,
    advance_meter,
    compute_completed_step_bytes,
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
