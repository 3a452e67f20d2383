"""Conversion between JSON documents (already parsed) and the cluster model.

Two formats:
- the snapshot file: `{"brokers": [{"id", "rack", "alive", "draining", "log_dirs": [{"path",
  "online", "total_bytes", "usable_bytes", "cordoned"}]}], "topics": [{"name", "min_insync_replicas",
  "partitions": [{"partition", "replicas", "isr", "leader", "size_bytes", "log_dirs",
  "bytes_in_per_sec", "bytes_out_per_sec"}]}]}`;
- the Kafka tool's reassignment file: `{"version": 1, "partitions": [{"topic", "partition",
  "replicas", "log_dirs"?}]}` (`"any"` in `log_dirs` means no preference: `None` here).

Defaults for optional fields: rack none, alive true, draining false, no log dirs; a dir is
online, not cordoned, with unknown sizes; isr = replicas, leader = first replica, size and traffic unknown,
min_insync_replicas 1. Unknown keys are ignored (newer writers may add some).

Every malformed value raises `MalformedInputError(source, json_path, expected, found)`, e.g.
`snapshot.json: at $.topics[2].partitions[0].replicas[1]: expected a non-negative integer
broker id, found 'x'`. Reading files is the caller's job: this module is pure.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from planning.model import Broker, Cluster, LogDir, PartitionState, Topic, TopicPartition
from schemas.errors import MalformedInputError

ReassignmentTargets = dict[TopicPartition, tuple[tuple[int, ...], tuple[str | None, ...] | None]]


class _Reader:
    """Typed accessors that know the source name, so every error can say where it was."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, path: str, expected: str, found: object = None) -> MalformedInputError:
        return MalformedInputError(self.source, path, expected, found)

    def obj(self, value: object, path: str) -> Mapping[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(path, "an object", _short(value))
        return value

    def array(self, value: object, path: str) -> Sequence[Any]:
        if not isinstance(value, list):
            raise self.fail(path, "an array", _short(value))
        return value

    def required(self, data: Mapping[str, Any], key: str, path: str) -> Any:
        if key not in data:
            raise self.fail(f"{path}.{key}", "a value (the field is required)")
        return data[key]

    def integer(self, value: object, path: str, minimum: int | None = None, what: str = "an integer") -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(path, what, _short(value))
        if minimum is not None and value < minimum:
            raise self.fail(path, what, value)
        return value

    def optional_integer(self, data: Mapping[str, Any], key: str, path: str, minimum: int = 0) -> int | None:
        value = data.get(key)
        if value is None:
            return None
        return self.integer(value, f"{path}.{key}", minimum, f"an integer >= {minimum} or null")

    def optional_rate(self, data: Mapping[str, Any], key: str, path: str) -> float | None:
        value = data.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
            raise self.fail(f"{path}.{key}", "a non-negative number of bytes per second or null", _short(value))
        return float(value)

    def boolean(self, data: Mapping[str, Any], key: str, path: str, default: bool) -> bool:
        value = data.get(key, default)
        if not isinstance(value, bool):
            raise self.fail(f"{path}.{key}", "true or false", _short(value))
        return value

    def string(self, value: object, path: str, allow_empty: bool = False) -> str:
        if not isinstance(value, str) or (not allow_empty and not value):
            raise self.fail(path, "a non-empty string", _short(value))
        return value

    def broker_ids(self, value: object, path: str, allow_empty: bool = False) -> tuple[int, ...]:
        items = self.array(value, path)
        if not items and not allow_empty:
            raise self.fail(path, "a non-empty array of broker ids", [])
        ids = tuple(
            self.integer(b, f"{path}[{i}]", 0, "a non-negative integer broker id")
            for i, b in enumerate(items)
        )
        seen: set[int] = set()
        for i, b in enumerate(ids):
            if b in seen:
                raise self.fail(f"{path}[{i}]", "distinct broker ids", b)
            seen.add(b)
        return ids

    def log_dir_list(self, value: object, path: str, length: int, any_is_none: bool) -> tuple[str | None, ...]:
        items = self.array(value, path)
        if len(items) != length:
            raise self.fail(path, f"one log dir per replica ({length})", f"{len(items)} entries")
        dirs: list[str | None] = []
        for i, d in enumerate(items):
            if d is None or (any_is_none and d == "any"):
                dirs.append(None)
            else:
                dirs.append(self.string(d, f"{path}[{i}]"))
        return tuple(dirs)


def _short(value: object) -> object:
    text = repr(value)
    return value if len(text) <= 60 else text[:57] + "..."


# --- snapshot --------------------------------------------------------------------------------


def cluster_from_json(data: object, source: str) -> Cluster:
    """Build a Cluster from a parsed snapshot document; `source` names it in error messages."""
    read = _Reader(source)
    root = read.obj(data, "$")
    brokers_json = read.array(read.required(root, "brokers", "$"), "$.brokers")
    topics_json = read.array(root.get("topics", []), "$.topics")
    brokers: list[Broker] = []
    seen_brokers: set[int] = set()
    for i, raw in enumerate(brokers_json):
        path = f"$.brokers[{i}]"
        broker = _broker_from_json(read, read.obj(raw, path), path)
        if broker.id in seen_brokers:
            raise read.fail(f"{path}.id", "a broker id not used by an earlier broker", broker.id)
        seen_brokers.add(broker.id)
        brokers.append(broker)
    topics: list[Topic] = []
    seen_topics: set[str] = set()
    for i, raw in enumerate(topics_json):
        path = f"$.topics[{i}]"
        topic = _topic_from_json(read, read.obj(raw, path), path)
        if topic.name in seen_topics:
            raise read.fail(f"{path}.name", "a topic name not used by an earlier topic", topic.name)
        seen_topics.add(topic.name)
        topics.append(topic)
    return Cluster(brokers=tuple(brokers), topics=tuple(topics))


def _broker_from_json(read: _Reader, raw: Mapping[str, Any], path: str) -> Broker:
    broker_id = read.integer(read.required(raw, "id", path), f"{path}.id", 0, "a non-negative integer broker id")
    rack = raw.get("rack")
    if rack is not None:
        rack = read.string(rack, f"{path}.rack", allow_empty=True) or None
    dirs: list[LogDir] = []
    for j, d in enumerate(read.array(raw.get("log_dirs", []), f"{path}.log_dirs")):
        dir_path = f"{path}.log_dirs[{j}]"
        d = read.obj(d, dir_path)
        dirs.append(
            LogDir(
                path=read.string(read.required(d, "path", dir_path), f"{dir_path}.path"),
                online=read.boolean(d, "online", dir_path, True),
                total_bytes=read.optional_integer(d, "total_bytes", dir_path),
                usable_bytes=read.optional_integer(d, "usable_bytes", dir_path),
                cordoned=read.boolean(d, "cordoned", dir_path, False),
            )
        )
    return Broker(
        id=broker_id,
        rack=rack,
        alive=read.boolean(raw, "alive", path, True),
        draining=read.boolean(raw, "draining", path, False),
        log_dirs=tuple(dirs),
    )


def _topic_from_json(read: _Reader, raw: Mapping[str, Any], path: str) -> Topic:
    name = read.string(read.required(raw, "name", path), f"{path}.name")
    min_isr = raw.get("min_insync_replicas", 1)
    min_isr = read.integer(min_isr, f"{path}.min_insync_replicas", 1, "an integer >= 1")
    partitions: list[PartitionState] = []
    seen: set[int] = set()
    for j, p in enumerate(read.array(raw.get("partitions", []), f"{path}.partitions")):
        p_path = f"{path}.partitions[{j}]"
        partition = _partition_from_json(read, name, read.obj(p, p_path), p_path)
        if partition.partition in seen:
            raise read.fail(f"{p_path}.partition", "a partition id not used earlier in the topic", partition.partition)
        seen.add(partition.partition)
        partitions.append(partition)
    return Topic(name=name, partitions=tuple(partitions), min_insync_replicas=min_isr)


def _partition_from_json(read: _Reader, topic: str, raw: Mapping[str, Any], path: str) -> PartitionState:
    number = read.integer(read.required(raw, "partition", path), f"{path}.partition", 0, "a non-negative partition id")
    replicas = read.broker_ids(read.required(raw, "replicas", path), f"{path}.replicas")
    isr = replicas
    if raw.get("isr") is not None:
        isr = read.broker_ids(raw["isr"], f"{path}.isr", allow_empty=True)
        for k, b in enumerate(isr):
            if b not in replicas:
                raise read.fail(f"{path}.isr[{k}]", f"a member of replicas {list(replicas)}", b)
    leader: int | None = replicas[0]
    if "leader" in raw:
        leader = raw["leader"]
        if leader is not None and leader != -1:
            leader = read.integer(leader, f"{path}.leader", 0, "a broker id, -1 or null")
        else:
            leader = None
    log_dirs: tuple[str | None, ...] = ()
    if raw.get("log_dirs") is not None:
        log_dirs = read.log_dir_list(raw["log_dirs"], f"{path}.log_dirs", len(replicas), any_is_none=True)
    return PartitionState(
        topic=topic,
        partition=number,
        replicas=replicas,
        isr=isr,
        leader=leader,
        size_bytes=read.optional_integer(raw, "size_bytes", path),
        log_dirs=log_dirs,
        bytes_in_per_sec=read.optional_rate(raw, "bytes_in_per_sec", path),
        bytes_out_per_sec=read.optional_rate(raw, "bytes_out_per_sec", path),
    )


def cluster_to_json(cluster: Cluster) -> dict:
    """The snapshot document for `cluster` (inverse of `cluster_from_json`)."""
    return {
        "brokers": [
            {
                "id": b.id,
                "rack": b.rack,
                "alive": b.alive,
                "draining": b.draining,
                "log_dirs": [
                    {
                        "path": d.path,
                        "online": d.online,
                        "total_bytes": d.total_bytes,
                        "usable_bytes": d.usable_bytes,
                        "cordoned": d.cordoned,
                    }
                    for d in b.log_dirs
                ],
            }
            for b in cluster.brokers
        ],
        "topics": [
            {
                "name": t.name,
                "min_insync_replicas": t.min_insync_replicas,
                "partitions": [
                    {
                        "partition": p.partition,
                        "replicas": list(p.replicas),
                        "isr": list(p.isr),
                        "leader": p.leader,
                        "size_bytes": p.size_bytes,
                        "log_dirs": list(p.log_dirs) if p.log_dirs else None,
                        "bytes_in_per_sec": p.bytes_in_per_sec,
                        "bytes_out_per_sec": p.bytes_out_per_sec,
                    }
                    for p in t.partitions
                ],
            }
            for t in cluster.topics
        ],
    }


# --- reassignment (the Kafka tool's JSON) ----------------------------------------------------


def reassignment_from_json(data: object, source: str) -> ReassignmentTargets:
    """{TopicPartition: (replicas, log_dirs or None)} from the tool's reassignment document."""
    read = _Reader(source)
    root = read.obj(data, "$")
    version = root.get("version", 1)
    if version != 1 or isinstance(version, bool):
        raise read.fail("$.version", "1", version)
    targets: ReassignmentTargets = {}
    for i, raw in enumerate(read.array(read.required(root, "partitions", "$"), "$.partitions")):
        path = f"$.partitions[{i}]"
        raw = read.obj(raw, path)
        topic = read.string(read.required(raw, "topic", path), f"{path}.topic")
        number = read.integer(read.required(raw, "partition", path), f"{path}.partition", 0, "a non-negative partition id")
        # Negative, duplicate or no ids are well-formed JSON but an invalid assignment: they are
        # refused by `planning.validation` with INVALID_REPLICA_ASSIGNMENT, not here.
        replicas_path = f"{path}.replicas"
        replicas = tuple(
            read.integer(b, f"{replicas_path}[{k}]", None, "an integer broker id")
            for k, b in enumerate(read.array(read.required(raw, "replicas", path), replicas_path))
        )
        log_dirs = None
        if raw.get("log_dirs") is not None:
            log_dirs = read.log_dir_list(raw["log_dirs"], f"{path}.log_dirs", len(replicas), any_is_none=True)
        tp = TopicPartition(topic, number)
        if tp in targets:
            raise read.fail(f"{path}", f"each partition once ({tp} appears earlier)")
        targets[tp] = (replicas, log_dirs)
    return targets


def reassignment_to_json(
    targets: Mapping[TopicPartition, Sequence[int]],
    log_dirs: Mapping[TopicPartition, Sequence[str | None]] | None = None,
) -> dict:
    """The tool's reassignment document; `log_dirs` entries of None are written as "any".

    A partition whose dirs are all None gets no `log_dirs` field (the tool's default).
    """
    partitions = []
    for tp in sorted(targets):
        entry: dict[str, Any] = {
            "topic": tp.topic,
            "partition": tp.partition,
            "replicas": list(targets[tp]),
        }
        dirs = (log_dirs or {}).get(tp)
        if dirs is not None and any(d is not None for d in dirs):
            entry["log_dirs"] = ["any" if d is None else d for d in dirs]
        partitions.append(entry)
    return {"version": 1, "partitions": partitions}
