"""Well-formed nonsense is refused before it reaches the cluster model (regression: a forged
leader epoch of 2^31-1 froze a real partition's view across snapshots with a false UnderMinIsr;
partition -1 stayed in Redis; broker id -1 and 10,000 replicas were accepted)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from handler_builders import T0, alerts, broker_event, cluster_events, partition_event, simple_cluster
from hypothesis import given
from hypothesis import strategies as st

from handlers.decide import decide
from handlers.event_checks import MAX_EPOCH_JUMP, compute_event_problem
from handlers.micro_batch import BatchInputs
from planning.model import Broker, TopicPartition
from state.model import ControllerState
from tests.settings_defaults import default_policy

CLUSTER = simple_cluster(4, {"t": (2, 3)})
PARTITION = next(iter(CLUSTER.partitions()))


def partition_record(**changes):
    return partition_event(replace(PARTITION, **changes), T0)[1]


@pytest.mark.parametrize("changes, problem", [
    ({"partition": -1}, "partition -1"),
    ({"replicas": (0, 1, -1), "isr": (0, 1)}, "replica -1"),
    ({"replicas": tuple(range(10_000)), "isr": (0,)}, "10,000 replicas"),
    ({"replicas": (0, 1, 1), "isr": (0,)}, "twice"),
    ({"isr": (0, 9)}, "isr [9] not among the replicas"),
    ({"leader": 9}, "leader 9 not among"),
    ({"leader_epoch": 2**31}, "leader epoch"),
    ({"size_bytes": -5}, "negative"),
    ({"isr": (0,), "eligible_leaders": (1, 9)}, "eligible_leader_replicas [9] not among"),
    ({"isr": (0, 1), "eligible_leaders": (1,)}, "are in the ISR too"),
    ({"isr": (), "leader": None, "last_known_elr": (7,)}, "last_known_elr [7] not among"),
])
def test_an_impossible_partition_state_is_named(changes, problem):
    found = compute_event_problem("PartitionState", partition_record(**changes))
    assert found is not None and problem in found


@pytest.mark.parametrize("name, value", [("bytes_in_per_sec", -1.0), ("bytes_out_per_sec", float("nan")),
                                         ("bytes_in_per_sec", float("inf")), ("traffic_window_ms", -60_000)])
def test_an_impossible_traffic_rate_is_named(name, value):
    found = compute_event_problem("PartitionState", {**partition_record(), name: value})
    assert found is not None and name in found and "finite, non-negative" in found
    assert compute_event_problem("PartitionState", {**partition_record(), name: 0}) is None


def test_a_true_partition_state_passes_and_an_epoch_jump_does_not():
    assert compute_event_problem("PartitionState", partition_record(leader_epoch=7), known_epoch=6) is None
    jump = compute_event_problem("PartitionState", partition_record(leader_epoch=2**31 - 1), known_epoch=6)
    assert jump is not None and f"{MAX_EPOCH_JUMP:,} above the known 6" in jump


def test_impossible_brokers_and_topics_are_named():
    assert "broker id -1" in compute_event_problem("BrokerMembership", broker_event(Broker(-1), T0)[1])
    bad_name = {"topic": "no spaces allowed", "deleted": False}
    assert "not a Kafka topic name" in compute_event_problem("TopicState", bad_name)
    assert "replication factor 1000" in compute_event_problem(
        "TopicState", {"topic": "t", "deleted": False, "partition_count": 1, "replication_factor": 1000})


@given(st.sampled_from(["BrokerMembership", "TopicState", "LogDirState", "PartitionState"]),
       st.dictionaries(st.sampled_from(["broker_id", "topic", "partition", "replicas", "isr", "leader",
                                        "leader_epoch", "path", "replicas", "deleted", "partition_count"]),
                       st.one_of(st.none(), st.integers(), st.text(max_size=5), st.lists(st.integers(), max_size=3))))
def test_the_check_never_raises_whatever_the_record(schema, record):
    compute_event_problem(schema, record)


def test_a_forged_epoch_is_a_bad_event_and_the_true_events_still_apply():
    state = decide(ControllerState(), BatchInputs(0, T0, cluster_events(CLUSTER, T0)), default_policy()).state
    forged = partition_event(replace(PARTITION, isr=PARTITION.replicas[:1], leader_epoch=2**31 - 1), T0 + 1000)
    minus_one = partition_event(replace(PARTITION, partition=-1), T0 + 1000)
    decision = decide(state, BatchInputs(1, T0 + 1000, (forged, minus_one)), default_policy())
    assert len(alerts(decision, "BadEvent")) == 2 and not alerts(decision, "UnderMinIsr")
    assert decision.state.cluster == state.cluster
    truth = partition_event(replace(PARTITION, isr=PARTITION.replicas[:2], leader_epoch=PARTITION.leader_epoch + 1),
                            T0 + 2000)
    after = decide(decision.state, BatchInputs(2, T0 + 2000, (truth,)), default_policy()).state
    assert after.cluster.partition(TopicPartition(PARTITION.topic, PARTITION.partition)).isr == PARTITION.replicas[:2]


def test_traffic_samples_join_the_partitions_smoothed_rates_and_a_change_event_keeps_them():
    from handler_builders import traffic_event

    from planning.load import smooth_rate

    tp = TopicPartition(PARTITION.topic, PARTITION.partition)
    state = decide(ControllerState(), BatchInputs(0, T0, cluster_events(CLUSTER, T0)), default_policy()).state
    assert state.cluster.partition(tp).bytes_in_per_sec is None  # never measured
    first = decide(state, BatchInputs(1, T0 + 60_000, (traffic_event(PARTITION, T0 + 60_000, 1_000.0, 3_000.0),)),
                   default_policy()).state
    assert (first.cluster.partition(tp).bytes_in_per_sec, first.cluster.partition(tp).bytes_out_per_sec) == (1_000.0,
                                                                                                           3_000.0)
    second = decide(first, BatchInputs(2, T0 + 120_000, (traffic_event(PARTITION, T0 + 120_000, 2_000.0, None),)),
                    default_policy()).state
    assert second.cluster.partition(tp).bytes_in_per_sec == smooth_rate(1_000.0, 2_000.0, 60_000)
    assert second.cluster.partition(tp).bytes_out_per_sec == 3_000.0  # not measured this time: kept
    change = partition_event(replace(PARTITION, isr=PARTITION.replicas[:2], leader_epoch=PARTITION.leader_epoch + 1),
                             T0 + 130_000)
    after = decide(second, BatchInputs(3, T0 + 130_000, (change,)), default_policy()).state.cluster.partition(tp)
    assert after.isr == PARTITION.replicas[:2] and after.bytes_in_per_sec == second.cluster.partition(tp).bytes_in_per_sec
