"""A state store found behind what the product already published, at the pipeline's start.

A running pipeline finds a lost store at its next commit (`state.controller_store`, VERIFIED).
A pipeline that *starts* has no state of its own to compare with; what it has is what the
product published while the store was whole: every command carries the planner epoch it was
issued under, and every alert the batch that raised it (`alert-<batch>-<n>`). So, before its
first batch, the pipeline reads the newest records of its commands and alerts topics
(`read_published_marks`) and compares (`compute_store_behind`):

- a command whose epoch is at least the epoch this start just took: the store lost its epoch
  (each start takes one above the stored one, and commands carry the epoch of the instance
  that issued or re-published them);
- an alert of a batch above the store's last batch: the store lost batches it had committed
  (alerts are published only after their batch is committed; an outbox re-published after a
  crash keeps the ids of its committed batch).

Either way the stored state is not one the product decided on and is not loaded. It is
rebuilt from Kafka (`compute_rebuilt_state`): the cluster from the watcher's events, read again
from the start of the state-carrying topics' logs (Kafka keeps their retention; the watcher's
periodic snapshot is among them); requests and command results are not read again (old
requests are history, not orders: the applied offsets of those topics start at their ends).
The epoch goes above every epoch published, the batch numbers and the command sequence above
every one used, so no command id is issued twice and no older throttle clear outranks a new
step. The dynamic settings the store still holds are kept (an emptied store held none: the
settings made with `config set` and the decommissions in progress are to be set again, as the
alert says). Reassignments Kafka runs are then
seen as other tools' moves and waited for; the plans that were running are requested again once
the replay has caught up (RESUME).

CORDONS are not left behind either: the brokers whose newest cordon command (`handlers.cordons`)
is a Cordon, with its dirs, are the rebuilt state's `cordoned`; the decommissions went with the
store, so at the first snapshot the pipeline uncordons what is no longer wanted (a decommission
requested again cordons its brokers again; a dir still pressed is cordoned again once the
relief judges it again).

THROTTLES are not left behind: the throttled steps and log-dir moves among the commands read
give the rebuilt state its throttle markers (`handlers.progress`, `handlers.log_dirs`), so the
pipeline issues the ClearThrottle once Kafka moves none of those partitions any more; an
executor that lost its own records of them with the store adopts them from the brokers' configs
(`reassigner.edge.throttles`, ADOPTION).

RESUME: every step command carries the final target of its reassignment, so the plans that were
running are known from the commands read (a partition whose newest command is a step, not a
cancel). Once the replay has applied every input partition up to where its log ended when the
rebuild began (`compute_caught_up`: the view is the present one again), the pipeline requests
them again (`compute_resume_step`), planned afresh from where Kafka is, under the usual checks
and verdict alerts, in two requests:
1. one Reassign request of the stepped partitions not yet at their final target. A step Kafka
   finished after the store was lost may have left a partition with a replica too many (the one
   it replaces not dropped yet): the final target gives it back its replication factor;
2. when those steps belonged to a rebalance (one a broker addition planned, or a Rebalance
   request), once the Reassign request was applied and none of its partitions moves any more: a
   Rebalance request (every topic when a broker addition planned it, else the topics its steps
   named), so that its partitions no step had reached, which are in no command, are planned
   too. After 1, not with it: planned while a partition still held a replica too many, the
   rebalance would keep that many.
The two requests are held in memory: a pipeline stopped between them does not send the second
(the alert says to request the rebalance again if it does not complete). Heals need nothing:
the replayed events show the brokers down, and their grace is over. What the lost store held
beyond that (dynamic settings, decommissions in progress) is not in the commands: the alert
says to set them again.

The evidence is the product's own topics, which only the product may write (docs: ACLs);
commands are counted only when their signature holds, where commands are signed
(`schemas.published`), and a partition's step or cancel only under the key the product gives it
(`<topic>-<partition>`): the commands of one key are in one partition of the topic, read in
their order, while the partitions are read in no given order, so a command under another key (a
forged or foreign one) could otherwise pass for the newest and end a plan that was running.
All functions but `read_published_marks` (it reads Kafka through the reader it is given) are pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping

from handlers.log_dirs import THROTTLE_MARKER as LOG_DIR_THROTTLE_MARKER
from handlers.requests import REBALANCE_REASON
from handlers.triggers import REBALANCE_PLAN_KIND
from planning.model import TopicPartition
from schemas.codec import partition_key
from schemas.loader import CURRENT_SCHEMA_VERSION
from handlers.progress import compute_throttle_marker
from schemas.published import TAIL_RECORDS, read_published
from state.model import ControllerState

ALERT_ID = re.compile(r"^alert-(\d+)-")
SEQUENCED_ID = re.compile(r"^(?:throttle|cordon)-(\d+)[-:]")  # `handlers.outbox` IDS
REBALANCE_PLAN = re.compile(rf"^b\d+-{REBALANCE_PLAN_KIND}-\d+")  # a rebalance a broker addition planned


@dataclass(frozen=True)
class PublishedMarks:
    """The highest of what the product published, as far as the newest records tell."""

    epoch: int = 0
    """The highest planner epoch a command carries (0: no command)."""
    batch: int = -1
    """The highest batch an alert was raised by (-1: no alert)."""
    command_sequence: int = 0
    """The highest command sequence a command carries (its throttle sequence, or in its id)."""
    throttled_brokers: frozenset[int] = frozenset()
    """The brokers the throttled ReassignmentSteps named (leader and follower throttles)."""
    throttled_partitions: frozenset[tuple[str, int]] = frozenset()
    """The partitions of those steps."""
    log_dir_throttled: frozenset[int] = frozenset()
    """The brokers of throttled LogDirMoves."""
    plans: tuple[tuple[str, int, tuple[int, ...]], ...] = ()
    """(topic, partition, final target) of the reassignments whose newest command is a step
    (not a cancel), as far as the newest records tell: the plans that were running."""
    rebalance_topics: frozenset[str] | None = None
    """Where those steps belong to a rebalance: the topics to rebalance again (empty: all, when a
    broker addition planned it); None: no rebalance was running."""
    cordoned: Mapping[int, tuple[str, ...]] = field(default_factory=dict)
    """The brokers whose newest cordon command is a Cordon, with its dirs (() = the whole broker)."""


def compute_published_marks(commands: Iterable[Mapping], alerts: Iterable[Mapping]) -> PublishedMarks:
    """The marks of decoded Command and Alert records (any other shape is skipped)."""
    epoch = sequence = 0
    brokers: set[int] = set()
    partitions: set[tuple[str, int]] = set()
    log_dirs: set[int] = set()
    newest: dict[tuple[str, int], tuple[int, ...] | None] = {}  # commands of one partition share a key: in order
    rebalancing: dict[tuple[str, int], str] = {}  # partition → "trigger" | "request"
    cordons: dict[int, tuple[str, ...] | None] = {}  # broker → its newest cordon command's dirs (one key: in order)
    for command in commands:
        epoch = max(epoch, int(command.get("epoch") or 0))
        numbered = SEQUENCED_ID.match(str(command.get("id", "")))
        if numbered:
            sequence = max(sequence, int(numbered.group(1)))
        action = command.get("action")
        if isinstance(action, Mapping) and action.get("kind") in ("Cordon", "Uncordon"):
            dirs = tuple(action.get("log_dirs") or ()) if action["kind"] == "Cordon" else None
            cordons |= {int(b): dirs for b in action.get("broker_ids") or ()}
            continue
        payload = command.get("payload")
        kind, fields = payload if isinstance(payload, tuple) and len(payload) == 2 else ("", {})
        if not isinstance(fields, Mapping):
            continue
        sequence = max(sequence, int(fields.get("throttle_sequence") or 0))
        if (kind in ("ReassignmentStep", "CancelReassignment") and "topic" in fields
                # Only under the product's key for the partition: read in their log's order (see
                # the module docstring's last paragraph)
                and command.get("key") == partition_key(fields["topic"], int(fields["partition"]))):
            final = fields.get("final_target_replicas") if kind == "ReassignmentStep" else None
            key = (fields["topic"], int(fields["partition"]))
            newest[key] = tuple(final) if final else None
            rebalancing.pop(key, None)
            if final and REBALANCE_PLAN.search(str(command.get("reassignment_id") or "")):
                rebalancing[key] = "trigger"
            elif final and str(command.get("reason") or "").startswith(REBALANCE_REASON):
                rebalancing[key] = "request"
        if kind == "ReassignmentStep" and fields.get("throttle_rate_bytes_per_sec") is not None:
            brokers |= set(fields.get("throttle_leader_broker_ids") or ())
            brokers |= set(fields.get("throttle_follower_broker_ids") or ())
            partitions.add((fields["topic"], int(fields["partition"])))
        elif kind == "LogDirMove" and fields.get("throttle_bytes_per_sec") is not None:
            log_dirs.add(int(fields["broker_id"]))
    batch = -1
    for alert in alerts:
        found = ALERT_ID.match(str(alert.get("id", "")))
        if found:
            batch = max(batch, int(found.group(1)))
    plans = tuple((topic, partition, final) for (topic, partition), final in sorted(newest.items()) if final)
    rebalance_topics = None
    if rebalancing:
        rebalance_topics = (frozenset() if "trigger" in rebalancing.values()
                            else frozenset(topic for topic, _ in rebalancing))
    return PublishedMarks(epoch, batch, sequence, frozenset(brokers), frozenset(partitions), frozenset(log_dirs),
                          plans, rebalance_topics, {b: dirs for b, dirs in cordons.items() if dirs is not None})


def compute_store_behind(taken_epoch: int, stored_last_batch: int, marks: PublishedMarks) -> str | None:
    """Why the store is behind what was published (one line), or None."""
    if marks.epoch >= taken_epoch:
        return (f"the state store holds planner epoch {taken_epoch - 1}, but commands of epoch {marks.epoch} "
                "were published (it was emptied or restored from an older copy while the pipeline was stopped)")
    if marks.batch > stored_last_batch:
        return (f"the state store ends at batch {stored_last_batch}, but batch {marks.batch} raised alerts "
                "(it was restored from an older copy, or emptied, while the pipeline was stopped)")
    return None


def compute_rebuilt_state(stored: ControllerState, taken_epoch: int, marks: PublishedMarks) -> ControllerState:
    """The state a rebuild starts from: no cluster (the events give it again), no reassignments,
    the stored dynamic settings, an epoch, batch numbers and a command sequence above all used,
    and the throttle markers of the throttled steps and log-dir moves published (so that the
    throttles they set are cleared once Kafka moves none of those partitions any more)."""
    markers = {f"{LOG_DIR_THROTTLE_MARKER}{broker}" for broker in marks.log_dir_throttled}
    if marks.throttled_partitions:
        markers.add(compute_throttle_marker(marks.throttled_brokers, marks.throttled_partitions))
    return ControllerState(
        config=stored.config,
        epoch=max(taken_epoch, marks.epoch + 1),
        last_batch=max(stored.last_batch, marks.batch),
        command_sequence=max(stored.command_sequence, marks.command_sequence) + 1,
        open_alerts=frozenset(markers),
        cordoned=marks.cordoned,
    )


def compute_rebuilt_offsets(input_logs: Mapping[tuple[str, int], tuple[int, int]],
                            skipped_topics: Iterable[str]) -> dict[tuple[str, int], int]:
    """The applied offsets a rebuild starts from: the partitions of `skipped_topics` (requests,
    command results) as applied up to their log end; every other input read from its start."""
    skipped = set(skipped_topics)
    return {(topic, partition): high - 1 for (topic, partition), (_low, high) in sorted(input_logs.items())
            if topic in skipped and high > 0}


def read_published_marks(reader, commands_topic: str, alerts_topic: str, signing_key=None,
                         count: int = TAIL_RECORDS, timeout: float = 15.0) -> PublishedMarks:
    """`compute_published_marks` of the newest `count` records of each partition of the two
    topics (`schemas.published`); `reader` is a `runtime.clients.kafka_consumer.TopicReader`."""
    found = read_published(reader, [commands_topic, alerts_topic], commands_topic, signing_key, count, timeout)
    return compute_published_marks(found[commands_topic], found[alerts_topic])


@dataclass(frozen=True)
class PlansToResume:
    """The plans a rebuild found running, the input log ends the replay must reach first, and
    how far their resume went (RESUME)."""

    plans: tuple[tuple[str, int, tuple[int, ...]], ...]
    ends: Mapping[tuple[str, int], int]
    """(topic, partition) of an input topic → the offset of its last record when the rebuild began."""
    rebalance_topics: frozenset[str] | None = None
    """As `PublishedMarks.rebalance_topics`."""
    reassign_id: str | None = None
    """The id of the Reassign request sent (step 1), while the Rebalance (step 2) waits for it."""
    reassign_applied: bool = False
    """Whether a batch has applied that Reassign request."""


def compute_caught_up(applied: Mapping[tuple[str, int], int], ends: Mapping[tuple[str, int], int]) -> bool:
    """Whether every input partition was applied up to where its log ended at the rebuild."""
    return all(applied.get(key, -1) >= end for key, end in ends.items())


def compute_resume_step(pending: PlansToResume, state: ControllerState, applied_request_ids: Iterable[str],
                        now_ms: int, request_id: str) -> tuple[dict | None, PlansToResume | None]:
    """The request to send now to resume the plans (RESUME), if any, and what is left to do
    after it (None: the resume is over). Called after each committed batch once the replay has
    caught up; `applied_request_ids` are the ids of the requests that batch applied."""
    envelope = {"schema_version": CURRENT_SCHEMA_VERSION, "event_time": now_ms, "id": request_id,
                "requested_by": "pipeline (state store rebuilt: resuming the plans that were running)",
                "action": None}
    if pending.reassign_id is None:
        partitions = _not_at_target(pending, state)
        if partitions:
            left = (replace(pending, reassign_id=request_id)
                    if pending.rebalance_topics is not None else None)
            return {**envelope, "key": "reassign",
                    "payload": ("Reassign", {"version": 1, "partitions": partitions, "additional": True})}, left
    else:
        if not pending.reassign_applied and pending.reassign_id in set(applied_request_ids):
            pending = replace(pending, reassign_applied=True)
        resumed = {TopicPartition(topic, partition) for topic, partition, _ in pending.plans}
        if not pending.reassign_applied or any(tp in state.reassignments for tp in resumed):
            return None, pending
    if pending.rebalance_topics is None:
        return None, None
    topics = sorted(t for t in pending.rebalance_topics if t in state.cluster.topics_by_name)
    if pending.rebalance_topics and not topics:
        return None, None
    return {**envelope, "key": "rebalance",
            "payload": ("Rebalance", {"topics": topics, "log_dirs": False, "broker_ids": []})}, None


def _not_at_target(pending: PlansToResume, state: ControllerState) -> list[dict]:
    """The Reassign request's partitions: those the cluster still has, not at their final target
    and not reassigned by a plan of ours since."""
    partitions = []
    for topic, partition, final in pending.plans:
        tp = TopicPartition(topic, partition)
        current = state.cluster.partition(tp)
        if current is None or tuple(current.replicas) == final or tp in state.reassignments:
            continue
        partitions.append({"topic": topic, "partition": partition, "replicas": list(final), "log_dirs": None})
    return partitions
