"""The events that tell what changed between two polls of the cluster (pure).

A `ClusterObservation` (`runtime.clients.cluster_observation`) is one poll's answer of the Admin
API, merged.

`compute_events(previous, current, now_ms)` gives the state-carrying events for what changed, as
`(topic_suffix, key, record)` with `record` ready for `schemas.codec.encode`:

    broker new / fenced / unfenced / gone       BrokerMembership  on broker-membership
    topic new / deleted / re-created /          TopicState        on topic-state
      min ISR, partition count or RF changed
    log dir new / online↔offline / cordoned     LogDirState       on disk-failures
      or not / replicas (topic, partition,
      is_future) changed / a copy in flight
      into it grew
    partition replicas / ISR / leader / epoch   PartitionState    on isr-changes
      / adding / removing / offline / log dirs

`compute_snapshot_events(current, snapshot_id, now_ms)` gives a START marker, the state of every
broker, topic, log dir and partition carrying the snapshot id, and an END marker with the counts
and the inventory (every topic with its partition count, every broker id): the pipeline drops
what is absent from it and was not observed after the START (a deletion event that was lost),
see `handlers.events`. A big cluster's snapshot is spread over several polls (the
watcher's SLICED SNAPSHOTS): `compute_snapshot_start`, then `compute_snapshot_slice` of some
partitions per poll, each as that poll shows it, then `compute_snapshot_end` with the inventory
of the last poll and the START's time — the same guarantee, since an entity created after the
START is in that inventory and one changed after it carries a later event time.

INVARIANTS
- Pure: no I/O, no clock (`now_ms` is an argument), no randomness (message ids are UUID-5 of
  the message's topic, key, time and snapshot id, so a duplicate of one message shares its id).
- Volatile numbers — partition and replica sizes, offset lags, a dir's free bytes — are carried
  but never compared (`field(compare=False)`): they change on every poll of a busy cluster and
  would turn each poll into thousands of events. One exception, bounded by what moves: a dir
  is told again when a replica being copied into it changed size (a future replica, or one a
  reassignment adds to its broker: `compute_changed_log_dirs`, COPIES IN FLIGHT), so that the
  movement's progress counts the bytes of a step as they copy. Snapshots carry their current values, and
  they alone carry traffic rates (the watcher's TRAFFIC): a change event's rates are null.
- The pipeline's reader (`handlers.events`) fed `compute_events(previous, current, t)` gives
  exactly `compute_cluster(current)` from `compute_cluster(previous)`, but for what it keeps by
  design (a min ISR or a replica's dir the poll does not tell), and `compute_events(x, x, t)`
  is empty (no event when nothing changed); both are property-tested
  (tests/edge/test_observation_events.py).
- A topic whose id changed was deleted and re-created between the polls: its TopicState carries
  the new id and every one of its partitions is told, also those that look unchanged.
- Order within one result: brokers, then new topics, log dirs, partitions, and deleted topics
  last, so a reader never sees a partition of a topic or broker it has not heard of.
- A deleted topic is told by one TopicState(deleted=true); its partitions get no events.
  An unregistered broker is told by one BrokerMembership(UNREGISTERED); its dirs get no events.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import TYPE_CHECKING

from runtime.clients.cluster_merge import (
    compute_changed_log_dirs,
    compute_changed_partitions,
    compute_partition_sizes,
)
from runtime.clients.cluster_observation import (
    BrokerObservation,
    ClusterObservation,
    LogDirObservation,
    PartitionObservation,
    TopicObservation,
)
from reassigner.edge.traffic import PartitionTraffic, TrafficWindow, compute_partition_traffic
from schemas.codec import partition_key
from schemas.loader import CURRENT_SCHEMA_VERSION

if TYPE_CHECKING:
    from planning.model import Cluster, KafkaFacts

MESSAGE_ID_NAMESPACE = uuid.UUID("6f0c1c9e-3a55-4d1e-9a57-2f7f4c1e0b5a")

Event = tuple[str, str, dict]
"""(topic suffix, Kafka message key, record dict)."""


def compute_broker_state(broker: BrokerObservation | None, previous: BrokerObservation | None) -> str:
    """BrokerState symbol: UNREGISTERED when gone; a fenced broker never seen before has only
    REGISTERED; FENCED when it was seen before (or in a snapshot, where history is unknown)."""
    if broker is None:
        return "UNREGISTERED"
    if not broker.fenced:
        return "UNFENCED"
    return "REGISTERED" if previous is None else "FENCED"


# --- events ----------------------------------------------------------------------------------------


def compute_events(previous: ClusterObservation, current: ClusterObservation, now_ms: int) -> list[Event]:
    """State-carrying events for everything that differs between two polls (see module doc)."""
    events: list[Event] = []
    for broker_id in sorted(previous.brokers.keys() | current.brokers.keys()):
        before, after = previous.brokers.get(broker_id), current.brokers.get(broker_id)
        if before == after:
            continue
        if after is None:
            events.append(broker_event(before, "UNREGISTERED", now_ms))  # type: ignore[arg-type]
        else:
            events.append(broker_event(after, compute_broker_state(after, before), now_ms))

    deleted_topics: list[TopicObservation] = []
    for name in sorted(previous.topics.keys() | current.topics.keys()):
        before, after = previous.topics.get(name), current.topics.get(name)
        if before == after:
            continue
        if after is None:
            deleted_topics.append(before)  # type: ignore[arg-type]
        else:
            events.append(topic_event(after, now_ms))

    # A vanished dir is told by its broker's event (unregistered or new dir list).
    events.extend(log_dir_event(current.log_dirs[key], now_ms)
                  for key in sorted(compute_changed_log_dirs(previous, current)))

    # A topic re-created between two polls (a new topic id) is a new topic: all its partitions
    # are told, also those that happen to look as the old incarnation's did.
    recreated = {name for name, after in current.topics.items()
                 if (before := previous.topics.get(name)) is not None
                 and before.topic_id and after.topic_id and before.topic_id != after.topic_id}
    changed = compute_changed_partitions(previous, current)
    if changed is None:
        candidates = current.partitions.keys()
    else:  # merged from `previous`: only these partitions may differ (the others are its objects)
        candidates = sorted(changed.union(*(((name, n) for n in range(current.topics[name].partition_count))
                                            for name in recreated)))
    before_partitions, after_partitions = previous.partitions, current.partitions
    for key in candidates:
        after = after_partitions.get(key)
        if after is None:
            continue
        if key[0] in recreated or before_partitions.get(key) != after:
            events.append(partition_event(after, now_ms))
    # Partitions only vanish with their topic (Kafka cannot shrink a topic): no event for them.
    events.extend(topic_event(t, now_ms, deleted=True) for t in deleted_topics)
    return events


def compute_snapshot_events(current: ClusterObservation, snapshot_id: str, now_ms: int,
                            traffic: TrafficWindow | None = None, kafka: KafkaFacts | None = None) -> list[Event]:
    """START marker, every broker, topic, log dir and partition, END marker with counts: a
    snapshot in one poll (`compute_snapshot_start` + `_slice` of every partition + `_end`)."""
    return [*compute_snapshot_start(current, snapshot_id, now_ms, kafka),
            *compute_snapshot_slice(current, snapshot_id, current.partitions, now_ms, traffic),
            *compute_snapshot_end(current, snapshot_id, now_ms, now_ms, len(current.partitions), dirs=False)]


def compute_snapshot_start(current: ClusterObservation, snapshot_id: str, now_ms: int,
                           kafka: KafkaFacts | None = None) -> list[Event]:
    """A snapshot's START marker (with which Kafka the cluster runs, when known) and the state of
    every broker, topic and log dir (few)."""
    events = [snapshot_marker(snapshot_id, "START", now_ms, now_ms, kafka=kafka)]
    events.extend(broker_event(b, compute_broker_state(b, b), now_ms, snapshot_id) for b in current.brokers.values())
    events.extend(topic_event(t, now_ms, snapshot_id=snapshot_id) for t in current.topics.values())
    events.extend(log_dir_event(d, now_ms, snapshot_id) for d in current.log_dirs.values())
    return events


def compute_snapshot_slice(current: ClusterObservation, snapshot_id: str, keys, now_ms: int,
                           traffic: TrafficWindow | None = None) -> list[Event]:
    """The state of the partitions named, as `current` shows them, with their sizes as its dirs
    tell them (the merge keeps a partition's size from its last change) and their rates over
    `traffic`'s window (`reassigner.edge.traffic`); a partition gone since the snapshot started
    is skipped: its topic's deletion told it."""
    partitions = current.partitions
    present = [key for key in keys if key in partitions]
    sizes = compute_partition_sizes(current, present)
    return [partition_event(replace(partitions[key], size_bytes=sizes[key]), now_ms, snapshot_id,
                            None if traffic is None else compute_partition_traffic(traffic, key, sizes[key]))
            for key in present]


def compute_snapshot_end(current: ClusterObservation, snapshot_id: str, started_ms: int, now_ms: int,
                         partitions_told: int, dirs: bool = True) -> list[Event]:
    """The END marker: its inventory is `current`'s (the poll that ends the snapshot) and its
    `started_at` the START's poll time, so the pipeline drops only what is absent now and was not
    observed since the snapshot began (`handlers.events`). With `dirs` (a sliced snapshot) the
    log dirs are told again first: a dir's event gives its replicas their dir only in partitions
    the pipeline knows, and a pipeline that started from nothing knows them only once the slices
    told them."""
    told = [log_dir_event(d, now_ms, snapshot_id) for d in current.log_dirs.values()] if dirs else []
    return [*told, snapshot_marker(snapshot_id, "END", now_ms, started_ms, ended_at=now_ms,
                                   counts=(len(current.brokers), len(current.topics), partitions_told,
                                           len(current.log_dirs)),
                                   inventory=current)]


def _header(suffix: str, key: str, now_ms: int, snapshot_id: str | None) -> dict:
    message_id = uuid.uuid5(MESSAGE_ID_NAMESPACE, f"{suffix}|{key}|{now_ms}|{snapshot_id}")
    return {"schema_version": CURRENT_SCHEMA_VERSION, "event_time": now_ms,
            "id": str(message_id), "key": key}


def broker_event(broker: BrokerObservation, state: str, now_ms: int,
                 snapshot_id: str | None = None) -> Event:
    key = str(broker.broker_id)
    gone = state == "UNREGISTERED"
    record = _header("broker-membership", key, now_ms, snapshot_id) | {
        "snapshot_id": snapshot_id,
        "broker_id": broker.broker_id,
        "rack": broker.rack,
        "host": None if gone else broker.host,
        "port": None if gone else broker.port,
        "state": state,
        "log_dirs": [] if gone else list(broker.log_dirs),
    }
    return ("broker-membership", key, record)


def topic_event(topic: TopicObservation, now_ms: int, deleted: bool = False,
                snapshot_id: str | None = None) -> Event:
    record = _header("topic-state", topic.name, now_ms, snapshot_id) | {
        "snapshot_id": snapshot_id,
        "topic": topic.name,
        "topic_id": topic.topic_id,
        "deleted": deleted,
        "partition_count": topic.partition_count,
        "replication_factor": topic.replication_factor,
        "min_insync_replicas": topic.min_insync_replicas,
    }
    return ("topic-state", topic.name, record)


def log_dir_event(log_dir: LogDirObservation, now_ms: int, snapshot_id: str | None = None) -> Event:
    key = str(log_dir.broker_id)
    replicas = log_dir.replica_list
    record = _header("disk-failures", f"{key}:{log_dir.path}", now_ms, snapshot_id) | {
        "key": key,
        "snapshot_id": snapshot_id,
        "broker_id": log_dir.broker_id,
        "path": log_dir.path,
        "online": log_dir.online,
        "error": log_dir.error,
        "total_bytes": log_dir.total_bytes,
        "usable_bytes": log_dir.usable_bytes,
        "cordoned": log_dir.cordoned,
        "replicas": [
            {"topic": topic, "partition": partition, "size_bytes": size, "offset_lag": lag, "is_future": is_future}
            for topic, partition, is_future, size, lag in zip(replicas.topics, replicas.partitions, replicas.futures,
                                                              replicas.sizes, replicas.lags)
        ],
    }
    return ("disk-failures", key, record)


def partition_event(p: PartitionObservation, now_ms: int, snapshot_id: str | None = None,
                    traffic: PartitionTraffic | None = None) -> Event:
    """A PartitionState; its rates are those of a snapshot's TRAFFIC window, None elsewhere."""
    key = partition_key(p.topic, p.partition)
    record = _header("isr-changes", key, now_ms, snapshot_id) | {
        "snapshot_id": snapshot_id,
        "topic": p.topic,
        "partition": p.partition,
        "replicas": list(p.replicas),
        "isr": list(p.isr),
        "leader": p.leader,
        "leader_epoch": p.leader_epoch,
        "adding": list(p.adding),
        "removing": list(p.removing),
        "offline_replicas": list(p.offline_replicas),
        "size_bytes": p.size_bytes,
        "log_dirs": list(p.log_dirs),
        "bytes_in_per_sec": None if traffic is None else traffic.bytes_in_per_sec,
        "bytes_out_per_sec": None if traffic is None else traffic.bytes_out_per_sec,
        "traffic_window_ms": None if traffic is None else traffic.window_ms,
        "eligible_leader_replicas": list(p.eligible_leaders),
        "last_known_elr": list(p.last_known_elr),
    }
    return ("isr-changes", key, record)


def snapshot_marker(snapshot_id: str, phase: str, now_ms: int, started_at: int,
                    ended_at: int | None = None, counts: tuple[int, int, int, int] = (0, 0, 0, 0),
                    inventory: ClusterObservation | None = None, kafka: KafkaFacts | None = None) -> Event:
    """A START or END marker; an END marker given the poll's observation lists its inventory;
    `kafka` says which Kafka the cluster runs."""
    brokers, topics, partitions, log_dirs = counts
    record = _header("snapshots", f"{snapshot_id}:{phase}", now_ms, snapshot_id) | {
        "key": snapshot_id,
        "snapshot_id": snapshot_id,
        "phase": phase,
        "started_at": started_at,
        "ended_at": ended_at,
        "broker_count": brokers,
        "topic_count": topics,
        "partition_count": partitions,
        "log_dir_count": log_dirs,
        "has_inventory": inventory is not None,
        "topics": [] if inventory is None else [
            {"name": t.name, "partition_count": t.partition_count} for t in inventory.topics.values()],
        "broker_ids": [] if inventory is None else sorted(inventory.brokers),
        "kafka_release": None if kafka is None else kafka.release,
        "kafka_metadata_level": None if kafka is None else kafka.metadata_level,
        "kafka_capabilities": [] if kafka is None else list(kafka.capabilities),
    }
    return ("snapshots", snapshot_id, record)


# --- the reader's side: a view that follows the events ---------------------------------------------


def compute_cluster(observation: ClusterObservation) -> "Cluster":
    """The planning model of an observation: alive = registered and unfenced, nothing draining
    (a decommission is the pipeline's knowledge, not the cluster's), min ISR 1 where unknown."""
    from planning.model import Broker, Cluster, LogDir, PartitionState, Topic, TopicPartition, compute_reported_log_dir

    adding_to: dict[int, set[TopicPartition]] = {}  # broker → the partitions being copied onto it
    for p in observation.partitions.values():
        for b in p.adding:
            adding_to.setdefault(b, set()).add(TopicPartition(p.topic, p.partition))
    dirs_of: dict[int, list[LogDir]] = {}
    for (broker_id, _), d in observation.log_dirs.items():
        dirs_of.setdefault(broker_id, []).append(compute_reported_log_dir(
            d.path, d.online, d.total_bytes, d.usable_bytes,
            ((TopicPartition(r.topic, r.partition), r.size_bytes, r.is_future) for r in d.replicas),
            adding_to.get(broker_id, ()), d.cordoned))
    brokers = tuple(Broker(b.broker_id, b.rack, alive=not b.fenced, draining=False,
                           log_dirs=tuple(dirs_of.get(b.broker_id, ())))
                    for b in observation.brokers.values())
    parts_of: dict[str, list[PartitionState]] = {}
    for p in observation.partitions.values():
        parts_of.setdefault(p.topic, []).append(PartitionState(
            p.topic, p.partition, p.replicas, p.isr, p.leader, p.size_bytes, p.log_dirs,
            p.adding, p.removing, p.offline_replicas, p.leader_epoch))
    topics = tuple(Topic(t.name, tuple(sorted(parts_of.get(t.name, ()), key=lambda p: p.partition)),
                         t.min_insync_replicas if t.min_insync_replicas is not None else 1, t.topic_id)
                   for t in observation.topics.values())
    return Cluster(brokers=brokers, topics=topics)
