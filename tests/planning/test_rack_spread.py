"""Hard constraint 3 (multi-level rack spread) and the rack tree rules."""

from __future__ import annotations

import itertools
import random
from collections import Counter

import pytest

from hypothesis import given, settings, strategies as st

from placement_checks import RACK_SHAPES, hard_constraint_violations, random_spread_cluster
from planning.model import Broker, Cluster, PartitionState, Topic
from planning.placement.goal import Goal
from planning.placement.placer import plan_placement
from planning.placement.racks import (
    compute_partition_boxes,
    compute_ideal_domain_counts,
    compute_rack_tree,
    count_rack_violations,
    satisfies_rack_spread,
)


def test_rf_not_above_domains_means_one_per_domain():
    tree = compute_rack_tree([Broker(i, rack=f"r{i % 3}") for i in range(9)])
    assert satisfies_rack_spread(tree, (0, 1, 2))
    assert not satisfies_rack_spread(tree, (0, 3, 1))  # two in r0, none in r2


def test_rf_above_domains_counts_differ_by_at_most_one():
    tree = compute_rack_tree([Broker(i, rack=f"r{i % 2}") for i in range(6)])
    assert satisfies_rack_spread(tree, (0, 1, 2))  # r0: 2, r1: 1
    assert not satisfies_rack_spread(tree, (0, 2, 4))  # r0: 3, r1: 0


def test_multi_level_spreads_dcs_then_racks():
    # KIP-879's example: 3 DCs x 2 racks, RF 3 -> one replica per DC.
    brokers = [Broker(i, rack=f"/dc{i % 3}/r{(i // 3) % 2}") for i in range(12)]
    tree = compute_rack_tree(brokers)
    assert satisfies_rack_spread(tree, (0, 1, 2))
    assert not satisfies_rack_spread(tree, (0, 3, 1))  # /dc0 twice, /dc2 unused
    # RF 6: two per DC, and inside each DC one per rack.
    assert satisfies_rack_spread(tree, (0, 3, 1, 4, 2, 5))
    assert not satisfies_rack_spread(tree, (0, 6, 1, 4, 2, 5))  # 0 and 6 share /dc0/r0


def test_small_domain_is_filled_and_the_rest_spills_over():
    tree = compute_rack_tree([Broker(0, rack="a")] + [Broker(i, rack="b") for i in range(1, 6)])
    assert satisfies_rack_spread(tree, (0, 1, 2, 3))  # a can hold only 1
    assert compute_ideal_domain_counts(tree, 4)["/a"] == (1, 1)
    assert compute_ideal_domain_counts(tree, 4)["/b"] == (3, 3)


def test_brokers_without_rack_are_their_own_domains_and_mixed_depth_warns():
    tree = compute_rack_tree([Broker(0, rack="/dc1/r1"), Broker(1, rack="/dc1"), Broker(2)])
    assert any("mixed depths" in w for w in tree.warnings)
    assert any("no rack" in w for w in tree.warnings)
    assert satisfies_rack_spread(tree, (0, 2))
    assert not satisfies_rack_spread(tree, (0, 1))  # both in /dc1 while broker 2 is free


def test_count_rack_violations_counts_bad_lists():
    tree = compute_rack_tree([Broker(i, rack=f"r{i % 2}") for i in range(4)])
    assert count_rack_violations(tree, [(0, 1), (0, 2), (1, 1), (0, 9)]) == 3


def test_planner_repairs_a_rack_violation_with_one_move():
    brokers = tuple(Broker(i, rack=f"r{i % 3}") for i in range(6))
    topic = Topic("t", (PartitionState("t", 0, (0, 3, 1)),))  # r0 twice, r2 unused
    cluster = Cluster(brokers, (topic,))
    plan = plan_placement(cluster, Goal())
    assert plan.rack_violations == 0
    final = plan.targets[topic.partitions[0].tp]
    assert len(set(final) - {0, 3, 1}) == 1
    assert final[0] == 0  # the leader stayed: a follower was moved




@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    shape=st.sampled_from(sorted(RACK_SHAPES)),
    brokers=st.integers(4, 16),
    rf=st.integers(1, 4),
    added=st.integers(0, 3),
    killed=st.integers(0, 1),
)
def test_no_plan_breaks_a_hard_constraint(seed, shape, brokers, rf, added, killed):
    rnd = random.Random(seed)
    rack = RACK_SHAPES[shape]
    rf = min(rf, brokers - killed)
    all_brokers = [Broker(i, rack=rack(i)) for i in range(brokers)]
    cluster = random_spread_cluster(rnd, all_brokers, rnd.randint(1, 3), 30, rf)
    dead = set(rnd.sample(range(brokers), killed))
    cluster = Cluster(tuple(Broker(b.id, b.rack, alive=b.id not in dead) for b in all_brokers), cluster.topics)
    goal = Goal(add_brokers=tuple(Broker(brokers + i, rack=rack(brokers + i)) for i in range(added)))
    plan = plan_placement(cluster, goal)
    assert hard_constraint_violations(cluster, goal, plan) == []
    assert plan.rack_violations == 0


_BOX_SHAPES = {
    **RACK_SHAPES,
    "three_levels": lambda i: f"/dc{i % 2}/r{(i // 2) % 2}/h{(i // 4) % 2}",
    "uneven_depths": lambda i: ["/dc0/r0", "/dc0/r1", "/dc1", "/dc0/r0", None, "/dc1/r5"][i % 6],
}


@pytest.mark.parametrize("shape", sorted(_BOX_SHAPES))
@pytest.mark.parametrize("brokers", [3, 5, 7, 9])
def test_partition_boxes_say_exactly_what_the_rule_says(shape, brokers):
    """Every set of distinct brokers (sizes 1..5): all counts inside their boxes <=> rack-spread."""
    tree = compute_rack_tree(Broker(i, rack=_BOX_SHAPES[shape](i)) for i in range(brokers))
    for rf in range(1, min(5, brokers) + 1):
        node_box, broker_box = compute_partition_boxes(tree, rf)
        for replicas in itertools.combinations(range(brokers), rf):
            counts = Counter()
            for b in replicas:
                counts.update(tree.node_ancestry[tree.broker_node[b]][1:])
            inside = all(lo <= counts.get(node, 0) <= hi for node, (lo, hi) in node_box.items()) and all(
                lo <= (1 if b in replicas else 0) <= hi for b, (lo, hi) in broker_box.items()
            )
            assert inside == satisfies_rack_spread(tree, replicas), (shape, rf, replicas)
