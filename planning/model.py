"""The cluster model: plain immutable data that every planning function reads.

Invariants (checked where the model is built from outside input, see `planning.snapshot`):
- broker ids are unique, non-negative ints; partition replicas are ordered, the first one is the
  preferred leader; `isr` and `adding`/`removing` are subsets of `replicas`;
- `log_dirs`, when known, runs parallel to `replicas` (one entry per replica, `None` = unknown);
- nothing here does I/O, reads a clock or holds mutable state: derived lookups are cached on
  first use (`functools.cached_property`, `Cluster.derive_from_brokers`) and never change
  because the data cannot.

A rack id may be a path (`/dc1/rack2/host3`, KIP-879); `Broker.rack_path` splits it into levels.
A broker without a rack is its own top-level domain, so it never shares a domain by accident.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import immutables
from typing import Any, Callable, Container, Iterable, Iterator, Mapping, NamedTuple, TypeVar

T = TypeVar("T")


class TopicPartition(NamedTuple):
    """A partition's key. A tuple, so hashing, equality and ordering run in C: a batch at 300k
    partitions looks keys up hundreds of thousands of times, and the hash a frozen dataclass
    computes in Python was a quarter of it."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True)
class LogDir:
    """One log dir of a broker. `replica_bytes` / `replica_count` sum the (current, not future)
    replicas the broker reported in it at its last describe-log-dirs (None = not reported);
    `future_replicas` are the partitions being copied into it by an intra-broker move.
    `copying_bytes`: (partition, bytes) of the replicas being copied into it, as that
    describe-log-dirs told their sizes: its future replicas, and the replicas of partitions whose
    reassignment adds this broker (`adding`) when the dir was told. What the movement's progress
    counts of a copy in flight (`planning.movement.eta`, IN FLIGHT); a volatile number, like a
    partition's size, so not compared.
    `cordoned`: Kafka takes no new replica into it (KIP-1066, Kafka 4.3+: its broker's
    `cordoned.log.dirs`, whoever set it): no plan puts one there (`planning.placement.log_dir_choice`,
    `planning.movement.log_dirs`, `planning.placement.disk_relief`); the replicas it holds stay
    and may move out (a cordon is not a drain)."""

    path: str
    online: bool = True
    total_bytes: int | None = None
    usable_bytes: int | None = None
    replica_bytes: int | None = None
    replica_count: int | None = None
    future_replicas: frozenset[TopicPartition] = frozenset()
    copying_bytes: tuple[tuple[TopicPartition, int], ...] = field(default=(), compare=False)
    cordoned: bool = False

    def copied_bytes(self, tp: TopicPartition) -> int | None:
        """Bytes of `tp`'s copy into this dir as last told; None when it is not being copied here."""
        return next((size for copied, size in self.copying_bytes if copied == tp), None)

    @property
    def used_bytes(self) -> int | None:
        if self.total_bytes is None or self.usable_bytes is None:
            return None
        return self.total_bytes - self.usable_bytes

    def room_bytes(self, max_usage_percent: float | None) -> float | None:
        """Bytes this dir's volume may still take before it is `max_usage_percent` full; None
        when there is no limit or the dir does not report its volume's size."""
        if max_usage_percent is None or not self.total_bytes or self.used_bytes is None:
            return None
        return max_usage_percent / 100.0 * self.total_bytes - self.used_bytes


def compute_dir_weights(dirs: tuple[LogDir, ...]) -> dict[str, float]:
    """Each online dir's weight in its broker's shares of bytes: its capacity (`total_bytes`) when
    every online dir reports one, else 1 (equal shares). The one rule the log-dir balance
    (`planning.movement.log_dirs`) and a plan's choice of dirs
    (`planning.placement.log_dir_choice`) both follow."""
    online = [d for d in dirs if d.online]
    by_capacity = all(d.total_bytes for d in online)
    return {d.path: float(d.total_bytes) if by_capacity else 1.0 for d in online}


