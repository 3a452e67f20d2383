"""Exact placement of one topic: every partition's replicas chosen at once by a min-cost flow.

RULE. Given the topic's partitions (fates decided: kept replicas, open slots, pinned positions,
excluded brokers) and per tree broker an interval `[low, high]` for its replicas of the topic
(from stage A, `planning.placement.cluster_quotas`), choose for each partition `replication`
distinct tree brokers such that
- the partition is rack-spread: every domain's and broker's count lies in its box
  (`planning.placement.racks.compute_partition_boxes`, the rule as intervals);
- every broker's total over the topic lies in its interval;
- the cost is least: a new replica costs `scale + 2 * size bucket` (fewest moves first, then the
  smallest partitions: buckets are size ranks in 32 steps), keeping a partition's leader earns 1
  (followers move first). `scale` exceeds every possible sum of tie-breaks, so the number of
  moves is minimal outright.
The network: source -> (partition, root) -> (partition, domain) down the rack tree with the
boxes -> broker (capacity 1, the cost) -> sink with the broker's interval. Per partition the
domains form a laminar family and the brokers another, so the optimum is integral: the fewest
moves of any rack-spread plan meeting the intervals, proven. Explicit (fixed) partitions are kept
as they are and count against the intervals.

The placer runs it on a topic whose greedy placement missed its quotas, and on the whole
cluster at once (every topic, per-topic and cluster bounds: a pair vertex (topic, broker) sits
between the partitions and the broker, so the families stay laminar) when the cluster is small
enough (`planning.placement.placer`), always within an arc budget. Pure: values in, a fresh
value out.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from planning.placement.flows import FlowBuilder, solve_min_cost_flow
from planning.placement.racks import ROOT, RackTree, compute_partition_boxes
from planning.placement.replica_fates import PartitionFates

SIZE_BUCKETS = 32


def count_topic_flow_arcs(tree: RackTree, partitions: Sequence[PartitionFates]) -> int:
    """The arcs `plan_topic_exact` would build: what its budget is counted in."""
    per_partition = len(tree.node_labels) + len(tree.broker_node)
    return sum(per_partition for p in partitions if not p.fixed and p.replication) + 2 * len(tree.broker_node)


def plan_topic_exact(
    tree: RackTree,
    partitions: Sequence[PartitionFates],
    broker_bounds: Mapping[int, tuple[int, int]],
) -> tuple[tuple[int, ...], ...] | None:
    """The final replica list per partition (input order), or None when no plan meets the bounds."""
    result = plan_topics_exact(tree, [partitions], [broker_bounds], None)
    return None if result is None else result[0]


def plan_topics_exact(
    tree: RackTree,
    topics: Sequence[Sequence[PartitionFates]],
    topic_bounds: Sequence[Mapping[int, tuple[int, int]]],
    cluster_bounds: Mapping[int, tuple[int, int]] | None,
) -> tuple[tuple[tuple[int, ...], ...], ...] | None:
    """Several topics at once: per topic and broker `topic_bounds`, and over all of them per
    broker `cluster_bounds` (None: no cluster rule). The finals per topic per partition, or None
    when no plan meets every bound. With every topic of the cluster and the floor/ceil of the
    shares as bounds, this is the exact optimum of the whole placement (the placer's joint
    model on clusters within its budget)."""
    brokers = sorted(tree.broker_node)
    column = {b: j for j, b in enumerate(brokers)}
    width = len(brokers)
    node_count = len(tree.node_labels)
    pair_low = np.array([[bounds.get(b, (0, 0))[0] for b in brokers] for bounds in topic_bounds],
                        dtype=np.int64).reshape(len(topics), width)
    pair_high = np.array([[bounds.get(b, (0, 0))[1] for b in brokers] for bounds in topic_bounds],
                         dtype=np.int64).reshape(len(topics), width)
    if cluster_bounds is None:
        broker_low = np.zeros(width, dtype=np.int64)
        broker_high = np.full(width, np.iinfo(np.int32).max, dtype=np.int64)
    else:
        broker_low = np.array([cluster_bounds.get(b, (0, 0))[0] for b in brokers], dtype=np.int64)
        broker_high = np.array([cluster_bounds.get(b, (0, 0))[1] for b in brokers], dtype=np.int64)
    open_partitions: list[tuple[int, int]] = []
    for t, partitions in enumerate(topics):
        for index, p in enumerate(partitions):
            if p.fixed:
                for b in p.replicas:
                    j = column.get(b)
                    if j is not None:
                        pair_low[t, j] -= 1
                        pair_high[t, j] -= 1
                        broker_low[j] -= 1
                        broker_high[j] -= 1
            elif p.replication:
                open_partitions.append((t, index))
    if (pair_high < 0).any() or (broker_high < 0).any():
        return None
    pair_low, broker_low = np.maximum(pair_low, 0), np.maximum(broker_low, 0)
    if not open_partitions:
        if pair_low.any() or broker_low.any():
            return None
        return tuple(tuple(tuple(p.replicas) for p in partitions) for partitions in topics)

    sizes = sorted(topics[t][i].size for t, i in open_partitions)
    rank = {size: position for position, size in reversed(list(enumerate(sizes)))}
    replicas_total = sum(topics[t][i].replication for t, i in open_partitions)
    scale = 2 * SIZE_BUCKETS * (replicas_total + 1)
    hang = np.array([tree.broker_node[b] for b in brokers], dtype=np.int64)

    builder = FlowBuilder()
    source = builder.add_node(replicas_total)
    sink = builder.add_node(-replicas_total)
    broker_vertex = builder.add_nodes(width) + np.arange(width)
    builder.add_arcs(broker_vertex, sink, broker_low, broker_high, 0)
    pair_vertex = builder.add_nodes(len(topics) * width) + np.arange(len(topics) * width).reshape(len(topics), width)
    builder.add_arcs(pair_vertex.ravel(), np.tile(broker_vertex, len(topics)), pair_low.ravel(), pair_high.ravel(), 0)
    parents = np.array(tree.node_parent[1:], dtype=np.int64)
    children = np.arange(1, node_count)
    broker_arc_blocks = []
    for t, index in open_partitions:
        p = topics[t][index]
        node_box, broker_box = compute_partition_boxes(tree, p.replication)
        base = builder.add_nodes(node_count)
        builder.add_arc(source, base + ROOT, p.replication, p.replication)
        if node_count > 1:
            builder.add_arcs(base + parents, base + children,
                             [node_box[n][0] for n in range(1, node_count)],
                             [node_box[n][1] for n in range(1, node_count)], 0)
        allowed = np.array([b not in p.excluded for b in brokers])
        box_low = np.array([broker_box[b][0] for b in brokers], dtype=np.int64)
        box_high = np.array([broker_box[b][1] for b in brokers], dtype=np.int64)
        if (box_low > allowed).any():
            return None  # a broker the rule needs in this partition may not host it
        box_high = np.minimum(box_high, allowed)
        costs = np.full(width, scale + 2 * (rank[p.size] * SIZE_BUCKETS // len(sizes)), dtype=np.int64)
        leader = p.replicas[0] if p.replicas else None
        for b in p.kept:
            costs[column[b]] = -1 if b == leader else 0
        first = builder.add_arcs(base + hang, pair_vertex[t], box_low, box_high, costs)
        broker_arc_blocks.append((t, index, first))

    solution = solve_min_cost_flow(builder.problem())
    if not solution.feasible:
        return None
    flows = solution.flows
    finals = [[tuple(p.replicas) for p in partitions] for partitions in topics]
    for t, index, first in broker_arc_blocks:
        p = topics[t][index]
        chosen = {brokers[j] for j in np.flatnonzero(flows[first:first + width])}
        final = [None if b is None or (b in p.kept and b not in chosen) else b for b in p.replicas]
        arriving = iter(sorted(chosen - set(final)))
        finals[t][index] = tuple(b if b is not None else next(arriving) for b in final)
    return tuple(tuple(f) for f in finals)
