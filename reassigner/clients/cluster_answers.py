"""The typed answer of one poll of the Admin API, merged (pure): what `ClusterAdmin` returns.

A `ClusterObservation` holds brokers (rack, host, port, fenced), topics (id,
min.insync.replicas), partitions (replicas, ISR, leader, leader epoch, adding/removing of an
ongoing reassignment, offline replicas, log dir per replica, size) and the log dirs of every
broker (online, sizes, the replicas and future replicas in them). `compute_observation` merges
the separate answers into one; `compute_log_dirs_hint` tells when the metadata suggests the dirs
changed (a poll reads them then, and otherwise only every few seconds: they are half of a poll's
cost).

It is the vocabulary shared by the adapter that reads Kafka (`reassigner.clients.kafka_admin`)
and the watcher that turns two polls into events (`reassigner.edge.observation`), so it sits
below both and imports nothing of the product.

INVARIANTS
- Pure: no I/O, no clock, no client library.
- Volatile numbers (partition and replica sizes, offset lags, a dir's free bytes) are carried
  but never compared (`field(compare=False)`): they change on every poll of a busy cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping, Sequence

KAFKA_STORAGE_ERROR = "KAFKA_STORAGE_ERROR"

PartitionKey = tuple[str, int]
LogDirKey = tuple[int, str]


@dataclass(frozen=True)
class BrokerObservation:
    broker_id: int
    rack: str | None
    host: str | None
    port: int | None
    fenced: bool
    log_dirs: tuple[str, ...] = ()


@dataclass(frozen=True, order=True)
class ReplicaInDir:
    topic: str
    partition: int
    is_future: bool = False
    size_bytes: int = field(default=0, compare=False)
    offset_lag: int = field(default=0, compare=False)


@dataclass(frozen=True)
class LogDirObservation:
    broker_id: int
    path: str
    online: bool
    error: str | None = None
    replicas: tuple[ReplicaInDir, ...] = ()
    total_bytes: int | None = field(default=None, compare=False)
    usable_bytes: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class PartitionObservation:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int | None
    leader_epoch: int = -1
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()
    offline_replicas: tuple[int, ...] = ()
    log_dirs: tuple[str | None, ...] = ()
    size_bytes: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class TopicObservation:
    name: str
    topic_id: str | None
    partition_count: int
    replication_factor: int
    min_insync_replicas: int | None = None


@dataclass(frozen=True)
class ClusterObservation:
    """One poll of the cluster. The mappings are never mutated after construction."""

    brokers: Mapping[int, BrokerObservation] = field(default_factory=dict)
    topics: Mapping[str, TopicObservation] = field(default_factory=dict)
    partitions: Mapping[PartitionKey, PartitionObservation] = field(default_factory=dict)
    log_dirs: Mapping[LogDirKey, LogDirObservation] = field(default_factory=dict)


EMPTY = ClusterObservation()


# --- building an observation from the Admin API's answers -----------------------------------------


def compute_observation(
    brokers: Iterable[BrokerObservation],
    partitions: Iterable[PartitionObservation],
    topic_ids: Mapping[str, str | None],
    reassignments: Mapping[PartitionKey, tuple[Sequence[int], Sequence[int]]],
    log_dirs: Iterable[LogDirObservation],
    min_insync_replicas: Mapping[str, int | None],
) -> ClusterObservation:
    """Merge one poll's answers: reassignments give adding/removing (kept within the replicas),
    log dirs give each replica's
    dir and the partition's size (the leader's replica; the largest one when leaderless), the
    brokers get their dir paths, topics get counts and min ISR."""
    dirs_by_key = {(d.broker_id, d.path): d for d in log_dirs}
    # (topic, partition) → broker → (dir, size) of its replica; one lookup per partition below
    # (this merge runs on every poll: at 10,000 partitions it is a sizeable part of one).
    hosted_by_partition: dict[PartitionKey, dict[int, tuple[str, int]]] = {}
    paths_of_broker: dict[int, list[str]] = {}
    for (broker_id, path), log_dir in dirs_by_key.items():
        paths_of_broker.setdefault(broker_id, []).append(path)
        for replica in log_dir.replicas:
            if replica.is_future:
                continue
            hosted_by_partition.setdefault((replica.topic, replica.partition), {})[broker_id] = (
                path, replica.size_bytes)

    merged: dict[PartitionKey, PartitionObservation] = {}
    for p in partitions:
        key = (p.topic, p.partition)
        adding, removing = reassignments.get(key, ((), ()))
        if adding or removing:
            # The metadata and the reassignment list come from different brokers and may disagree
            # for a moment; keep the model's invariant (adding, removing ⊆ replicas).
            adding = tuple(b for b in adding if b in p.replicas)
            removing = tuple(b for b in removing if b in p.replicas)
        hosted = hosted_by_partition.get(key)
        replica_dirs: tuple[str | None, ...] = ()
        size = None
        if hosted:
            replica_dirs = tuple(hosted[b][0] if b in hosted else None for b in p.replicas)
            if not any(d is not None for d in replica_dirs):
                replica_dirs = ()
            if p.leader in hosted:
                size = hosted[p.leader][1]
            else:
                size = max((hosted[b][1] for b in p.replicas if b in hosted), default=None)
        merged[key] = PartitionObservation(
            p.topic, p.partition, p.replicas, p.isr, p.leader, p.leader_epoch, tuple(adding),
            tuple(removing), p.offline_replicas, replica_dirs, size)

    broker_map = {
        b.broker_id: replace(b, log_dirs=tuple(sorted(paths_of_broker.get(b.broker_id, b.log_dirs))))
        for b in brokers
    }
    by_topic: dict[str, list[PartitionObservation]] = {}
    for p in merged.values():
        by_topic.setdefault(p.topic, []).append(p)
    topics = {
        name: TopicObservation(
            name=name,
            topic_id=topic_ids.get(name),
            partition_count=len(parts),
            replication_factor=compute_replication_factor(parts),
            min_insync_replicas=min_insync_replicas.get(name),
        )
        for name, parts in sorted(by_topic.items())
    }
    for name, topic_id in topic_ids.items():  # a topic whose partitions are not described yet
        if name not in topics:
            topics[name] = TopicObservation(name, topic_id, 0, 0, min_insync_replicas.get(name))
    return ClusterObservation(
        brokers=dict(sorted(broker_map.items())),
        topics=topics,
        partitions={key: merged[key] for key in sorted(merged)},
        log_dirs=dict(sorted(dirs_by_key.items())),
    )


def compute_log_dirs_hint(previous: ClusterObservation, brokers: Iterable[BrokerObservation],
                          partitions: Iterable[PartitionObservation] = ()) -> str | None:
    """Why a poll must read the log dirs although they are not due, or None when the previous
    poll's dirs still describe the cluster as far as the metadata can tell. A dir can change
    unseen by the metadata only by failing empty, by moving a replica between dirs of one
    broker (a move in flight shows as a future replica), by a broker's restart (fencing) or by
    a replica being created (a new partition, a reassignment in flight)."""
    if not previous.brokers:
        return "no earlier poll"
    live = {b.broker_id for b in brokers if not b.fenced}
    if live != {b.broker_id for b in previous.brokers.values() if not b.fenced}:
        return "the live brokers changed"
    if any(r.is_future for d in previous.log_dirs.values() for r in d.replicas):
        return "a replica is moving between dirs"
    if any(p.adding or p.removing for p in previous.partitions.values()):
        return "a reassignment is in flight"  # its new replicas' dirs appear as they are created
    for p in partitions:
        before = previous.partitions.get((p.topic, p.partition))
        if before is None or before.replicas != p.replicas or before.offline_replicas != p.offline_replicas:
            return f"the replicas of {p.topic}-{p.partition} changed"
    return None


def compute_replication_factor(partitions: Sequence[PartitionObservation]) -> int:
    """Replicas of partition 0 outside a reassignment (its target: replicas minus removing)."""
    first = min(partitions, key=lambda p: p.partition, default=None)
    if first is None:
        return 0
    return len(first.replicas) - len(first.removing)
