"""The planner's moves equal the exhaustive optimum on small clusters.

The brute force enumerates every rack-spread replica set of every partition (the rule re-derived
in `placement_checks._spread_ok`, not the planner's), keeps, per topic, the count vectors within
the floor/ceiling of each broker's ideal share of the topic, combines topics by the cluster count
vector, keeps those within each broker's share of the cluster, and takes the fewest moves. Where
such a plan exists, the planner must find one with exactly that many moves, and say so.
"""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter
from fractions import Fraction

from hypothesis import event, given, settings
from hypothesis import strategies as st

from placement_checks import RACK_SHAPES, _spread_ok, eligible_brokers, hard_constraint_violations
from planning.model import Broker, Cluster, PartitionState, Topic
from planning.placement.goal import Goal, compute_planning_cluster
from planning.placement.placer import plan_placement
from planning.placement.quotas import compute_ideal_shares
from planning.placement.racks import compute_rack_tree

_SHAPES = {**RACK_SHAPES, "none": lambda i: None, "three_levels": lambda i: f"/dc{i % 2}/r{(i // 2) % 2}/h{i % 3}"}


def fewest_balanced_moves(cluster: Cluster, goal: Goal) -> int | None:
    eligible = eligible_brokers(cluster, goal)
    scope = sorted(eligible.values(), key=lambda b: b.id)
    ids = [b.id for b in scope]
    tree = compute_rack_tree(b for b in compute_planning_cluster(cluster, goal).brokers if b.eligible)
    combos_by_rf: dict[int, list[tuple[int, ...]]] = {}
    cluster_share = Counter()
    cluster_states: dict[tuple[int, ...], int] = {(0,) * len(ids): 0}
    for topic in cluster.topics:
        histogram = Counter(len(p.replicas) for p in topic.partitions)
        shares = compute_ideal_shares(tree, histogram)
        cluster_share.update(shares)
        states: dict[tuple[int, ...], int] = {(0,) * len(ids): 0}
        for p in topic.partitions:
            rf = len(p.replicas)
            if rf not in combos_by_rf:
                combos_by_rf[rf] = [
                    tuple(ids.index(b.id) for b in combo)
                    for combo in itertools.combinations(scope, rf)
                    if _spread_ok(list(combo), scope, 0)
                ]
            following: dict[tuple[int, ...], int] = {}
            for counts, moves in states.items():
                for combo in combos_by_rf[rf]:
                    new = list(counts)
                    for j in combo:
                        new[j] += 1
                    key = tuple(new)
                    cost = moves + sum(1 for j in combo if ids[j] not in p.replicas)
                    if cost < following.get(key, 1 << 30):
                        following[key] = cost
            states = following
        balanced = {
            counts: moves for counts, moves in states.items()
            if all(math.floor(shares[b]) <= c <= math.ceil(shares[b]) for b, c in zip(ids, counts))
        }
        if not balanced:
            return None
        combined: dict[tuple[int, ...], int] = {}
        for total, moves in cluster_states.items():
            for counts, more in balanced.items():
                key = tuple(a + b for a, b in zip(total, counts))
                if moves + more < combined.get(key, 1 << 30):
                    combined[key] = moves + more
        cluster_states = combined
    result = [
        moves for counts, moves in cluster_states.items()
        if all(math.floor(cluster_share.get(b, Fraction(0))) <= c <= math.ceil(cluster_share.get(b, Fraction(0)))
               for b, c in zip(ids, counts))
    ]
    return min(result) if result else None


@st.composite
def small_clusters(draw):
    shape = _SHAPES[draw(st.sampled_from(sorted(_SHAPES)))]
    n = draw(st.integers(3, 7))
    rnd = random.Random(draw(st.integers(0, 2**32 - 1)))
    brokers = [Broker(i, rack=shape(i)) for i in range(n)]
    dead = set(rnd.sample(range(n), draw(st.integers(0, 1))))
    brokers = [Broker(b.id, b.rack, alive=b.id not in dead) for b in brokers]
    topics = []
    for t in range(draw(st.integers(1, 3))):
        rf = rnd.randint(1, min(5, n - 1))
        parts = tuple(PartitionState(f"t{t}", p, tuple(rnd.sample(range(n), rf))) for p in range(rnd.randint(1, 3)))
        topics.append(Topic(f"t{t}", parts))
    added = tuple(Broker(n + i, rack=shape(n + i)) for i in range(draw(st.integers(0, 1))))
    drain = frozenset(rnd.sample(sorted(set(range(n)) - dead), draw(st.integers(0, 1))))
    return Cluster(tuple(brokers), tuple(topics)), Goal(add_brokers=added, drain_brokers=drain)


@settings(max_examples=120, deadline=None)
@given(small_clusters())
def test_moves_equal_the_exhaustive_optimum(case):
    cluster, goal = case
    eligible = eligible_brokers(cluster, goal)
    if any(len(p.replicas) > len(eligible) for p in cluster.partitions()):
        return
    best = fewest_balanced_moves(cluster, goal)
    plan = plan_placement(cluster, goal)
    assert hard_constraint_violations(cluster, goal, plan) == []
    event("a plan balanced both ways exists" if best is not None else "no balanced plan exists")
    if best is None:
        return  # no plan is balanced both ways: the planner does what it can (and reports it)
    assert plan.replica_moves == best
    assert plan.replica_moves_optimum == best == plan.replica_moves_lower_bound
    assert plan.replicas_outside_share == 0
