"""The plan the placer returns (`PlacementPlan`), and how good it is, measured honestly.

Every plan carries, next to its targets, the figures that say how well it met the goals
(docs/design.md, "The honest summary"): moves against the lower bound (`gap_percent`; the
moves are proven fewest when they equal it), replicas and leaders per broker before and after,
spreads per topic and over the cluster, bytes per broker after the plan, rack violations, and a
warning for every broker left outside its share.

RULES of the measures (`PlanTally`, fed topic by topic as the placer finalises them):
- balance is measured against the shares, not against raw spreads (which racks can force): a
  broker is "outside" by how far its count lies outside `[floor, ceil]` of its ideal share of a
  topic (`planning.placement.quotas.compute_balanced_ranges`) and of the cluster (stage A's
  `cluster_ranges`); leaders against floor/ceil of `total / n` (leaders know no racks);
- only eligible brokers and the topics the goal balances count (an excluded topic keeps what it
  has); a move is a replica in a target that its partition did not hold;
- warnings (with rebalance only): one line per topic left outside its shares (up to ten, then a
  count) and one for the cluster, naming each broker, its rack, its count against its range,
  and why the plan could not do better.
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

from planning.model import Cluster, TopicPartition
from planning.placement.goal import Goal
from planning.placement.quotas import compute_topic_ranges
from planning.placement.racks import RackTree


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
    # Set by the tolerance planner (`balance.mode=bytes`, `planning.placement.balance_modes`),
    # which proves its plan in bytes, not in replica moves:
    balance_mode: str = "strict"
    bytes_moved_lower_bound: int | None = None
    within_tolerance: bool | None = None  # every eligible broker inside its disk/replica/leader band
    resources: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))  # name → before/after
    disk_cv_floor: float | None = None  # the lowest disk CV any plan moving as many bytes reaches
    disk_tolerance: float | None = None  # the disk band planned to
    byte_budget: int | None = None  # set when the band is the tightest this budget reaches (`bytes_budget`)

    @property
    def gap_percent(self) -> float | None:
        """How far the plan is above its lower bound, in % (0: proven optimal): in bytes moved
        when the bytes bound is set, else in replica moves. None for a bytes plan outside its
        bands: the bytes bound holds for the plans within them, and such a plan may move less."""
        if self.bytes_moved_lower_bound is not None:
            if self.within_tolerance is False:
                return None
            bound, value = self.bytes_moved_lower_bound, self.bytes_moved
        else:
            bound, value = self.replica_moves_lower_bound, self.replica_moves
        return 100.0 * (value - bound) / bound if bound else 0.0


class PlanTally:
    """The measures of one plan, counted as the placer finalises each topic (mutable, private to
    one placement). `replicas_before` is also the placer's starting cluster load."""

    def __init__(self, cluster: Cluster, tree: RackTree, goal: Goal) -> None:
        self.cluster, self.tree, self.goal = cluster, tree, goal
        self.eligible = frozenset(tree.broker_node)
        self.replicas_before: dict[int, int] = {b.id: 0 for b in cluster.brokers}
        self.leaders_before: dict[int, int] = {b.id: 0 for b in cluster.brokers}
        for p in cluster.partitions():
            for b in p.replicas:
                self.replicas_before[b] = self.replicas_before.get(b, 0) + 1
            if p.replicas:
                self.leaders_before[p.replicas[0]] = self.leaders_before.get(p.replicas[0], 0) + 1
        self.replicas_after = {b: 0 for b in self.replicas_before}
        self.leaders_after = {b: 0 for b in self.leaders_before}
        self.moves = self.bytes_moved = self.leader_changes = 0
        self.replica_spread = self.leader_spread = 0
        self.replicas_outside = self.leaders_outside = 0
        self.ranges_cache: dict = {}
        self.shown: list[tuple[str, list, str]] = []  # topics ending outside their shares, and why
        self.balanced_replicas: Counter = Counter()  # replicas and leaders of the topics balanced
        self.balanced_leaders: Counter = Counter()

    def add_topic(self, name: str, partitions, work, led, why_missed: str) -> None:
        """Count one topic: `led` is each partition's final list, leader first."""
        eligible = self.eligible
        replica_counter = Counter(itertools.chain.from_iterable(led))
        leader_counter = Counter(final[0] for final in led if final)
        for b, count in replica_counter.items():
            self.replicas_after[b] = self.replicas_after.get(b, 0) + count
        for b, count in leader_counter.items():
            self.leaders_after[b] = self.leaders_after.get(b, 0) + count
        topic_counts = {b: replica_counter.get(b, 0) for b in eligible}
        topic_leaders = {b: leader_counter.get(b, 0) for b in eligible}
        for p, final in zip(partitions, led):
            if final == p.replicas:
                continue
            new = [b for b in final if b not in p.replicas]
            self.moves += len(new)
            self.bytes_moved += len(new) * (p.size_bytes or 0)
            if final and p.replicas and final[0] != p.replicas[0]:
                self.leader_changes += 1
        if topic_counts and name not in self.goal.excluded_topics:
            self.balanced_replicas.update(replica_counter)
            self.balanced_leaders.update(leader_counter)
            self.replica_spread = max(self.replica_spread, _spread(topic_counts))
            self.leader_spread = max(self.leader_spread, _spread(topic_leaders))
            outside = _outside_ranges(topic_counts, compute_topic_ranges(self.tree, work, self.ranges_cache))
            self.replicas_outside += sum(excess for _, _, _, excess in outside)
            self.leaders_outside += sum(_outside_even(topic_leaders, sum(topic_leaders.values())))
            if outside and self.goal.rebalance:
                self.shown.append((name, outside, why_missed))

    def plan(self, targets, target_log_dirs, bound: int, infeasible, cluster_ranges,
             missed: Mapping[str, str], warnings: list[str]) -> PlacementPlan:
        """The `PlacementPlan` of the topics counted; `warnings` gets the balance warnings."""
        tree, eligible = self.tree, self.eligible
        # Over the cluster: the topics the goal balances (excluded ones keep what they have).
        cluster_counts = {b: self.balanced_replicas.get(b, 0) for b in eligible}
        cluster_outside = _outside_ranges(cluster_counts, cluster_ranges)
        replicas_outside = self.replicas_outside + sum(excess for _, _, _, excess in cluster_outside)
        cluster_leads = {b: self.balanced_leaders.get(b, 0) for b in eligible}
        leaders_outside = self.leaders_outside + sum(_outside_even(cluster_leads, sum(cluster_leads.values())))
        if self.goal.rebalance:
            warnings.extend(_balance_warnings(tree, self.shown, cluster_outside, missed))
        violations = sum(
            1
            for tp, final in targets.items()
            if not _rack_spread_ok(tree, [b for b in final if b in eligible], final)
        )
        bytes_after = _compute_bytes_after(self.cluster, targets)
        eligible_bytes = [bytes_after.get(b, 0) for b in eligible]
        moves = self.moves
        return PlacementPlan(
            targets=MappingProxyType(targets),
            target_log_dirs=MappingProxyType(target_log_dirs),
            replica_moves=moves,
            replica_moves_lower_bound=bound,
            bytes_moved=self.bytes_moved,
            leader_changes=self.leader_changes,
            warnings=tuple(warnings),
            replicas_before=MappingProxyType(self.replicas_before),
            replicas_after=MappingProxyType(self.replicas_after),
            leaders_before=MappingProxyType(self.leaders_before),
            leaders_after=MappingProxyType(self.leaders_after),
            rack_violations=violations,
            max_topic_replica_spread=self.replica_spread,
            max_topic_leader_spread=self.leader_spread,
            infeasible=MappingProxyType(infeasible),
            eligible_brokers=tuple(sorted(eligible)),
            replica_moves_optimum=moves if moves == bound else None,
            replicas_outside_share=replicas_outside,
            leaders_outside_share=leaders_outside,
            cluster_replica_spread=_spread(cluster_counts) if cluster_counts else 0,
            cluster_leader_spread=_spread(cluster_leads) if cluster_leads else 0,
            bytes_after=MappingProxyType(bytes_after),
            cluster_bytes_spread=max(eligible_bytes) - min(eligible_bytes) if eligible_bytes else 0,
        )


def _compute_bytes_after(cluster: Cluster, targets: Mapping[TopicPartition, tuple[int, ...]]) -> dict[int, int]:
    """Bytes per broker once `targets` are reached (a replica weighs its partition's size)."""
    held: dict[int, int] = {b.id: 0 for b in cluster.brokers}
    for p in cluster.partitions():
        size = p.size_bytes or 0
        for b in targets.get(p.tp, p.replicas):
            held[b] = held.get(b, 0) + size
    return held


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


def _rack_spread_ok(tree: RackTree, in_tree: list[int], final: list[int]) -> bool:
    if len(set(final)) != len(final):
        return False
    return tree.fits(tuple(sorted(tree.broker_node[b] for b in in_tree)), len(in_tree))


def _spread(counts: Mapping[int, int]) -> int:
    return max(counts.values()) - min(counts.values())
