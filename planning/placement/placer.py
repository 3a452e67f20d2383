"""The placer: where every replica should live (SPEC 4). Pure: a cluster and a goal in, a plan out.

GOALS, in priority order (soft: the planner does as well as it can, and reports how well):
1. Move as little as possible. Keep every replica that may stay; move exactly the replicas that
   must leave (dead broker, draining broker, offline dir) plus the fewest needed for balance;
   among equally good choices move small partitions, then followers rather than leaders.
2. Even replica counts per topic and over the cluster: every eligible broker between the floor
   and the ceiling of its ideal share of each topic and of the whole cluster (T / n without
   rack constraints; otherwise what the racks leave to its domains), new brokers included even
   when every topic is smaller than the cluster.
3. Even preferred leadership per topic and over the cluster (floor/ceil of P_t / n and of L / n),
   by reordering, not by moving.
4. Even bytes: a new replica goes to its broker's least used online log dir (Kafka's bytes in
   it). The bytes each broker holds after the plan, and their spread, are reported next to the
   counts (`bytes_after`, `cluster_bytes_spread`); they are not otherwise optimised.

DISK CAPACITY (`Goal.disk_max_usage_percent`, SPEC 4 rule 4; Cruise Control's DiskCapacityGoal):
no new replica goes into a dir whose projected usage — the volume's used bytes as
describe-log-dirs reports them (total - usable) plus the bytes the plan puts there — would
exceed the limit. A replica that fits no online dir of its broker keeps that broker out of the
partition (as `Broker.cannot_host` does) and the cluster is planned again, at most
`DISK_REPLANS` times; if replicas still do not fit, `PlanInfeasibleError` names the dirs with
their figures. Dirs that do not report their volume's size are not limited. Dirs sharing one
volume each count only their own incoming bytes against it (the volume is not recognised).

CONSTRAINTS (breaking one raises `PlanInfeasibleError` naming the partition; with
`Goal.partial` that partition is left as it is instead, listed in `PlacementPlan.infeasible`, and
every other partition is planned as usual):
1. No broker twice in a partition; the replication factor is kept.
2. New replicas only on eligible brokers: alive, not draining, with an online dir (and never on
   the broker whose dir holds the offline replica being replaced, nor on a broker whose failed
   dir held the partition before and that has not restarted since: `Broker.cannot_host`).
3. Multi-level rack spread, as defined in `planning.placement.racks` (water-filling at every level);
   `Goal.ignore_racks` drops it (the last resort of a heal that cannot keep it, see
   `handlers.triggers`).
Explicit targets (`Goal.explicit_targets`) are validated (`planning.validation`) and kept as given.

ALGORITHM (topics in name order; partitions in id order; everything deterministic):
0. Fate of each replica, every topic: kept, or a slot to fill (it must leave). With
   `heal=False` replicas on dead brokers or offline dirs stay where they are ("pinned") and are
   not counted.
1. Stage A (`planning.placement.cluster_quotas`), once for the cluster: each broker's quota of
   each topic, within the floor/ceiling of its share of the topic and of the cluster, with the
   fewest moves: one min-cost flow, a proven optimum. Per topic then:
2. Rack repair: if the kept replicas cannot be completed to a rack-spread set, drop kept
   replicas (followers first) until they can.
3. Quotas: stage A's (a topic it could not include, or one re-planned without a partition that
   `Goal.partial` leaves out, gets its own: `planning.placement.quotas`).
4. Balance (`rebalance=True`): a broker above its quota gives up that many replicas, choosing
   partitions not yet touched, then small ones, then ones it does not lead.
5. Fill every slot top-down through the rack tree: at each node the child with the most
   remaining quota among those that keep the partition completable, then the fewest replicas
   of the topic per broker (a slot the rack rule forces into a domain whose quota is used up
   spreads there instead of piling on one broker); at the leaves the broker with the most
   remaining quota, then the fewest replicas of the topic, then of the cluster, then lowest id.
   A slot that had to overflow a full broker is repaired by re-pointing it, or it and another
   new replica, to a broker still below quota (no extra moves). Then a new replica on a broker
   holding two or more replicas of the topic more than an eligible broker outside the partition
   is re-pointed there when the racks allow (no extra moves; it matters without rebalance,
   where kept replicas skew the quotas). With rebalance, what remains is shifted along a chain
   of re-pointed replicas found by breadth-first search, paying a move only as a last resort
   (`planning.placement.topic_replicas._shift_along_paths`).
6. Certificate: a topic whose brokers all end at their quotas has the fewest moves stage A
   counted. Where the greedy missed (few brokers per replica, tight racks) the topic is placed
   again by the exact flow (`planning.placement.topic_flow`), within an arc budget.
7. Leaders, once for the cluster (`planning.placement.leadership`): one min-cost flow evens
   leadership per topic and over the cluster, then changes the fewest leaders; by reordering.

THE JOINT MODEL: a cluster within `JOINT_EXACT_ARCS` skips steps 1-6: one exact flow over every
topic (`planning.placement.topic_flow.plan_topics_exact`) places all replicas balanced per topic
and over the cluster with the fewest moves, and its moves are the bound (the proven optimum).

THE BOUND (`compute_lower_bound`, reported as `replica_moves_lower_bound`): stage A's optimum,
the fewest moves that reach the balance the racks allow per topic and over the cluster — every
broker between the floor and the ceiling of its ideal shares
(`planning.placement.quotas.compute_ideal_shares`: T / n without rack constraints, otherwise the
domain totals the rack rule fixes, shared evenly inside). For one topic this is SPEC 4's
`max(F + excess above the ceilings, deficit below the floors)`. It is a true lower bound for
every rack-spread plan so balanced (checked by brute force in
`tests/planning/test_lower_bound.py`); the planner meets it on all four benchmarks. Rack repairs
of badly spread partitions and "no broker twice" are not in it, so it can be below what any plan
needs when the cluster starts rack-violating or has fewer than 2 * RF + 1 eligible brokers.

Worked example (cluster-wide): 60 one-partition RF-3 topics on brokers 0-5, add 6 and 7. Per
topic the 3 replicas already sit on 3 distinct brokers, each within [0, 1] of its share 3/8, so
per-topic balancing moves nothing and 6 and 7 stay empty. Stage A adds the cluster rule: every
broker between floor and ceil of 180/8 = 22.5, so each old broker gives up 7 or 8 replicas:
44 moves, the bound and the optimum.

Worked example (one topic): brokers 1,2,3 (no racks), topic t with 6 partitions RF 2, every broker holding
4 replicas; add broker 4. T = 12, n = 4: every quota is 3. Each of 1,2,3 drops one replica
(from different partitions, followers first): 3 slots, all filled by broker 4 (quota 3).
Moves 3 = lower bound max(excess 3, deficit 3). Leaders: 6 partitions over 4 brokers, ceil 2;
broker 4 leads none, floor 1, so it takes the lead of one partition it now holds.
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Mapping, Sequence

from planning.placement.cluster_quotas import ClusterQuotas, TopicDemand, compute_cluster_quotas
from planning.placement.leadership import LeaderChoice, compute_leaders
from planning.model import Broker, Cluster, PartitionState, TopicPartition
from planning.placement.quotas import TopicQuotas, compute_balanced_ranges
from planning.placement.racks import RackTree, compute_rack_tree, hang_key
from planning.placement.topic_flow import count_topic_flow_arcs, plan_topic_exact, plan_topics_exact
from planning.placement.topic_replicas import PartitionFates, TopicReplicas, plan_topic_replicas
from planning.validation import validate_targets
from schemas.errors import InvalidReplicaAssignmentError, PlanInfeasibleError

_EMPTY: Mapping = MappingProxyType({})
# The exact per-topic flow runs only where the greedy missed its quotas, within budgets counted in
# arcs (never in time: planning stays deterministic). A 300-partition topic on 200 brokers is 63k.
TOPIC_EXACT_ARCS = 2_000_000
PLAN_EXACT_ARCS = 8_000_000
# Clusters up to this many arcs are placed by one exact flow over every topic (the proven optimum;
# 200 partitions on 7 brokers is 2k arcs, 30k on 33 brokers 1.1M: those take the per-topic path).
JOINT_EXACT_ARCS = 200_000


@dataclass(frozen=True)
class Goal:
    """What the plan is for. The default (heal and rebalance) is the controller's steady goal."""

    add_brokers: tuple[Broker, ...] = ()  # new (empty) brokers to bring in
    drain_brokers: frozenset[int] = frozenset()  # move everything off these
    heal: bool = True  # replace replicas on dead brokers / offline dirs
    rebalance: bool = True  # even out counts (False = only do what is forced)
    explicit_targets: Mapping[TopicPartition, tuple[int, ...]] = field(default_factory=lambda: MappingProxyType({}))
    partial: bool = False  # leave a partition that cannot be placed as it is; plan the rest
    excluded_topics: frozenset[str] = frozenset()  # only healed and drained, never rebalanced
    ignore_racks: bool = False  # place as if no broker had a rack (a last resort)
    disk_max_usage_percent: float | None = None  # None: dirs are not limited (see DISK CAPACITY)


