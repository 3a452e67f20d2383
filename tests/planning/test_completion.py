"""Step completion, progress and stalls (`planning.movement.completion`)."""

from __future__ import annotations

from planning.movement.completion import (
    StepPhase,
    compute_step_progress,
    describe_stall,
    is_step_complete,
    is_step_stalled,
    needs_leader_election,
)
from planning.model import PartitionState
from planning.movement.partition_steps import Step

STEP = Step(target=(4, 3, 2), adding=(4,), removing=(1,), elect_leader=True, leader_movement=True)


def p(replicas, isr, leader, adding=(), removing=()):
    return PartitionState("t", 0, tuple(replicas), tuple(isr), leader, adding=tuple(adding), removing=tuple(removing))


def test_complete_when_replicas_match_in_order_all_in_sync_and_leader_elected():
    assert is_step_complete(p([4, 3, 2], [2, 3, 4], 4), STEP)


def test_not_complete_while_kafka_still_reassigns():
    partition = p([1, 4, 3, 2], [1, 2, 3, 4], 1, adding=[4], removing=[1])
    assert not is_step_complete(partition, STEP)
    assert compute_step_progress(partition, STEP).phase is StepPhase.REMOVING
    catching_up = p([1, 4, 3, 2], [1, 2, 3], 1, adding=[4], removing=[1])
    progress = compute_step_progress(catching_up, STEP)
    assert progress.phase is StepPhase.CATCHING_UP and progress.waiting_for == (4,)
    assert "0/1" in progress.describe()


def test_not_complete_in_another_order_or_with_a_member_out_of_sync():
    assert not is_step_complete(p([3, 4, 2], [2, 3, 4], 4), STEP)
    out_of_sync = p([4, 3, 2], [3, 4], 4)
    assert not is_step_complete(out_of_sync, STEP)
    assert compute_step_progress(out_of_sync, STEP).phase is StepPhase.AWAITING_ISR


def test_a_step_that_elects_waits_for_its_leader():
    waiting = p([4, 3, 2], [2, 3, 4], 3)
    assert not is_step_complete(waiting, STEP)
    assert needs_leader_election(waiting, STEP)
    no_election = Step(target=(4, 3, 2), adding=(4,), removing=(1,))
    assert is_step_complete(waiting, no_election)


def test_stall_after_timeout_with_progress_in_the_message():
    assert not is_step_stalled(100.0, 699.0, 600.0)
    assert is_step_stalled(100.0, 700.0, 600.0)
    message = describe_stall(p([1, 4, 3, 2], [1, 2, 3], 1, adding=[4], removing=[1]), STEP, 0.0, 900.0)
    assert "900 s" in message and "waiting for [4]" in message
