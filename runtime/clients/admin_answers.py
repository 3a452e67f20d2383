"""The Admin API's answers, as kafka-python's structs and dicts give them, read into the typed
observation (`runtime.clients.cluster_observation`), and the throttled-replica lists written as
Kafka's topic configs.

Where the watcher's poll spends its CPU at 10,000 partitions and more: the Metadata and
DescribeLogDirs answers arrive as kafka-python's answer structs (`kafka_fast_reads`: no `to_dict`),
and are read as they are into plain rows (`PartitionList` states, `ReplicaList` columns) that the
merge compares in C.

INVARIANTS
- Pure but for reading kafka-python's error table (`compute_log_dirs`): no I/O, no clock.
- A topic being deleted (a topic-level error other than LEADER_NOT_AVAILABLE, or no partitions)
  is left out; a negative leader is None, and so is a dir's negative total or usable bytes.
- A dir's replicas are sorted by key, (topic, partition, is_future).
- A dir is cordoned only where the answer says so (`is_cordoned`, DescribeLogDirs v5, Kafka
  4.3+); an older answer has no such field, and its dirs are not cordoned.
"""

from __future__ import annotations

from collections import defaultdict
from operator import itemgetter
from typing import Iterable, Mapping, Sequence

from runtime.clients.cluster_observation import (
    FOLLOWER_THROTTLED_REPLICAS,
    KAFKA_STORAGE_ERROR,
    LEADER_THROTTLED_REPLICAS,
    MIN_INSYNC_REPLICAS,
    LogDirObservation,
    PartitionList,
    ReplicaList,
)
from runtime.clients.kafka_errors import kafka_error_name

BY_REPLICA_KEY = itemgetter(0, 1, 2)  # of a replica row: (topic, partition, is_future)


def compute_min_insync_replicas(topics: Sequence[str], answer: Mapping) -> dict[str, int | None]:
    """Per topic the effective min.insync.replicas of a DescribeConfigs answer (None where the
    broker gave no value: kafka-python answers nothing for an unknown topic)."""
    found = answer.get("topic", {})
    result: dict[str, int | None] = {}
    for topic in topics:
        value = found.get(topic, {}).get(MIN_INSYNC_REPLICAS, {}).get("value")
        result[topic] = int(value) if value not in (None, "") else None
    return result


def compute_partitions(topics: Iterable) -> tuple[PartitionList, dict[str, str | None]]:
    """Metadata answer structs as partitions (a `PartitionList`, which the poll merge compares in
    C) and topic ids. A topic being deleted (topic-level error other than LEADER_NOT_AVAILABLE,
    or no partitions) is left out."""
    partitions = PartitionList()
    states = partitions.states
    topic_ids: dict[str, str | None] = {}
    for topic in topics:
        # LEADER_NOT_AVAILABLE (5) right after creation still lists the partitions.
        if topic.error_code not in (0, 5) or not topic.partitions:
            continue
        name = topic.name
        topic_ids[name] = str(topic.topic_id) if topic.topic_id else None
        for p in topic.partitions:
            leader = p.leader_id
            leader = None if leader is None or leader < 0 else leader
            replicas, isr = tuple(p.replica_nodes), tuple(p.isr_nodes)
            offline = tuple(p.offline_replicas or ())
            states.append((name, p.partition_index, replicas, isr, leader, p.leader_epoch, offline))
    return partitions, topic_ids


def compute_reassignments(answer: Mapping) -> dict[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...]]]:
    """kafka-python's list_partition_reassignments answer: (topic, partition) → (adding, removing)."""
    return {(tp.topic, tp.partition): (tuple(r["adding_replicas"]), tuple(r["removing_replicas"]))
            for tp, r in answer.items()}


def compute_log_dirs(broker_id: int, results: Iterable) -> list[LogDirObservation]:
    """One broker's DescribeLogDirs answer structs as observations (error 56 = dir offline;
    `is_cordoned` only from a v5 answer, Kafka 4.3+: kafka-python gives an older one's default,
    False, and a struct without the field is taken the same)."""
    import kafka.errors as kafka_errors

    dirs: list[LogDirObservation] = []
    for entry in results:
        error_code = entry.error_code
        error = None
        if error_code:
            error = (KAFKA_STORAGE_ERROR if error_code == 56
                     else kafka_error_name(kafka_errors.for_code(error_code)()))
        # Plain rows, sorted by key, not a dataclass per replica (see `ReplicaList`). The topic
        # names are not interned: at 1-2 replicas per topic entry (many topics) `sys.intern`
        # cost the decoding 330 ms a dirs read at 300k partitions to save the merge 17 ms.
        rows = [(topic.name, part.partition_index, bool(part.is_future_key), int(part.partition_size or 0),
                 int(part.offset_lag or 0)) for topic in entry.topics or () for part in topic.partitions]
        rows.sort(key=BY_REPLICA_KEY)
        total, usable = entry.total_bytes, entry.usable_bytes
        dirs.append(LogDirObservation(
            broker_id=broker_id, path=entry.log_dir, online=error_code == 0, error=error,
            replicas=ReplicaList.of_rows(rows),
            total_bytes=total if total is not None and total >= 0 else None,
            usable_bytes=usable if usable is not None and usable >= 0 else None,
            cordoned=bool(getattr(entry, "is_cordoned", False)),
        ))
    return dirs


def group_throttled_replicas(partitions: Iterable[Mapping]) -> dict[str, dict[str, str]]:
    """ThrottledPartition records → per topic the two `*.replication.throttled.replicas` values
    (`partition:broker,...`), as Kafka's reassignment tool writes them."""
    leaders: dict[str, list[str]] = defaultdict(list)
    followers: dict[str, list[str]] = defaultdict(list)
    for p in partitions:
        leaders[p["topic"]] += [f"{p['partition']}:{b}" for b in p.get("leader_broker_ids", [])]
        followers[p["topic"]] += [f"{p['partition']}:{b}" for b in p.get("follower_broker_ids", [])]
    grouped: dict[str, dict[str, str]] = {}
    for topic in sorted(leaders.keys() | followers.keys()):
        configs = {LEADER_THROTTLED_REPLICAS: ",".join(leaders[topic]),
                   FOLLOWER_THROTTLED_REPLICAS: ",".join(followers[topic])}
        grouped[topic] = {name: value for name, value in configs.items() if value}
    return grouped
