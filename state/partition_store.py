"""Partition state in Redis, written one Spark micro-batch at a time, atomically and at most once.

Keys (all of one Kafka cluster share the hash tag `{<cluster>}`, so one Lua script may touch them
all, on a single Redis or on Redis Cluster alike):
- `reassigner:{<cluster>}:partition:<topic>-<partition>` — JSON of the latest `PartitionState`
  event of that partition (fields as in `schemas/PartitionState.avsc`);
- `reassigner:{<cluster>}:partitions` — set of the stored partition keys;
- `reassigner:{<cluster>}:last_batch` — id of the last applied micro-batch.

Invariants: a micro-batch is applied entirely or not at all (one Lua script); a batch id not
greater than `last_batch` is skipped, so a replayed batch (Spark re-runs the last batch after a
restart) changes nothing; an event older than the stored one for the same partition (lower
leader epoch, or same epoch and older event time) is ignored.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Iterable, Mapping

APPLY_BATCH = """
local last = tonumber(redis.call('GET', KEYS[1]) or '-1')
local batch = tonumber(ARGV[1])
if batch <= last then return -1 end
local applied = 0
for i = 2, #ARGV, 4 do
  local key, epoch, time, value = ARGV[i], tonumber(ARGV[i+1]), tonumber(ARGV[i+2]), ARGV[i+3]
  local current = redis.call('HMGET', key, 'leader_epoch', 'event_time')
  local stale = false
  if current[1] then
    local c_epoch, c_time = tonumber(current[1]), tonumber(current[2])
    stale = epoch < c_epoch or (epoch == c_epoch and time < c_time)
  end
  if not stale then
    redis.call('HSET', key, 'leader_epoch', epoch, 'event_time', time, 'state', value)
    redis.call('SADD', KEYS[2], key)
    applied = applied + 1
  end
end
redis.call('SET', KEYS[1], batch)
return applied
"""


def event_time_millis(value: object) -> int:
    """Event time as epoch milliseconds, whether the reader gave an int (fastavro as configured
    by `schemas.codec`) or a datetime (Spark's TimestampType)."""
    if value is None:
        return 0
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    return int(value)  # type: ignore[arg-type]


def key_prefix(cluster_name: str) -> str:
    return f"reassigner:{{{cluster_name}}}"


def partition_key(cluster_name: str, topic: str, partition: int) -> str:
    return f"{key_prefix(cluster_name)}:partition:{topic}-{partition}"


class PartitionStore:
    """Reads and writes the partition states of one cluster; `client` is a `redis.Redis`."""

    def __init__(self, client, cluster_name: str) -> None:
        self.client = client
        self.cluster_name = cluster_name
        self._apply = client.register_script(APPLY_BATCH)

    def store_batch(self, batch_id: int, states: Iterable[Mapping]) -> int:
        """Apply one micro-batch of PartitionState records; returns how many were applied,
        or -1 if the batch id was applied before."""
        prefix = key_prefix(self.cluster_name)
        arguments: list[object] = [batch_id]
        for state in states:
            arguments += [
                partition_key(self.cluster_name, state["topic"], state["partition"]),
                int(state.get("leader_epoch", -1)),
                event_time_millis(state.get("event_time")),
                json.dumps(state, sort_keys=True, default=str),
            ]
        return int(self._apply(keys=[f"{prefix}:last_batch", f"{prefix}:partitions"],
                               args=arguments))

    def last_batch(self) -> int:
        value = self.client.get(f"{key_prefix(self.cluster_name)}:last_batch")
        return int(value) if value is not None else -1

    def load(self, topic: str, partition: int) -> dict | None:
        value = self.client.hget(partition_key(self.cluster_name, topic, partition), "state")
        return json.loads(value) if value is not None else None

    def load_all(self) -> dict[str, dict]:
        keys = sorted(k.decode() if isinstance(k, bytes) else k
                      for k in self.client.smembers(f"{key_prefix(self.cluster_name)}:partitions"))
        if not keys:
            return {}
        pipeline = self.client.pipeline(transaction=False)
        for key in keys:
            pipeline.hget(key, "state")
        values = pipeline.execute()
        return {key.rsplit(":", 1)[-1]: json.loads(v) for key, v in zip(keys, values) if v}
