"""Apply the watcher's state-carrying events to the cluster model.

Events arrive collapsed to the latest per key, ordered brokers → topics → log dirs → partitions
(→ snapshot markers), so a partition event may name a broker or topic the same batch introduces.
`compute_cluster_after_events` folds them into a new `Cluster` and reports what changed, for the
triggers (membership, disks, ISR alerts) to react to.

RULES:
- BrokerMembership: UNFENCED and DRAINING mean alive; REGISTERED (known, not unfenced yet),
  FENCED and UNREGISTERED mean not alive — but a broker first seen REGISTERED did not go down (it
  is joining: KRaft keeps a new broker fenced for a moment), so it raises no `went_down`; UNKNOWN
  (a symbol of a later schema) changes nothing but the rack and dirs.
  `draining` stays set once set (a decommission is ours; the watcher does not report it), or is
  set by a DRAINING state. The dir list (paths) keeps the health and usage of known dirs; an
  empty list keeps the dirs known. An UNREGISTERED broker that holds no replica after the batch
  is forgotten (it left the cluster, e.g. after a decommission).
- What a broker's failed dirs held (`Broker.cannot_host`, set by the disk failure trigger) is
  kept until the broker shows no offline dir: the dir back online or gone from its list, which
  Kafka allows only through a restart, and a restart is what makes Kafka forget them too. Being
  seen down and up is not enough: a broker fenced for a missed heartbeat did not restart.
- TopicState: sets `min.insync.replicas` (null keeps it); `deleted` drops the topic and its
  partitions (and partition events for it later in the same batch are ignored). A topic id other
  than the stored one means the topic was deleted and re-created between two polls (one event
  tells it): the old incarnation's partitions are dropped (`EventEffects.topics_recreated`, its
  reassignments go with it) and the new one's partition events follow in the same batch.
- LogDirState: sets the dir's online flag, usage and cordon (false from watchers before schema
  set 11, and where Kafka has no cordons). A broker not known yet becomes known and not alive,
  as by REGISTERED: its membership event says when it is up, also when its dirs arrived first
  (another topic, read into an earlier batch). Every (non-future) replica it lists gets that dir
  in its partition's `log_dirs`. The sizes of the copies in flight into the dir (its
  future replicas, its replicas of partitions whose `adding` names the broker) are kept in
  `LogDir.copying_bytes`, what the movement's progress counts of a step in flight. An offline dir lists no replicas: partitions keep
  pointing at it, which is what makes their replicas offline.
- PartitionState: replaces the partition, unless it is stale (a leader epoch lower than the one
  stored). An event without log dirs keeps the dirs known per broker; its traffic rates (a
  snapshot's sample) join the smoothed means (`planning.load.smooth_rate`), and an event without
  them keeps the means. A partition of an unknown
  topic creates the topic (min ISR 1 until a TopicState says otherwise). Every one applied,
  whether it changed the partition or not (a snapshot tells it again), is a view of the
  partition polled at its event time (`EventEffects.viewed`: whether a step in flight can be
  judged from it, `planning.movement.completion` INTERRUPTED).
- Observation times (`ControllerState.observed_at`): every applied event raises the time of
  what it is about to its event time (TopicState and PartitionState → the topic; BrokerMembership
  and LogDirState → the broker). A snapshot's own events carry its poll time.
- SnapshotMarker END with an inventory (every topic with its partition count and every broker
  id one poll saw, at time T = `started_at`) reconciles, after the batch's other events: what is
  absent from the inventory and was **not observed after T** is gone — its deletion event was
  lost (the view is never wrong longer than one snapshot period):
    a topic          → deleted, exactly as by TopicState(deleted=true);
    a broker         → UNREGISTERED, exactly as by a BrokerMembership event at time T;
    partitions ≥ the inventory's count of a topic not observed after T → dropped (a topic
                       re-created smaller; a count of 0 means "not described yet": kept).
  Why "not observed after T" and not just "absent": the snapshot's events span several Kafka
  topics and batches and are collapsed with newer change events, so the marker may be applied
  before or after changes newer than its poll. A change observed after T carries a later event
  time, so an entity created (or re-created) after the poll is never dropped; an entity the poll
  saw is in the inventory whatever the order. What reconciliation removed is reported in
  `EventEffects.reconciled` (a `SnapshotReconciled` alert). A START marker, or an END marker
  without inventory (a version 1 writer), changes nothing.
- A record missing a field it needs, or one Kafka could never have produced (a negative id, a
  partition -1, duplicate replicas, a leader epoch far beyond the known one:
  `handlers.event_checks`), is rejected (reported as a BadEvent, the batch goes on) and changes
  nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping

from handlers.event_checks import compute_event_problem
from state.model import ObservationTimes
from planning.load import smooth_rate
from planning.movement.isr_shrinks import compute_isr_losses, is_moving
from planning.model import (Broker, Cluster, KafkaFacts, LogDir, PartitionState, Topic, TopicPartition,
                            compute_reported_log_dir)

ALIVE_STATES = ("UNFENCED", "DRAINING")
DOWN_STATES = ("REGISTERED", "FENCED", "UNREGISTERED")


@dataclass(frozen=True)
class Reconciliation:
    """What one snapshot's inventory removed (see the module rules).

    snapshot_id: the snapshot. observed_at_ms: its poll time T.
    topics / partitions / brokers: what was absent from it and not observed after T (brokers
        that were already down and still hold replicas are not listed: nothing changes for them).
    """

    snapshot_id: str
    observed_at_ms: int
    topics: tuple[str, ...] = ()
    partitions: tuple[TopicPartition, ...] = ()
    brokers: tuple[int, ...] = ()


@dataclass
class EventEffects:
    """What the events of one batch changed, for the triggers.

    came_up: broker id -> event time (ms) of brokers that became alive (new, or back from
        fenced/unregistered).
    went_down: broker id -> event time (ms) of brokers that stopped being alive.
    dirs_failed / dirs_restored: (broker, path) of dirs that went offline / came back online.
    dirs_changed: brokers with a dir added, removed, or gone offline or online.
    topics_deleted: topics dropped.
    topics_recreated: topics whose old incarnation was dropped for a new topic id.
    touched: partitions whose state changed (for UNDER-min-ISR / offline alerts).
    rejected: (schema, key, reason) of events that could not be applied.
    stale: partition events ignored for a lower leader epoch.
    first_view: the cluster knew no broker before this batch (the controller's first view).
    reconciled: what snapshot inventories removed in this batch (their deletions are also in
        `topics_deleted` / `went_down` like those of explicit events).
    viewed: partition -> the latest event time (the watcher's poll time) of the PartitionState
        events applied for it, changed or not.
    kafka: which Kafka the cluster runs, from the batch's newest snapshot marker that says
        (schema set 9 watchers); None when none did.
    isr_lost: (partition, brokers, event time ms) of brokers that fell out of the ISR of a
        partition Kafka showed no reassignment of, before or after (`planning.movement.
        isr_shrinks`); whether the product or another tool moves it is the handler's to tell.
    canary_samples: the batch's CanarySample records, in order: they change no cluster fact,
        the adaptive throttle's handler folds them (`handlers.throttle`).
    """

    came_up: dict[int, int] = field(default_factory=dict)
    went_down: dict[int, int] = field(default_factory=dict)
    dirs_failed: list[tuple[int, str]] = field(default_factory=list)
    dirs_restored: list[tuple[int, str]] = field(default_factory=list)
    dirs_changed: set[int] = field(default_factory=set)
    topics_deleted: list[str] = field(default_factory=list)
    topics_recreated: list[str] = field(default_factory=list)
    touched: set[TopicPartition] = field(default_factory=set)
    rejected: list[tuple[str, str, str]] = field(default_factory=list)
    stale: int = 0
    first_view: bool = False
    kafka: KafkaFacts | None = None
    reconciled: list[Reconciliation] = field(default_factory=list)
    viewed: dict[TopicPartition, int] = field(default_factory=dict)
    isr_lost: list[tuple[TopicPartition, tuple[int, ...], int | None]] = field(default_factory=list)
    canary_samples: list[Mapping[str, Any]] = field(default_factory=list)


class _WorkingCluster:
    """A mutable copy of the cluster for the length of one batch (never escapes this module)."""

    def __init__(self, cluster: Cluster, observed_at: ObservationTimes) -> None:
        self.original = cluster
        self.original_times = observed_at
        self.topic_times: dict[str, int] = dict(observed_at.topics)
        self.broker_times: dict[int, int] = dict(observed_at.brokers)
        self.brokers: dict[int, Broker] = dict(cluster.brokers_by_id)
        self.topics: dict[str, Topic] = dict(cluster.topics_by_name)
        self.min_isr: dict[str, int] = {t.name: t.min_insync_replicas for t in cluster.topics}
        self.topic_ids: dict[str, str | None] = {t.name: t.topic_id for t in cluster.topics}
        self.partitions: dict[str, dict[int, PartitionState]] = {}  # only topics changed
        self.deleted: set[str] = set()
        self.unregistered: set[int] = set()

    def topic_partitions(self, topic: str) -> dict[int, PartitionState]:
        if topic not in self.partitions:
            existing = self.topics.get(topic)
            self.partitions[topic] = {p.partition: p for p in existing.partitions} if existing else {}
            self.min_isr.setdefault(topic, 1)
        return self.partitions[topic]

    def partition(self, tp: TopicPartition) -> PartitionState | None:
        if tp.topic in self.partitions:
            return self.partitions[tp.topic].get(tp.partition)
        return self.original.partition(tp) if tp.topic in self.topics else None

    def live_topics(self) -> list[str]:
        return sorted((set(self.topics) | set(self.partitions)) - self.deleted)

    def held_brokers(self) -> set[int]:
        return {b for parts in self._all_partitions() for p in parts for b in p.replicas}

    def build_times(self, cluster: Cluster) -> ObservationTimes:
        """The observation times of what `cluster` still holds."""
        topics = {t: at for t, at in self.topic_times.items() if t in cluster.topics_by_name}
        brokers = {b: at for b, at in self.broker_times.items() if b in cluster.brokers_by_id}
        if topics == self.original_times.topics and brokers == self.original_times.brokers:
            return self.original_times
        return ObservationTimes(topics=topics, brokers=brokers)

    def build(self) -> Cluster:
        # Walking every replica is paid only in a batch that unregistered a broker.
        held = self.held_brokers() if self.unregistered else set()
        for broker_id in self.unregistered:
            if broker_id not in held and broker_id in self.brokers and not self.brokers[broker_id].alive:
                del self.brokers[broker_id]
        # Every topic event (a deletion aside) goes through `topic_partitions`: with none, every
        # topic is the original one, and a Tick or a broker-only batch walks no topic.
        topics = self._build_topics() if self.partitions or self.deleted else self.original.topics
        for broker_id, broker in list(self.brokers.items()):
            if broker.cannot_host and all(d.online for d in broker.log_dirs):
                self.brokers[broker_id] = replace(broker, cannot_host=frozenset())
        brokers = tuple(self.brokers[b] for b in sorted(self.brokers))
        if brokers == self.original.brokers:
            # The same brokers (compared by identity first): the very same tuple, so what the
            # cluster and the stepping memo derive from the brokers alone carries over (a batch
            # of partition events otherwise re-derives it per broker, O(brokers) per batch).
            brokers = self.original.brokers
            if topics == self.original.topics:
                return self.original
        touched = set(self.partitions) | self.deleted
        touched |= {t.name for t in topics if t is not self.original.topics_by_name.get(t.name)}
        return self.original.with_topics(brokers, topics, touched)

    def _build_topics(self) -> tuple[Topic, ...]:
        topics = []
        for name in sorted(set(self.topics) | set(self.partitions)):
            if name in self.deleted:
                continue
            if name in self.partitions:
                parts = self.partitions[name]
                topics.append(Topic(name, tuple(parts[i] for i in sorted(parts)), self.min_isr[name],
                                    self.topic_ids.get(name)))
            else:
                old = self.topics[name]
                if (old.min_insync_replicas, old.topic_id) != (self.min_isr[name], self.topic_ids.get(name)):
                    old = replace(old, min_insync_replicas=self.min_isr[name], topic_id=self.topic_ids.get(name))
                topics.append(old)
        return tuple(topics)

    def _all_partitions(self) -> Iterable[Iterable[PartitionState]]:
        for name, topic in self.topics.items():
            if name not in self.deleted:
                yield self.partitions[name].values() if name in self.partitions else topic.partitions
        for name, parts in self.partitions.items():
            if name not in self.topics and name not in self.deleted:
                yield parts.values()


def compute_cluster_after_events(
    cluster: Cluster, events: Iterable[tuple[str, Mapping[str, Any]]],
    observed_at: ObservationTimes | None = None,
) -> tuple[Cluster, ObservationTimes, EventEffects]:
    """Fold the batch's events into `cluster` and its observation times; snapshot markers are
    applied after every other event. See the module docstring for the rules."""
    work = _WorkingCluster(cluster, observed_at or ObservationTimes())
    effects = EventEffects(first_view=not cluster.brokers)
    appliers = {
        "BrokerMembership": _apply_broker,
        "TopicState": _apply_topic,
        "LogDirState": _apply_log_dir,
        "PartitionState": _apply_partition,
    }
    markers: list[Mapping[str, Any]] = []
    for schema, record in events:
        if schema == "SnapshotMarker":
            markers.append(record)
            continue
        if schema == "CanarySample":
            effects.canary_samples.append(record)
            continue
        applier = appliers.get(schema)
        if applier is None:
            effects.rejected.append((schema, str(record.get("key", "?")), f"unknown event type {schema!r}"))
            continue
        problem = compute_event_problem(schema, record, _known_epoch(work, schema, record))
        if problem is not None:
            effects.rejected.append((schema, str(record.get("key", "?")), problem))
            continue
        try:
            applier(work, record, effects)
            _note_observed(work, schema, record)
        except (KeyError, TypeError, ValueError) as error:
            effects.rejected.append((schema, str(record.get("key", "?")), f"malformed {schema}: {error!r}"))
    for record in markers:
        try:
            if record.get("kafka_release") is not None:
                level = record.get("kafka_metadata_level")
                effects.kafka = KafkaFacts(str(record["kafka_release"]), None if level is None else int(level),
                                           tuple(str(c) for c in record.get("kafka_capabilities") or ()))
            _reconcile(work, record, effects)
        except (KeyError, TypeError, ValueError) as error:
            effects.rejected.append(("SnapshotMarker", str(record.get("key", "?")),
                                     f"malformed SnapshotMarker: {error!r}"))
    built = work.build()
    return built, work.build_times(built), effects


def _known_epoch(work: _WorkingCluster, schema: str, record: Mapping[str, Any]) -> int | None:
    """The stored leader epoch of the partition a PartitionState is about (None otherwise)."""
    if schema != "PartitionState" or record.get("topic") in work.deleted:
        return None
    try:
        known = work.partition(TopicPartition(record["topic"], int(record["partition"])))
    except (KeyError, TypeError, ValueError):
        return None
    return known.leader_epoch if known is not None else None


def _note_observed(work: _WorkingCluster, schema: str, record: Mapping[str, Any]) -> None:
    """Raise the observation time of what an applied event is about (see the module rules)."""
    at = int(record["event_time"])
    if schema in ("BrokerMembership", "LogDirState"):
        broker_id = int(record["broker_id"])
        work.broker_times[broker_id] = max(at, work.broker_times.get(broker_id, at))
    elif record["topic"] not in work.deleted:  # TopicState, PartitionState
        topic = record["topic"]
        work.topic_times[topic] = max(at, work.topic_times.get(topic, at))


def _reconcile(work: _WorkingCluster, marker: Mapping[str, Any], effects: EventEffects) -> None:
    """Remove what a snapshot's inventory says is gone (see the module rules)."""
    if marker.get("phase") != "END" or not marker.get("has_inventory"):
        return
    seen_at = int(marker["started_at"])
    counts = {str(t["name"]): int(t["partition_count"]) for t in marker["topics"]}
    registered = {int(b) for b in marker["broker_ids"]}
    topics: list[str] = []
    partitions: list[TopicPartition] = []
    for name in work.live_topics():
        if work.topic_times.get(name, 0) > seen_at:
            continue  # observed after the poll: the inventory is older news
        if name not in counts:
            _apply_topic(work, {"topic": name, "deleted": True}, effects)
            topics.append(name)
            continue
        count = counts[name]
        known = work.partitions[name] if name in work.partitions else {
            p.partition: p for p in work.topics[name].partitions}
        extra = sorted(n for n in known if n >= count) if count > 0 else []
        if extra:
            parts = work.topic_partitions(name)
            for number in extra:
                del parts[number]
            partitions.extend(TopicPartition(name, number) for number in extra)
    gone = [b for b in sorted(work.brokers)
            if b not in registered and work.broker_times.get(b, 0) <= seen_at]
    held = work.held_brokers() if gone else set()
    brokers = [b for b in gone if work.brokers[b].alive or b not in held]
    for broker_id in gone:
        _apply_broker(work, {"broker_id": broker_id, "state": "UNREGISTERED", "rack": None,
                             "log_dirs": [], "event_time": seen_at}, effects)
    if topics or partitions or brokers:
        effects.reconciled.append(Reconciliation(
            str(marker["snapshot_id"]), seen_at, tuple(topics), tuple(partitions), tuple(brokers)))


def _apply_broker(work: _WorkingCluster, record: Mapping[str, Any], effects: EventEffects) -> None:
    broker_id = int(record["broker_id"])
    state = record["state"]
    old = work.brokers.get(broker_id)
    was_alive = old is not None and old.alive
    if state in ALIVE_STATES:
        alive = True
    elif state in DOWN_STATES:
        alive = False
    else:
        alive = old.alive if old is not None else False
    draining = (old.draining if old is not None else False) or state == "DRAINING"
    paths = list(record.get("log_dirs") or [])
    known = {d.path: d for d in old.log_dirs} if old is not None else {}
    dirs = tuple(known.get(path, LogDir(path)) for path in paths) if paths else tuple(known.values())
    rack = record.get("rack")
    if rack is None and state == "UNREGISTERED" and old is not None:
        rack = old.rack
    cannot_host = old.cannot_host if old is not None else frozenset()
    work.brokers[broker_id] = Broker(broker_id, rack, alive, draining, dirs, cannot_host)
    if old is not None and {d.path for d in dirs} != set(known):
        effects.dirs_changed.add(broker_id)
    if alive and not was_alive:
        effects.came_up[broker_id] = int(record["event_time"])
        effects.went_down.pop(broker_id, None)
        work.unregistered.discard(broker_id)
    elif not alive and (was_alive or (old is None and state != "REGISTERED")):
        effects.went_down[broker_id] = int(record["event_time"])
    if state == "UNREGISTERED":
        work.unregistered.add(broker_id)


def _apply_topic(work: _WorkingCluster, record: Mapping[str, Any], effects: EventEffects) -> None:
    name = record["topic"]
    if record.get("deleted"):
        if name in work.topics or name in work.partitions:
            effects.topics_deleted.append(name)
        work.deleted.add(name)
        return
    work.deleted.discard(name)  # re-created under the same name
    topic_id = record.get("topic_id")
    known_id = work.topic_ids.get(name)
    if topic_id and known_id and topic_id != known_id and name not in effects.topics_recreated:
        # Deleted and re-created between two polls: the old partitions and their epochs are gone.
        old = work.topic_partitions(name)
        effects.touched.difference_update(TopicPartition(name, n) for n in old)
        for n in old:
            effects.viewed.pop(TopicPartition(name, n), None)
        work.partitions[name] = {}
        work.min_isr[name] = 1
        effects.topics_recreated.append(name)
    if topic_id:
        work.topic_ids[name] = topic_id
    parts = work.topic_partitions(name)
    min_isr = record.get("min_insync_replicas")
    if min_isr is not None and int(min_isr) >= 1 and work.min_isr.get(name) != int(min_isr):
        work.min_isr[name] = int(min_isr)
        effects.touched.update(TopicPartition(name, n) for n in parts)


def _apply_log_dir(work: _WorkingCluster, record: Mapping[str, Any], effects: EventEffects) -> None:
    broker_id = int(record["broker_id"])
    path = record["path"]
    online = bool(record["online"])
    # Not known yet: known from now on, but not alive. Only a membership event (or a snapshot's)
    # says a broker is up, and so that it came up: its dirs, read from another topic, may reach
    # a batch before it does, and a broker made alive here joined without a `BrokerAdded`.
    broker = work.brokers.get(broker_id) or Broker(broker_id, alive=False)
    old_dir = next((d for d in broker.log_dirs if d.path == path), None)
    listed = record.get("replicas") or ()
    # The copies in flight into this dir: its replicas of the partitions whose reassignment adds
    # this broker, as the model shows them now (a step whose partition event comes later in the
    # same batch is counted from the dir's next event: the watcher tells a dir again while a copy
    # into it grows). Found in the one pass over the dir's replicas that gives them their dir.
    adding_here: set[TopicPartition] = set()
    for replica in listed:
        if replica.get("is_future"):
            continue
        tp = TopicPartition(replica["topic"], int(replica["partition"]))
        partition = work.partition(tp)
        if partition is None or broker_id not in partition.replicas:
            continue
        if broker_id in partition.adding:
            adding_here.add(tp)
        dirs_now = list(partition.log_dirs) if len(partition.log_dirs) == len(partition.replicas) \
            else [None] * len(partition.replicas)
        index = partition.replicas.index(broker_id)
        if dirs_now[index] != path:
            dirs_now[index] = path
            # A replica that just landed in a dir carries its size fresher than the partition's
            # last event (sizes refresh with snapshots), and a relief judging this very dir plans
            # with it: the leader's replica is the partition's size (`compute_partition_sizes`);
            # a follower's raises a size known smaller (or not at all: 0 since the topic's
            # creation), never lowers it.
            landed = int(replica.get("size_bytes") or 0)
            size = landed if broker_id == partition.leader else max(landed, partition.size_bytes or 0)
            work.topic_partitions(tp.topic)[tp.partition] = replace(
                partition, log_dirs=tuple(dirs_now), size_bytes=size or partition.size_bytes)
            effects.touched.add(tp)
    new_dir = compute_reported_log_dir(
        path, online, record.get("total_bytes"), record.get("usable_bytes"),
        ((TopicPartition(r["topic"], int(r["partition"])), int(r.get("size_bytes") or 0), bool(r.get("is_future")))
         for r in listed), adding_here, bool(record.get("cordoned")))
    if old_dir is None:
        dirs = broker.log_dirs + (new_dir,)
    else:
        dirs = tuple(new_dir if d.path == path else d for d in broker.log_dirs)
    work.brokers[broker_id] = replace(broker, log_dirs=dirs)
    was_online = old_dir is None or old_dir.online
    if was_online and not online:
        effects.dirs_failed.append((broker_id, path))
    elif old_dir is not None and not old_dir.online and online:
        effects.dirs_restored.append((broker_id, path))
    if old_dir is None or old_dir.online != online:
        effects.dirs_changed.add(broker_id)


def _apply_partition(work: _WorkingCluster, record: Mapping[str, Any], effects: EventEffects) -> None:
    tp = TopicPartition(record["topic"], int(record["partition"]))
    if tp.topic in work.deleted:
        return
    old = work.partition(tp)
    epoch = int(record.get("leader_epoch", -1))
    if old is not None and epoch >= 0 and epoch < old.leader_epoch:
        effects.stale += 1
        return
    replicas = tuple(int(b) for b in record["replicas"])
    log_dirs = tuple(record.get("log_dirs") or ())
    known = _dirs_by_broker(old, replicas)
    if len(log_dirs) != len(replicas):
        log_dirs = known
    elif known:
        # None means "not described" (an offline dir lists no replicas), not "moved": the
        # replica is still where it was, which is what tells a disk failure which replicas it hit.
        log_dirs = tuple(d if d is not None else k for d, k in zip(log_dirs, known))
    partition = PartitionState(
        topic=tp.topic,
        partition=tp.partition,
        replicas=replicas,
        isr=tuple(int(b) for b in record["isr"]),
        leader=record.get("leader"),
        size_bytes=record.get("size_bytes"),
        log_dirs=log_dirs,
        adding=tuple(int(b) for b in record.get("adding") or ()),
        removing=tuple(int(b) for b in record.get("removing") or ()),
        offline_replicas=tuple(int(b) for b in record.get("offline_replicas") or ()),
        leader_epoch=epoch,
        # A snapshot's rates are one sample; the state keeps their smoothed mean (planning.load).
        bytes_in_per_sec=smooth_rate(old.bytes_in_per_sec if old else None, record.get("bytes_in_per_sec"),
                                     record.get("traffic_window_ms")),
        bytes_out_per_sec=smooth_rate(old.bytes_out_per_sec if old else None, record.get("bytes_out_per_sec"),
                                      record.get("traffic_window_ms")),
        eligible_leaders=tuple(int(b) for b in record.get("eligible_leader_replicas") or ()),
        last_known_elr=tuple(int(b) for b in record.get("last_known_elr") or ()),
    )
    if partition != old:
        work.topic_partitions(tp.topic)[tp.partition] = partition
        effects.touched.add(tp)
        lost = compute_isr_losses(old, partition)
        if lost and not is_moving(old, partition, False):
            effects.isr_lost.append((tp, lost, record.get("event_time")))
    at = record.get("event_time")
    if isinstance(at, int):
        effects.viewed[tp] = max(at, effects.viewed.get(tp, at))


def _dirs_by_broker(old: PartitionState | None, replicas: tuple[int, ...]) -> tuple[str | None, ...]:
    """The dirs known for these replicas from the previous state of the partition, if any."""
    if old is None or len(old.log_dirs) != len(old.replicas):
        return ()
    known = dict(zip(old.replicas, old.log_dirs))
    dirs = tuple(known.get(b) for b in replicas)
    return dirs if any(d is not None for d in dirs) else ()