def compute_reported_log_dir(path: str, online: bool, total_bytes: int | None, usable_bytes: int | None,
                             replicas: Iterable[tuple[TopicPartition, int, bool]],
                             adding_here: Container[TopicPartition] = (), cordoned: bool = False) -> LogDir:
    """A dir as describe-log-dirs reports it, from its (partition, size, is_future) replicas: the
    sums of the current ones, the future ones, and the sizes of the copies in flight into it
    (`copying_bytes`: the future replicas, and the current ones of the partitions in
    `adding_here`, those whose reassignment adds this dir's broker). An offline dir lists
    nothing: its sums are unknown."""
    listed = list(replicas)
    current = [size for _, size, is_future in listed if not is_future]
    copying = tuple(sorted((tp, size) for tp, size, is_future in listed if is_future or tp in adding_here))
    return LogDir(path, online, total_bytes, usable_bytes,
                  sum(current) if online else None, len(current) if online else None,
                  frozenset(tp for tp, _, is_future in listed if is_future), copying, cordoned)


@dataclass(frozen=True)
class Broker:
    id: int
    rack: str | None = None
    alive: bool = True
    draining: bool = False
    log_dirs: tuple[LogDir, ...] = ()
    # Partitions a failed log dir of this broker held. Kafka keeps them marked as residing in an
    # offline dir until the broker restarts: a replica moved back here never starts (it is not
    # even listed offline), so placement keeps them off this broker until it shows no offline
    # dir any more (see `handlers.events`).
    cannot_host: frozenset[TopicPartition] = frozenset()

    @property
    def eligible(self) -> bool:
        """May hold new replicas: alive, not being drained (and, if dirs are known, one online);
        counts in the balance and keeps its replicas. A partition may still be barred from it
        (`Cluster.brokers_that_cannot_host`: `cannot_host`, or every online dir `cordoned`)."""
        if not self.alive or self.draining:
            return False
        return not self.log_dirs or any(d.online for d in self.log_dirs)

    @property
    def cordoned(self) -> bool:
        """Every online dir is cordoned (`cordoned.log.dirs=*`, or each one named): Kafka puts
        no new replica on this broker, and no plan does; what it holds stays."""
        online = self.online_log_dirs
        return bool(online) and all(d.cordoned for d in online)

    @property
    def rack_path(self) -> tuple[str, ...]:
        """The failure-domain path, top level first. `/dc1/r2` -> ("dc1", "r2"); `r1` -> ("r1",)."""
        if self.rack is None or not self.rack.strip("/ "):
            return (f"<no-rack:{self.id}>",)
        return tuple(level for level in self.rack.strip().split("/") if level)

    @cached_property
    def online_log_dirs(self) -> tuple[LogDir, ...]:
        # Cached: read for every broker in every batch (the log-dir balance trigger); a broker
        # is immutable and carried unchanged from batch to batch.
        return tuple(d for d in self.log_dirs if d.online)

    def has_future_replica(self, tp: TopicPartition) -> bool:
        """Whether an intra-broker move of `tp` is copying into one of this broker's dirs."""
        return any(tp in d.future_replicas for d in self.log_dirs)


@dataclass(frozen=True)
class PlannedDirMove:
    """One intra-broker move a plan makes (KIP-113): the replica, where it is, where it goes, its
    weight (a log-dir balance, `planning.movement.log_dirs`; a disk relief,
    `planning.placement.disk_relief`)."""

    tp: TopicPartition
    broker_id: int
    origin_dir: str
    target_dir: str
    size_bytes: int


@dataclass(frozen=True)
class PartitionState:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...] = ()
    leader: int | None = None
    size_bytes: int | None = None
    log_dirs: tuple[str | None, ...] = ()
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()
    offline_replicas: tuple[int, ...] = ()
    leader_epoch: int = -1
    # Smoothed traffic (`planning.load`): bytes produced to it and read from it by consumers,
    # per second; None = never measured (counts as zero).
    bytes_in_per_sec: float | None = None
    bytes_out_per_sec: float | None = None
    # Eligible leader replicas (KIP-966): out of the ISR but holding every committed record, kept
    # by Kafka while the ISR is below min ISR; a clean leader when no ISR member is left. Read only
    # for partitions under min ISR; () where the cluster has no ELR or none is kept.
    eligible_leaders: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def preferred_leader(self) -> int | None:
        return self.replicas[0] if self.replicas else None

    @property
    def reassigning(self) -> bool:
        return bool(self.adding or self.removing)

    def log_dir_of(self, broker_id: int) -> str | None:
        if broker_id not in self.replicas or not self.log_dirs:
            return None
        return self.log_dirs[self.replicas.index(broker_id)]


