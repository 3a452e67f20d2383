"""Well-formed nonsense refused: the plausibility of one state-carrying event, before it is applied.

Avro guarantees an event's shape, not its sense. A record that Kafka could never have produced —
a forged one, or a bug upstream — must not reach the cluster model: one leader epoch of 2^31-1
froze a real partition's view for good (every later, true event looked stale), and a partition
-1 stayed in Redis. `compute_event_problem` names what is implausible (the event becomes a
`BadEvent`, the state stays untouched), or gives None.

RULES (Kafka's own limits, or far beyond anything a real cluster shows):
- broker ids, partition numbers and replica ids are in 0..2^31-1; a leader is one of the
  replicas (or none, null or -1);
- a topic name is Kafka-legal: 1..249 characters of [a-zA-Z0-9._-];
- replicas are distinct and at most `MAX_REPLICAS`; the ISR, adding, removing and offline
  replicas are among them;
- a leader epoch is -1..2^31-1 and, when the partition's epoch is known, at most
  `MAX_EPOCH_JUMP` above it (leader epochs grow by one per leader change);
- sizes, counts and traffic rates are not negative (rates finite); texts (racks, paths) are at most `MAX_TEXT_CHARS`.
"""

from __future__ import annotations

import math
import re
from typing import Any, Mapping

from handlers.outbox import compute_bounded_text

MAX_ID = 2**31 - 1
MAX_REPLICAS = 64
MAX_EPOCH_JUMP = 1_000_000
MAX_TEXT_CHARS = 4096
MAX_PARTITIONS = 1_000_000
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def compute_event_problem(schema: str, record: Mapping[str, Any], known_epoch: int | None = None) -> str | None:
    """What makes `record` implausible, or None. `known_epoch`: the stored leader epoch of the
    partition a PartitionState is about (None when unknown)."""
    try:
        check = _CHECKS.get(schema)
        return check(record, known_epoch) if check is not None else None
    except (KeyError, TypeError, ValueError) as error:
        return f"malformed {schema}: {error!r}"


def _id_problem(what: str, value: object) -> str | None:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_ID:
        return f"{what} {value!r} is not an id in 0..{MAX_ID}"
    return None


def _text_problem(what: str, value: object) -> str | None:
    if value is not None and len(str(value)) > MAX_TEXT_CHARS:
        return f"{what} has {len(str(value)):,} characters (at most {MAX_TEXT_CHARS})"
    return None


def _topic_problem(name: object) -> str | None:
    if not isinstance(name, str) or not _TOPIC_NAME.fullmatch(name):
        shown = compute_bounded_text(name, 60) if isinstance(name, str) else name
        return f"topic name {shown!r} is not a Kafka topic name (1-249 of a-z A-Z 0-9 . _ -)"
    return None


def _first(*problems: str | None) -> str | None:
    return next((p for p in problems if p is not None), None)


def _check_broker(record: Mapping[str, Any], _epoch: int | None) -> str | None:
    return _first(_id_problem("broker id", record["broker_id"]), _text_problem("rack", record.get("rack")),
                  *(_text_problem("log dir path", p) for p in record.get("log_dirs") or ()))


def _check_topic(record: Mapping[str, Any], _epoch: int | None) -> str | None:
    problem = _topic_problem(record["topic"])
    if problem or record.get("deleted"):
        return problem
    count, rf, min_isr = record.get("partition_count"), record.get("replication_factor"), record.get("min_insync_replicas")
    if count is not None and not 0 <= int(count) <= MAX_PARTITIONS:
        return f"partition count {count} is not in 0..{MAX_PARTITIONS:,}"
    if rf is not None and not 0 <= int(rf) <= MAX_REPLICAS:
        return f"replication factor {rf} is not in 0..{MAX_REPLICAS}"
    if min_isr is not None and not 1 <= int(min_isr) <= MAX_REPLICAS:
        return f"min.insync.replicas {min_isr} is not in 1..{MAX_REPLICAS}"
    return None


def _check_log_dir(record: Mapping[str, Any], _epoch: int | None) -> str | None:
    problem = _first(_id_problem("broker id", record["broker_id"]), _text_problem("log dir path", record["path"]))
    for replica in record.get("replicas") or ():
        problem = problem or _topic_problem(replica["topic"]) or _id_problem("partition", replica["partition"])
    for name in ("total_bytes", "usable_bytes"):
        if problem is None and record.get(name) is not None and int(record[name]) < 0:
            problem = f"{name} {record[name]} is negative"
    return problem


def _check_partition(record: Mapping[str, Any], known_epoch: int | None) -> str | None:
    problem = _first(_topic_problem(record["topic"]), _id_problem("partition", record["partition"]))
    if problem:
        return problem
    replicas = list(record["replicas"])
    if len(replicas) > MAX_REPLICAS:
        return f"{len(replicas):,} replicas (at most {MAX_REPLICAS})"
    if not all(type(broker) is int and 0 <= broker <= MAX_ID for broker in replicas):  # the common case, fast
        return next(p for p in (_id_problem("replica", broker) for broker in replicas) if p is not None)
    replica_set = set(replicas)
    if len(replica_set) != len(replicas):
        return f"replicas {replicas} name a broker twice"
    for name in ("isr", "adding", "removing", "offline_replicas", "eligible_leader_replicas", "last_known_elr"):
        values = record.get(name)
        if values and not replica_set.issuperset(values):
            return f"{name} {sorted(set(values) - replica_set)} not among the replicas {replicas}"
    eligible = record.get("eligible_leader_replicas")
    if eligible and set(eligible) & set(record.get("isr") or ()):
        return (f"eligible_leader_replicas {sorted(set(eligible) & set(record['isr']))} are in the ISR too "
                "(Kafka keeps out-of-ISR replicas there)")
    leader = record.get("leader")
    if leader is not None and leader != -1 and leader not in replicas:
        return f"leader {leader} not among the replicas {replicas}"
    epoch = int(record.get("leader_epoch", -1))
    if not -1 <= epoch <= MAX_ID:
        return f"leader epoch {epoch} is not in -1..{MAX_ID}"
    if known_epoch is not None and known_epoch >= 0 and epoch > known_epoch + MAX_EPOCH_JUMP:
        return (f"leader epoch {epoch} is more than {MAX_EPOCH_JUMP:,} above the known {known_epoch} "
                "(epochs grow by one per leader change)")
    if record.get("size_bytes") is not None and int(record["size_bytes"]) < 0:
        return f"size {record['size_bytes']} is negative"
    for name in ("bytes_in_per_sec", "bytes_out_per_sec", "traffic_window_ms"):
        value = record.get(name)
        if value is not None and not 0 <= value < math.inf:  # NaN fails too
            return f"{name} {value} is not a finite, non-negative number"
    return None


_CHECKS = {
    "BrokerMembership": _check_broker,
    "TopicState": _check_topic,
    "LogDirState": _check_log_dir,
    "PartitionState": _check_partition,
}
