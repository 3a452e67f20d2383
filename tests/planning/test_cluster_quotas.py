"""Stage A: cluster-wide quotas, so new brokers get their share even when every topic is small."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_checks import RACK_SHAPES, hard_constraint_violations, reaches_balance
from planning.model import Broker, Cluster, PartitionState, Topic
from planning.placement.cluster_quotas import TopicDemand, compute_cluster_quotas
from planning.placement.goal import Goal
from planning.placement.lower_bound import compute_lower_bound
from planning.placement.placer import plan_placement
from planning.placement.quotas import compute_ideal_shares
from planning.placement.racks import compute_rack_tree


def _one_partition_topics(count: int, brokers: int, rf: int) -> tuple[Topic, ...]:
    return tuple(
        Topic(f"t{t:03d}", (PartitionState(f"t{t:03d}", 0, tuple((t + k) % brokers for k in range(rf))),))
        for t in range(count)
    )


@pytest.mark.parametrize("rf, moves", [(1, 14), (2, 30), (3, 44)])
def test_new_brokers_get_their_share_when_every_topic_has_one_partition(rf, moves):
    """The issue's case: 60 one-partition topics on 6 brokers plus 2 new ones gave an empty plan."""
    cluster = Cluster(tuple(Broker(i) for i in range(6)), _one_partition_topics(60, 6, rf))
    plan = plan_placement(cluster, Goal(add_brokers=(Broker(6), Broker(7))))
    assert plan.replica_moves == plan.replica_moves_lower_bound == moves
    share = Fraction(60 * rf, 8)
    assert all(math.floor(share) <= plan.replicas_after[b] <= math.ceil(share) for b in range(8))
    assert not hard_constraint_violations(cluster, Goal(add_brokers=(Broker(6), Broker(7))), plan)


def test_new_racked_brokers_get_their_share():
    """90 one-partition RF-3 topics over 3 racks, one new broker per rack: every broker ends at 30."""
    brokers = tuple(Broker(i, rack=f"r{i % 3}") for i in range(6))
    goal = Goal(add_brokers=tuple(Broker(6 + i, rack=f"r{i}") for i in range(3)))
    cluster = Cluster(brokers, _one_partition_topics(90, 6, 3))
    plan = plan_placement(cluster, goal)
    assert plan.replica_moves == plan.replica_moves_lower_bound == 90
    assert set(plan.replicas_after.values()) == {30}
    assert plan.rack_violations == 0 and not hard_constraint_violations(cluster, goal, plan)


@pytest.mark.parametrize(
    "broker_count, replicas",
    [
        (7, [(5,)]),  # one RF-1 partition: its unit must not go to the DC with more capacity
        (4, [(3, 0, 2), (1, 2, 0)]),  # a node quota of 6*2//4 = 3 is stricter than "balanced"
    ],
)
def test_a_balanced_racked_topic_is_left_alone(broker_count, replicas):
    """Two dc2x2 clusters, already balanced, that per-topic quotas alone would move: nothing moves."""
    shape = RACK_SHAPES["dc2x2"]
    cluster = Cluster(
        tuple(Broker(i, rack=shape(i)) for i in range(broker_count)),
        (Topic("t", tuple(PartitionState("t", p, r) for p, r in enumerate(replicas))),),
    )
    plan = plan_placement(cluster, Goal())
    assert plan.replica_moves == plan.replica_moves_lower_bound == 0


@st.composite
def small_clusters(draw):
    shape_name = draw(st.sampled_from([None, *sorted(RACK_SHAPES)]))
    shape = RACK_SHAPES[shape_name] if shape_name else (lambda i: None)
    n = draw(st.integers(3, 8))
    rf = draw(st.integers(1, min(3, n)))
    brokers = [Broker(i, rack=shape(i)) for i in range(n)]
    seed = draw(st.integers(0, 2**32 - 1))
    rnd = random.Random(seed)
    topics = []
    for t in range(draw(st.integers(1, 6))):
        parts = tuple(
            PartitionState(f"t{t}", p, tuple(rnd.sample(range(n), rf)))
            for p in range(rnd.randint(1, 3))
        )
        topics.append(Topic(f"t{t}", parts))
    added = tuple(Broker(n + i, rack=shape(n + i)) for i in range(draw(st.integers(0, 2))))
    return Cluster(tuple(brokers), tuple(topics)), Goal(add_brokers=added)


@settings(max_examples=150, deadline=None)
@given(small_clusters())
def test_quotas_balance_every_topic_and_the_cluster(case):
    cluster, goal = case
    tree = compute_rack_tree([*cluster.brokers, *goal.add_brokers])
    demands = []
    for topic in cluster.topics:
        current: dict[int, int] = {}
        for p in topic.partitions:
            for b in p.replicas:
                current[b] = current.get(b, 0) + 1
        rf = len(topic.partitions[0].replicas)
        demands.append(TopicDemand(topic.name, {rf: len(topic.partitions)}, current))
    result = compute_cluster_quotas(tree, demands)
    cluster_share = {b: Fraction(0) for b in tree.broker_node}
    cluster_total = {b: 0 for b in tree.broker_node}
    moves = 0
    for demand in demands:
        quotas = result.quotas[demand.topic]
        shares = compute_ideal_shares(tree, demand.replica_histogram)
        total = sum(r * k for r, k in demand.replica_histogram.items())
        assert sum(quotas.broker_quota.values()) == total
        for b, share in shares.items():
            assert math.floor(share) <= quotas.broker_quota[b] <= math.ceil(share)
            cluster_share[b] += share
            cluster_total[b] += quotas.broker_quota[b]
        for node, quota in quotas.node_quota.items():  # a node's quota is its brokers' sum
            assert quota == sum(q for b, q in quotas.broker_quota.items()
                                if node in tree.node_ancestry[tree.broker_node[b]])
        moves += total - sum(min(q, demand.current.get(b, 0)) for b, q in quotas.broker_quota.items())
    for b, share in cluster_share.items():
        assert math.floor(share) <= cluster_total[b] <= math.ceil(share)
    assert result.moves_lower_bound == moves