@dataclass(frozen=True)
class PlacementPlan:
    """The outcome. Counts are per broker over the whole cluster, before and after the plan."""

    targets: Mapping[TopicPartition, tuple[int, ...]]  # only partitions whose list changes
    target_log_dirs: Mapping[TopicPartition, tuple[str | None, ...]]  # per replica; None = any
    replica_moves: int
    replica_moves_lower_bound: int
    bytes_moved: int
    leader_changes: int
    warnings: tuple[str, ...] = ()
    replicas_before: Mapping[int, int] = field(default_factory=lambda: MappingProxyType({}))
    replicas_after: Mapping[int, int] = field(default_factory=lambda: MappingProxyType({}))
    leaders_before: Mapping[int, int] = field(default_factory=lambda: MappingProxyType({}))
    leaders_after: Mapping[int, int] = field(default_factory=lambda: MappingProxyType({}))
    rack_violations: int = 0
    max_topic_replica_spread: int = 0  # max over topics of (max - min) count on eligible brokers
    max_topic_leader_spread: int = 0
    eligible_brokers: tuple[int, ...] = ()
    infeasible: Mapping[TopicPartition, str] = field(default_factory=lambda: MappingProxyType({}))
    # How balanced the result is, measured against the shares (not raw spreads, which racks can
    # force: benchmark (a) has a spread of 9 that no rack-spread plan can lower):
    replica_moves_optimum: int | None = None  # set when the moves are proven fewest (== the bound)
    replicas_outside_share: int = 0  # replicas beyond floor/ceil of the shares, per topic + cluster
    leaders_outside_share: int = 0  # the same for preferred leaders
    cluster_replica_spread: int = 0  # max - min replicas over eligible brokers
    cluster_leader_spread: int = 0
    bytes_after: Mapping[int, int] = field(default_factory=lambda: MappingProxyType({}))  # per broker
    cluster_bytes_spread: int = 0  # max - min bytes over eligible brokers, after the plan

    @property
    def gap_percent(self) -> float:
        """How far the moves are above the lower bound, in % (0: proven optimal)."""
        bound = self.replica_moves_lower_bound
        return 100.0 * (self.replica_moves - bound) / bound if bound else 0.0


