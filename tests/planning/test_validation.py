"""Explicit targets (Reassign requests): bad input is refused with Kafka-style codes."""

from __future__ import annotations

import pytest

from planning.model import Broker, Cluster, PartitionState, Topic, TopicPartition
from planning.placement.goal import Goal
from planning.placement.placer import plan_placement
from planning.validation import require_satisfiable_replication_factor, validate_targets
from schemas.errors import (
    InvalidReplicaAssignmentError,
    PlanInfeasibleError,
    UnknownTopicOrPartitionError,
)

TP = TopicPartition("orders", 0)


@pytest.fixture
def cluster() -> Cluster:
    brokers = (Broker(0), Broker(1), Broker(2), Broker(3, alive=False), Broker(4, draining=True))
    parts = tuple(PartitionState("orders", p, (0, 1)) for p in range(2))
    return Cluster(brokers, (Topic("orders", parts),))


@pytest.mark.parametrize(
    "replicas, words",
    [
        ((), "empty"),
        ((0, -1), "non-negative"),
        ((0, 0), "more than once"),
        ((0, 9), "not in the cluster"),
        ((0, 3), "dead"),
        ((0, 4), "drained"),
    ],
)
def test_bad_replica_lists_are_invalid_assignments(cluster, replicas, words):
    with pytest.raises(InvalidReplicaAssignmentError) as caught:
        validate_targets(cluster, {TP: replicas})
    assert words in str(caught.value)
    assert "orders-0" in str(caught.value)
    assert caught.value.code == "INVALID_REPLICA_ASSIGNMENT"


def test_unknown_topic_and_partition(cluster):
    with pytest.raises(UnknownTopicOrPartitionError) as caught:
        validate_targets(cluster, {TopicPartition("nope", 0): (0, 1)})
    assert caught.value.code == "UNKNOWN_TOPIC_OR_PARTITION"
    with pytest.raises(UnknownTopicOrPartitionError, match="has 2 partitions"):
        validate_targets(cluster, {TopicPartition("orders", 7): (0, 1)})


def test_replication_factor_above_eligible_brokers_is_refused(cluster):
    with pytest.raises(InvalidReplicaAssignmentError, match="needs 4 replicas but only 3"):
        require_satisfiable_replication_factor(cluster, TP, (0, 1, 2, 5))


def test_planner_refuses_rf_above_eligible_brokers_naming_the_partition():
    brokers = (Broker(0), Broker(1), Broker(2, alive=False))
    cluster = Cluster(brokers, (Topic("orders", (PartitionState("orders", 0, (0, 1, 2)),)),))
    with pytest.raises(PlanInfeasibleError, match=r"orders-0 needs 3 replicas but only 2"):
        plan_placement(cluster, Goal())


def test_explicit_targets_are_kept_as_given(cluster):
    plan = plan_placement(cluster, Goal(explicit_targets={TP: (2, 0)}))
    assert plan.targets[TP] == (2, 0)


def test_explicit_targets_are_validated_by_the_planner(cluster):
    with pytest.raises(InvalidReplicaAssignmentError):
        plan_placement(cluster, Goal(explicit_targets={TP: (0, 3)}))


def test_removing_an_unknown_broker_is_refused(cluster):
    with pytest.raises(InvalidReplicaAssignmentError, match="broker 42"):
        plan_placement(cluster, Goal(drain_brokers=frozenset({42})))
