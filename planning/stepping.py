"""One decision over all ongoing reassignments: what completed, what to elect, what starts now.

This is the movement half of a micro-batch's "decide" (SPEC 5.3: the next step of a partition is
decided in the same decision that sees its step complete). Pure: records and a read-only cluster
view in, new records and the commands to issue out; `now` is passed in.

ORDER (the code follows it):
1. For every active record, read its partition from the cluster:
   - gone (topic deleted) → DONE;
   - CANCELLING and Kafka no longer shows a reassignment → revert, keep or resume (cancel.py);
   - step in flight complete (completion.py) → count it; Kafka finished but TR[0] does not lead
     → ask for a preferred-leader election; still running past the stall timeout → report it;
   - nothing in flight and replicas == final target → DONE; else its next step (steps.py) is a
     candidate — one that also drops offline leaving replicas the SPEC step would keep (see
     `compute_reachable_step`).
2. Choose the steps that start now (batches.py) against everything still in flight.
3. Mark them in flight with `started_at = now`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping

from planning.batches import Deferral, Limits, PlannedStep, compute_batch_decision
from planning.cancel import compute_cancel_observed
from planning.completion import (
    DEFAULT_STALL_TIMEOUT_SECONDS,
    describe_stall,
    is_step_complete,
    is_step_stalled,
    needs_leader_election,
)
from planning.model import Cluster, PartitionState, TopicPartition
from planning.reassignment import Reassignment, ReassignmentState, complete_step, finish, start_step
from planning.steps import Step, compute_next_step


@dataclass(frozen=True)
class SteppingDecision:
    """reassignments: every record after the decision (DONE ones included, for alerts/cleanup).
    started: steps to submit now (one ReassignmentStep command each).
    elections: partitions whose finished step needs TR[0] elected (ElectLeader commands).
    finished: reassignments that became DONE in this decision.
    stalled: (partition, message) for steps running longer than the stall timeout.
    deferred: candidates that wait, with the reason.
    """

    reassignments: Mapping[TopicPartition, Reassignment]
    started: tuple[PlannedStep, ...] = ()
    elections: tuple[TopicPartition, ...] = ()
    finished: tuple[TopicPartition, ...] = ()
    stalled: tuple[tuple[TopicPartition, str], ...] = ()
    deferred: tuple[Deferral, ...] = ()


def compute_stepping(
    reassignments: Mapping[TopicPartition, Reassignment],
    cluster: Cluster,
    limits: Limits,
    now: float,
    stall_timeout: float = DEFAULT_STALL_TIMEOUT_SECONDS,
) -> SteppingDecision:
    updated: dict[TopicPartition, Reassignment] = dict(reassignments)
    candidates: list[PlannedStep] = []
    elections: list[TopicPartition] = []
    finished: list[TopicPartition] = []
    stalled: list[tuple[TopicPartition, str]] = []

    for tp in sorted(reassignments):
        record = reassignments[tp]
        if not record.active:
            continue
        partition = cluster.partition(tp)
        if partition is None:
            updated[tp] = finish(record)
            finished.append(tp)
            continue
        record = compute_cancel_observed(record, partition)
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
                record = finish(record)
                finished.append(tp)
            else:
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
    """The SPEC 5.1 step, unless it would keep a leaving replica that is offline.

    A replica on a dead broker or an offline dir can never rejoin the ISR, so a step whose target
    keeps it never completes (SPEC 5.3) — and it would target a dead broker (SPEC 6). This
    happens when healing makes a new broker the preferred leader: SPEC 5.1 adds it alone and
    drops nothing. Such a step also drops its offline leaving replicas, which loses no
    redundancy, since they are out of sync, and the ISR after it is no smaller than before. With
    no replica in sync at all the offline copies may hold the only data, so nothing is dropped
    and the partition waits (OfflinePartitions).
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
    offline_kept = [
        b for b in partition.replicas
        if b not in record.final_target and b in step.target and b not in partition.isr
        and _replica_offline(cluster, partition, b)
    ]
    if not offline_kept or not set(partition.isr) & set(partition.replicas):
        return step
    return replace(
        step,
        target=tuple(b for b in step.target if b not in offline_kept),
        removing=step.removing + tuple(offline_kept),
        leader_movement=step.leader_movement or partition.leader in offline_kept,
    )


def _replica_offline(cluster: Cluster, partition: PartitionState, broker_id: int) -> bool:
    broker = cluster.broker(broker_id)
    return broker is None or not broker.alive or broker_id in partition.offline_replicas


def _log_dirs_for(record: Reassignment, adding: tuple[int, ...]) -> tuple[tuple[int, str], ...]:
    """The wanted log dir of each added replica, from the record's target log dirs."""
    if not record.target_log_dirs or len(record.target_log_dirs) != len(record.final_target):
        return ()
    wanted = dict(zip(record.final_target, record.target_log_dirs))
    return tuple((b, wanted[b]) for b in adding if wanted.get(b) is not None)