def compute_planning_cluster(cluster: Cluster, goal: Goal) -> Cluster:
    """The cluster as the plan sees it: added brokers present, drained brokers marked draining."""
    brokers = dict(cluster.brokers_by_id)
    for new in goal.add_brokers:
        old = brokers.get(new.id)
        if old is None:
            brokers[new.id] = new
        else:  # already registered (a snapshot taken after it joined): bring it in
            brokers[new.id] = replace(
                old, alive=True, draining=False, rack=new.rack if new.rack else old.rack
            )
    for broker_id in sorted(goal.drain_brokers):
        if broker_id not in brokers:
            raise InvalidReplicaAssignmentError(
                f"cannot remove broker {broker_id}: it is not in the cluster "
                f"(known: {sorted(brokers)})"
            )
        brokers[broker_id] = replace(brokers[broker_id], draining=True)
    return cluster.with_brokers(brokers[b] for b in sorted(brokers))


# --- replica fates ---------------------------------------------------------------------------

KEPT, SLOT, PINNED = 0, 1, 2


def _offline_dirs(cluster: Cluster) -> dict[int, frozenset[str]]:
    return {
        b.id: frozenset(d.path for d in b.log_dirs if not d.online)
        for b in cluster.brokers
        if any(not d.online for d in b.log_dirs)
    }


def compute_replica_fates(
    partition: PartitionState,
    cluster: Cluster,
    eligible: Mapping[int, object] | frozenset[int],
    offline_dirs: Mapping[int, frozenset[str]],
    heal: bool,
) -> tuple[list[int], set[int]]:
    """Per replica KEPT / SLOT / PINNED, and brokers this partition must not go back to."""
    replicas = partition.replicas
    cannot_host = cluster.brokers_that_cannot_host(partition.tp)
    if not offline_dirs and not partition.offline_replicas and not cannot_host:
        # The common case: every replica on an eligible broker, no dir offline anywhere.
        if all(b in eligible for b in replicas) and len(set(replicas)) == len(replicas):
            return [KEPT] * len(replicas), set()
    fates: list[int] = []
    excluded: set[int] = set(cannot_host)
    seen: set[int] = set()
    for index, b in enumerate(partition.replicas):
        dirs_off = offline_dirs.get(b)
        on_offline_dir = b in partition.offline_replicas or (
            dirs_off is not None
            and index < len(partition.log_dirs)
            and partition.log_dirs[index] in dirs_off
        )
        if b in eligible and not on_offline_dir and b not in seen:
            fates.append(KEPT)
        else:
            broker = cluster.broker(b)
            draining = broker is not None and broker.alive and broker.draining
            fates.append(SLOT if (heal or draining or b in seen) else PINNED)
            if on_offline_dir:
                excluded.add(b)
        seen.add(b)
    return fates, excluded


