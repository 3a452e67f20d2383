"""Builders of the records a decision publishes: commands, alerts and dead letters.

One `Outbox` collects the messages of one decision, in the order they are decided; it is local to
one `decide` call and never escapes it (the Decision carries a tuple).

IDS (deterministic, so a replayed batch decides byte-identical messages):
- a command serving a reassignment: `<reassignment id>:<step number>:<kind>`
  (`Reassignment.command_id`), e.g. `req-7/orders-3:2:ReassignmentStep`;
- a throttle command: `throttle-<n>:0:<kind>`, n = `ControllerState.command_sequence`; a cordon
  command (Cordon, Uncordon): `cordon-<n>-<broker id>:0:<kind>`, numbered the same way;
- an alert: `alert-<batch id>-<index in the batch>`; the one the pipeline's shell raises when it
  finds the state store lost (`StateStoreLost`): `alert-<batch id>-store-lost`;
- a dead letter: its key, `<source topic>-<partition>-<offset>`.
Every record carries `schema_version` (the current schema set's) and `event_time` = the batch's
time (`now_ms`); commands carry the planner epoch. Records are shaped exactly as
`schemas.codec.encode` wants them.

BOUNDS: an alert's subject keeps at most `MAX_SUBJECT_CHARS`, its message and each detail value
at most `MAX_TEXT_CHARS` (the cut is marked), so that no input, however large, can make an
alert the producer refuses (1 MB): an outbox that can never be published would stop the
pipeline for good. Dead letters are bounded by `schemas.dead_letter`.
"""

from __future__ import annotations

from typing import Any, Mapping

from state.model import OutboundMessage
from planning.model import TopicPartition
from schemas.codec import partition_key
from schemas.dead_letter import build_dead_letter
from schemas.loader import CURRENT_SCHEMA_VERSION

INFO, WARNING, ERROR, CRITICAL = "INFO", "WARNING", "ERROR", "CRITICAL"

MAX_SUBJECT_CHARS = 512
MAX_TEXT_CHARS = 4000


