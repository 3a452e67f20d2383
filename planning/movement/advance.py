"""One decision over all ongoing reassignments: what completed, what to elect, what starts now.

This is the movement half of a micro-batch's "decide" (SPEC 5.3: the next step of a partition is
decided in the same decision that sees its step complete), and the only place that decides it:
the simulator driver (`planning.simulation.simulator.run_plan`) and the pipeline (`handlers.progress`) both
call `compute_stepping` and only carry out its decision. Pure: records and a read-only cluster
view in, new records and what to do out; `now` is passed in.

ORDER (the code follows it):
1. For every active record, in (topic, partition) order, read its partition from the cluster:
   - gone (topic deleted) → DONE, ending DELETED;
   - a step in flight the view shows (reassigning, or at the step's target) is marked seen;
   - CANCELLING and Kafka no longer shows a reassignment, in a view that can be trusted (seen,
     at the step's target, or the cancel confirmed by the executor) → revert, keep (DONE,
     ending STOPPED) or resume (`planning.movement.cancel.compute_cancel_observed`);
   - step in flight complete (completion.py) → count it; Kafka finished but TR[0] does not lead
     → ask for a preferred-leader election; still running past the stall timeout → report it
     (every decision while it lasts: signalling once is the caller's business);
   - nothing in flight and replicas == final target → DONE, ending COMPLETED (or REVERTED for a
     cancelled reassignment back at its original replicas); else its next step is a candidate
     (`compute_reachable_step`: the SPEC 5.1 step, shedding offline leaving replicas).
2. Choose the steps that start now (batches.py) against everything still in flight; with
   `start_steps=False` (the pipeline's mode `observe`) there are no candidates and none starts.
3. Mark them in flight with `started_at = now`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum
from typing import Mapping

from planning.movement.batches import Deferral, Limits, PlannedStep, compute_batch_decision
from planning.movement.cancel import compute_cancel_observed
from planning.movement.completion import (
    describe_stall,
    is_step_complete,
    is_step_stalled,
    needs_leader_election,
)
from planning.model import Cluster, PartitionState, TopicPartition
from planning.movement.reassignment import (
    Reassignment,
    ReassignmentState,
    complete_step,
    finish,
    mark_step_seen,
    start_step,
)
from planning.movement.partition_steps import Step, compute_next_step


class Ending(str, Enum):
    """How a reassignment became DONE."""

    COMPLETED = "completed"  # reached its final target
    REVERTED = "reverted"  # cancelled, and stepped back to its original replicas
    STOPPED = "stopped"  # cancelled with `keep`: stays where Kafka has it
    DELETED = "deleted"  # its partition is gone (topic deleted)


@dataclass(frozen=True)
class SteppingDecision:
    """reassignments: every record after the decision (DONE ones included, for alerts/cleanup).
    started: steps to submit now (one ReassignmentStep command each).
    elections: partitions whose finished step needs TR[0] elected (ElectLeader commands).
    finished: (partition, ending) of the reassignments that became DONE in this decision.
    stalled: (partition, message) for steps running longer than the stall timeout.
    deferred: candidates that wait, with the reason.
    """

    reassignments: Mapping[TopicPartition, Reassignment]
    started: tuple[PlannedStep, ...] = ()
    elections: tuple[TopicPartition, ...] = ()
    finished: tuple[tuple[TopicPartition, Ending], ...] = ()
    stalled: tuple[tuple[TopicPartition, str], ...] = ()
    deferred: tuple[Deferral, ...] = ()


def compute_stepping(
    reassignments: Mapping[TopicPartition, Reassignment],
    cluster: Cluster,
    limits: Limits,
    now: float,
    stall_timeout: float,
    *,
    start_steps: bool = True,
) -> SteppingDecision:
    """See the module docstring; `stall_timeout` and `now` are in seconds."""
    updated: dict[TopicPartition, Reassignment] = dict(reassignments)
    candidates: list[PlannedStep] = []
    elections: list[TopicPartition] = []
    finished: list[tuple[TopicPartition, Ending]] = []
    stalled: list[tuple[TopicPartition, str]] = []

    for tp in sorted(reassignments):
        record = reassignments[tp]
        if not record.active:
            continue
        partition = cluster.partition(tp)
        if partition is None:
            updated[tp] = finish(record)
            finished.append((tp, Ending.DELETED))
            continue
        if record.in_flight is not None and (
                partition.reassigning or set(partition.replicas) == set(record.in_flight.step.target)):
            record = mark_step_seen(record)
        flight = record.in_flight
        record = compute_cancel_observed(
            record, partition, stalled=flight is not None and is_step_stalled(flight.started_at, now, stall_timeout))
        if not record.active:
            updated[tp] = record
            finished.append((tp, Ending.STOPPED))
            continue
        flight = record.in_flight
        if flight is not None and record.state is not ReassignmentState.CANCELLING:
            if is_step_complete(partition, flight.step):
                record = complete_step(record)
            elif needs_leader_election(partition, flight.step):
                elections.append(tp)
            elif is_step_stalled(flight.started_at, now, stall_timeout):
                stalled.append((tp, describe_stall(partition, flight.step, flight.started_at, now)))
        if record.wants_next_step:
            if tuple(partition.replicas) == record.final_target and not partition.reassigning:
                reverted = record.state is ReassignmentState.REVERTING
                finished.append((tp, Ending.REVERTED if reverted else Ending.COMPLETED))
                record = finish(record)
            elif start_steps and (record.retry_at is None or now >= record.retry_at):
                step = compute_reachable_step(record, partition, cluster, limits)
                if step is not None:
                    candidates.append(PlannedStep(tp, step, _log_dirs_for(record, step.adding)))
        updated[tp] = record

    in_flight = [PlannedStep(tp, r.in_flight.step) for tp, r in updated.items() if r.in_flight is not None]
    decision = compute_batch_decision(candidates, in_flight, cluster, limits)
    for planned in decision.started:
        updated[planned.tp] = start_step(updated[planned.tp], planned.step, now)
    return SteppingDecision(
        reassignments=updated,
        started=decision.started,
        elections=tuple(elections),
        finished=tuple(finished),
        stalled=tuple(stalled),
        deferred=decision.deferred,
    )


def compute_reachable_step(
    record: Reassignment, partition: PartitionState, cluster: Cluster, limits: Limits
) -> Step | None:
    """The SPEC 5.1 step, also dropping the offline leaving replicas it would keep.

    A replica on a dead broker or an offline dir can never rejoin the ISR, so a step whose target
    keeps it never completes (SPEC 5.3) — and it would target a dead broker (SPEC 6). This
    happens when healing makes a new broker the preferred leader (SPEC 5.1 adds it alone and
    drops nothing), or when more replicas are lost than R lets one step drop. Such a step also
    drops every offline, out-of-sync replica that the final target does not hold. That costs no
    redundancy — they are out of sync — so these drops do not count against R
    (`planning.movement.batches.count_replica_drops`), and the ISR after the step is no smaller than
    before. Example, R = 1, brokers 0 and 1 dead, ISR [2]: (0, 1, 2) → (3, 4, 2) steps
    (3, 2) -[0, 1] +[3], then (3, 4, 2) +[4].
    With no online replica in sync the offline copies may hold the only data (an unclean
    election may still need them), so nothing extra is dropped and the partition waits
    (OfflinePartitions).
    """
    step = compute_next_step(
        partition.replicas,
        record.final_target,
        partition.isr,
        limits.max_replica_movements,
        cluster.min_isr(partition.topic),
        leader=partition.leader,
    )
    if step is None:
        return None
    lost = [
        b for b in step.target
        if b not in record.final_target and b not in partition.isr and not cluster.is_replica_online(partition, b)
    ]
    if not lost or not any(cluster.is_replica_online(partition, b) for b in partition.isr):
        return step
    return replace(
        step,
        target=tuple(b for b in step.target if b not in lost),
        removing=step.removing + tuple(lost),
        leader_movement=step.leader_movement or partition.leader in lost,
    )


def _log_dirs_for(record: Reassignment, adding: tuple[int, ...]) -> tuple[tuple[int, str], ...]:
    """The wanted log dir of each added replica, from the record's target log dirs."""
    if not record.target_log_dirs or len(record.target_log_dirs) != len(record.final_target):
        return ()
    wanted = dict(zip(record.final_target, record.target_log_dirs))
    return tuple((b, wanted[b]) for b in adding if wanted.get(b) is not None)