def compute_lower_bound(cluster: Cluster, goal: Goal) -> int:
    """The fewest replica moves any plan for `goal` needs to balance counts as racks allow.

    Per topic and over the cluster: the optimum of stage A
    (`planning.placement.cluster_quotas`), i.e. the fewest moves after which every eligible
    broker holds between the floor and the ceiling of its ideal share of every topic and of the
    cluster (T / n without rack constraints, otherwise the share the rack rule leaves to b's
    domains, split evenly inside them). For one topic this is SPEC 4's closed form
    `max(F + sum(max(0, c_b - hi_b)), sum(max(0, lo_b - c_b)))`. With `rebalance=False` only the
    replicas that must leave, F. Explicit targets count their new replicas.
    """
    cluster = compute_planning_cluster(cluster, goal)
    tree = _planning_tree(cluster, goal)
    eligible = frozenset(tree.broker_node)
    explicit = dict(goal.explicit_targets)
    offline_dirs = _offline_dirs(cluster)
    topic_work = _compute_topic_work(cluster, goal, explicit, eligible, offline_dirs)
    cluster_quotas = _stage_a(tree, topic_work, goal)
    joint = _plan_cluster_exact(tree, topic_work, cluster_quotas, {}) if goal.rebalance else None
    if joint is not None:  # the exact optimum is the tightest bound
        return _joint_moves(tree, topic_work, joint)
    return _plan_lower_bound(tree, topic_work, goal, cluster_quotas)


def _compute_topic_work(cluster: Cluster, goal: Goal, explicit, eligible, offline_dirs) -> list:
    """(topic name, its partitions by id, their fates) for every topic, in name order."""
    return [
        (topic.name, partitions,
         [_partition_fates(p, cluster, explicit, eligible, offline_dirs, goal.heal) for p in partitions])
        for topic in sorted(cluster.topics, key=lambda t: t.name)
        for partitions in [sorted(topic.partitions, key=lambda p: p.partition)]
    ]


def _planning_tree(cluster: Cluster, goal: Goal) -> RackTree:
    return compute_rack_tree(replace(b, rack=None) if goal.ignore_racks else b
                             for b in cluster.brokers if b.eligible)


def _demand(topic: str, work: Sequence[PartitionFates]) -> TopicDemand:
    """What stage A needs of one topic: replicas to place per partition, and what may stay."""
    histogram: dict[int, int] = {}
    current: dict[int, int] = {}
    for w in work:
        histogram[w.replication] = histogram.get(w.replication, 0) + 1
        for b in w.kept:
            current[b] = current.get(b, 0) + 1
    return TopicDemand(topic, histogram, current)


def _stage_a(tree: RackTree, topic_work, goal: Goal) -> ClusterQuotas:
    """Stage A over the topics the goal balances (excluded topics are only healed and drained)."""
    return compute_cluster_quotas(tree, [_demand(name, work) for name, _, work in topic_work
                                         if name not in goal.excluded_topics])