@settings(max_examples=150, deadline=None)
@given(small_clusters())
def test_plans_keep_the_hard_constraints_and_a_balanced_plan_never_beats_the_bound(case):
    cluster, goal = case
    plan = plan_placement(cluster, goal)
    assert not hard_constraint_violations(cluster, goal, plan)
    assert plan.replica_moves_lower_bound == compute_lower_bound(cluster, goal)
    if reaches_balance(cluster, goal, plan):
        assert plan.replica_moves >= plan.replica_moves_lower_bound


@settings(max_examples=150, deadline=None)
@given(small_clusters())
def test_without_racks_every_broker_ends_within_its_cluster_share(case):
    cluster, goal = case
    brokers = tuple(Broker(b.id) for b in cluster.brokers)
    goal = Goal(add_brokers=tuple(Broker(b.id) for b in goal.add_brokers))
    cluster = Cluster(brokers, cluster.topics)
    plan = plan_placement(cluster, goal)
    total = sum(len(p.replicas) for p in cluster.partitions())
    share = Fraction(total, len(brokers) + len(goal.add_brokers))
    assert all(math.floor(share) <= count <= math.ceil(share) for count in plan.replicas_after.values())
    assert plan.replica_moves == plan.replica_moves_lower_bound


@settings(max_examples=60, deadline=None)
@given(small_clusters())
def test_a_planned_cluster_needs_no_further_moves(case):
    cluster, goal = case
    plan = plan_placement(cluster, goal)
    applied = Cluster(
        tuple(sorted({b.id: b for b in (*cluster.brokers, *goal.add_brokers)}.values(), key=lambda b: b.id)),
        tuple(
            Topic(t.name, tuple(
                PartitionState(p.topic, p.partition, plan.targets.get(p.tp, p.replicas)) for p in t.partitions
            ))
            for t in cluster.topics
        ),
    )
    again = plan_placement(applied, Goal())
    assert again.replica_moves == 0


# --- the honest summary ------------------------------------------------------------------------


def _dc3x4(broker_count: int, replicas: list[tuple[int, ...]]) -> Cluster:
    shape = RACK_SHAPES["dc3x4"]
    return Cluster(
        tuple(Broker(i, rack=shape(i)) for i in range(broker_count)),
        (Topic("t", tuple(PartitionState("t", p, r) for p, r in enumerate(replicas))),),
    )


def test_the_bound_counts_the_rack_repairs_a_violating_cluster_needs(monkeypatch):
    """Two partitions sit twice in dc0: each must lose a replica. The bound said 0; the optimum is 3."""
    import planning.placement.exact_placement as exact_placement

    cluster = _dc3x4(4, [(2, 1), (0, 3), (0, 2), (3, 0), (1, 2)])
    plan = plan_placement(cluster, Goal())  # small: the joint model, the proven optimum
    assert plan.replica_moves == plan.replica_moves_lower_bound == plan.replica_moves_optimum == 3
    monkeypatch.setattr(exact_placement, "JOINT_EXACT_ARCS", 0)  # the per-topic path, as on big clusters
    plan = plan_placement(cluster, Goal())
    assert 2 <= plan.replica_moves_lower_bound <= 3 <= plan.replica_moves
    assert plan.rack_violations == 0 and plan.replicas_outside_share == 0
    if plan.replica_moves > plan.replica_moves_lower_bound:
        assert plan.replica_moves_optimum is None and plan.gap_percent > 0


def test_a_plan_never_reports_fewer_moves_than_its_bound_when_balanced():
    """RF 5 over 3 DCs: the plan made 0 moves under its own bound of 1, spread 2, no warning."""
    plan = plan_placement(_dc3x4(7, [(0, 6, 2, 5, 1), (2, 3, 5, 1, 4), (0, 2, 6, 1, 4)]), Goal())
    assert plan.replicas_outside_share == 0 and plan.max_topic_replica_spread <= 1
    assert plan.replica_moves >= plan.replica_moves_lower_bound
    assert plan.replica_moves == 2  # the exact balanced optimum


def test_a_broker_left_outside_its_share_is_named_with_the_reason(monkeypatch):
    """With the exact placements' budgets at 0, a topic the greedy cannot balance is reported."""
    import planning.placement.exact_placement as exact_placement

    monkeypatch.setattr(exact_placement, "TOPIC_EXACT_ARCS", 0)
    monkeypatch.setattr(exact_placement, "JOINT_EXACT_ARCS", 0)
    rnd = random.Random(3)
    from placement_checks import random_spread_cluster

    cluster = random_spread_cluster(rnd, [Broker(i) for i in range(3)], 2, 30, 2)
    plan = plan_placement(cluster, Goal())
    assert plan.replicas_outside_share > 0 and plan.replica_moves_optimum is None
    assert any("outside their share" in w and "over its budget" in w for w in plan.warnings)
    assert any(w.startswith("the cluster: brokers end outside their share") for w in plan.warnings)
    monkeypatch.undo()
    exact = plan_placement(cluster, Goal())
    assert exact.replicas_outside_share == 0 and not exact.warnings
