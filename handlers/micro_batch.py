"""What one micro-batch brings to the handlers, and what they give back.

The streaming shell (`streams.runner`, `streams.input_rows`) turns a Spark micro-batch into `BatchInputs` — decoded
records in Kafka order, state-carrying events already collapsed to the latest per key — and calls
`handlers.decide.decide(state, inputs, policy)`, a pure function returning a `Decision`: the next
`ControllerState` and the outbox of messages (commands, alerts, dead letters) to publish once the
state is committed.

Records are plain dicts exactly as `schemas.codec.decode` returns them: times are epoch
milliseconds (ints) and a union payload is a `(kind, fields)` tuple.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from planning.model import TopicPartition
from state.model import ControllerState, OutboundMessage


@dataclass(frozen=True)
class BadRecord:
    """An input record that could not be decoded; it becomes a DeadLetter and a BadEvent alert.

    source_topic, partition, offset: where it was read.
    value: its raw bytes.
    reason: why it was rejected (for the dead letter and the alert).
    """

    source_topic: str
    partition: int
    offset: int
    value: bytes
    reason: str


@dataclass(frozen=True)
class BatchInputs:
    """One micro-batch, in the order the handlers apply it.

    batch_id: the batch's sequence number, `last_batch` + 1 (deterministic ids derive from it).
    now_ms: the batch's time: the greatest event time among its records (ticks included), so
        grace periods and stall timeouts follow event time and tests are deterministic.
    events: (schema name, record) of BrokerMembership, TopicState, LogDirState, PartitionState and
        SnapshotMarker events, latest per key, ordered by (topic, partition, offset).
    requests: Request envelopes in offset order (Tick requests included: they only move time).
    command_results: CommandResult records in offset order.
    bad_records: what could not be decoded.
    clock_ms: the pipeline's own clock when the batch ran (read by the shell), the bound that
        event times are held to (`handlers.decide`, TIME); None trusts the event times (tests).
    origins: where each event, request and command result was read, keyed by (`"events"`,
        `"requests"` or `"command_results"`, index): the raw record a dead letter keeps when
        deciding on that one input fails (`handlers.decide.decide_isolating`); may be empty.
    """

    batch_id: int
    now_ms: int
    events: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    requests: tuple[Mapping[str, Any], ...] = ()
    command_results: tuple[Mapping[str, Any], ...] = ()
    bad_records: tuple[BadRecord, ...] = ()
    clock_ms: int | None = None
    origins: Mapping[tuple[str, int], BadRecord] = field(default_factory=dict)


@dataclass(frozen=True)
class BatchReport:
    """What one decision did, filled by the handlers as they decide (the pipeline's metrics only
    count it, nothing re-derives it from the states or the outbox).

    inputs: (schema, "applied" | "rejected") → records: an input is rejected when it did not
        decode, when deciding on it failed (both dead-lettered), or when its content was refused
        (a BadEvent naming its schema); every other input of the batch is applied.
    commands, alerts: kind → messages in the outbox.
    steps_completed: the partitions whose step in flight completed in this batch (its view
        reached the step's target; a failed or cancelled step is none).
    bytes_moved: the bytes those steps copied (`planning.movement.eta`).
    """

    inputs: Mapping[tuple[str, str], int] = field(default_factory=dict)
    commands: Mapping[str, int] = field(default_factory=dict)
    alerts: Mapping[str, int] = field(default_factory=dict)
    steps_completed: tuple[TopicPartition, ...] = ()
    bytes_moved: int = 0


@dataclass(frozen=True)
class Decision:
    """The outcome of one batch: the next state, the messages to publish after committing, and
    what it did."""

    state: ControllerState
    outbox: tuple[OutboundMessage, ...] = ()
    report: BatchReport = field(default_factory=BatchReport)