def compute_bounded_text(text: str, limit: int) -> str:
    """`text`, or its first `limit` characters and a mark saying how long it was."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters, cut)"


class Outbox:
    """The messages of one decision, in order (a local accumulator of a pure function)."""

    def __init__(self, batch_id: int, now_ms: int, epoch: int) -> None:
        self.batch_id = batch_id
        self.now_ms = now_ms
        self.epoch = epoch
        self.messages: list[OutboundMessage] = []
        self._alerts = 0

    def alert(self, kind: str, severity: str, subject: str, message: str,
              details: Mapping[str, object] | None = None) -> None:
        alert_id = f"alert-{self.batch_id}-{self._alerts}"
        self._alerts += 1
        self.messages.append(build_alert(alert_id, self.now_ms, kind, severity, subject, message, details))

    def command(self, command_id: str, key: str, reassignment_id: str | None, step: int,
                reason: str, kind: str, fields: Mapping[str, Any]) -> None:
        """A command of a `Command.payload` kind."""
        self._add_command(command_id, key, reassignment_id, step, reason, (kind, dict(fields)), None)

    def action_command(self, command_id: str, key: str, reason: str, action: Mapping[str, Any]) -> None:
        """A command of a `Command.action` kind (schema version 10): its payload an empty
        ClearThrottle, which clears nothing."""
        empty = ("ClearThrottle", {"broker_ids": [], "partitions": [], "log_dir_only": False, "throttle_sequence": None})
        self._add_command(command_id, key, None, 0, reason, empty, dict(action))

    def _add_command(self, command_id: str, key: str, reassignment_id: str | None, step: int,
                     reason: str, payload: tuple[str, dict], action: dict | None) -> None:
        record = {
            "schema_version": CURRENT_SCHEMA_VERSION,
            "event_time": self.now_ms,
            "id": command_id,
            "key": key,
            "epoch": self.epoch,
            "reassignment_id": reassignment_id,
            "step": step,
            "reason": reason,
            "payload": payload,
            "action": action,
        }
        self.messages.append(OutboundMessage("commands", key, "Command", record))

    def dead_letter(self, source_topic: str, partition: int, offset: int, value: bytes,
                    reason: str, expected_schema: str | None = None) -> str:
        record = build_dead_letter(source_topic=source_topic, partition=partition, offset=offset,
                                   value=value, reason=reason, now_ms=self.now_ms,
                                   expected_schema=expected_schema)
        self.messages.append(OutboundMessage("dead-letter", record["key"], "DeadLetter", record))
        return record["key"]

    def mark(self) -> tuple[int, int]:
        """Where the outbox stands now, for `rollback`."""
        return len(self.messages), self._alerts

    def rollback(self, mark: tuple[int, int]) -> None:
        """Forget what was added since `mark` (an input that failed half-way changes nothing)."""
        del self.messages[mark[0]:]
        self._alerts = mark[1]

    def count(self, topic_suffix: str) -> int:
        return sum(1 for m in self.messages if m.topic_suffix == topic_suffix)


def build_alert(alert_id: str, now_ms: int, kind: str, severity: str, subject: str, message: str,
                details: Mapping[str, object] | None = None) -> OutboundMessage:
    """One alert record (BOUNDS), keyed by its subject."""
    subject = compute_bounded_text(subject, MAX_SUBJECT_CHARS)
    record = {
        "schema_version": CURRENT_SCHEMA_VERSION,
        "event_time": now_ms,
        "id": alert_id,
        "key": subject,
        "severity": severity,
        "kind": kind,
        "subject": subject,
        "message": compute_bounded_text(message, MAX_TEXT_CHARS),
        "details": {compute_bounded_text(str(k), MAX_SUBJECT_CHARS): compute_bounded_text(str(v), MAX_TEXT_CHARS)
                    for k, v in sorted((details or {}).items())},
    }
    return OutboundMessage("alerts", subject, "Alert", record)


def compute_restamped(messages: list[OutboundMessage] | tuple[OutboundMessage, ...],
                      epoch: int) -> list[OutboundMessage]:
    """An outbox re-published by a newer instance: its commands carry that instance's `epoch`
    (ids unchanged), or an executor that already saw the new epoch would refuse them as stale."""
    return [OutboundMessage(m.topic_suffix, m.key, m.schema, {**m.record, "epoch": epoch})
            if m.schema == "Command" and m.record.get("epoch") != epoch else m for m in messages]


def tp_key(tp: TopicPartition) -> str:
    """The key of partition-scoped messages (`schemas.codec.partition_key`): the store's rebuild
    reads a partition's commands by it (`streams.store_recovery`)."""
    return partition_key(tp.topic, tp.partition)


def broker_subject(broker_id: int) -> str:
    return f"broker-{broker_id}"


def reassignment_step_fields(tp: TopicPartition, target: tuple[int, ...], adding: tuple[int, ...],
                             removing: tuple[int, ...], elect_leader: bool,
                             target_log_dirs: Mapping[int, str] | None = None,
                             final_target: tuple[int, ...] | None = None) -> dict[str, Any]:
    """A ReassignmentStep payload; log dirs parallel to the target ("any" where not chosen);
    `final_target`: where the reassignment the step belongs to ends."""
    dirs = dict(target_log_dirs or {})
    return {
        "topic": tp.topic,
        "partition": tp.partition,
        "target_replicas": list(target),
        "adding": list(adding),
        "removing": list(removing),
        "elect_leader": elect_leader,
        "target_log_dirs": [dirs.get(b, "any") for b in target] if dirs else [],
        "final_target_replicas": list(final_target) if final_target is not None else None,
    }


def summarise(items: list[str], limit: int = 20) -> str:
    """At most `limit` items, comma separated, with a count of the rest."""
    shown = ",".join(items[:limit])
    return shown if len(items) <= limit else f"{shown},... (+{len(items) - limit})"
