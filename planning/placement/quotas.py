"""Per-topic replica quotas: how many replicas of one topic each broker (and domain) should hold.

The planner normally takes its quotas from stage A (`planning.placement.cluster_quotas`, all
topics at once); this per-topic apportioning is the fallback for a topic stage A cannot include
or one re-planned without a partition `Goal.partial` leaves out. Its ideal shares
(`compute_ideal_shares`) define "balanced" for both.

GOAL. Even replica counts per topic (the planner's soft goal 2) with the fewest moves (goal 1).
Without racks every eligible broker gets `floor(T / n)` or `ceil(T / n)` of the topic's `T`
replicas; the `T mod n` higher quotas go first to brokers that already hold at least that many
(each such choice saves one move), then to brokers with the fewest replicas cluster-wide
(cluster-wide evenness), then by broker id.

RACKS. Per partition the rack rule (`planning.placement.racks`) fixes how many replicas a domain may
hold, so over the topic a domain holds between `min` and `max` replicas. Quotas are apportioned
top-down: a node's total is shared among its children in proportion to their broker counts,
clamped to [min, max] and rounded so that the shares add up exactly; the rounding favours the
child that already holds the most above its share (fewer moves), then the least loaded.
Inside a child the partitions are assumed to hold `floor` or `ceil` of the child's total / P
replicas each (replicas spread evenly over partitions too), which gives its own [min, max].
With balanced racks this reduces to the flat rule above.

IDEAL SHARES (`compute_ideal_shares`, used for the lower bound). The same apportioning done
with exact fractions and without looking at where replicas are now: a node's share `X` is split
over its children as `clamp(lambda * capacity, min, max)` with the one `lambda` that makes the
shares add up to `X` (water-filling), where `[min, max]` is what the rack rule lets the child
hold over all partitions (an example at `compute_ideal_shares`). Without rack constraints
every broker's share is T / n. `compute_balanced_ranges` rounds each share down and up: a broker's count in
any plan that balances the topic as far as the racks allow.

Pure: inputs are a tree and counts; the output is a fresh dict.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Mapping

from planning.placement.racks import ROOT, RackTree


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


def compute_balanced_ranges(
    tree: RackTree, replica_histogram: Mapping[int, int]
) -> dict[int, tuple[int, int]]:
    """Per tree broker: (floor, ceil) of its ideal share of the topic (see the module docstring)."""
    return {
        b: (math.floor(share), math.ceil(share))
        for b, share in compute_ideal_shares(tree, replica_histogram).items()
    }


def compute_topic_ranges(tree: RackTree, work, cache: dict) -> Mapping[int, tuple[int, int]]:
    """`compute_balanced_ranges` of a topic given as its partitions (anything with a
    `replication`: the replicas the rack rule applies to), memoised in `cache` by histogram;
    empty when no broker is eligible."""
    histogram: dict[int, int] = {}
    for w in work:
        histogram[w.replication] = histogram.get(w.replication, 0) + 1
    key = tuple(sorted(histogram.items()))
    ranges = cache.get(key)
    if ranges is None:
        ranges = cache[key] = compute_balanced_ranges(tree, histogram) if tree.broker_node else {}
    return ranges


def compute_ideal_shares(tree: RackTree, replica_histogram: Mapping[int, int],
                         weights: Mapping[int, int] | None = None) -> dict[int, Fraction]:
    """Per tree broker: its exact share of a topic whose partitions hold `replica_histogram`.

    Only the rack rule and the broker counts matter, not where replicas are now. Below the top
    level a child's per-partition count is only known as a range (`low`..`high` over the
    parent's possible counts), which can only widen the child's [min, max]: the shares stay
    within what any rack-spread plan can reach.

    Example: brokers 0, 3, 6 in r0 and 1, 4 / 2, 5 in r1 / r2, one topic of 50 partitions RF 3.
    Every partition puts exactly one replica in each rack (min = max = 50), so r0's brokers get
    50/3 each and the others 25: the balance the racks allow is 16-17 per r0 broker and 25 per
    r1/r2 broker, not the flat 21-22.

    The histogram's values may be any non-negative weights of the partitions, not only their
    numbers: everything here is linear in them, so `{replicas: bytes of those partitions}`
    gives each broker's share of the bytes. `weights` (per tree broker, positive; default 1
    each) shares a node's amount among its children in proportion to their summed weights
    instead of their broker counts (brokers of different disk sizes); the rack rule's ranges
    stay counted in brokers.
    """
    return compute_shares_and_domain_ranges(tree, replica_histogram, weights)[0]


def compute_shares_and_domain_ranges(
    tree: RackTree, replica_histogram: Mapping[int, int], weights: Mapping[int, int] | None = None
) -> tuple[dict[int, Fraction], dict[int, tuple[int, int]]]:
    """`compute_ideal_shares`, and per rack domain below the root the [min, max] replicas of the
    topic the rack rule lets it hold (summed over partitions; a relaxation below the top level,
    so every rack-spread plan is within it). Domains no replica can reach are left out."""
    node_weight = list(tree.node_capacity)
    if weights is not None:
        node_weight = [0] * len(tree.node_labels)
        for broker_id, node in tree.broker_node.items():
            for ancestor in tree.node_ancestry[node]:
                node_weight[ancestor] += weights[broker_id]
    shares: dict[int, Fraction] = {b: Fraction(0) for b in tree.broker_node}
    domain_ranges: dict[int, tuple[int, int]] = {}
    total = sum(r * k for r, k in replica_histogram.items())
    groups = {(r, r): k for r, k in replica_histogram.items() if r > 0 and k > 0}
    pending: list[tuple[int, Fraction, dict]] = [(ROOT, Fraction(total), groups)]
    while pending:
        node, amount, groups = pending.pop()
        if not groups:
            continue
        children = []  # (child node or None, broker id or None, weight, capacity, min, max, groups)
        for child in tree.node_children[node]:
            children.append((child, None, node_weight[child])
                            + _child_range(tree, node, tree.node_capacity[child], groups))
        for broker_id in tree.node_brokers[node]:
            children.append((None, broker_id, 1 if weights is None else weights[broker_id])
                            + _child_range(tree, node, 1, groups))
        level = _water_level(amount, [(weight, low, high) for _, _, weight, _, low, high, _ in children])
        for child, broker_id, weight, _, low, high, child_groups in children:
            share = min(max(level * weight, low), high)
            if broker_id is not None:
                shares[broker_id] = share
            else:
                domain_ranges[child] = (low, high)
                pending.append((child, share, child_groups))
    return shares, domain_ranges


def _child_range(tree: RackTree, node: int, cap: int, groups: Mapping) -> tuple:
    """(capacity, min, max, per-partition groups) of one child of `node` under the rack rule."""
    low_total = high_total = 0
    child_groups: dict[tuple[int, int], int] = {}
    for (low, high), count in groups.items():
        low_level, _ = tree.waterfill(node, low)
        high_level, high_extras = tree.waterfill(node, high)
        child_low = min(cap, low_level)
        child_high = min(cap, high_level + (1 if high_extras else 0))
        low_total += child_low * count
        high_total += child_high * count
        if child_high > 0:
            key = (child_low, child_high)
            child_groups[key] = child_groups.get(key, 0) + count
    return cap, low_total, high_total, child_groups


def _water_level(amount: Fraction, children: list[tuple[int, int, int]]) -> Fraction:
    """The `lambda` with sum(clamp(lambda * cap, low, high)) == amount (exact, piecewise linear)."""

    def filled(level: Fraction) -> Fraction:
        return sum((min(max(level * cap, low), high) for cap, low, high in children), Fraction(0))

    points = sorted({Fraction(v, cap) for cap, low, high in children for v in (low, high) if cap})
    if not points:
        return Fraction(0)
    lo, hi = 0, len(points) - 1  # largest breakpoint with filled(point) <= amount
    if filled(points[0]) > amount:
        return points[0]
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if filled(points[mid]) <= amount:
            lo = mid
        else:
            hi = mid - 1
    start = points[lo]
    below = filled(start)
    if below == amount or lo == len(points) - 1:
        return start
    end = points[lo + 1]
    slope = sum(cap for cap, low, high in children if low <= start * cap and high >= end * cap)
    return start + (amount - below) / slope if slope else start
