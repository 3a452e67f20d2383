"""The placer's per-topic step changes nothing it is given: `plan_topic_replicas` works on its own
copies, never on the caller's partition fates or cluster load."""

from __future__ import annotations

import copy
import random
from dataclasses import fields

from hypothesis import given, settings, strategies as st

from placement_checks import RACK_SHAPES, random_spread_cluster
from planning.model import Broker, Cluster, PartitionState, Topic
from planning.placement.goal import Goal, compute_planning_cluster
from planning.placement.racks import compute_rack_tree
from planning.placement.replica_fates import PartitionFates, compute_offline_dirs, compute_partition_fates
from planning.placement.topic_replicas import plan_topic_replicas


def topic_inputs(cluster: Cluster, goal: Goal, topic: Topic):
    """What `plan_placement` hands `plan_topic_replicas` for `topic`."""
    cluster = compute_planning_cluster(cluster, goal)
    tree = compute_rack_tree(b for b in cluster.brokers if b.eligible)
    eligible = frozenset(tree.broker_node)
    partitions = sorted(topic.partitions, key=lambda p: p.partition)
    fates = [compute_partition_fates(p, cluster, {}, eligible, compute_offline_dirs(cluster), goal.heal) for p in partitions]
    load = {b: sum(b in p.replicas for p in cluster.partitions()) for b in eligible}
    return tree, fates, load


def tree_value(tree) -> tuple:
    """The rack tree without its memo caches (filled on use, they are not part of its value)."""
    return tuple(getattr(tree, f.name) for f in fields(tree) if not f.name.startswith("_"))


def assert_unchanged_by_planning(tree, fates, load, rebalance):
    before = (tree_value(tree), copy.deepcopy(fates), copy.deepcopy(load))
    first = plan_topic_replicas(tree, fates, load, rebalance)
    assert (tree_value(tree), fates, load) == before
    assert plan_topic_replicas(tree, fates, load, rebalance) == first  # same inputs, same answer
    return first


def test_a_broker_added_gets_replicas_and_the_callers_values_stay_as_they_were():
    brokers = tuple(Broker(b) for b in range(3))
    parts = tuple(PartitionState("t", n, (n % 3, (n + 1) % 3)) for n in range(6))
    cluster = Cluster(brokers, (Topic("t", parts),))
    tree, fates, load = topic_inputs(cluster, Goal(add_brokers=(Broker(3),)), cluster.topics[0])
    assert load == {0: 4, 1: 4, 2: 4, 3: 0}
    placed = assert_unchanged_by_planning(tree, fates, load, rebalance=True)
    assert sum(3 in final for final in placed.finals) == 3  # `plan_topic_replicas`' worked example: 3 moves
    assert placed.cluster_load[3] == 3 and load[3] == 0
    assert all(isinstance(f, PartitionFates) and None not in placed.finals[i] for i, f in enumerate(fates))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 100_000), shape=st.sampled_from(sorted(RACK_SHAPES)), brokers=st.integers(4, 12),
       rf=st.integers(1, 3), added=st.integers(0, 2), killed=st.integers(0, 1), rebalance=st.booleans())
def test_planning_a_topic_changes_none_of_its_inputs(seed, shape, brokers, rf, added, killed, rebalance):
    rnd = random.Random(seed)
    rack = RACK_SHAPES[shape]
    cluster = random_spread_cluster(rnd, [Broker(i, rack=rack(i)) for i in range(brokers)], 2, 30, rf)
    dead = set(rnd.sample(range(brokers), killed))
    cluster = cluster.with_brokers(Broker(b.id, b.rack, alive=b.id not in dead) for b in cluster.brokers)
    goal = Goal(add_brokers=tuple(Broker(brokers + i, rack=rack(brokers + i)) for i in range(added)),
                rebalance=rebalance)
    for topic in cluster.topics:
        tree, fates, load = topic_inputs(cluster, goal, topic)
        if any(f.replication > tree.node_capacity[0] for f in fates):
            return  # infeasible: raises before planning anything
        assert_unchanged_by_planning(tree, fates, load, rebalance)
