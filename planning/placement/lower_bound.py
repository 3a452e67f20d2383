"""The lower bound on replica moves that every plan reports (`replica_moves_lower_bound`).

THE BOUND: stage A's optimum (`planning.placement.cluster_quotas`), the fewest moves that reach
the balance the racks allow per topic and over the cluster — every eligible broker between the
floor and the ceiling of its ideal shares (`planning.placement.quotas.compute_ideal_shares`:
T / n without rack constraints, otherwise the domain totals the rack rule fixes, shared evenly
inside). For one topic it has the closed form `max(F + excess above the ceilings, deficit below
the floors)`, F the replicas that must leave. Without rebalance it is F alone; explicit targets
count their new replicas; a topic stage A leaves out gets its own per-topic bound. When the
joint model runs (`planning.placement.exact_placement`) its moves, the proven optimum, are the
bound.

GUARANTEE: a true lower bound for every rack-spread plan so balanced (checked by brute force in
`tests/planning/test_lower_bound.py`). The kept replicas that badly spread partitions must drop
(rack repairs) are a bound of their own, taken with the replicas that must leave, beside stage
A's optimum and not added to it (a plan asks for them only when it needed more moves than that
optimum); "no broker twice" is not in it. So the bound can be below what any plan needs when the
cluster starts rack-violating or has fewer than 2 * RF + 1 eligible brokers: the summary then
shows the gap.

Worked example: 60 one-partition RF-3 topics on brokers 0-5, add 6 and 7. Per topic the 3
replicas sit on 3 distinct brokers, each within [0, 1] of its share 3/8, so per-topic balancing
moves nothing. Over the cluster every broker must end between floor and ceil of 180/8 = 22.5,
so each old broker gives up 7 or 8 replicas: 44 moves, the bound and the optimum.
"""

from __future__ import annotations

import itertools

from planning.model import Cluster
from planning.placement.cluster_quotas import ClusterQuotas
from planning.placement.exact_placement import count_joint_moves, plan_cluster_exact
from planning.placement.goal import Goal, compute_planning_cluster
from planning.placement.quotas import compute_balanced_ranges
from planning.placement.racks import RackTree, hang_key
from planning.placement.replica_fates import (
    PartitionFates,
    compute_offline_dirs,
    compute_planning_tree,
    compute_stage_a,
    compute_topic_work,
)


def compute_lower_bound(cluster: Cluster, goal: Goal) -> int:
    """The fewest replica moves any plan for `goal` needs to balance counts as racks allow.

    Per topic and over the cluster: the optimum of stage A
    (`planning.placement.cluster_quotas`), i.e. the fewest moves after which every eligible
    broker holds between the floor and the ceiling of its ideal share of every topic and of the
    cluster (T / n without rack constraints, otherwise the share the rack rule leaves to b's
    domains, split evenly inside them). For one topic this is the closed form
    `max(F + sum(max(0, c_b - hi_b)), sum(max(0, lo_b - c_b)))`. With `rebalance=False` only the
    replicas that must leave, F. Explicit targets count their new replicas.
    """
    cluster = compute_planning_cluster(cluster, goal)
    tree = compute_planning_tree(cluster, goal)
    eligible = frozenset(tree.broker_node)
    explicit = dict(goal.explicit_targets)
    offline_dirs = compute_offline_dirs(cluster)
    topic_work = compute_topic_work(cluster, goal, explicit, eligible, offline_dirs)
    cluster_quotas = compute_stage_a(tree, topic_work, goal)
    joint = plan_cluster_exact(tree, topic_work, cluster_quotas, {}) if goal.rebalance else None
    if joint is not None:  # the exact optimum is the tightest bound
        return count_joint_moves(tree, topic_work, joint)
    return compute_plan_lower_bound(tree, topic_work, goal, cluster_quotas)


def compute_plan_lower_bound(tree, topic_work, goal: Goal, cluster_quotas: ClusterQuotas,
                             with_repairs: bool = True) -> int:
    """Explicit moves + forced moves (without rebalance) or stage A's optimum plus the per-topic
    bound of each topic stage A left out (with rebalance); rack repairs counted unless
    `with_repairs` is False (they can only raise the bound above a plan's moves when the plan
    needed more moves than stage A's optimum: the placer asks for them only then)."""
    repairs = _fewest_rack_repairs if with_repairs else (lambda tree, w: 0)
    bound = 0
    ranges_cache: dict = {}
    explicit = forced = 0  # over the topics stage A counted
    rebalance = goal.rebalance
    for name, partitions, work in topic_work:
        balanced = rebalance and name not in goal.excluded_topics
        if not balanced or name not in cluster_quotas.quotas:
            bound += _work_lower_bound(tree, partitions, work, balanced, ranges_cache)
            if not balanced:
                bound += sum(repairs(tree, w) for w in work if not w.fixed)
            continue
        for p, w in zip(partitions, work):
            if w.fixed:
                explicit += len(set(w.replicas) - set(p.replicas))
            else:
                forced += w.replication - len(w.kept) + repairs(tree, w)
    if rebalance:
        # Stage A's optimum leaves rack repairs out; the replicas that must leave, repairs
        # included, are a bound of their own (a cluster that starts rack-violating).
        bound += explicit + max(cluster_quotas.moves_lower_bound, forced)
    return bound


def _fewest_rack_repairs(tree: RackTree, w: PartitionFates) -> int:
    """The fewest kept replicas of `w` to drop so that the rest can be completed rack-spread."""
    if tree.is_flat or not w.kept or tree.fits(hang_key(tree, w.kept), w.replication):
        return 0
    kept = sorted(w.kept)
    for drop in range(1, len(kept) + 1):
        if any(tree.fits(hang_key(tree, rest), w.replication)
               for rest in itertools.combinations(kept, len(kept) - drop)):
            return drop
    return len(kept)


def _work_lower_bound(tree, partitions, work, rebalance: bool, cache: dict) -> int:
    """`compute_lower_bound` for one topic, from the fates already worked out (before repair)."""
    counts: dict[int, int] = {}
    histogram: dict[int, int] = {}
    forced = explicit_moves = 0
    for p, w in zip(partitions, work):
        histogram[w.replication] = histogram.get(w.replication, 0) + 1
        if w.fixed:
            explicit_moves += len(set(w.replicas) - set(p.replicas))
            for b in w.replicas:
                counts[b] = counts.get(b, 0) + 1
            continue
        for b in w.kept:
            counts[b] = counts.get(b, 0) + 1
        forced += w.replication - len(w.kept)
    return explicit_moves + _topic_lower_bound(tree, counts, forced, histogram, rebalance, cache)


def _topic_lower_bound(tree, counts, forced: int, histogram, rebalance: bool, cache: dict) -> int:
    """One topic's closed form: `max(forced + excess above the ceilings, deficit below the floors)`."""
    if not rebalance or not tree.broker_node:
        return forced
    key = tuple(sorted(histogram.items()))
    ranges = cache.get(key)
    if ranges is None:
        ranges = cache[key] = compute_balanced_ranges(tree, histogram)
    excess = sum(max(0, c - ranges[b][1]) for b, c in counts.items() if b in ranges)
    deficit = sum(max(0, low - counts.get(b, 0)) for b, (low, _) in ranges.items())
    return max(forced + excess, deficit)
