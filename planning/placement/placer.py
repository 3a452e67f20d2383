"""The placer: where every replica should live. Pure: a cluster and a goal in, a plan out.

GUARANTEES (constraints: breaking one raises `PlanInfeasibleError` naming the partition; with
`Goal.partial` that partition is left as it is, listed in `PlacementPlan.infeasible`):
1. no broker twice in a partition; the replication factor is kept; explicit targets are
   validated (`planning.validation`) and kept as given;
2. new replicas only on eligible brokers (alive, not draining, an online dir, not barred by
   `Broker.cannot_host`), in a dir with room under the disk limit (`log_dir_choice`);
3. multi-level rack spread (`racks`), unless `Goal.ignore_racks` (a heal's last resort).
GOALS, soft, in priority order (the plan reports how well it met them, `plan_summary`): 1. move
as little as possible; 2. every eligible broker between floor and ceil of its ideal share of each
topic and of the cluster (new brokers included); 3. even preferred leaders, by reordering;
4. even bytes (new replicas to the dir left least full for its share, `log_dir_choice`; reported,
not otherwise optimised).

HOW (topics in name order, partitions in id order: deterministic, no clock):
0. each replica's fate: kept, or a slot to fill (`replica_fates`);
1. stage A: every broker's quota of every topic at once, fewest moves (`cluster_quotas`);
2-5. per topic: repair racks, drop above quota, fill the slots down the rack tree, re-point
   (`topic_replicas`); a topic that missed its quotas is placed again exactly, and a small
   cluster is placed by one exact flow instead of 2-5 (`exact_placement`);
6. leaders, once for the cluster (`leadership`); dirs for the new replicas (`log_dir_choice`);
7. a new replica that fits no dir keeps its broker out of that partition and the cluster is
   planned again, at most `DISK_REPLANS` times; then `PlanInfeasibleError` names the dirs.
The bound reported beside the moves: `lower_bound`. The whole design, with worked examples:
docs/design.md, "The planner".
"""

from __future__ import annotations

import itertools
from dataclasses import replace

from planning.model import Cluster, PartitionState, TopicPartition
from planning.placement.exact_placement import (
    PLAN_EXACT_ARCS,
    count_joint_moves,
    place_exactly_where_quotas_missed,
    plan_cluster_exact,
)
from planning.placement.goal import Goal, compute_planning_cluster
from planning.placement.leadership import LeaderChoice, compute_leaders
from planning.placement.log_dir_choice import DiskOverflow, compute_target_dirs, describe_disk_overflow
from planning.placement.lower_bound import compute_plan_lower_bound
from planning.placement.plan_summary import PlacementPlan, PlanTally
from planning.placement.quotas import TopicQuotas
from planning.placement.replica_fates import (
    PartitionFates,
    compute_offline_dirs,
    compute_planning_tree,
    compute_stage_a,
    compute_topic_work,
)
from planning.placement.topic_replicas import plan_topic_replicas
from planning.validation import validate_targets
from schemas.errors import PlanInfeasibleError

# `Goal`, `PlacementPlan` and `compute_planning_cluster` live beside their jobs; the rest of the
# product imports them from here, with `plan_placement`.
__all__ = ["DISK_REPLANS", "Goal", "PlacementPlan", "compute_planning_cluster", "plan_placement"]

DISK_REPLANS = 4


def plan_placement(cluster: Cluster, goal: Goal) -> PlacementPlan:
    """Plan final targets for `goal` on `cluster`; see the module docstring for the rules."""
    cluster = compute_planning_cluster(cluster, goal)
    kept_off: dict[int, set[TopicPartition]] = {}
    seen: list[DiskOverflow] = []
    for _ in range(DISK_REPLANS + 1):
        planning = cluster if not kept_off else cluster.with_brokers(
            replace(b, cannot_host=b.cannot_host | frozenset(kept_off.get(b.id, ()))) for b in cluster.brokers)
        try:
            plan, overflow = _plan_once(planning, goal)
        except PlanInfeasibleError as error:
            if not kept_off:
                raise
            # Keeping the full dirs out left a partition nowhere to go: the disks are the cause.
            raise PlanInfeasibleError(f"{describe_disk_overflow(cluster, seen, goal.disk_max_usage_percent)} "
                                      f"(then: {error})", error.partition) from None
        if not overflow:
            return plan
        seen.extend(overflow)
        for o in overflow:
            kept_off.setdefault(o.broker_id, set()).add(o.tp)
    raise PlanInfeasibleError(describe_disk_overflow(cluster, seen, goal.disk_max_usage_percent), seen[0].tp)


