"""Eligible leader replicas (KIP-966) in the pipeline: carried from the watcher's events into the
partition state and its stored form, and named by the UnderMinIsr and OfflinePartitions alerts
(a leaderless partition with some gets a clean leader back when one of their brokers returns)."""

from __future__ import annotations

from dataclasses import replace

from handler_builders import T0, alerts, cluster_events, partition_event, simple_cluster

from handlers.decide import decide
from handlers.micro_batch import BatchInputs
from planning.model import TopicPartition
from state.model import ControllerState
from state.stored_forms import partition_from_storage, partition_to_storage
from tests.settings_defaults import default_policy

CLUSTER = simple_cluster(4, {"t": (3, 3)}, min_isr=2)


def started():
    return decide(ControllerState(), BatchInputs(0, T0, cluster_events(CLUSTER, T0)), default_policy()).state


def test_the_alerts_say_which_partitions_keep_eligible_leaders():
    state = started()
    p0, p1, p2 = (CLUSTER.partition(TopicPartition("t", n)) for n in range(3))
    (a0, b0, c0), b1 = p0.replicas, p1.replicas[1]
    events = (
        # under min ISR, its two others kept as eligible leaders
        partition_event(replace(p0, isr=(a0,), leader=a0, eligible_leaders=(b0, c0), leader_epoch=1), T0 + 1000),
        # leaderless: nothing in sync, one eligible leader left
        partition_event(replace(p1, isr=(), leader=None, eligible_leaders=(b1,), last_known_elr=(),
                                leader_epoch=1), T0 + 1000),
        # leaderless with no eligible leader: only the last known ones
        partition_event(replace(p2, isr=(), leader=None, last_known_elr=p2.replicas[:1], leader_epoch=1),
                        T0 + 1000),
    )
    decision = decide(state, BatchInputs(1, T0 + 1000, events), default_policy())
    assert not alerts(decision, "BadEvent")
    kept = decision.state.cluster.partition(TopicPartition("t", 0))
    assert (kept.isr, kept.eligible_leaders) == ((a0,), (b0, c0))
    assert decision.state.cluster.partition(TopicPartition("t", 2)).last_known_elr == p2.replicas[:1]
    (under,) = alerts(decision, "UnderMinIsr")
    assert under["details"]["count"] == "3" and under["details"]["with_eligible_leaders"] == "2"
    assert "2 of them keep eligible leader replicas" in under["message"]
    (offline,) = alerts(decision, "OfflinePartitions")
    assert offline["details"]["count"] == "2" and offline["details"]["eligible_partitions"] == "t-1"
    assert "1 of them keep eligible leader replicas" in offline["message"]
    assert "1 need an in-sync replica back" in offline["message"]


def test_alerts_without_eligible_leaders_read_as_before():
    state = started()
    p0 = CLUSTER.partition(TopicPartition("t", 0))
    decision = decide(state, BatchInputs(1, T0 + 1000, (partition_event(
        replace(p0, isr=p0.replicas[:1], leader_epoch=1), T0 + 1000),)), default_policy())
    (under,) = alerts(decision, "UnderMinIsr")
    assert under["message"] == "1 partitions of t have fewer in-sync replicas than min.insync.replicas = 2"
    assert "with_eligible_leaders" not in under["details"]


def test_the_stored_form_keeps_eligible_leaders_and_reads_rows_written_before_them():
    brokers = CLUSTER.brokers_by_id
    p0 = CLUSTER.partition(TopicPartition("t", 0))
    with_elr = replace(p0, isr=p0.replicas[:1], eligible_leaders=p0.replicas[1:], last_known_elr=())
    assert partition_from_storage(p0.tp, partition_to_storage(with_elr, brokers), brokers) == with_elr
    plain = partition_to_storage(p0, brokers)
    assert plain.count(",") == partition_to_storage(replace(p0, eligible_leaders=()), brokers).count(",")
    assert partition_from_storage(p0.tp, plain, brokers) == p0  # no ELR: the row as before (eleven fields)


def test_a_snapshot_marker_tells_the_state_which_kafka_runs_and_one_from_an_older_watcher_changes_nothing():
    import json

    from handler_builders import snapshot_end

    from planning.model import KafkaFacts
    from state.stored_forms import kafka_facts_from_storage, meta_to_storage

    state = started()
    assert state.kafka is None
    schema, marker = snapshot_end(CLUSTER, T0 + 1000)
    told = {**marker, "kafka_release": "3.7", "kafka_metadata_level": 19,
            "kafka_capabilities": ["log-dir moves and dir failures"]}
    state = decide(state, BatchInputs(1, T0 + 1000, ((schema, told),)), default_policy()).state
    assert state.kafka == KafkaFacts("3.7", 19, ("log-dir moves and dir failures",))
    assert kafka_facts_from_storage(json.loads(meta_to_storage(state)["kafka"])) == state.kafka
    assert kafka_facts_from_storage(None) is None  # a state stored before it was kept
    older = decide(state, BatchInputs(2, T0 + 2000, (snapshot_end(CLUSTER, T0 + 2000, "snap-2"),)),
                   default_policy()).state
    assert older.kafka == state.kafka  # a marker that does not say keeps what is known
