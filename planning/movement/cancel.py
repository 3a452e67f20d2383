"""Cancel, supersede and additional requests against running reassignments.

RULES:
- Additional: a request for partitions that are not moving starts new reassignments and leaves
  the running ones alone (their steps in flight, step numbers and targets are untouched).
- Supersede: a new final target for a moving partition replaces the old one. The step in flight
  finishes; the next step is computed from wherever the partition then is towards the new target.
  The original replicas (the revert target) stay those from before the first step.
- Cancel (one partition, a topic, or everything): no new steps. A step in flight is cancelled in
  Kafka, which reverts it: the adding replicas are removed from the replica list and the ISR,
  adding/removing are emptied, and the replicas the partition held before that step remain
  (`compute_partition_after_cancel`). Then, by default, the partition is stepped back to its
  original replicas under the same limits; `keep=True` stops where it is.
- Cancelling when nothing matching is in progress raises `NoReassignmentInProgressError`.

Kafka's view of one step and of a cancel (KIP-455; R = replicas, I = ISR, AR/RR = adding/removing):
    R [1,2,3] I [1,2,3] -> target [4,3,2]:  R [1,4,3,2] AR [4] RR [1]  ... 4 joins I ...  R [4,3,2]
    R [1,2,3] -> target [3,4,5], cancelled while R [1,2,3,4,5] AR [4,5] RR [1,2]:  back to R [1,2,3]

COST: the records after a request are the records given, patched (`compute_patched_records`): an
`immutables.Map` (the controller state's) is updated in O(k log n) for k records touched, sharing
the rest, never copied whole; a plain dict gives a new dict.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping

import immutables

from planning.model import PartitionState, TopicPartition
from planning.movement.completion import is_view_conclusive
from planning.movement.reassignment import (
    AfterCancel,
    Reassignment,
    ReassignmentState,
    begin_cancel,
    cancel_observed,
    start_reassignment,
    supersede,
)
from schemas.errors import NoReassignmentInProgressError


@dataclass(frozen=True)
class CancelScope:
    """What a cancel applies to: everything (no topic), a topic, or one partition of it."""

    topic: str | None = None
    partition: int | None = None

    def __post_init__(self) -> None:
        if self.partition is not None and self.topic is None:
            raise ValueError("a cancel scope with a partition needs its topic")

    def matches(self, tp: TopicPartition) -> bool:
        if self.topic is None:
            return True
        return tp.topic == self.topic and (self.partition is None or tp.partition == self.partition)

    def __str__(self) -> str:
        if self.topic is None:
            return "all partitions"
        return self.topic if self.partition is None else f"{self.topic}-{self.partition}"


@dataclass(frozen=True)
class CancelDecision:
    """The records after the cancel, and the partitions whose step in flight Kafka must cancel."""

    reassignments: Mapping[TopicPartition, Reassignment]
    cancel_in_kafka: tuple[TopicPartition, ...]
    cancelled: tuple[TopicPartition, ...]


def compute_cancel(
    reassignments: Mapping[TopicPartition, Reassignment],
    scope: CancelScope = CancelScope(),
    keep: bool = False,
    reason: str = "",
) -> CancelDecision:
    """Cancel every active reassignment in `scope`; see the module docstring."""
    if scope.partition is not None:  # one partition: looked up, not searched for
        tp = TopicPartition(scope.topic, scope.partition)
        record = reassignments.get(tp)
        matching = [tp] if record is not None and record.active else []
    else:
        matching = sorted(tp for tp, r in reassignments.items() if r.active and scope.matches(tp))
    if not matching:
        raise NoReassignmentInProgressError(f"no reassignment in progress for {scope}")
    updated: dict[TopicPartition, Reassignment] = {}
    cancel_in_kafka = []
    for tp in matching:
        record = reassignments[tp]
        if record.state is ReassignmentState.CANCELLING:
            # Already being cancelled in Kafka: the latest cancel decides what follows it.
            after = AfterCancel.KEEP if keep else AfterCancel.REVERT
            updated[tp] = replace(record, after_cancel=after)
            continue
        if record.in_flight is not None:
            cancel_in_kafka.append(tp)
        updated[tp] = begin_cancel(record, keep=keep, reason=reason or f"cancelled ({scope})")
    return CancelDecision(compute_patched_records(reassignments, updated), tuple(cancel_in_kafka), tuple(matching))


def compute_patched_records(records: Mapping[TopicPartition, Reassignment],
                            patch: Mapping[TopicPartition, Reassignment]) -> Mapping[TopicPartition, Reassignment]:
    """`records` with `patch` set over them, of the same kind (see COST): an `immutables.Map` is
    updated (O(len(patch) log n)), any other mapping copied into a new dict."""
    if isinstance(records, immutables.Map):
        return records.update(patch) if patch else records
    return {**records, **patch}


def compute_partition_after_cancel(partition: PartitionState) -> PartitionState:
    """The partition as Kafka shows it once a reassignment in progress is cancelled.

    Kafka subtracts the adding replicas from the replica list (order kept) and from the ISR and
    empties adding/removing. A leader among the adding replicas (only possible after an explicit
    election) falls back to the first in-sync remaining replica.
    """
    if not partition.reassigning:
        return partition
    adding = set(partition.adding)
    kept = tuple(b for b in partition.replicas if b not in adding)
    log_dirs = partition.log_dirs
    if log_dirs and len(log_dirs) == len(partition.replicas):
        log_dirs = tuple(d for b, d in zip(partition.replicas, log_dirs) if b not in adding)
    isr = tuple(b for b in partition.isr if b not in adding)
    leader = partition.leader
    if leader in adding:
        leader = next((b for b in kept if b in isr), None)
    return replace(
        partition,
        replicas=kept,
        isr=isr,
        leader=leader,
        log_dirs=log_dirs,
        adding=(),
        removing=(),
        offline_replicas=tuple(b for b in partition.offline_replicas if b not in adding),
        leader_epoch=partition.leader_epoch + 1,
    )


def compute_cancel_observed(reassignment: Reassignment, partition: PartitionState,
                            stalled: bool = False) -> Reassignment:
    """Once Kafka no longer shows the cancelled step, revert, stop or resume (a no-op until then).

    Kafka shows either the replicas from before the step (the cancel reverted it) or the step's
    target (the step completed before the cancel reached Kafka, which then answers
    NO_REASSIGNMENT_IN_PROGRESS). Both end the step (`cancel_observed` counts it, so the next
    step gets a new number and command id); the revert is the next step, computed like any step
    from the replicas observed now, so it starts from wherever the partition is.

    A view that is not reassigning counts only if it can be trusted: it shows the step's target,
    or it can tell whether Kafka runs the step (`completion.is_view_conclusive`: it showed the
    step before, or it was read after the executor applied the step), or the executor confirmed
    the cancel (`cancel_confirmed`). Otherwise it may predate the step: a step that only drops replicas
    completes at once in Kafka, and the stale view of the replicas from before it would pass
    for a reverted step — the revert would then end at once with Kafka one replica short.
    `stalled` (the step is older than the stall timeout) trusts the view anyway, so that a lost
    command result cannot hold a partition forever.
    """
    if reassignment.state is not ReassignmentState.CANCELLING or partition.reassigning:
        return reassignment
    flight = reassignment.in_flight
    trusted = (flight is None or is_view_conclusive(flight) or flight.cancel_confirmed or stalled
               or set(partition.replicas) == set(flight.step.target))
    return cancel_observed(reassignment) if trusted else reassignment


def compute_reassign_request(
    reassignments: Mapping[TopicPartition, Reassignment],
    targets: Mapping[TopicPartition, tuple[int, ...]],
    current_replicas: Mapping[TopicPartition, tuple[int, ...]],
    request_id: str,
    reason: str = "",
    target_log_dirs: Mapping[TopicPartition, tuple[str | None, ...]] | None = None,
) -> Mapping[TopicPartition, Reassignment]:
    """Records after a reassign request: new partitions join, moving ones are superseded.

    A partition already at its target (and not moving) gets no record. Records of partitions the
    request does not name are returned unchanged. Validation of the targets (live brokers, no
    duplicates, RF) happens before this, in `planning.validation`.
    """
    updated: dict[TopicPartition, Reassignment] = {}
    log_dirs = target_log_dirs or {}
    for tp in sorted(targets):
        target = tuple(targets[tp])
        record = reassignments.get(tp)
        dirs = tuple(log_dirs.get(tp, ()))
        if record is not None and record.active:
            if record.final_target != target or record.state is not ReassignmentState.RUNNING:
                # Superseding a CANCELLING record lets the cancel finish, then resumes (see supersede).
                updated[tp] = supersede(record, target, dirs, reason=reason or f"superseded by {request_id}",
                                       plan_id=request_id)
            continue
        current = tuple(current_replicas.get(tp, ()))
        if current == target:
            continue
        updated[tp] = start_reassignment(f"{request_id}/{tp}", tp, current, target, dirs, reason)
    return compute_patched_records(reassignments, updated)