LOG_DIR_MOVES = "log-dir moves and dir failures"
FENCED_BROKERS = "fenced brokers in DescribeCluster"
ELIGIBLE_LEADERS = "eligible leader replicas"
CORDONS = "cordoned log dirs"
"""The capabilities of a Kafka the product uses (`KafkaFacts.capabilities`); which release and
features each needs is `runtime.kafka_versions`' table."""


@dataclass(frozen=True)
class KafkaFacts:
    """Which Kafka the cluster runs, as the watcher read it from what the cluster finalized
    (`runtime.kafka_versions`): its release line, its metadata.version level and the names of
    the capabilities the product uses that it has."""

    release: str
    metadata_level: int | None
    capabilities: tuple[str, ...] = ()

    def has(self, capability: str) -> bool:
        return capability in self.capabilities


@dataclass(frozen=True)
class Topic:
    name: str
    partitions: tuple[PartitionState, ...] = ()
    min_insync_replicas: int = 1
    topic_id: str | None = None
    """Kafka's id of this incarnation of the topic (None where it was never reported): a topic
    deleted and re-created under the same name gets a new one."""

    @property
    def replication_factor(self) -> int:
        """The most common replica count of the topic's partitions (Kafka keeps them equal)."""
        if not self.partitions:
            return 0
        counts: dict[int, int] = {}
        for p in self.partitions:
            counts[len(p.replicas)] = counts.get(len(p.replicas), 0) + 1
        return max(counts, key=lambda rf: (counts[rf], rf))


