"""The load a partition puts on its brokers, and each broker's load (pure).

PER PARTITION (`PartitionState`): `size_bytes`, held on every replica's disk; `bytes_in_per_sec`,
the bytes produced to it, written by every replica (the leader takes them from producers, each
follower fetches them from the leader); `bytes_out_per_sec`, the bytes consumers read from it
(from the leader).

PER BROKER (`compute_broker_loads`), over the replicas it holds:

    disk bytes       Σ size of each replica
    bytes in/s       Σ bytes in of each replica
    network out/s    Σ over the partitions it leads of (replicas - 1) × bytes in + bytes out
    replicas, leaders

so moving a follower moves its disk bytes and bytes in, and moving leadership moves network
out. AFTER A MOVEMENT (`compute_loads_after`): the same sums once some partitions hold their
target replicas, led by the target's first (the preferred leader the movement elects), worked
out from the partitions that change alone. Traffic never measured counts as zero (a new
cluster, a partition created since the last sample): unknown traffic never blocks a plan, it
only weighs nothing.

SMOOTHING (`smooth_rate`). A snapshot's rate is one sample over its window (the time between two
samples, `reassigner.edge.traffic`). The state keeps an exponentially weighted mean over
`TRAFFIC_HORIZON_SECONDS`: the new sample weighs `1 - exp(-window / horizon)`, so a burst of one
minute moves a five-minute mean by a fifth, and a sample over a long window (a watcher that was
away) weighs more. A sample of None keeps the mean as it was.

Pure: no I/O, no clock; the same cluster gives the same loads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

from planning.model import Cluster, PartitionState, TopicPartition

TRAFFIC_HORIZON_SECONDS = 300.0


@dataclass(frozen=True)
class BrokerLoad:
    replicas: int = 0
    leaders: int = 0
    disk_bytes: int = 0
    bytes_in_per_sec: float = 0.0
    network_out_per_sec: float = 0.0


def smooth_rate(previous: float | None, sample: float | None, window_ms: int | None,
                horizon_seconds: float = TRAFFIC_HORIZON_SECONDS) -> float | None:
    """The mean after one sample (module SMOOTHING)."""
    if sample is None or not window_ms or window_ms <= 0:
        return previous
    if previous is None:
        return float(sample)
    weight = 1.0 - math.exp(-(window_ms / 1000) / horizon_seconds)
    return previous + weight * (sample - previous)


def compute_partition_network_out(partition: PartitionState) -> float:
    """What the leader of `partition` sends per second: each follower's fetch of what is
    produced, and the consumers' reads."""
    return _leader_out(partition, len(partition.replicas))


def _leader_out(partition: PartitionState, replicas: int) -> float:
    """What the leader of `partition` sends per second with `replicas` replicas."""
    return max(0, replicas - 1) * (partition.bytes_in_per_sec or 0.0) + (partition.bytes_out_per_sec or 0.0)


def compute_broker_loads(cluster: Cluster) -> Mapping[int, BrokerLoad]:
    """The load of every broker of `cluster` (module PER BROKER); a broker that holds nothing has
    a zero load. Walks every partition: for views and plans, not per event."""
    replicas = dict.fromkeys(cluster.brokers_by_id, 0)
    leaders = dict.fromkeys(cluster.brokers_by_id, 0)
    disk = dict.fromkeys(cluster.brokers_by_id, 0)
    bytes_in = dict.fromkeys(cluster.brokers_by_id, 0.0)
    out = dict.fromkeys(cluster.brokers_by_id, 0.0)
    for topic in cluster.topics:
        for p in topic.partitions:
            size, produced = p.size_bytes or 0, p.bytes_in_per_sec or 0.0
            for broker in p.replicas:
                replicas[broker] = replicas.get(broker, 0) + 1
                disk[broker] = disk.get(broker, 0) + size
                bytes_in[broker] = bytes_in.get(broker, 0.0) + produced
            if p.leader is not None and p.leader >= 0:
                leaders[p.leader] = leaders.get(p.leader, 0) + 1
                out[p.leader] = out.get(p.leader, 0.0) + compute_partition_network_out(p)
    return {b: BrokerLoad(replicas[b], leaders.get(b, 0), disk[b], bytes_in[b], out.get(b, 0.0))
            for b in sorted(replicas)}


def compute_loads_after(cluster: Cluster, loads: Mapping[int, BrokerLoad],
                        targets: Mapping[TopicPartition, tuple[int, ...]]) -> Mapping[int, BrokerLoad]:
    """The load of each broker a target changes (module AFTER A MOVEMENT), from `loads` (the
    cluster's, `compute_broker_loads`) and the partitions of `targets` alone; a partition the
    cluster does not show is left out. Brokers no target touches are not in the result."""
    delta: dict[int, list] = {}

    def add(broker: int, replicas: int, leaders: int, size: int, produced: float, out: float) -> None:
        entry = delta.setdefault(broker, [0, 0, 0, 0.0, 0.0])
        entry[0] += replicas
        entry[1] += leaders
        entry[2] += size
        entry[3] += produced
        entry[4] += out

    for tp in sorted(targets):
        partition, target = cluster.partition(tp), tuple(targets[tp])
        if partition is None or not target:
            continue
        size, produced = partition.size_bytes or 0, partition.bytes_in_per_sec or 0.0
        old_replicas, new_replicas = set(partition.replicas), set(target)
        for broker in old_replicas - new_replicas:
            add(broker, -1, 0, -size, -produced, 0.0)
        for broker in new_replicas - old_replicas:
            add(broker, 1, 0, size, produced, 0.0)
        leader = partition.leader if partition.leader is not None and partition.leader >= 0 else None
        if leader is not None:
            add(leader, 0, -1, 0, 0.0, -compute_partition_network_out(partition))
        add(target[0], 0, 1, 0, 0.0, _leader_out(partition, len(target)))
    idle = BrokerLoad()
    after = {}
    for broker, (replicas, leaders, size, produced, out) in sorted(delta.items()):
        now = loads.get(broker, idle)
        after[broker] = BrokerLoad(now.replicas + replicas, now.leaders + leaders, now.disk_bytes + size,
                                   max(0.0, now.bytes_in_per_sec + produced),
                                   max(0.0, now.network_out_per_sec + out))
    return after
