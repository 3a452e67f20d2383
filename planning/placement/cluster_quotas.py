"""Cluster-wide quotas ("stage A"): how many replicas of each topic each broker should hold, chosen
for all topics together so that the cluster balances too, with the fewest moves.

GOAL. Every broker within the floor and ceiling of its ideal share of each topic AND of the whole
cluster (the planner's soft goal 2), with the fewest replica moves (goal 1). Per-topic quotas alone
(`planning.placement.quotas.compute_topic_quotas`) hand each topic's `T mod n` higher shares to
brokers that already hold them, so when topics are small (fewer replicas than brokers) a new
broker would never get any. Here the higher shares of all topics are apportioned at once and a
new broker reaches its cluster share (docs/design.md, "Why cluster-wide quotas", has an example).

THE MODEL. Variables `q[t][b]`, the replicas of topic t on eligible broker b, with
- per topic and broker: `q[t][b]` in `[floor s_tb, ceil s_tb]`, `s_tb` b's ideal share of t
  (`compute_ideal_shares`: T / n without racks, else what the rack rule leaves to b's domains);
- per topic and rack domain D: `sum_{b in D} q[t][b]` within the [min, max] the rack rule lets
  D hold over t's partitions (necessary for a rack-spread plan; not a balance goal: balance is
  defined per broker, so a domain's total is not pinned to its share);
- per broker over the cluster: `sum_t q[t][b]` in `[floor C_b, ceil C_b]`, `C_b = sum_t s_tb`;
- cost: the moves `T_t - sum_b min(q[t][b], c[t][b])`, `c` the replicas that may stay. Every
  plan whose counts are `q` keeps at most `min(q, c)` replicas on b, so this is the fewest moves
  that reach `q`, and it is convex in `q` (-1 per unit up to `c`, 0 above).
As a network: source -> (t, root) -> (t, D) down t's rack tree -> broker b -> sink, every arc
with its interval. The topic side and the cluster side are each a laminar family, so the
least-cost flow is integral and optimal for the integer problem (`planning.placement.flows`). It is always feasible: the ideal shares themselves are a
fractional point inside every interval. Its optimum is a lower bound on the moves of any plan
balanced per topic and over the cluster; the per-topic greedy
(`planning.placement.topic_replicas`) then places replicas to meet `q` and usually meets the
bound exactly (the placer reports the bound beside the moves).

Pure: values in, a fresh value out. Cost: one solve over `topics * (domains + 2 * brokers)`
arcs (about 430k arcs for 1000 topics on 200 brokers).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from types import MappingProxyType
from typing import Mapping, Sequence

import numpy as np

from planning.placement.flows import FlowBuilder, solve_min_cost_flow
from planning.placement.quotas import TopicQuotas, compute_shares_and_domain_ranges
from planning.placement.racks import ROOT, RackTree


@dataclass(frozen=True)
class TopicDemand:
    """One topic as stage A sees it.

    replica_histogram: {replicas to place per partition: partitions} (pinned positions excluded).
    current: replicas of the topic that may stay, per tree broker.
    """

    topic: str
    replica_histogram: Mapping[int, int]
    current: Mapping[int, int]


@dataclass(frozen=True)
class ClusterQuotas:
    """Per topic the quotas the greedy places to, and the fewest moves that reach them all.

    quotas: only topics stage A could include (a topic with a partition needing more replicas
        than there are eligible brokers is left to the per-topic path, which reports it).
    moves_lower_bound: the optimum of the model over the included topics, forced moves included.
    cluster_ranges: per tree broker the floor and ceiling of its share of the cluster (those
        topics), the range a balanced plan keeps it in.
    """

    quotas: Mapping[str, TopicQuotas]
    moves_lower_bound: int
    cluster_ranges: Mapping[int, tuple[int, int]] = field(default_factory=lambda: MappingProxyType({}))


def compute_cluster_quotas(tree: RackTree, demands: Sequence[TopicDemand]) -> ClusterQuotas:
    """Stage A for `demands` (see the module docstring). Deterministic for a given order.

    Built as arrays (topics x brokers): a cluster of 20,000 small topics is 2.7M arcs.
    """
    brokers = sorted(tree.broker_node)
    capacity = tree.node_capacity[ROOT]
    included = [
        d for d in demands
        if brokers and all(r <= capacity for r, k in d.replica_histogram.items() if k)
    ]
    if not included:
        return ClusterQuotas(MappingProxyType({}), 0)
    node_count = len(tree.node_labels)
    broker_count = len(brokers)
    column = {b: i for i, b in enumerate(brokers)}

    # Per distinct histogram (few: topics mostly share their shape): the brokers' floor/ceil of
    # their ideal share, the domains' rack-rule ranges, and the exact shares for the cluster's.
    key_index: dict[tuple, int] = {}
    topic_key = np.empty(len(included), dtype=np.int64)
    key_tables: list[tuple] = []
    for t, demand in enumerate(included):
        key = tuple(sorted((r, k) for r, k in demand.replica_histogram.items() if r > 0 and k > 0))
        index = key_index.get(key)
        if index is None:
            index = key_index[key] = len(key_tables)
            shares, domain_ranges = compute_shares_and_domain_ranges(tree, dict(key))
            key_tables.append((
                key,
                [shares[b] for b in brokers],
                [math.floor(shares[b]) for b in brokers],
                [math.ceil(shares[b]) for b in brokers],
                [domain_ranges.get(node, (0, 0)) for node in range(1, node_count)],
                sum(r * k for r, k in key),
            ))
        topic_key[t] = index
    uses = np.bincount(topic_key, minlength=len(key_tables))
    cluster_share = [sum((int(uses[i]) * table[1][j] for i, table in enumerate(key_tables)), Fraction(0))
                     for j in range(broker_count)]
    low_table = np.array([table[2] for table in key_tables], dtype=np.int64)
    high_table = np.array([table[3] for table in key_tables], dtype=np.int64)
    totals = np.array([table[5] for table in key_tables], dtype=np.int64)[topic_key]
    low = low_table[topic_key]  # topics x brokers
    high = high_table[topic_key]
    current = np.zeros((len(included), broker_count), dtype=np.int64)
    rows, columns, values = [], [], []
    for t, demand in enumerate(included):
        for b, count in demand.current.items():
            j = column.get(b)
            if j is not None and count:
                rows.append(t)
                columns.append(j)
                values.append(count)
    current[rows, columns] = values
    kept = np.minimum(current, high)

    # Vertices: source, sink, one per broker, then one per (topic, rack node).
    topics = len(included)
    total = int(totals.sum())
    builder = FlowBuilder()
    source = builder.add_node(total)
    sink = builder.add_node(-total)
    broker_vertex = builder.add_nodes(broker_count) + np.arange(broker_count)
    topic_base = builder.add_nodes(topics * node_count) + node_count * np.arange(topics)
    builder.add_arcs(broker_vertex, np.full(broker_count, sink),
                     [math.floor(x) for x in cluster_share], [math.ceil(x) for x in cluster_share], 0)
    builder.add_arcs(np.full(topics, source), topic_base + ROOT, totals, totals, 0)
    if node_count > 1:
        parents = np.array(tree.node_parent[1:], dtype=np.int64)
        nodes = np.arange(1, node_count)
        node_ranges = np.array([table[4] for table in key_tables], dtype=np.int64)[topic_key]
        node_arcs = builder.add_arcs(
            (topic_base[:, None] + parents[None, :]).ravel(),
            (topic_base[:, None] + nodes[None, :]).ravel(),
            node_ranges[:, :, 0].ravel(), node_ranges[:, :, 1].ravel(), 0,
        )
    hang = np.array([tree.broker_node[b] for b in brokers], dtype=np.int64)
    tails = topic_base[:, None] + hang[None, :]
    heads = np.broadcast_to(broker_vertex[None, :], tails.shape)
    # Kept units cost -1 each (a replica that stays), the rest 0: the moves are total - kept.
    keep_rows, keep_columns = np.nonzero(kept)
    keep_arcs = builder.add_arcs(
        tails[keep_rows, keep_columns], heads[keep_rows, keep_columns],
        np.minimum(low, kept)[keep_rows, keep_columns], kept[keep_rows, keep_columns], -1,
    )
    rest_rows, rest_columns = np.nonzero(high > kept)
    rest_arcs = builder.add_arcs(
        tails[rest_rows, rest_columns], heads[rest_rows, rest_columns],
        np.maximum(0, low - kept)[rest_rows, rest_columns], (high - kept)[rest_rows, rest_columns], 0,
    )

    solution = solve_min_cost_flow(builder.problem())
    if not solution.feasible:  # cannot happen (the ideal shares are a feasible point); be loud
        raise AssertionError("stage A: the cluster quota flow is infeasible; report this with the snapshot")
    flows = solution.flows
    quota = np.zeros((topics, broker_count), dtype=np.int64)
    quota[keep_rows, keep_columns] += flows[keep_arcs:keep_arcs + len(keep_rows)]
    quota[rest_rows, rest_columns] += flows[rest_arcs:rest_arcs + len(rest_rows)]
    if node_count > 1:
        node_flows = flows[node_arcs:node_arcs + topics * (node_count - 1)].reshape(topics, node_count - 1)
    quotas: dict[str, TopicQuotas] = {}
    for t, demand in enumerate(included):
        node_quota = {ROOT: int(totals[t])}
        if node_count > 1:
            node_quota.update(zip(range(1, node_count), node_flows[t].tolist()))
        quotas[demand.topic] = TopicQuotas(node_quota=node_quota,
                                           broker_quota=dict(zip(brokers, quota[t].tolist())))
    cluster_ranges = {b: (math.floor(share), math.ceil(share)) for b, share in zip(brokers, cluster_share)}
    return ClusterQuotas(MappingProxyType(quotas), total + solution.cost, MappingProxyType(cluster_ranges))