def _plan_lower_bound(tree, topic_work, goal: Goal, cluster_quotas: ClusterQuotas,
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


def _topic_lower_bound(tree, counts, forced: int, histogram, rebalance: bool, cache: dict) -> int:
    if not rebalance or not tree.broker_node:
        return forced
    key = tuple(sorted(histogram.items()))
    ranges = cache.get(key)
    if ranges is None:
        ranges = cache[key] = compute_balanced_ranges(tree, histogram)
    excess = sum(max(0, c - ranges[b][1]) for b, c in counts.items() if b in ranges)
    deficit = sum(max(0, low - counts.get(b, 0)) for b, (low, _) in ranges.items())
    return max(forced + excess, deficit)


# --- the planner -----------------------------------------------------------------------------


DISK_REPLANS = 4


@dataclass(frozen=True)
class DiskOverflow:
    """A new replica that fits no online dir of its broker under the disk limit."""

    tp: TopicPartition
    broker_id: int
    size_bytes: int


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


def describe_disk_overflow(cluster: Cluster, overflow: Sequence[DiskOverflow], limit: float | None) -> str:
    """One line: which replicas fit no dir, and each dir's figures against the limit."""
    brokers = sorted({o.broker_id for o in overflow})
    parts = []
    for broker_id in brokers[:5]:
        broker = cluster.broker(broker_id)
        dirs = ", ".join(f"{d.path} {100 * d.used_bytes / d.total_bytes:.0f}% used "
                         f"({d.used_bytes:,} of {d.total_bytes:,} B)"
                         for d in (broker.online_log_dirs if broker else ()) if d.total_bytes and d.used_bytes is not None)
        mine = [o for o in overflow if o.broker_id == broker_id]
        parts.append(f"broker {broker_id}: {len(mine)} replica(s) ({sum(o.size_bytes for o in mine):,} B, e.g. "
                     f"{mine[0].tp}) fit none of its dirs [{dirs or 'no online dir'}]")
    more = f"; and {len(brokers) - 5} more brokers" if len(brokers) > 5 else ""
    return (f"no plan keeps every log dir under disk.max.usage.percent {limit:g}%: " + "; ".join(parts) + more
            + ": free space, add brokers or disks, or raise disk.max.usage.percent")


def _plan_once(cluster: Cluster, goal: Goal) -> tuple[PlacementPlan, list[DiskOverflow]]:
    """One placement; the new replicas that fit no dir under the disk limit (empty when all do)."""
    explicit = dict(goal.explicit_targets)
    if explicit:
        validate_targets(cluster, explicit)
    tree = _planning_tree(cluster, goal)
    eligible = frozenset(tree.broker_node)
    offline_dirs = _offline_dirs(cluster)
    warnings = list(tree.warnings)
    infeasible: dict[TopicPartition, str] = {}

    replicas_before: dict[int, int] = {b.id: 0 for b in cluster.brokers}
    leaders_before: dict[int, int] = {b.id: 0 for b in cluster.brokers}
    for p in cluster.partitions():
        for b in p.replicas:
            replicas_before[b] = replicas_before.get(b, 0) + 1
        if p.replicas:
            leaders_before[p.replicas[0]] = leaders_before.get(p.replicas[0], 0) + 1
    cluster_load = {b: replicas_before.get(b, 0) for b in eligible}

    targets: dict[TopicPartition, tuple[int, ...]] = {}
    target_log_dirs: dict[TopicPartition, tuple[str | None, ...]] = {}
    dir_usage = _initial_dir_usage(cluster)
    headroom = _initial_dir_headroom(cluster, goal.disk_max_usage_percent)
    overflow: list[DiskOverflow] = []
    replicas_after = {b: 0 for b in replicas_before}
    leaders_after = {b: 0 for b in leaders_before}
    moves = bytes_moved = leader_changes = 0
    replica_spread = leader_spread = 0
    replicas_outside = leaders_outside = 0
    ranges_cache: dict = {}
    shown: list[tuple[str, list, str]] = []  # topics ending outside their shares, and why
    balanced_replicas: Counter = Counter()  # replicas and leaders of the topics the goal balances
    balanced_leaders: Counter = Counter()
    topic_work = _compute_topic_work(cluster, goal, explicit, eligible, offline_dirs)
    cluster_quotas = _stage_a(tree, topic_work, goal)
    exact_arcs_left = PLAN_EXACT_ARCS
    placed_finals: list[tuple[tuple[int, ...], ...]] = []
    missed: dict[str, str] = {}  # topic -> why its quotas were not met
    joint = _plan_cluster_exact(tree, topic_work, cluster_quotas, ranges_cache) if goal.rebalance else None
    if joint is not None:
        placed_finals = list(joint)
        bound = _joint_moves(tree, topic_work, joint)
    else:
        bound = _plan_lower_bound(tree, topic_work, goal, cluster_quotas, with_repairs=False)
    for name, partitions, work in ([] if joint is not None else topic_work):
        quotas = cluster_quotas.quotas.get(name)
        balanced = goal.rebalance and name not in goal.excluded_topics
        placed = _plan_topic_or_leave_out(tree, work, partitions, cluster_load, goal, eligible, infeasible,
                                          quotas, balanced)
        if balanced and quotas is not None and not any(w.tp in infeasible for w in work):
            placed, exact_arcs_left, why_missed = _exact_where_quotas_missed(
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
    for (name, partitions, work), finals in zip(topic_work, placed_finals):
        led = [final if not final or final[0] == leader else _led_by(final, leader)
               for final, leader in zip(finals, itertools.islice(leaders, len(finals)))]
        replica_counter = Counter(itertools.chain.from_iterable(led))
        leader_counter = Counter(final[0] for final in led if final)
        for b, count in replica_counter.items():
            replicas_after[b] = replicas_after.get(b, 0) + count
        for b, count in leader_counter.items():
            leaders_after[b] = leaders_after.get(b, 0) + count
        topic_counts = {b: replica_counter.get(b, 0) for b in eligible}
        topic_leaders = {b: leader_counter.get(b, 0) for b in eligible}
        for p, w, final in zip(partitions, work, led):
            if final == p.replicas:
                continue
            tp = w.tp
            targets[tp] = final
            new = [b for b in final if b not in p.replicas]
            moves += len(new)
            bytes_moved += len(new) * (p.size_bytes or 0)
            if final and p.replicas and final[0] != p.replicas[0]:
                leader_changes += 1
            target_log_dirs[tp] = _target_dirs(p, final, cluster, dir_usage, headroom, overflow)
        if topic_counts and name not in goal.excluded_topics:
            balanced_replicas.update(replica_counter)
            balanced_leaders.update(leader_counter)
            replica_spread = max(replica_spread, _spread(topic_counts))
            leader_spread = max(leader_spread, _spread(topic_leaders))
            outside = _outside_ranges(topic_counts, _topic_ranges(tree, work, ranges_cache))
            replicas_outside += sum(excess for _, _, _, excess in outside)
            leaders_outside += sum(_outside_even(topic_leaders, sum(topic_leaders.values())))
            if outside and goal.rebalance:
                shown.append((name, outside, missed.get(name, "")))

    # Over the cluster: the topics the goal balances (excluded ones keep what they have).
    cluster_counts = {b: balanced_replicas.get(b, 0) for b in eligible}
    cluster_outside = _outside_ranges(cluster_counts, cluster_quotas.cluster_ranges)
    replicas_outside += sum(excess for _, _, _, excess in cluster_outside)
    cluster_leads = {b: balanced_leaders.get(b, 0) for b in eligible}
    leaders_outside += sum(_outside_even(cluster_leads, sum(cluster_leads.values())))
    if goal.rebalance:
        warnings.extend(_balance_warnings(tree, shown, cluster_outside, missed))
    if moves > bound and joint is None:  # only then can rack repairs raise the bound
        bound = _plan_lower_bound(tree, topic_work, goal, cluster_quotas)
    violations = sum(
        1
        for tp, final in targets.items()
        if not _rack_spread_ok(tree, [b for b in final if b in eligible], final)
    )
    bytes_after = _compute_bytes_after(cluster, targets)
    eligible_bytes = [bytes_after.get(b, 0) for b in eligible]
    return PlacementPlan(
        targets=MappingProxyType(targets),
        target_log_dirs=MappingProxyType(target_log_dirs),
        replica_moves=moves,
        replica_moves_lower_bound=bound,
        bytes_moved=bytes_moved,
        leader_changes=leader_changes,
        warnings=tuple(warnings),
        replicas_before=MappingProxyType(replicas_before),
        replicas_after=MappingProxyType(replicas_after),
        leaders_before=MappingProxyType(leaders_before),
        leaders_after=MappingProxyType(leaders_after),
        rack_violations=violations,
        max_topic_replica_spread=replica_spread,
        max_topic_leader_spread=leader_spread,
        infeasible=MappingProxyType(infeasible),
        eligible_brokers=tuple(sorted(eligible)),
        replica_moves_optimum=moves if moves == bound else None,
        replicas_outside_share=replicas_outside,
        leaders_outside_share=leaders_outside,
        cluster_replica_spread=_spread(cluster_counts) if cluster_counts else 0,
        cluster_leader_spread=_spread(cluster_leads) if cluster_leads else 0,
        bytes_after=MappingProxyType(bytes_after),
        cluster_bytes_spread=max(eligible_bytes) - min(eligible_bytes) if eligible_bytes else 0,
    ), overflow


def _compute_bytes_after(cluster: Cluster, targets: Mapping[TopicPartition, tuple[int, ...]]) -> dict[int, int]:
    """Bytes per broker once `targets` are reached (a replica weighs its partition's size)."""
    held: dict[int, int] = {b.id: 0 for b in cluster.brokers}
    for p in cluster.partitions():
        size = p.size_bytes or 0
        for b in targets.get(p.tp, p.replicas):
            held[b] = held.get(b, 0) + size
    return held


def _topic_ranges(tree: RackTree, work, cache: dict) -> Mapping[int, tuple[int, int]]:
    histogram: dict[int, int] = {}
    for w in work:
        histogram[w.replication] = histogram.get(w.replication, 0) + 1
    key = tuple(sorted(histogram.items()))
    ranges = cache.get(key)
    if ranges is None:
        ranges = cache[key] = compute_balanced_ranges(tree, histogram) if tree.broker_node else {}
    return ranges


def _outside_ranges(counts: Mapping[int, int], ranges: Mapping[int, tuple[int, int]]) -> list:
    """(broker, count, (floor, ceil), replicas beyond the range) for each broker outside it."""
    result = []
    for b, (low, high) in ranges.items():
        count = counts.get(b, 0)
        if count < low or count > high:
            result.append((b, count, (low, high), low - count if count < low else count - high))
    return result


def _outside_even(counts: Mapping[int, int], total: int) -> list[int]:
    """Per broker, how far its count is outside floor/ceil of total / n (leaders: no racks)."""
    if not counts:
        return []
    low, high = total // len(counts), -(-total // len(counts))
    return [max(0, low - c) + max(0, c - high) for c in counts.values()]


_WARNED_TOPICS = 10


def _balance_warnings(tree: RackTree, topics: list, cluster_outside: list, missed: Mapping[str, str]) -> list[str]:
    """One line per topic (up to ten, then a count) and one for the cluster, naming each broker
    outside its share, its rack, and why the plan could not do better."""

    def brokers(outside) -> str:
        return ", ".join(
            f"{b}{' (' + tree.node_labels[tree.broker_node[b]] + ')' if tree.broker_node.get(b) else ''}: "
            f"{count} of {low}-{high}"
            for b, count, (low, high), _ in outside[:8]
        ) + (f" and {len(outside) - 8} more" if len(outside) > 8 else "")

    lines = []
    for name, outside, why in topics[:_WARNED_TOPICS]:
        lines.append(f"topic {name}: brokers end outside their share (replicas of floor-ceil): "
                     f"{brokers(outside)}; {why or 'the greedy placement missed it'}")
    if len(topics) > _WARNED_TOPICS:
        lines.append(f"and {len(topics) - _WARNED_TOPICS} more topics end outside their shares")
    if cluster_outside:
        reasons = "; ".join(f"{name}: {why}" for name, why in sorted(missed.items())[:3])
        more = f" and {len(missed) - 3} more" if len(missed) > 3 else ""
        lines.append(f"the cluster: brokers end outside their share (replicas of floor-ceil): "
                     f"{brokers(cluster_outside)}; topics that missed their quotas: "
                     f"{reasons or 'none'}{more}")
    return lines


def _partition_fates(p, cluster, explicit, eligible, offline_dirs, heal) -> PartitionFates:
    tp = p.tp
    target = explicit.get(tp) if explicit else None
    if target is not None:
        members = frozenset(b for b in target if b in eligible)
        return PartitionFates(tp, tuple(target), members, frozenset(), len(members), 0, True)
    replicas = p.replicas
    if (not offline_dirs and not p.offline_replicas
            and (not cluster.any_cannot_host or not cluster.brokers_that_cannot_host(tp))
            and eligible.issuperset(replicas) and len(set(replicas)) == len(replicas)):
        # The common case (every replica stays where it may): no per-replica fates to work out.
        return PartitionFates(tp, replicas, frozenset(replicas), frozenset(), len(replicas),
                              p.size_bytes or 0, False)
    fates, excluded = compute_replica_fates(p, cluster, eligible, offline_dirs, heal)
    replicas = tuple(b if fate != SLOT else None for b, fate in zip(p.replicas, fates))
    kept = frozenset(b for b, fate in zip(p.replicas, fates) if fate == KEPT)
    replication = sum(1 for fate in fates if fate != PINNED)
    return PartitionFates(
        tp, replicas, kept, frozenset(excluded), replication, p.size_bytes or 0, False
    )


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


def _exact_where_quotas_missed(tree, work, placed: TopicReplicas, quotas: TopicQuotas,
                               load_before: Mapping[int, int], arcs_left: int) -> tuple[TopicReplicas, int, str]:
    """The greedy's placement when it meets every broker's quota (then it is optimal: the moves
    stage A counted), else the exact flow's (`plan_topic_exact`) within the arc budget; and why
    the quotas stay missed ("" when they are met)."""
    counts = Counter(b for b in itertools.chain.from_iterable(placed.finals) if b in tree.broker_node)
    kept = Counter(itertools.chain.from_iterable(w.kept for w in work))
    fewest = sum(quotas.broker_quota.values()) - sum(min(q, kept.get(b, 0)) for b, q in quotas.broker_quota.items())
    greedy_moves = _new_replicas(tree, work, placed.finals)
    meets_quotas = all(counts.get(b, 0) == q for b, q in quotas.broker_quota.items())
    if greedy_moves == fewest and meets_quotas:
        return placed, arcs_left, ""  # certified: stage A's count for these quotas
    arcs = count_topic_flow_arcs(tree, work)
    if arcs > TOPIC_EXACT_ARCS or arcs > arcs_left:
        return placed, arcs_left, (f"the exact placement of this topic ({arcs} arcs) is over its "
                                   f"budget ({min(TOPIC_EXACT_ARCS, arcs_left)} arcs left)")
    finals = plan_topic_exact(tree, work, {b: (q, q) for b, q in quotas.broker_quota.items()})
    if finals is None:  # the quotas are out of the racks' reach for this topic: keep the greedy's
        return placed, arcs_left - arcs, ("the rack rule, with the replicas that stay, leaves no "
                                          "placement that meets every share")
    if meets_quotas and _new_replicas(tree, work, finals) >= greedy_moves:
        return placed, arcs_left - arcs, ""  # the greedy's was as good (rack repairs cost it)
    load = dict(load_before)
    for w, final in zip(work, finals):
        for b in w.kept:
            load[b] -= 1
        for b in final:
            if b in tree.broker_node:
                load[b] = load.get(b, 0) + 1
    return TopicReplicas(finals, MappingProxyType(load)), arcs_left - arcs, ""


def _plan_cluster_exact(tree: RackTree, topic_work, cluster_quotas: ClusterQuotas, ranges_cache: dict):
    """The joint model: every topic in one exact flow, balanced per topic and over the cluster
    with the fewest moves (`plan_topics_exact`), when the cluster fits `JOINT_EXACT_ARCS`; None
    when it does not fit or no balanced rack-spread plan exists (the per-topic path then plans
    it, and reports what it could not balance)."""
    if not tree.broker_node or any(name not in cluster_quotas.quotas for name, _, _ in topic_work):
        return None
    arcs = sum(count_topic_flow_arcs(tree, work) for _, _, work in topic_work)
    if not topic_work or arcs > JOINT_EXACT_ARCS:
        return None
    return plan_topics_exact(
        tree,
        [work for _, _, work in topic_work],
        [_topic_ranges(tree, work, ranges_cache) for _, _, work in topic_work],
        cluster_quotas.cluster_ranges,
    )


def _joint_moves(tree: RackTree, topic_work, joint) -> int:
    """The moves of the joint model's plan: explicit targets' new replicas plus the rest."""
    explicit = sum(len(set(w.replicas) - set(p.replicas))
                   for _, partitions, work in topic_work for p, w in zip(partitions, work) if w.fixed)
    return explicit + sum(_new_replicas(tree, work, finals) for (_, _, work), finals in zip(topic_work, joint))


def _new_replicas(tree: RackTree, work, finals) -> int:
    """Replicas placed where they were not allowed to stay (the moves of one topic's plan)."""
    return sum(len(tree.broker_node.keys() & final) - len(w.kept & set(final))
               for w, final in zip(work, finals) if not w.fixed)


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


def _rack_spread_ok(tree: RackTree, in_tree: list[int], final: list[int]) -> bool:
    if len(set(final)) != len(final):
        return False
    return tree.fits(tuple(sorted(tree.broker_node[b] for b in in_tree)), len(in_tree))


def _led_by(final: tuple[int, ...], leader: int | None) -> tuple[int, ...]:
    """`final` with `leader` first, the others in their order."""
    if leader is None or not final or final[0] == leader:
        return tuple(final)
    return (leader,) + tuple(b for b in final if b != leader)


def _spread(counts: Mapping[int, int]) -> int:
    return max(counts.values()) - min(counts.values())


def _initial_dir_usage(cluster: Cluster) -> dict[tuple[int, str], int]:
    """Bytes per online dir: Kafka's own (the replicas describe-log-dirs listed) where reported —
    dirs sharing one volume all report that volume's usage — else the volume's used bytes."""
    return {
        (b.id, d.path): d.replica_bytes if d.replica_bytes is not None else d.used_bytes or 0
        for b in cluster.brokers for d in b.log_dirs if d.online
    }


def _initial_dir_headroom(cluster: Cluster, limit: float | None) -> dict[tuple[int, str], float]:
    """Bytes each online dir may still take under `limit` percent of its volume (only dirs that
    report their volume's size and free space)."""
    return {(b.id, d.path): room for b in cluster.brokers for d in b.log_dirs
            if d.online and (room := d.room_bytes(limit)) is not None}


def _target_dirs(p, final, cluster, dir_usage, headroom, overflow) -> tuple[str | None, ...]:
    """Kept replicas keep their dir; a new one goes to its broker's least used online dir among
    those with room for it under the disk limit (none: a `DiskOverflow`)."""
    dirs: list[str | None] = []
    size = p.size_bytes or 0
    for b in final:
        if b in p.replicas:
            dirs.append(p.log_dir_of(b))
            continue
        broker = cluster.broker(b)
        online = broker.online_log_dirs if broker is not None else ()
        fitting = [d for d in online if headroom.get((b, d.path), float("inf")) >= size]
        if not fitting:
            if online:
                overflow.append(DiskOverflow(p.tp, b, size))
            dirs.append(None)
            continue
        best = min(fitting, key=lambda d: (dir_usage.get((b, d.path), 0), d.path))
        dir_usage[(b, best.path)] = dir_usage.get((b, best.path), 0) + size
        if (b, best.path) in headroom:
            headroom[(b, best.path)] -= size
        dirs.append(best.path)
    return tuple(dirs)