@dataclass(frozen=True)
class Cluster:
    brokers: tuple[Broker, ...] = ()
    topics: tuple[Topic, ...] = field(default=())

    @cached_property
    def brokers_by_id(self) -> Mapping[int, Broker]:
        return {b.id: b for b in self.brokers}

    @cached_property
    def topics_by_name(self) -> Mapping[str, Topic]:
        return {t.name: t for t in self.topics}

    @cached_property
    def partitions_by_tp(self) -> Mapping[TopicPartition, PartitionState]:
        """Every partition by key: a persistent map (HAMT), so that the next cluster's index is
        this one with a batch's few changes, O(changes · log N), not a copy (`with_topics`)."""
        return immutables.Map({p.tp: p for t in self.topics for p in t.partitions})

    @cached_property
    def replica_count_by_broker(self) -> Mapping[int, int]:
        """How many partitions have a replica on each broker (a broker with none is absent);
        carried from one cluster to the next like `partitions_by_tp` (`with_topics`)."""
        counts: dict[int, int] = {}
        for t in self.topics:
            for p in t.partitions:
                for broker_id in p.replicas:
                    counts[broker_id] = counts.get(broker_id, 0) + 1
        return counts

    @cached_property
    def _cannot_host_index(self) -> Mapping[TopicPartition, frozenset[int]]:
        index: dict[TopicPartition, set[int]] = {}
        for b in self.brokers:
            for tp in b.cannot_host:
                index.setdefault(tp, set()).add(b.id)
        return {tp: frozenset(ids) for tp, ids in index.items()}

    @cached_property
    def cordoned_broker_ids(self) -> frozenset[int]:
        """The eligible brokers whose every online dir is cordoned (`Broker.cordoned`): they keep
        their replicas and their place in the balance, and get no new replica. (A draining
        broker the product cordons is not eligible: it is left out here.)"""
        return frozenset(b.id for b in self.brokers if b.eligible and b.cordoned)

    @cached_property
    def any_cannot_host(self) -> bool:
        """Whether any broker must not get some partition (most clusters: none)."""
        return bool(self._cannot_host_index) or bool(self.cordoned_broker_ids)

    def brokers_that_cannot_host(self, tp: TopicPartition) -> frozenset[int]:
        """Brokers that must not get a new replica of `tp`: those whose failed dir held it
        (`Broker.cannot_host`), and the cordoned ones (`cordoned_broker_ids`) that hold no
        replica of it (one that holds it keeps it: a cordon is not a drain)."""
        barred = self._cannot_host_index.get(tp, frozenset())
        cordoned = self.cordoned_broker_ids
        if cordoned:
            partition = self.partitions_by_tp.get(tp)
            barred = barred | cordoned.difference(partition.replicas if partition is not None else ())
        return barred

    @cached_property
    def eligible_broker_ids(self) -> tuple[int, ...]:
        return tuple(sorted(b.id for b in self.brokers if b.eligible))

    @cached_property
    def _derived_from_brokers(self) -> dict[tuple, Any]:
        return {}

    def derive_from_brokers(self, key: tuple, compute: Callable[[tuple[Broker, ...]], T]) -> T:
        """`compute(self.brokers)`, made once per brokers tuple: kept with the cluster and carried
        to the next one when its brokers are the very same tuple (`with_topics`), as the other
        views of the brokers are. For what a batch would otherwise derive broker by broker,
        O(brokers) per batch. `key` names the computation and every argument it closes over;
        `compute` must be a pure function of the brokers and those arguments."""
        memo = self._derived_from_brokers
        if key not in memo:
            memo[key] = compute(self.brokers)
        return memo[key]

    def broker(self, broker_id: int) -> Broker | None:
        return self.brokers_by_id.get(broker_id)

    def is_alive(self, broker_id: int) -> bool:
        """A known broker that is alive (an unknown one is not)."""
        broker = self.brokers_by_id.get(broker_id)
        return broker is not None and broker.alive

    def partition(self, tp: TopicPartition) -> PartitionState | None:
        return self.partitions_by_tp.get(tp)

    def is_replica_online(self, partition: PartitionState, broker_id: int) -> bool:
        """The replica can be in sync: its broker is alive, Kafka does not list it offline, and its
        log dir (when known) is online. An offline replica can never rejoin the ISR as it is."""
        broker = self.broker(broker_id)
        if broker is None or not broker.alive or broker_id in partition.offline_replicas:
            return False
        path = partition.log_dir_of(broker_id)
        if path is None or not broker.log_dirs:
            return True
        return any(d.path == path and d.online for d in broker.log_dirs)

    def min_isr(self, topic: str) -> int:
        t = self.topics_by_name.get(topic)
        return t.min_insync_replicas if t else 1

    def partitions(self) -> Iterator[PartitionState]:
        for t in self.topics:
            yield from t.partitions

    def with_brokers(self, brokers: Iterable[Broker]) -> "Cluster":
        return self.with_topics(tuple(brokers), self.topics, ())

    def with_topics(self, brokers: tuple[Broker, ...], topics: tuple[Topic, ...],
                    touched: Iterable[str], replaced: Iterable[PartitionState] | None = None) -> "Cluster":
        """A new cluster of `brokers` and `topics`, where the topics not named in `touched` are
        this cluster's own (the same objects). The partition index, when this cluster has built
        it, is carried over and updated for the touched topics only: a batch that changes one
        partition must not rebuild an index of every partition (a million replicas).

        `replaced`: the caller knows that `topics` are this cluster's topics, by name and in
        order, and that each touched one holds the same partitions (keys, order) except these
        new `PartitionState`s: the index and the topics by name are then patched with them
        alone, O(replaced · log N), without comparing the touched topics partition by partition
        (the simulator's snapshot, whose topics never gain or lose a partition)."""
        cluster = Cluster(brokers=brokers, topics=topics)
        if brokers is self.brokers:  # what is derived from the brokers alone is carried over
            for name in ("brokers_by_id", "eligible_broker_ids", "_cannot_host_index", "cordoned_broker_ids",
                         "any_cannot_host", "_derived_from_brokers"):
                if name in self.__dict__:
                    cluster.__dict__[name] = self.__dict__[name]
        built = self.__dict__.get("partitions_by_tp")  # set by the cached property once built
        counted = self.__dict__.get("replica_count_by_broker")
        if replaced is not None:
            names = set(touched)
            by_name = self.__dict__.get("topics_by_name")
            if by_name is not None:
                carried = dict(by_name)
                for t in topics:
                    if t.name in names:
                        carried[t.name] = t
                cluster.__dict__["topics_by_name"] = carried
            if built is None:
                return cluster
            pairs = [(built.get(p.tp), p) for p in replaced]
        else:
            if built is None and counted is None:
                return cluster
            pairs = []
            for name in set(touched):
                old = self.topics_by_name.get(name)
                new = cluster.topics_by_name.get(name)
                old_parts = old.partitions if old is not None else ()
                new_parts = new.partitions if new is not None else ()
                if len(old_parts) == len(new_parts) and all(
                        a.partition == b.partition for a, b in zip(old_parts, new_parts)):
                    pairs += [(a, b) for a, b in zip(old_parts, new_parts) if a is not b]  # same partitions
                else:
                    pairs += [(a, None) for a in old_parts] + [(None, b) for b in new_parts]
        _patch_indexes(cluster, built, counted, pairs)
        return cluster

    def with_partitions(self, updated: Iterable[PartitionState]) -> "Cluster":
        """A new cluster in which the given partitions replace those with the same key; topics
        without a replaced partition are kept as they are (the same objects)."""
        by_tp = {p.tp: p for p in updated}
        if not by_tp:
            return self
        touched = {tp.topic for tp in by_tp}
        topics = tuple(
            Topic(t.name, tuple(by_tp.get(p.tp, p) for p in t.partitions), t.min_insync_replicas, t.topic_id)
            if t.name in touched else t
            for t in self.topics
        )
        return self.with_topics(self.brokers, topics, touched)


