"""Reassignments another tool runs, and steps of ours another tool interrupted: what they mean
for the state and the alerts (the rules are `planning.movement.external`'s and
`planning.movement.completion`'s; the decision that holds and re-plans is `compute_stepping`'s).

RULES:
- after each stepping decision (`handlers.progress`), `ControllerState.external_moves` is brought
  up to date for the partitions that changed (`compute_external_moves`);
- a move that starts (or another move on the same partition) → one `ExternalReassignment` alert:
  INFO when no reassignment of ours is about that partition, WARNING when one is (it waits);
  an existing move a reassignment of ours comes to wait on (a plan made while it runs) → one
  WARNING. Once per partition-move: the entry itself (its `since_ms`, `held`) is the marker;
- a step of ours another tool cancelled or replaced → one `ReassignmentInterrupted` WARNING
  naming what Kafka shows (the step has ended; the partition is stepped again from there);
- what tells a step interrupted although no poll ever showed it running
  (`planning.movement.completion` INTERRUPTED) is kept on its record as the batches bring it:
  the poll time of each view of its partition read while it is in flight and unseen
  (`handle_step_views`, after the events), and the time of the executor's ok result for it
  (`handlers.results`). Either may come first; the decision compares them.
Pure.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from handlers.context import BatchContext
from handlers.outbox import INFO, WARNING, tp_key
from planning.model import TopicPartition
from planning.movement.external import compute_external_moves
from planning.movement.reassignment import Reassignment, note_step_viewed


def handle_external_moves(context: BatchContext, looked_at: Iterable[TopicPartition] | None) -> None:
    """Update `external_moves` for `looked_at` (None: every partition) and alert (RULES)."""
    state = context.state
    update = compute_external_moves(state.external_moves, state.cluster, state.reassignments,
                                    context.now_ms, looked_at)
    if update.moves is state.external_moves:
        return
    for tp in update.started:
        _announce(context, tp, state.reassignments.get(tp), update.moves[tp], new=True)
    for tp in update.held:
        _announce(context, tp, state.reassignments.get(tp), update.moves[tp], new=False)
    context.state = state.with_changes(external_moves=update.moves)


def handle_step_views(context: BatchContext, viewed: Mapping[TopicPartition, int]) -> None:
    """Each partition viewed in this batch (partition → poll time) whose reassignment has a step
    in flight not seen yet keeps that view's time on the step (RULES). O(viewed)."""
    records = context.state.reassignments
    patch = {}
    for tp, at_ms in viewed.items():
        record = records.get(tp)
        if record is None or record.in_flight is None:
            continue
        noted = note_step_viewed(record, at_ms)
        if noted is not record:
            patch[tp] = noted
    if patch:
        context.state = context.state.with_records(patch)


def _announce(context: BatchContext, tp: TopicPartition, record: Reassignment | None, move, new: bool) -> None:
    shown = f"adding {list(move.adding)}, removing {list(move.removing)}, replicas {list(move.replicas)}"
    details = {"topic": tp.topic, "partition": tp.partition, "replicas": str(list(move.replicas)),
               "adding": str(list(move.adding)), "removing": str(list(move.removing)),
               "since_ms": move.since_ms}
    if record is None:
        context.outbox.alert("ExternalReassignment", INFO, tp_key(tp),
                             f"{tp} is being moved by another tool ({shown}); the product starts no step "
                             "on it while Kafka shows that move", details)
        return
    details["reassignment_id"] = record.reassignment_id
    what = "is being moved" if new else "is still being moved"
    context.outbox.alert("ExternalReassignment", WARNING, tp_key(tp),
                         f"{tp} {what} by another tool ({shown}); reassignment {record.reassignment_id} "
                         f"({record.reason}) waits until Kafka shows that move ended", details)


def report_interrupted(context: BatchContext, record: Reassignment, message: str, tp: TopicPartition) -> None:
    """One `ReassignmentInterrupted` per step another tool cancelled or replaced (RULES)."""
    partition = context.state.cluster.partition(tp)
    details = {"reassignment_id": record.reassignment_id, "step": record.steps_done,
               "replicas": str(list(partition.replicas)) if partition is not None else "",
               "adding": str(list(partition.adding)) if partition is not None else "",
               "removing": str(list(partition.removing)) if partition is not None else ""}
    context.outbox.alert("ReassignmentInterrupted", WARNING, tp_key(tp),
                         f"{message}; planning {tp} again from there ({record.reason})", details)
