"""`Goal.partial`: a partition that cannot be placed is left as it is and named; the rest is
planned exactly as without it. `Goal.ignore_racks`: the last resort of a heal."""

from __future__ import annotations

import pytest

from planning.model import Broker, Cluster, LogDir, PartitionState, Topic, TopicPartition
from planning.placement.goal import Goal
from planning.placement.placer import plan_placement
from schemas.errors import PlanInfeasibleError


def cluster_with_a_failed_dir() -> Cluster:
    brokers = tuple(Broker(b, rack=rack, log_dirs=(LogDir("/d0"), LogDir("/d1", online=b != 0)))
                    for b, rack in enumerate(("ra", "rb", "rc", "rc")))
    t0 = PartitionState("t", 0, (0, 1, 2), (1, 2), 1, log_dirs=("/d1", "/d0", "/d0"), offline_replicas=(0,))
    t1 = PartitionState("t", 1, (1, 2, 0), (1, 2, 0), 1, log_dirs=("/d0", "/d0", "/d0"))
    u0 = PartitionState("u", 0, (0, 1), (1,), 1, log_dirs=("/d1", "/d0"), offline_replicas=(0,))
    return Cluster(brokers, (Topic("t", (t0, t1), 2), Topic("u", (u0,), 1)))


def test_a_partial_heal_names_what_it_leaves_and_plans_the_rest():
    cluster = cluster_with_a_failed_dir()
    goal = Goal(heal=True, rebalance=False)
    with pytest.raises(PlanInfeasibleError) as raised:
        plan_placement(cluster, goal)
    assert raised.value.partition == TopicPartition("t", 0)
    plan = plan_placement(cluster, Goal(heal=True, rebalance=False, partial=True))
    assert set(plan.infeasible) == {TopicPartition("t", 0)}
    assert "rack spread" in plan.infeasible[TopicPartition("t", 0)]
    assert set(plan.targets) == {TopicPartition("u", 0)} and 0 not in plan.targets[TopicPartition("u", 0)]
    assert plan.rack_violations == 0


def test_ignoring_racks_heals_everything_and_says_how_spread_suffers():
    plan = plan_placement(cluster_with_a_failed_dir(), Goal(heal=True, rebalance=False, ignore_racks=True))
    assert not plan.infeasible and 0 not in plan.targets[TopicPartition("t", 0)]
