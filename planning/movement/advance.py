"""One decision over all ongoing reassignments: what completed, what to elect, what starts now.

The movement half of a micro-batch's "decide", and the only place that decides it: the
simulator's driver (`planning.simulation.driver.run_plan`) and the pipeline
(`handlers.progress`) both call `compute_stepping` and only carry out its decision. Pure:
records and a read-only cluster view in, new records and what to do out; `now` is passed in.

RULES (the order is in `compute_stepping`):
- a partition's next step is decided in the same decision that sees its step complete;
- a step ends only on what a view that can tell shows: complete (`completion`), cancelled or
  replaced by another tool (then the partition is stepped again from what Kafka shows), or, for
  a cancel, Kafka no longer reassigning (then revert, keep or resume: `cancel`);
- a step running past the stall timeout is reported in every decision while it lasts;
- a record at its final target with nothing in flight is DONE (`Ending` says how);
- the steps that start are chosen by the batch rule (`batches`) against everything in flight,
  and none starts with `start_steps=False` (mode `observe`).
COST: O(what changed + what is in flight) per decision, not O(reassignments), and the same
decision as one computed afresh (a property test runs both side by side): see `SteppingMemo`.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, replace
from enum import Enum
from typing import Collection, Mapping

import immutables

from planning.movement.batches import Deferral, Limits, PlannedStep, compute_priority, compute_split_batch_decision
from planning.movement.cancel import compute_cancel_observed
from planning.movement.completion import (
    describe_interruption,
    describe_stall,
    is_step_complete,
    is_step_interrupted,
    is_step_stalled,
    is_view_conclusive,
    needs_leader_election,
    shows_step,
)
from planning.model import Broker, Cluster, PartitionState, Topic, TopicPartition
from planning.sorted_chunks import SortedChunks
from planning.movement.reassignment import (
    Reassignment,
    ReassignmentState,
    complete_step,
    finish,
    interrupt_step,
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
class _Waiting:
    """What one decision computed for a record waiting for its next step, and the topic object
    (its partitions and min.insync.replicas) it was computed from."""

    record: Reassignment
    topic: Topic
    partition: PartitionState
    candidate: PlannedStep | None
    rank: tuple | None  # its place in the batch order (`batches.compute_priority`), when a candidate


@dataclass(frozen=True)
class SteppingMemo:
    """What the last decision computed for the records waiting for a slot, so the next one need
    not compute it again. Derived data, never stored: absent (a restart), it is rebuilt by one
    full decision.

    Why: a big rebalance has tens of thousands of reassignments waiting for a slot, and each
    decision would compute every one's next step and rank them all. A waiting entry is taken as
    it is when nothing it was computed from changed: the same record object (it waits: running
    or reverting, nothing in flight, no retry pending), the same topic object (events replace a
    topic whenever they change it) or else the same partition object and min.insync.replicas,
    the same limits, and brokers alive, draining and with online dirs as they were
    (`compute_broker_signature`). Everything else is decided afresh, in (topic, partition)
    order; the candidates stay in rank order (patched, not re-sorted). A caller that knows what
    changed (the simulator does) passes it as `changed`: then only those partitions and the
    `unsettled` records are looked at. Given `reassignments` as an `immutables.Map`, the records
    come back as one too, patched, not copied. The candidates are kept in two orders, the steps
    that move leadership and the others, walked merged (`compute_split_batch_decision`); once L
    leader movements are in flight the first is not walked, so a backlog waiting for L is free.

    Invariants: every (rank, tp) of `leader_order` / `other_order` is a `waiting` entry with a
    candidate that moves leadership / does not, and every such entry is in its order, once;
    `unsettled` holds every active record after the decision that has no `waiting` entry, or
    one with a retry time (it is looked at again by the next decision whatever changed).
    """

    brokers: tuple  # `compute_broker_signature` of the cluster it was computed against
    limits: Limits
    waiting: Mapping[TopicPartition, _Waiting]  # an immutables.Map
    leader_order: SortedChunks  # (rank, tp) of the leader-moving candidates, ascending
    other_order: SortedChunks  # (rank, tp) of the other candidates, ascending
    in_flight: frozenset[TopicPartition] = frozenset()  # records with a step in flight after it
    unsettled: frozenset[TopicPartition] = frozenset()
    broker_objects: tuple = ()  # the `cluster.brokers` the signature was computed from

    @property
    def order(self) -> tuple[tuple[tuple, TopicPartition], ...]:
        """(rank, tp) of every candidate, ascending (both orders merged; O(candidates))."""
        return tuple(heapq.merge(self.leader_order, self.other_order))


@dataclass(frozen=True)
class SteppingDecision:
    """reassignments: every record after the decision (DONE ones included, for alerts/cleanup).
    started: steps to submit now (one ReassignmentStep command each).
    elections: partitions whose finished step needs TR[0] elected (ElectLeader commands).
    finished: (partition, ending) of the reassignments that became DONE in this decision.
    stalled: (partition, message) for steps running longer than the stall timeout.
    interrupted: (partition, message) for steps another tool cancelled or replaced (ended).
    deferred: candidates examined that wait, with the reason (none once P is reached).
    """

    reassignments: Mapping[TopicPartition, Reassignment]
    started: tuple[PlannedStep, ...] = ()
    elections: tuple[TopicPartition, ...] = ()
    finished: tuple[tuple[TopicPartition, Ending], ...] = ()
    stalled: tuple[tuple[TopicPartition, str], ...] = ()
    deferred: tuple[Deferral, ...] = ()
    memo: SteppingMemo | None = None  # for the next decision
    completed: tuple[TopicPartition, ...] = ()  # partitions whose step in flight completed
    replaced: frozenset[TopicPartition] = frozenset()  # partitions whose record this decision replaced
    interrupted: tuple[tuple[TopicPartition, str], ...] = ()


def compute_stepping(
    reassignments: Mapping[TopicPartition, Reassignment],
    cluster: Cluster,
    limits: Limits,
    now: float,
    stall_timeout: float,
    *,
    start_steps: bool = True,
    memo: SteppingMemo | None = None,
    changed: Collection[TopicPartition] | None = None,
) -> SteppingDecision:
    """The decision (module docstring); `stall_timeout` and `now` are in seconds. `changed` (with
    `memo`): every partition whose record or whose `PartitionState` (by identity), or whose
    topic's min.insync.replicas, may differ from those of the decision that made `memo` (its
    returned records, the cluster it read); None: unknown, every record is looked at.

    ORDER (the code follows it):
    1. For every active record, in (topic, partition) order, read its partition from the cluster:
       - gone (topic deleted) → DONE, ending DELETED;
       - a step in flight the view shows (reassigning to the step's target, or at it:
         `completion.shows_step`) is marked seen;
       - CANCELLING and Kafka no longer shows a reassignment, in a view that can be trusted
         (seen, at the step's target, or the cancel confirmed by the executor) → revert, keep
         (DONE, ending STOPPED) or resume (`planning.movement.cancel.compute_cancel_observed`);
       - step in flight complete → count it; Kafka finished but TR[0] does not lead → ask for a
         preferred-leader election; not shown in a view that can tell — one that showed it
         before, or one read after the executor applied it (`completion.is_step_interrupted`,
         `is_view_conclusive`) → it ends (`interrupt_step`) and the partition is stepped again
         from the replicas Kafka shows, in this decision (held by the batch rule while Kafka
         shows another tool's reassignment); still running past the stall timeout → report it
         (signalling once is the caller's business);
       - nothing in flight and replicas == final target → DONE, ending COMPLETED (or REVERTED
         for a cancelled reassignment back at its original replicas); else its next step is a
         candidate (`compute_reachable_step`, shedding offline leaving replicas).
    2. Choose the steps that start now (batches.py) against everything still in flight; with
       `start_steps=False` there are no candidates and none starts.
    3. Mark them in flight with `started_at = now`.
    """
    persistent = isinstance(reassignments, immutables.Map)
    updated = reassignments.mutate() if persistent else dict(reassignments)
    elections: list[TopicPartition] = []
    finished: list[tuple[TopicPartition, Ending]] = []
    stalled: list[tuple[TopicPartition, str]] = []
    interrupted: list[tuple[TopicPartition, str]] = []
    if memo is not None and memo.broker_objects is cluster.brokers:
        signature = memo.brokers
    else:
        signature = compute_broker_signature(cluster.brokers)
    usable = memo is not None and memo.limits == limits and memo.brokers == signature
    known = memo.waiting if usable else immutables.Map()
    topics = cluster.topics_by_name
    waiting = known.mutate() if usable and changed is not None else immutables.Map().mutate()
    dirty: list[TopicPartition] = []
    if usable and changed is not None:
        looked_at = set(changed)
        looked_at.update(memo.unsettled)
        gone = []  # remembered records no longer passed in
        for tp in looked_at:
            record = reassignments.get(tp)
            entry = known.get(tp)
            if record is None:
                if entry is not None:
                    gone.append(tp)
                    del waiting[tp]
                continue
            if entry is not None:
                reused = _reuse(entry, record, topics, cluster, tp)
                if reused is not None:
                    if reused is not entry:
                        waiting[tp] = reused
                    continue
                del waiting[tp]
            dirty.append(tp)
    else:
        gone = None  # found by `_compute_orders`
        for tp, record in reassignments.items():
            entry = known.get(tp)
            if entry is not None:
                reused = _reuse(entry, record, topics, cluster, tp)
                if reused is not None:
                    waiting[tp] = reused
                    continue
            dirty.append(tp)
    kept = len(waiting)
    completed: list[TopicPartition] = []
    unsettled: set[TopicPartition] = set()

    for tp in sorted(dirty):
        record = reassignments[tp]
        if not record.active:
            continue
        partition = cluster.partition(tp)
        if partition is None:
            updated[tp] = finish(record)
            finished.append((tp, Ending.DELETED))
            continue
        if record.in_flight is not None and shows_step(partition, record.in_flight.step):
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
                completed.append(tp)
            elif needs_leader_election(partition, flight.step):
                elections.append(tp)
            elif is_step_interrupted(partition, flight.step, is_view_conclusive(flight)):
                interrupted.append((tp, describe_interruption(partition, flight.step, flight.number)))
                record = interrupt_step(record)
            elif is_step_stalled(flight.started_at, now, stall_timeout):
                stalled.append((tp, describe_stall(partition, flight.step, flight.started_at, now)))
        if record.wants_next_step:
            if tuple(partition.replicas) == record.final_target and not partition.reassigning:
                reverted = record.state is ReassignmentState.REVERTING
                finished.append((tp, Ending.REVERTED if reverted else Ending.COMPLETED))
                record = finish(record)
            elif record.retry_at is None or now >= record.retry_at:
                step = compute_reachable_step(record, partition, cluster, limits)
                candidate = None if step is None else PlannedStep(tp, step, _log_dirs_for(record, step.adding))
                waiting[tp] = _Waiting(record, topics[tp.topic], partition, candidate,
                                       None if candidate is None else compute_priority(candidate, cluster))
        if record.active and (record.retry_at is not None or tp not in waiting):
            unsettled.add(tp)
        updated[tp] = record

    waiting = waiting.finish()
    leader_order, other_order = _compute_orders(memo if usable else None, known, kept, waiting, dirty, gone)
    # A record with a step in flight is never taken from the memo: the dirty ones hold them all.
    flying = [tp for tp in dirty if updated[tp].in_flight is not None]
    in_flight = [PlannedStep(tp, updated[tp].in_flight.step) for tp in flying]
    if start_steps:
        decision = compute_split_batch_decision(
            ((rank, waiting[tp].candidate) for rank, tp in other_order),
            ((rank, waiting[tp].candidate) for rank, tp in leader_order),
            in_flight, cluster, limits)
        started = decision.started
        deferred = decision.deferred
    else:
        started, deferred = (), ()
    if started:
        leader_order = _without(leader_order, [(waiting[p.tp].rank, p.tp) for p in started if p.step.leader_movement])
        other_order = _without(other_order, [(waiting[p.tp].rank, p.tp) for p in started if not p.step.leader_movement])
    for planned in started:
        updated[planned.tp] = start_step(updated[planned.tp], planned.step, now)
        waiting = waiting.delete(planned.tp)
        unsettled.add(planned.tp)
    replaced = frozenset([tp for tp in dirty if updated[tp] is not reassignments[tp]] + [p.tp for p in started])
    return SteppingDecision(
        reassignments=updated.finish() if persistent else updated,
        started=started,
        elections=tuple(elections),
        finished=tuple(finished),
        stalled=tuple(stalled),
        deferred=deferred,
        memo=SteppingMemo(signature, limits, waiting, leader_order, other_order,
                          frozenset(flying) | {planned.tp for planned in started},
                          frozenset(unsettled), cluster.brokers),
        completed=tuple(completed),
        replaced=replaced,
        interrupted=tuple(interrupted),
    )


def _reuse(entry: _Waiting, record: Reassignment, topics: Mapping[str, Topic], cluster: Cluster,
           tp: TopicPartition) -> _Waiting | None:
    """The memo's entry for `tp` if nothing it was computed from changed (COST), else None."""
    if entry.record is not record or record.retry_at is not None:
        return None
    topic = topics.get(tp.topic)
    if entry.topic is topic:
        return entry
    if (topic is not None and entry.partition is cluster.partition(tp)
            and entry.topic.min_insync_replicas == topic.min_insync_replicas):
        # Another partition of its topic changed (a constructor: `replace` costs 10x).
        return _Waiting(record, topic, entry.partition, entry.candidate, entry.rank)
    return None


def _without(order: SortedChunks, items: list) -> SortedChunks:
    """`order` without `items` (each in it)."""
    for item in items:
        order = order.remove(item)
    return order


def compute_broker_signature(brokers: tuple[Broker, ...]) -> tuple:
    """What a step's choice reads of the brokers: who is alive, draining, and which dirs are
    online (not their usage, which every LogDirState refreshes)."""
    return tuple((b.id, b.alive, b.draining, tuple((d.path, d.online) for d in b.log_dirs)) for b in brokers)


def _moves_leader(entry: _Waiting) -> bool:
    return entry.candidate.step.leader_movement


def _compute_orders(memo: SteppingMemo | None, known: Mapping[TopicPartition, _Waiting], kept: int,
                    waiting: Mapping[TopicPartition, _Waiting], dirty: list[TopicPartition],
                    gone: list[TopicPartition] | None) -> tuple[SortedChunks, SortedChunks]:
    """(rank, tp) of every waiting candidate that moves leadership, and of the others, each
    ascending: the memo's orders with the old places of the dirty records (and of the `gone`
    ones) taken out and their new ones put in (persistent: the memo's stay as they were). A
    full sort when there is no memo, much changed, or (`gone` None: not known) a remembered
    record is gone without being dirty."""
    stale = [tp for tp in dirty if tp in known] + (gone or [])
    changes = len(dirty) + len(gone or ())

    def full() -> tuple[SortedChunks, SortedChunks]:
        ranked = sorted((w.rank, tp) for tp, w in waiting.items() if w.candidate is not None)
        return (SortedChunks(item for item in ranked if _moves_leader(waiting[item[1]])),
                SortedChunks(item for item in ranked if not _moves_leader(waiting[item[1]])))

    if memo is None or (gone is None and len(known) - kept != len(stale)):
        return full()
    if changes * 8 > len(memo.leader_order) + len(memo.other_order):
        return full()
    orders = {True: memo.leader_order, False: memo.other_order}
    for tp in stale:
        entry = known[tp]
        if entry.candidate is not None:
            side = _moves_leader(entry)
            smaller = orders[side].remove((entry.rank, tp))
            if smaller is None:  # not where it should be: start over
                return full()
            orders[side] = smaller
    for tp in dirty:
        entry = waiting.get(tp)
        if entry is not None and entry.candidate is not None:
            side = _moves_leader(entry)
            orders[side] = orders[side].insert((entry.rank, tp))
    return orders[True], orders[False]


def compute_reachable_step(
    record: Reassignment, partition: PartitionState, cluster: Cluster, limits: Limits
) -> Step | None:
    """The next step (`partition_steps.compute_next_step`), also dropping the offline leaving
    replicas it would keep.

    A replica on a dead broker or an offline dir can never rejoin the ISR, so a step whose target
    keeps it never completes (a step completes when all its target is in sync) — and it would
    target a dead broker (a safety invariant). This happens when healing makes a new broker the
    preferred leader (the next step adds it alone and drops nothing), or when more replicas are
    lost than R lets one step drop. Such a step also drops every offline, out-of-sync replica that
    the final target does not hold. That costs no redundancy — they are out of sync — so these
    drops do not count against R (`planning.movement.batches.count_replica_drops`), and the ISR
    after the step is no smaller than before. Example, R = 1, brokers 0 and 1 dead, ISR [2]:
    (0, 1, 2) → (3, 4, 2) steps (3, 2) -[0, 1] +[3], then (3, 4, 2) +[4].

    An eligible leader replica (KIP-966) is out of sync but not lost: it holds every committed
    record, and a leaderless partition gets a clean leader from it when its broker is back. It is
    dropped this way only by a step that adds a replica: Kafka keeps a leaving replica until the
    added ones are in the ISR, so the clean copy is traded for an in-sync one, never given up. A
    step that adds nothing keeps it, and the batch rule holds that step back (it targets an
    offline replica) until the broker is back or a new plan adds a replica.
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
        eligible_leaders=partition.eligible_leaders,
    )
    if step is None:
        return None
    lost = [
        b for b in step.target
        if b not in record.final_target and b not in partition.isr and not cluster.is_replica_online(partition, b)
        and (step.adding or b not in partition.eligible_leaders)
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
