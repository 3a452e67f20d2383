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
- times are epoch milliseconds taken from event times, never from a clock read here;
- `reassignments` is an `immutables.Map` (a persistent map, as `Cluster.partitions_by_tp`), in
  every state: the constructor takes any mapping and converts it once (a plain dict from a test or
  `state.controller_store`'s load); `with_records` patches it in O(k log n) for k records, sharing
  the rest, so that no batch copies the whole map. Compare it with another mapping as
  `dict(state.reassignments)`: a Map equals only a Map;
- `reassignments`, `cluster` and `stepping_memo` are written only through `with_records`,
  `with_cluster` and `with_stepping` (`with_changes` refuses them), which keep `change_log`: what
  a batch changed, so that the stepping and the commit cost what changed (`ChangeLog`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping

import immutables

from planning.model import Cluster, KafkaFacts, TopicPartition, compute_replaced_partitions
from planning.movement.advance import SteppingMemo
from planning.movement.eta import ReplicationMeter
from planning.movement.external import ExternalMove
from planning.movement.canary import CanaryReading
from planning.movement.isr_shrinks import IsrShrinkWindow
from planning.movement.throttle_control import BrokerThrottle
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
class PlanRecord:
    """A plan being carried out, for the one alert at its end (`handlers.plan_ends`).

    plan_id: the plan's id (its reassignments' `plan`).
    subject, reason: as its PlanCreated alert said them.
    started_at_ms: event time of the decision that made it.
    partitions: the partitions it started or re-targeted; remaining: those still moving for it.
    bytes_planned: the replica bytes its targets add (each added replica at its partition's size).
    completed, cancelled, superseded: how its partitions ended so far (at their target; cancelled,
        reverted, given up or deleted; re-targeted by a later plan).
    """

    plan_id: str
    subject: str
    reason: str
    started_at_ms: int
    partitions: int
    remaining: int
    bytes_planned: int = 0
    completed: int = 0
    cancelled: int = 0
    superseded: int = 0


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
class ChangeLog:
    """Which reassignment records and partitions changed, kept by `ControllerState`'s setters:
    an image and its delta (Kafka's `MetadataImage` / `MetadataDelta`), so that the per-batch
    work costs what the batch changed. Derived data: never stored, never compared; a state
    loaded or built anew has an empty log that vouches for nothing.

    Two sets, each relative to its own base:
    - `batch_records`: the partitions whose record was set or removed since `batch_base` (the
      reassignments at the start of the batch, `ControllerState.with_batch_opened`): what the
      commit writes (`state.controller_store.compute_changes`);
    - `since_stepping`: the partitions whose record was set or removed since the records the
      last `compute_stepping` returned (the one that made `memo`), plus those whose
      `PartitionState` (by identity) or topic min.insync.replicas changed since the cluster it
      read (`planning.model.compute_replaced_partitions`): its `changed` argument.

    Invariant: a set is exact for the mappings named beside it — `batch_for` (records),
    `stepping_records_for` and `stepping_cluster_for` — by identity. A setter that finds its
    state's mapping is not the one named (a write went around the setters, or the log vouches
    for nothing yet) names None, which matches no mapping: readers then find the set unusable
    (`ControllerState.compute_stepping_changes`, `compute_batch_changes`) and fall back to a
    full walk. A wrong set is never used; a missing one costs a walk.
    """

    batch_base: Mapping[TopicPartition, Any] | None = None
    batch_records: frozenset[TopicPartition] = frozenset()
    batch_for: Mapping[TopicPartition, Any] | None = None
    memo: SteppingMemo | None = None
    since_stepping: frozenset[TopicPartition] = frozenset()
    stepping_records_for: Mapping[TopicPartition, Any] | None = None
    stepping_cluster_for: Cluster | None = None

    def with_records(self, before: Mapping, after: Mapping, touched: Iterable[TopicPartition]) -> "ChangeLog":
        """The log after the records went from `before` to `after`, changing only `touched`."""
        touched = frozenset(touched)
        batch_ok = self.batch_for is before
        stepping_ok = self.stepping_records_for is before
        return replace(
            self,
            batch_records=self.batch_records | touched if batch_ok else frozenset(),
            batch_for=after if batch_ok else None,
            since_stepping=self.since_stepping | touched if stepping_ok else frozenset(),
            stepping_records_for=after if stepping_ok else None)

    def with_cluster(self, before: Cluster, after: Cluster) -> "ChangeLog":
        """The log after the cluster went from `before` to `after`."""
        if self.stepping_cluster_for is not before:
            return replace(self, since_stepping=frozenset(), stepping_cluster_for=None)
        replaced = compute_replaced_partitions(before, after)
        return replace(self, since_stepping=self.since_stepping | replaced if replaced else self.since_stepping,
                       stepping_cluster_for=after)


@dataclass(frozen=True)
class ControllerState:
    """Everything the pipeline decides from.

    cluster: the latest observed cluster (brokers, topics, partitions), built from the watcher's
        state-carrying events; `Broker.draining` marks brokers being decommissioned.
    reassignments: the active reassignments, by partition; an `immutables.Map` (a plain mapping
        given to the constructor is converted, see the module docstring).
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
        the observed replication rate and the time left, and the reassignments of the movement
        that ended, with their steps and bytes, for its overall progress (`planning.movement.eta`).
    waiting: why each reassignment the last decision examined did not start its next step
        (`planning.movement.batches`' refusal: a limit, the ISR, a broker, Kafka reassigning
        it), by partition; at most `MAX_WAITING_REASONS` (`handlers.waiting`), empty when no
        step could start (paused, mode observe); for `list` and `status`.
    external_moves: the partitions Kafka shows reassigning with no step of ours in flight: moved
        by another tool (`planning.movement.external`), with what Kafka showed and since when;
        kept incrementally by `handlers.external`; for `list`, `status` and the batch rule's
        "moved by another tool".
    plans: the plans being carried out (`PlanRecord`), by id, for the alert at each one's end.
    kafka: which Kafka the cluster runs and what it can do (`KafkaFacts`), from the newest
        snapshot marker that said (None until one did: an older watcher, or none yet).
    cordoned: what the product asked the executor to cordon (`handlers.cordons`), by broker: the
        dirs, sorted, or () for the whole broker (its draining brokers; the dirs it empties), on
        a Kafka that has cordons; ('',) where a cordon command failed (not known what holds).
    isr_shrinks: per broker, how many times it fell out of the ISR of a partition nothing was
        moving, in ten-second buckets of the last ten minutes, each with its latest shrink's
        time (`planning.movement.isr_shrinks`):
        the cluster's clients or replication hurting; for `status`, `/metrics` and the adaptive
        throttle.
    canary: per broker, the newest window of the canary the watcher measures on the partition it
        leads, and the baseline of the windows in which nothing moved
        (`planning.movement.canary.CanaryReading`, `handlers.throttle`); for the adaptive
        throttle, `status` and `/metrics`.
    throttles: per broker the movement touches, the adaptive throttle's rate and moves in
        flight, when and why they last changed (`planning.movement.throttle_control`); empty in
        static mode and when nothing is in flight.
    stepping_memo: what the last decision computed for the reassignments waiting for a step
        (`planning.movement.advance.SteppingMemo`): derived data that makes the next decision
        cost what changed; never stored, never compared, rebuilt after a restart.
    change_log: what the setters changed (`ChangeLog`); never stored, never compared.
    """

    cluster: Cluster = field(default_factory=Cluster)
    reassignments: Mapping[TopicPartition, Reassignment] = field(default_factory=immutables.Map)
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
    external_moves: Mapping[TopicPartition, ExternalMove] = field(default_factory=dict)
    plans: Mapping[str, PlanRecord] = field(default_factory=dict)
    kafka: KafkaFacts | None = None
    cordoned: Mapping[int, tuple[str, ...]] = field(default_factory=dict)
    isr_shrinks: IsrShrinkWindow = field(default_factory=dict)
    canary: Mapping[int, CanaryReading] = field(default_factory=dict)
    throttles: Mapping[int, BrokerThrottle] = field(default_factory=dict)
    stepping_memo: SteppingMemo | None = field(default=None, compare=False, repr=False)
    change_log: ChangeLog = field(default_factory=ChangeLog, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.reassignments, immutables.Map):  # once, at construction (see the invariants)
            object.__setattr__(self, "reassignments", immutables.Map(self.reassignments))

    def with_changes(self, **changes: object) -> "ControllerState":
        """The state with other fields than the logged ones (see `LOGGED_FIELDS`)."""
        logged = LOGGED_FIELDS.intersection(changes)
        if logged:
            raise TypeError(f"{', '.join(sorted(logged))}: set through with_records / with_cluster / "
                            "with_stepping, which keep the change log")
        return replace(self, **changes)

    def with_records(self, patch: Mapping[TopicPartition, Reassignment | None]) -> "ControllerState":
        """The state with `patch` applied to `reassignments` (a record sets, None removes), logged."""
        if not patch:
            return self
        mutation = self.reassignments.mutate()
        for tp, record in patch.items():
            if record is None:
                mutation.pop(tp, None)
            else:
                mutation[tp] = record
        records = mutation.finish()
        return replace(self, reassignments=records,
                       change_log=self.change_log.with_records(self.reassignments, records, patch))

    def with_cluster(self, cluster: Cluster) -> "ControllerState":
        """The state with `cluster`; the log finds the partitions it changed itself."""
        if cluster is self.cluster:
            return self
        return replace(self, cluster=cluster, change_log=self.change_log.with_cluster(self.cluster, cluster))

    def with_stepping(self, memo: SteppingMemo | None, since: Iterable[TopicPartition]) -> "ControllerState":
        """The state after a stepping decision made `memo`: `since` names the records that are
        not the ones the decision returned (the stepping set starts again from them)."""
        log = replace(self.change_log, memo=memo, since_stepping=frozenset(since),
                      stepping_records_for=self.reassignments, stepping_cluster_for=self.cluster)
        return replace(self, stepping_memo=memo, change_log=log)

    def with_batch_opened(self) -> "ControllerState":
        """The state at the start of a batch: the batch set starts empty from these records."""
        log = replace(self.change_log, batch_base=self.reassignments, batch_records=frozenset(),
                      batch_for=self.reassignments)
        return replace(self, change_log=log)

    def compute_stepping_changes(self) -> frozenset[TopicPartition] | None:
        """`compute_stepping`'s `changed` for this state's records, cluster and memo, or None when
        the log cannot vouch for it (then the decision walks every record)."""
        log = self.change_log
        if (self.stepping_memo is None or log.memo is not self.stepping_memo
                or log.stepping_records_for is not self.reassignments or log.stepping_cluster_for is not self.cluster):
            return None
        return log.since_stepping

    def compute_records_in_flight(self) -> dict[TopicPartition, Reassignment]:
        """The records with a step in flight: among the last stepping decision's
        (`SteppingMemo.in_flight`) and the records changed since, when the change log vouches for
        them (O(in flight + changed)); among every record otherwise."""
        changed = self.compute_stepping_changes()
        if changed is not None and self.stepping_memo is not None:
            records = self.reassignments
            found = ((tp, records.get(tp)) for tp in self.stepping_memo.in_flight | changed)
            return {tp: r for tp, r in found if r is not None and r.in_flight is not None}
        return {tp: r for tp, r in self.reassignments.items() if r.in_flight is not None}

    def compute_batch_changes(self, before: "ControllerState") -> frozenset[TopicPartition] | None:
        """The partitions whose record may differ between `before` and this state, or None when
        the log cannot vouch for it (not the same batch, or a write around the setters)."""
        log = self.change_log
        if log.batch_base is not before.reassignments or log.batch_for is not self.reassignments:
            return None
        return log.batch_records


LOGGED_FIELDS = frozenset({"reassignments", "cluster", "stepping_memo", "change_log"})
