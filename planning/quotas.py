"""Per-topic replica quotas: how many replicas of one topic each broker (and domain) should hold.

GOAL. Even replica counts per topic (SPEC 4, soft goal 2) with the fewest moves (goal 1).
Without racks every eligible broker gets `floor(T / n)` or `ceil(T / n)` of the topic's `T`
replicas; the `T mod n` higher quotas go first to brokers that already hold at least that many
(each such choice saves one move), then to brokers with the fewest replicas cluster-wide
(cluster-wide evenness), then by broker id.

RACKS. Per partition the rack rule (`planning.racks`) fixes how many replicas a domain may
hold, so over the topic a domain holds between `min` and `max` replicas. Quotas are apportioned
top-down: a node's total is shared among its children in proportion to their broker counts,
clamped to [min, max] and rounded so that the shares add up exactly; the rounding favours the
child that already holds the most above its share (fewer moves), then the least loaded.
Inside a child the partitions are assumed to hold `floor` or `ceil` of the child's total / P
replicas each (replicas spread evenly over partitions too), which gives its own [min, max].
With balanced racks this reduces to the flat rule above.

Pure: inputs are a tree and counts; the output is a fresh dict.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Mapping

from planning.racks import ROOT, RackTree


@dataclass(frozen=True)
class TopicQuotas:
    """Targets for one topic: per tree node (subtree total) and per broker."""

    node_quota: Mapping[int, int]
    broker_quota: Mapping[int, int]


def compute_topic_quotas(
    tree: RackTree,
    replica_histogram: Mapping[int, int],
    broker_current: Mapping[int, int],
    broker_cluster_load: Mapping[int, int],
) -> TopicQuotas:
    """Quotas for a topic whose partitions hold `replica_histogram` {replicas: partitions}.

    `broker_current` counts the topic's replicas that may stay where they are; it steers the
    rounding towards keeping them. `broker_cluster_load` (replicas over all topics) breaks ties.
    """
    node_current = [0] * len(tree.node_labels)
    for broker_id, count in broker_current.items():
        node = tree.broker_node.get(broker_id)
        if node is None:
            continue
        for ancestor in tree.node_ancestry[node]:
            node_current[ancestor] += count
    node_load = [0] * len(tree.node_labels)
    for broker_id, node in tree.broker_node.items():
        for ancestor in tree.node_ancestry[node]:
            node_load[ancestor] += broker_cluster_load.get(broker_id, 0)

    partitions = sum(replica_histogram.values())
    total = sum(r * k for r, k in replica_histogram.items())
    node_quota: dict[int, int] = {ROOT: total}
    broker_quota: dict[int, int] = {}
    pending: list[tuple[int, dict[int, int]]] = [(ROOT, dict(replica_histogram))]
    while pending:
        node, histogram = pending.pop()
        node_total = node_quota[node]
        shares = []  # (kind, id, capacity, minimum, maximum, current, load)
        for child in tree.node_children[node]:
            cap = tree.node_capacity[child]
            low = high = 0
            for replicas, count in histogram.items():
                level, extras = tree.waterfill(node, replicas)
                low += min(cap, level) * count
                high += min(cap, level + (1 if extras else 0)) * count
            shares.append((0, child, cap, low, high, node_current[child], node_load[child]))
        for broker_id in tree.node_brokers[node]:
            low = high = 0
            for replicas, count in histogram.items():
                level, extras = tree.waterfill(node, replicas)
                low += min(1, level) * count
                high += min(1, level + (1 if extras else 0)) * count
            shares.append(
                (
                    1,
                    broker_id,
                    1,
                    low,
                    high,
                    broker_current.get(broker_id, 0),
                    broker_cluster_load.get(broker_id, 0),
                )
            )
        amounts = _apportion(node_total, tree.node_capacity[node], shares)
        for share, amount in zip(shares, amounts):
            kind, ident = share[0], share[1]
            if kind == 1:
                broker_quota[ident] = amount
            else:
                node_quota[ident] = amount
                if partitions:
                    base, extra = divmod(amount, partitions)
                    child_histogram = {base: partitions - extra}
                    if extra:
                        child_histogram[base + 1] = extra
                else:
                    child_histogram = {}
                pending.append((ident, child_histogram))
    return TopicQuotas(node_quota=node_quota, broker_quota=broker_quota)


def _apportion(total: int, capacity: int, shares: list[tuple]) -> list[int]:
    """Split `total` over shares in proportion to capacity, within [minimum, maximum]."""
    amounts = []
    for _, _, cap, low, high, _, _ in shares:
        ideal = total * cap // capacity if capacity else 0
        amounts.append(max(low, min(high, ideal)))
    difference = total - sum(amounts)
    if difference > 0:
        # The next unit goes where the per-broker load after it is lowest; among equals to
        # the share that already holds the most above its amount (a kept replica), then to
        # the least loaded cluster-wide.
        heap = [
            (
                (amounts[i] + 1) / share[2],
                -(share[5] - amounts[i]),
                share[6] / share[2],
                i,
            )
            for i, share in enumerate(shares)
            if amounts[i] < share[4]
        ]
        heapq.heapify(heap)
        while difference > 0 and heap:
            _, _, _, i = heapq.heappop(heap)
            amounts[i] += 1
            difference -= 1
            share = shares[i]
            if amounts[i] < share[4]:
                heapq.heappush(
                    heap,
                    ((amounts[i] + 1) / share[2], -(share[5] - amounts[i]), share[6] / share[2], i),
                )
    elif difference < 0:
        heap = [
            (-amounts[i] / share[2], share[5] - amounts[i], -share[6] / share[2], i)
            for i, share in enumerate(shares)
            if amounts[i] > share[3]
        ]
        heapq.heapify(heap)
        while difference < 0 and heap:
            _, _, _, i = heapq.heappop(heap)
            amounts[i] -= 1
            difference += 1
            share = shares[i]
            if amounts[i] > share[3]:
                heapq.heappush(
                    heap, (-amounts[i] / share[2], share[5] - amounts[i], -share[6] / share[2], i)
                )
    return amounts
