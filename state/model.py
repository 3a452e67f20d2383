"""The controller's whole state, as one immutable value: what the pipeline keeps in Redis.

A micro-batch is a pure function `ControllerState × inputs → ControllerState × outbox`
(`handlers.decide`); the shell persists the new state and the outbox atomically. Every field is
documented below; `state.controller_store` converts it to and from Redis in one place.

Invariants:
- `reassignments` holds at most one record per partition, and only active ones (a DONE record is
  dropped in the transition that finishes it);
- `epoch` only grows: a pipeline instance bumps it when it starts, and its commands carry it;
- `last_batch` numbers the applied micro-batches (-1 before the first): the pipeline counts them
  itself (Spark's batch ids restart with a new checkpoint); alert and command ids derive from it;
- times are epoch milliseconds taken from event times, never from a clock read here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from planning.model import Cluster, TopicPartition
from planning.movement.advance import SteppingMemo
from planning.movement.eta import ReplicationMeter
from planning.movement.log_dirs import LogDirTask
from planning.movement.reassignment import Reassignment


@dataclass(frozen=True)
class OutboundMessage:
    """A message decided by a batch, to be published after the batch is committed.

    topic_suffix: which product topic (`commands`, `alerts`, `dead-letter`, ...).
    key: the Kafka message key.
    schema: the record name in `schemas/` (`Command`, `Alert`, `DeadLetter`).
    record: the record, as the codec encodes it (a union payload is `[kind, fields]`).
    """

    topic_suffix: str
    key: str
    schema: str
    record: Mapping[str, Any]


@dataclass(frozen=True)
class Proposal:
    """A plan waiting for `approve` (mode `approve`).

    proposal_id: what the operator approves (`reassigner request approve ID`).
    targets: final target per partition.
    reason: why it was planned (e.g. "broker 4 added").
    created_at_ms: event time of the decision.
    """

    proposal_id: str
    targets: Mapping[TopicPartition, tuple[int, ...]]
    reason: str
    created_at_ms: int


@dataclass(frozen=True)
class ObservationTimes:
    """When the watcher last told something about each topic and broker: the greatest event time
    (epoch ms) of the events applied about it. A snapshot's inventory is only allowed to drop
    what was not observed after the snapshot's poll (`handlers.events`), so that an entity
    created after that poll is never dropped. A missing entry means "never" (state written before
    these times were kept).

    topics: topic name → time of its latest TopicState or PartitionState event.
    brokers: broker id → time of its latest BrokerMembership or LogDirState event.
    """

    topics: Mapping[str, int] = field(default_factory=dict)
    brokers: Mapping[int, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ControllerState:
    """Everything the pipeline decides from.

    cluster: the latest observed cluster (brokers, topics, partitions), built from the watcher's
        state-carrying events; `Broker.draining` marks brokers being decommissioned.
    reassignments: the active reassignments, by partition.
    broker_added_at_ms: brokers seen registered and empty, waiting out `broker.add.grace`
        (several additions coalesce into one rebalance); cleared when the rebalance is planned.
    broker_down_since_ms: brokers fenced or unregistered, with the event time they went down;
        healed after `broker.failure.grace`; cleared when they come back (BrokerRecovered).
    healed_brokers: down brokers whose replicas have already been planned away.
    config: runtime overrides from SetConfig requests (Kafka-style dotted names → value).
    proposals: plans awaiting approval (mode `approve`).
    epoch: the planner epoch of the pipeline instance that wrote this state.
    last_batch: the sequence number of the last applied micro-batch.
    open_alerts: keys of condition alerts already raised (e.g. "UnderMinIsr:orders-3"), so a
        condition alerts once when it starts, not once per batch.
    command_sequence: count of commands ever issued, for ids of commands that serve no single
        reassignment (throttles, elections).
    observed_at: when each topic and broker of `cluster` was last told about (for reconciling
        with a snapshot's inventory); keys are a subset of the cluster's topics and brokers.
    log_dir_moves: the active intra-broker moves, by (broker, partition) (`LogDirTask`: waiting
        for a slot or in flight); at most one per replica.
    replication_meter: bytes the completed steps copied since the current movement began, for
        the observed replication rate and the time left (`planning.movement.eta`).
    waiting: why each reassignment the last decision examined did not start its next step
        (`planning.movement.batches`' refusal: a limit, the ISR, a broker, Kafka reassigning
        it), by partition; at most `MAX_WAITING_REASONS` (`handlers.waiting`), empty when no
        step could start (paused, mode observe); for `list` and `status`.
    stepping_memo: what the last decision computed for the reassignments waiting for a step
        (`planning.movement.advance.SteppingMemo`): derived data that makes the next decision
        cost what changed; never stored, never compared, rebuilt after a restart.
    """

    cluster: Cluster = field(default_factory=Cluster)
    reassignments: Mapping[TopicPartition, Reassignment] = field(default_factory=dict)
    broker_added_at_ms: Mapping[int, int] = field(default_factory=dict)
    broker_down_since_ms: Mapping[int, int] = field(default_factory=dict)
    healed_brokers: frozenset[int] = frozenset()
    config: Mapping[str, str] = field(default_factory=dict)
    proposals: Mapping[str, Proposal] = field(default_factory=dict)
    epoch: int = 0
    last_batch: int = -1
    open_alerts: frozenset[str] = frozenset()
    command_sequence: int = 0
    observed_at: ObservationTimes = field(default_factory=ObservationTimes)
    log_dir_moves: Mapping[tuple[int, TopicPartition], LogDirTask] = field(default_factory=dict)
    replication_meter: ReplicationMeter = field(default_factory=ReplicationMeter)
    waiting: Mapping[TopicPartition, str] = field(default_factory=dict)
    stepping_memo: SteppingMemo | None = field(default=None, compare=False, repr=False)

    def with_changes(self, **changes: object) -> "ControllerState":
        return replace(self, **changes)
