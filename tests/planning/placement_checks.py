"""Independent checks of placement results, written without reusing planning internals.

`hard_constraint_violations` re-derives the planner's hard constraints from the cluster and goal:
no broker twice, replication factor kept, only eligible brokers, multi-level rack spread
(computed here by brute force per level). Also random cluster builders used by the tests, and
`reaches_balance`, which does use the planner's definition of a broker's ideal share (the
contract of the lower bound).
"""

from __future__ import annotations

import math
import random
from collections import Counter

from planning.model import Broker, Cluster, PartitionState, Topic
from planning.placement.goal import Goal, compute_planning_cluster
from planning.placement.quotas import compute_balanced_ranges, compute_ideal_shares
from planning.placement.racks import compute_rack_tree

# Rack layouts for generated clusters, by name: broker index → rack (None: no rack).
RACK_SHAPES = {
    "flat2": lambda i: f"r{i % 2}",
    "flat3": lambda i: f"r{i % 3}",
    "uneven": lambda i: "r0" if i % 5 == 0 else f"r{1 + i % 2}",
    "dc2x2": lambda i: f"/dc{i % 2}/r{(i // 2) % 2}",
    "dc3x4": lambda i: f"/dc{i % 3}/r{(i // 3) % 4}",
    "mixed": lambda i: None if i % 5 == 4 else f"/dc{i % 2}/r{i % 3}",
}


def rack_levels(broker: Broker) -> tuple[str, ...]:
    if broker.rack is None or not broker.rack.strip("/ "):
        return ()
    return tuple(x for x in broker.rack.split("/") if x)


def _spread_ok(replicas: list[Broker], scope: list[Broker], depth: int) -> bool:
    """At this depth, group scope brokers by path component (shorter path: own group)."""
    if not replicas:
        return True

    def group(b: Broker):
        levels = rack_levels(b)
        return ("domain", levels[depth]) if len(levels) > depth else ("broker", b.id)

    groups: dict = {}
    for b in scope:
        groups.setdefault(group(b), []).append(b)
    m = len(replicas)
    caps = {g: len(members) for g, members in groups.items()}
    q = 0
    while sum(min(c, q + 1) for c in caps.values()) <= m and q <= m:
        q += 1
    low = {g: min(c, q) for g, c in caps.items()}
    high = {g: min(c, q + 1) for g, c in caps.items()}
    extras = m - sum(low.values())
    counts = Counter(group(b) for b in replicas)
    if any(g not in groups for g in counts):
        return False
    at_high = 0
    for g in groups:
        c = counts.get(g, 0)
        if c < low[g] or c > high[g]:
            return False
        if c > low[g]:
            at_high += 1
    if at_high != extras:
        return False
    for g, members in groups.items():
        if g[0] == "broker":
            continue
        inside = [b for b in replicas if group(b) == g]
        if not _spread_ok(inside, members, depth + 1):
            return False
    return True


def eligible_brokers(cluster: Cluster, goal) -> dict[int, Broker]:
    brokers = {b.id: b for b in cluster.brokers}
    for b in goal.add_brokers:
        brokers.setdefault(b.id, b)
    return {
        i: b
        for i, b in brokers.items()
        if b.alive and not b.draining and i not in goal.drain_brokers
        and (not b.log_dirs or any(d.online for d in b.log_dirs))
    }


def hard_constraint_violations(cluster: Cluster, goal, plan) -> list[str]:
    eligible = eligible_brokers(cluster, goal)
    scope = sorted(eligible.values(), key=lambda b: b.id)
    problems = []
    for p in cluster.partitions():
        final = plan.targets.get(p.tp)
        if final is None:
            continue
        if len(final) != len(p.replicas):
            problems.append(f"{p.tp}: RF {len(p.replicas)} -> {len(final)}")
        if len(set(final)) != len(final):
            problems.append(f"{p.tp}: duplicate in {final}")
        new = [b for b in final if b not in p.replicas]
        if any(b not in eligible for b in new):
            problems.append(f"{p.tp}: new replica on ineligible broker in {final}")
        if goal.heal and any(b not in eligible for b in final):
            problems.append(f"{p.tp}: ineligible broker kept in {final}")
        members = [eligible[b] for b in final if b in eligible]
        if not _spread_ok(members, scope, 0):
            problems.append(f"{p.tp}: rack spread broken by {final}")
    return problems


def per_topic_spread(cluster: Cluster, goal, plan) -> int:
    eligible = eligible_brokers(cluster, goal)
    worst = 0
    for t in cluster.topics:
        counts = Counter({b: 0 for b in eligible})
        for p in t.partitions:
            counts.update(b for b in plan.targets.get(p.tp, p.replicas) if b in eligible)
        worst = max(worst, max(counts.values()) - min(counts.values()))
    return worst


def random_spread_cluster(rnd: random.Random, brokers: list[Broker], topics: int, max_parts: int, rf: int) -> Cluster:
    """Replicas placed randomly but rack-spread (each partition one per top domain round-robin)."""
    by_top: dict[str, list[int]] = {}
    for b in brokers:
        levels = rack_levels(b)
        by_top.setdefault(levels[0] if levels else f"#{b.id}", []).append(b.id)
    domains = sorted(by_top.values())
    result = []
    for t in range(topics):
        parts = []
        for p in range(rnd.randint(1, max_parts)):
            start = rnd.randrange(len(domains))
            replicas: list[int] = []
            k = 0
            while len(replicas) < rf:
                pool = [b for b in domains[(start + k) % len(domains)] if b not in replicas]
                k += 1
                if pool:
                    replicas.append(rnd.choice(pool))
            parts.append(PartitionState(f"t{t}", p, tuple(replicas), size_bytes=rnd.randrange(1, 1000)))
        result.append(Topic(f"t{t}", tuple(parts)))
    return Cluster(tuple(brokers), tuple(result))


def reaches_balance(cluster: Cluster, goal: Goal, plan) -> bool:
    """Every broker's counts within the floor/ceil of its ideal shares, per topic and over the
    cluster (the bound is the fewest moves of a plan balanced both ways)."""
    planning = compute_planning_cluster(cluster, goal)
    tree = compute_rack_tree(b for b in planning.brokers if b.eligible)
    cluster_share = Counter()
    for topic in cluster.topics:
        counts = Counter(b for p in topic.partitions for b in plan.targets.get(p.tp, p.replicas))
        histogram = Counter(len(p.replicas) for p in topic.partitions)
        for b, (low, high) in compute_balanced_ranges(tree, histogram).items():
            if not low <= counts.get(b, 0) <= high:
                return False
        cluster_share.update(compute_ideal_shares(tree, histogram))
    return all(math.floor(share) <= plan.replicas_after.get(b, 0) <= math.ceil(share)
               for b, share in cluster_share.items())
