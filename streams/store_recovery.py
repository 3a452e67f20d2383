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

THROTTLES are not left behind: the throttled steps and log-dir moves among the commands read
give the rebuilt state its throttle markers (`handlers.progress`, `handlers.log_dirs`), so the
pipeline issues the ClearThrottle once Kafka moves none of those partitions any more; an
executor that lost its own records of them with the store adopts them from the brokers' configs
(`reassigner.edge.throttles`, ADOPTION).

RESUME: every step command carries the final target of its reassignment, so the plans that were
running are known from the commands read (a partition whose newest command is a step, not a
cancel). Once the replay has applied every input partition up to where its log ended when the
rebuild began (`compute_caught_up`: the view is the present one again), the pipeline requests
them again as one Reassign request of the partitions not yet at their target
(`compute_resume_request`), planned afresh from where Kafka is, under the usual checks and
verdict alert. The partitions of a plan that no step had reached yet are in no command: a
rebalance cut so is not finished (the alert says to request it again). Heals need nothing: the
replayed events show the brokers down, and their grace is over. What the lost store held beyond that (dynamic settings, decommissions in progress) is
not in the commands: the alert says to set them again.

The evidence is the product's own topics, which only the product may write (docs: ACLs);
commands are counted only when their signature holds, where commands are signed
(`schemas.published`).
All functions but `read_published_marks` (it reads Kafka through the reader it is given) are pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Mapping

from handlers.log_dirs import THROTTLE_MARKER as LOG_DIR_THROTTLE_MARKER
from planning.model import TopicPartition
from schemas.loader import CURRENT_SCHEMA_VERSION
from handlers.progress import compute_throttle_marker
from schemas.published import TAIL_RECORDS, read_published
from state.model import ControllerState

ALERT_ID = re.compile(r"^alert-(\d+)-")


@dataclass(frozen=True)
class PublishedMarks:
    """The highest of what the product published, as far as the newest records tell."""

    epoch: int = 0
    """The highest planner epoch a command carries (0: no command)."""
    batch: int = -1
    """The highest batch an alert was raised by (-1: no alert)."""
    command_sequence: int = 0
    """The highest throttle sequence a command carries."""
    throttled_brokers: frozenset[int] = frozenset()
    """The brokers the throttled ReassignmentSteps named (leader and follower throttles)."""
    throttled_partitions: frozenset[tuple[str, int]] = frozenset()
    """The partitions of those steps."""
    log_dir_throttled: frozenset[int] = frozenset()
    """The brokers of throttled LogDirMoves."""
    plans: tuple[tuple[str, int, tuple[int, ...]], ...] = ()
    """(topic, partition, final target) of the reassignments whose newest command is a step
    (not a cancel), as far as the newest records tell: the plans that were running."""


def compute_published_marks(commands: Iterable[Mapping], alerts: Iterable[Mapping]) -> PublishedMarks:
    """The marks of decoded Command and Alert records (any other shape is skipped)."""
    epoch = sequence = 0
    brokers: set[int] = set()
    partitions: set[tuple[str, int]] = set()
    log_dirs: set[int] = set()
    newest: dict[tuple[str, int], tuple[int, ...] | None] = {}  # commands of one partition share a key: in order
    for command in commands:
        epoch = max(epoch, int(command.get("epoch") or 0))
        payload = command.get("payload")
        kind, fields = payload if isinstance(payload, tuple) and len(payload) == 2 else ("", {})
        if not isinstance(fields, Mapping):
            continue
        sequence = max(sequence, int(fields.get("throttle_sequence") or 0))
        if kind in ("ReassignmentStep", "CancelReassignment") and "topic" in fields:
            final = fields.get("final_target_replicas") if kind == "ReassignmentStep" else None
            key = (fields["topic"], int(fields["partition"]))
            newest[key] = tuple(final) if final else None
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
    return PublishedMarks(epoch, batch, sequence, frozenset(brokers), frozenset(partitions), frozenset(log_dirs),
                          plans)


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
    """The plans a rebuild found running, and the input log ends the replay must reach first."""

    plans: tuple[tuple[str, int, tuple[int, ...]], ...]
    ends: Mapping[tuple[str, int], int]
    """(topic, partition) of an input topic → the offset of its last record when the rebuild began."""



def compute_caught_up(applied: Mapping[tuple[str, int], int], ends: Mapping[tuple[str, int], int]) -> bool:
    """Whether every input partition was applied up to where its log ended at the rebuild."""
    return all(applied.get(key, -1) >= end for key, end in ends.items())


def compute_resume_request(pending: PlansToResume, state: ControllerState, now_ms: int,
                           request_id: str) -> dict | None:
    """The Reassign request that resumes the plans once the replay has caught up (RESUME): the
    partitions the cluster still has, not at their final target and not reassigned by a plan of
    ours since; None when none is left. A step Kafka finished after the store was lost may have
    left a partition at its step's target (a replica added, the one it replaces not dropped yet):
    the final target puts it back at its replication factor."""
    partitions = []
    for topic, partition, final in pending.plans:
        tp = TopicPartition(topic, partition)
        current = state.cluster.partition(tp)
        if current is None or tuple(current.replicas) == final or tp in state.reassignments:
            continue
        partitions.append({"topic": topic, "partition": partition, "replicas": list(final), "log_dirs": None})
    if not partitions:
        return None
    return {"schema_version": CURRENT_SCHEMA_VERSION, "event_time": now_ms, "id": request_id, "key": "reassign",
            "requested_by": "pipeline (state store rebuilt: resuming the plans that were running)",
            "payload": ("Reassign", {"version": 1, "partitions": partitions, "additional": True}), "action": None}
