"""The Avro schemas of every message the product exchanges, and their codec.

One `.avsc` file per type in this directory, namespace `io.reassigner.v1`, file name = type name.
Every message record starts with the same envelope fields:

    schema_version  int    version of the schema set that wrote it (also a Kafka header)
    event_time      long   timestamp-millis, UTC
    id              string unique (or deterministic, for commands and dead letters) message id
    key             string the Kafka message key: broker id, `<topic>-<partition>`, topic, ...

Requests and commands share one topic each, so they are wrapped in an envelope record
(`Request`, `Command`) whose `payload` is a union of the kinds; the envelope fields sit on the
wrapper, and the payload records (`Reassign`, `ReassignmentStep`, ...) hold only what is
specific to their kind. See `schemas.codec` for the topic → record mapping and the wire format,
`schemas.loader` for the self-contained schema JSON (for Spark's `from_avro`), and
`schemas.compatibility` for the evolution rule that the frozen `history/v<N>` sets are held to.

Evolution rule: a released schema set is frozen under `history/v<N>/` and never edited. A change
is a new version directory, the current files equal to it, `CURRENT_SCHEMA_VERSION` bumped, and
every change both ways compatible with every older version (new fields have defaults, removed
fields had defaults, enums only grow and carry a default symbol). Alert kinds are plain strings
for that reason: a new kind never breaks an old reader.

Nothing is read from disk at import.
"""

from __future__ import annotations

from typing import Mapping

# The codec and the loader are imported at first use of one of their names (PEP 562): the codec
# loads fastavro, which `schemas.errors` and every command line's start would otherwise pay.
_LAZY = {
    **{name: "schemas.codec" for name in (
        "HEADER_SCHEMA_VERSION", "TOPICS", "decode", "encode", "partition_key", "schema_for_topic", "topic_name",
        "version_headers", "writer_version_from_headers")},
    **{name: "schemas.loader" for name in ("CURRENT_SCHEMA_VERSION", "NAMESPACE", "schema_json", "schema_names")},
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'schemas' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


EVENT_TYPES = ("BrokerMembership", "PartitionState", "LogDirState", "TopicState", "SnapshotMarker", "CanarySample")
REQUEST_KINDS = ("Reassign", "Cancel", "Decommission", "Rebalance", "Approve", "SetConfig", "Tick")
"""Branches of `Request.payload`, in union order."""
REQUEST_ACTION_KINDS = ("Reject", "Recommission")
"""Kinds of `Request.action` (schema version 4): request kinds added after the payload union was
frozen. `RequestAction.kind` is a string, so a kind added later needs no schema change; a request
with an action carries a Tick as its payload."""
COMMAND_KINDS = (
    "ReassignmentStep",
    "CancelReassignment",
    "ElectLeader",
    "LogDirMove",
    "SetThrottle",
    "ClearThrottle",
)
"""Branches of `Command.payload`, in union order; also the values of `CommandResult.command_kind`."""
COMMAND_ACTION_KINDS = ("Cordon", "Uncordon")
"""Kinds of `Command.action` (schema version 10): command kinds added after the payload union was
frozen (`CommandAction.kind` is a string); a command with an action carries an empty
ClearThrottle as its payload. Also values of `CommandResult.command_kind`."""


def command_kind(command: Mapping) -> str:
    """A Command record's kind: its action's (schema version 10) or its payload's record name."""
    action = command.get("action")
    return str(action["kind"]) if action else str(command["payload"][0])
MESSAGE_TYPES = EVENT_TYPES + ("Request", "Command", "CommandResult", "Alert", "DeadLetter")
"""Record types that are a whole Kafka message value (one per topic, see `TOPICS`)."""

BROKER_STATES = ("REGISTERED", "UNFENCED", "FENCED", "UNREGISTERED", "DRAINING", "UNKNOWN")
ALERT_SEVERITIES = ("INFO", "WARNING", "ERROR", "CRITICAL")
ALERT_KINDS = (
    "BrokerAdded",
    "BrokerFailed",
    "BrokerRecovered",
    "BrokerDrained",
    "DiskFailed",
    "UnderMinIsr",
    "OfflinePartitions",
    "PlanCreated",
    "ProposalReady",
    "ReassignmentCompleted",
    "ReassignmentStalled",
    "ReassignmentCancelled",
    "PlanInfeasible",
    "RequestRejected",
    "CommandFailed",
    "SelfHealingSuppressed",
    "BadEvent",
    "TopicDeleted",
    "ConfigChanged",
    "SnapshotReconciled",
    "ClockSkew",
    "LogDirsUnbalanced",
    "LogDirsBalanced",
    "LogDirMoveStalled",
    "LogDirMoveFailed",
    "RequestAccepted",
    "ProposalRejected",
    "ProposalExpired",
    "BrokerRecommissioned",
    "ExternalReassignment",
    "ReassignmentInterrupted",
    "StateStoreLost",
    "DiskPressure",
    "PlanCompleted",
    "ThrottleChanged",
    "CanaryMissing",
)
"""Alert kinds (the original set plus TopicDeleted, ConfigChanged, SnapshotReconciled, ClockSkew and the
log-dir balance's four, the request verdicts and proposal ends of schema version 4, and the moves of
other tools: ExternalReassignment, ReassignmentInterrupted; StateStoreLost, raised by the pipeline
when Redis no longer holds the state it wrote; DiskPressure, a log dir's volume past the high-water
mark; PlanCompleted, the end of a plan; ThrottleChanged, the adaptive throttle's rate changes;
CanaryMissing, adaptive brokers with no canary reading). `Alert.kind` is a string: readers
must accept kinds not listed here."""

__all__ = [
    "ALERT_KINDS",
    "ALERT_SEVERITIES",
    "BROKER_STATES",
    "COMMAND_ACTION_KINDS",
    "command_kind",
    "COMMAND_KINDS",
    "CURRENT_SCHEMA_VERSION",
    "EVENT_TYPES",
    "HEADER_SCHEMA_VERSION",
    "MESSAGE_TYPES",
    "NAMESPACE",
    "REQUEST_ACTION_KINDS",
    "REQUEST_KINDS",
    "TOPICS",
    "decode",
    "encode",
    "partition_key",
    "schema_for_topic",
    "schema_json",
    "schema_names",
    "topic_name",
    "version_headers",
    "writer_version_from_headers",
]