def _patch_indexes(cluster: Cluster, built, counted: Mapping[int, int] | None,
                   pairs: Iterable[tuple[PartitionState | None, PartitionState | None]]) -> None:
    """Give `cluster` the partition map `built` and the replica counts `counted` of the cluster
    it was made from, patched with each (old, new) partition pair (None: absent on that side)."""
    index = built.mutate() if built is not None else None
    counts = dict(counted) if counted is not None else None
    for a, b in pairs:
        if index is not None:
            if b is None:
                index.pop(a.tp, None)
            else:
                index[b.tp] = b
        if counts is not None and (a is None or b is None or a.replicas != b.replicas):
            for broker_id in a.replicas if a is not None else ():
                counts[broker_id] -= 1
            for broker_id in b.replicas if b is not None else ():
                counts[broker_id] = counts.get(broker_id, 0) + 1
    if index is not None:
        cluster.__dict__["partitions_by_tp"] = index.finish()
    if counts is not None:
        cluster.__dict__["replica_count_by_broker"] = {b: n for b, n in counts.items() if n}


def compute_replaced_partitions(before: Cluster, after: Cluster) -> set[TopicPartition]:
    """The partitions whose `PartitionState` object differs between two clusters (present in
    only one included), and every partition of a topic whose min.insync.replicas differs: what
    a step decided against `before` may have read differently in `after`. A topic that is the
    same object in both is skipped whole (events and `with_partitions` keep the topics they do
    not touch), so the cost is the topics compared by identity plus the partitions of the
    replaced ones."""
    if after.topics is before.topics:
        return set()
    old_topics = before.topics_by_name
    new_topics = after.topics_by_name
    replaced: set[TopicPartition] = set()
    for name, topic in new_topics.items():
        old = old_topics.get(name)
        if old is topic:
            continue
        if old is None or old.min_insync_replicas != topic.min_insync_replicas:
            replaced.update(p.tp for p in topic.partitions)
            if old is not None:
                replaced.update(p.tp for p in old.partitions)
            continue
        known = {p.partition: p for p in old.partitions}
        for p in topic.partitions:
            if known.pop(p.partition, None) is not p:
                replaced.add(p.tp)
        replaced.update(TopicPartition(name, number) for number in known)
    for name, old in old_topics.items():
        if name not in new_topics:
            replaced.update(p.tp for p in old.partitions)
    return replaced