def _plan_once(cluster: Cluster, goal: Goal) -> tuple[PlacementPlan, list[DiskOverflow]]:
    """One placement; the new replicas that fit no dir under the disk limit (empty when all do)."""
    explicit = dict(goal.explicit_targets)
    if explicit:
        validate_targets(cluster, explicit)
    tree = compute_planning_tree(cluster, goal)
    eligible = frozenset(tree.broker_node)
    offline_dirs = compute_offline_dirs(cluster)
    warnings = list(tree.warnings)
    infeasible: dict[TopicPartition, str] = {}
    tally = PlanTally(cluster, tree, goal)
    cluster_load = {b: tally.replicas_before.get(b, 0) for b in eligible}

    topic_work = compute_topic_work(cluster, goal, explicit, eligible, offline_dirs)
    cluster_quotas = compute_stage_a(tree, topic_work, goal)
    exact_arcs_left = PLAN_EXACT_ARCS
    placed_finals: list[tuple[tuple[int, ...], ...]] = []
    missed: dict[str, str] = {}  # topic -> why its quotas were not met
    joint = plan_cluster_exact(tree, topic_work, cluster_quotas, {}) if goal.rebalance else None
    if joint is not None:
        placed_finals = list(joint)
        bound = count_joint_moves(tree, topic_work, joint)
    else:
        bound = compute_plan_lower_bound(tree, topic_work, goal, cluster_quotas, with_repairs=False)
    for name, partitions, work in ([] if joint is not None else topic_work):
        quotas = cluster_quotas.quotas.get(name)
        balanced = goal.rebalance and name not in goal.excluded_topics
        placed = _plan_topic_or_leave_out(tree, work, partitions, cluster_load, goal, eligible, infeasible,
                                          quotas, balanced)
        if balanced and quotas is not None and not any(w.tp in infeasible for w in work):
            placed, exact_arcs_left, why_missed = place_exactly_where_quotas_missed(
                tree, work, placed, quotas, cluster_load, exact_arcs_left)
            if why_missed:
                missed[name] = why_missed
        cluster_load = placed.cluster_load
        placed_finals.append(placed.finals)

    choices = [
        LeaderChoice(name, final, p.replicas[0] if p.replicas else None, w.kept,
                     w.fixed or (excluded and bool(p.replicas) and bool(final) and final[0] == p.replicas[0]))
        for (name, partitions, work), finals in zip(topic_work, placed_finals)
        for excluded in [name in goal.excluded_topics]
        for p, w, final in zip(partitions, work, finals)
    ]
    leaders = iter(compute_leaders(choices, eligible, goal.rebalance))
    targets: dict[TopicPartition, tuple[int, ...]] = {}
    changed: list[tuple[PartitionState, tuple[int, ...]]] = []  # their dirs chosen once all are known
    for (name, partitions, work), finals in zip(topic_work, placed_finals):
        led = [final if not final or final[0] == leader else compute_led_by(final, leader)
               for final, leader in zip(finals, itertools.islice(leaders, len(finals)))]
        for p, w, final in zip(partitions, work, led):
            if final != p.replicas:
                targets[w.tp] = final
                changed.append((p, final))
        tally.add_topic(name, partitions, work, led, missed.get(name, ""))

    target_log_dirs, overflow = compute_target_dirs(cluster, goal.disk_max_usage_percent, changed)
    if tally.moves > bound and joint is None:  # only then can rack repairs raise the bound
        bound = compute_plan_lower_bound(tree, topic_work, goal, cluster_quotas)
    plan = tally.plan(targets, target_log_dirs, bound, infeasible, cluster_quotas.cluster_ranges, missed,
                      warnings)
    return plan, overflow


def _plan_topic_or_leave_out(tree, work, partitions, cluster_load, goal: Goal, eligible,
                             infeasible: dict[TopicPartition, str], quotas: TopicQuotas | None,
                             rebalance: bool):
    """`plan_topic_replicas` to stage A's `quotas`; with `goal.partial`, a partition it cannot
    place is pinned as it is (recorded in `infeasible`) and the topic planned again without it,
    to per-topic quotas (stage A counted that partition as placed)."""
    while True:
        try:
            return plan_topic_replicas(tree, work, cluster_load, rebalance, quotas)
        except PlanInfeasibleError as error:
            quotas = None
            index = next((i for i, w in enumerate(work) if w.tp == error.partition and not w.fixed), None)
            if not goal.partial or index is None:
                raise
            infeasible[error.partition] = error.message
            p = partitions[index]
            members = frozenset(b for b in p.replicas if b in eligible)
            work[index] = PartitionFates(p.tp, p.replicas, members, frozenset(), len(members), 0, True)


def compute_led_by(final: tuple[int, ...], leader: int | None) -> tuple[int, ...]:
    """`final` with `leader` first, the others in their order."""
    if leader is None or not final or final[0] == leader:
        return tuple(final)
    return (leader,) + tuple(b for b in final if b != leader)
