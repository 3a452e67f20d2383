"""Snapshot reconciliation (SPEC 2): a lost deletion never leaves the state wrong for longer than one
snapshot period, and a snapshot never drops what was observed after its poll."""

from __future__ import annotations

from dataclasses import replace

from handler_builders import (
    T0,
    alerts,
    broker_event,
    cluster_events,
    partition_event,
    reassign,
    simple_cluster,
    snapshot_end,
    tick,
    topic_event,
)
from hypothesis import given, settings
from tests.edge.test_observation_events import observations

from handlers.micro_batch import BatchInputs, Decision
from handlers.decide import decide
from tests.settings_defaults import default_policy
from state.model import ControllerState, ObservationTimes
from planning.model import Broker, Cluster, LogDir, PartitionState, Topic, TopicPartition

POLL = T0 + 60_000  # the snapshot's poll time


def run(state: ControllerState, events, at_ms: int, batch: int, requests=()) -> Decision:
    inputs = BatchInputs(batch, at_ms, tuple(events), tuple(requests) or (tick(at_ms),))
    return decide(state, inputs, default_policy())


def without_topic(cluster: Cluster, name: str) -> Cluster:
    return Cluster(cluster.brokers, tuple(t for t in cluster.topics if t.name != name))


def started(cluster: Cluster, requests=()) -> ControllerState:
    return run(ControllerState(), cluster_events(cluster, T0), T0, 0, requests).state


def test_a_lost_topic_deletion_is_fixed_by_the_next_snapshot():
    cluster = simple_cluster(3, {"kept": (2, 2), "gone": (3, 2)})
    state = started(cluster, [reassign({TopicPartition("gone", 0): (2, 0)}, T0)])
    assert TopicPartition("gone", 0) in state.reassignments
    # "gone" is deleted at T0 + 1 s; its TopicState(deleted) never reaches the pipeline.
    decision = run(state, [snapshot_end(without_topic(cluster, "gone"), POLL)], POLL, 1)
    after = decision.state
    assert set(after.cluster.topics_by_name) == {"kept"}
    assert all(tp.topic == "kept" for tp in after.cluster.partitions_by_tp)
    assert not after.reassignments and set(after.observed_at.topics) == {"kept"}
    [reconciled] = alerts(decision, "SnapshotReconciled")
    assert reconciled["details"]["topics"] == "gone" and reconciled["details"]["snapshot_id"] == "snap-1"
    assert [a["subject"] for a in alerts(decision, "TopicDeleted")] == ["gone"]
    # A second snapshot saying the same thing changes nothing and says nothing.
    again = run(after, [snapshot_end(without_topic(cluster, "gone"), POLL + 60_000, "snap-2")], POLL + 60_000, 2)
    assert again.state.cluster == after.cluster and not alerts(again, "SnapshotReconciled")


def test_a_topic_created_after_the_snapshots_poll_is_never_dropped():
    cluster = simple_cluster(3, {"old": (2, 2)})
    new = Topic("new", (PartitionState("new", 0, (1, 2), (1, 2), 1, leader_epoch=0),), 1)
    created = (topic_event(new, POLL + 500), partition_event(new.partitions[0], POLL + 500))
    polled_before = snapshot_end(cluster, POLL)  # the poll did not see "new" yet
    # The marker applied in a later batch than the creation...
    state = run(started(cluster), created, POLL + 500, 1).state
    later = run(state, [polled_before], POLL + 600, 2)
    assert "new" in later.state.cluster.topics_by_name and not alerts(later, "SnapshotReconciled")
    # ...in the same batch (listed first: markers are applied after every other event)...
    same = run(started(cluster), (polled_before, *created), POLL + 500, 1)
    assert "new" in same.state.cluster.topics_by_name and not alerts(same, "SnapshotReconciled")
    # ...or with only a partition event of it arrived so far (its TopicState travels elsewhere).
    partial = run(started(cluster), (created[1], polled_before), POLL + 500, 1)
    assert partial.state.cluster.partition(TopicPartition("new", 0)) is not None


def test_a_lost_broker_unregistration_is_fixed_by_the_next_snapshot():
    cluster = simple_cluster(3, {"t": (6, 2)})
    empty = Broker(3, "r0", log_dirs=(LogDir("/d0"),))
    with_empty = Cluster((*cluster.brokers, empty), cluster.topics)
    state = started(with_empty)
    # Broker 3 (empty) unregisters and broker 2 (holding replicas) vanishes; both events are lost.
    polled = Cluster(cluster.brokers[:2], cluster.topics)
    decision = run(state, [snapshot_end(polled, POLL)], POLL, 1)
    after = decision.state
    assert after.cluster.broker(3) is None  # left the cluster empty: forgotten
    assert after.cluster.broker(2) is not None and not after.cluster.broker(2).alive
    assert after.broker_down_since_ms == {2: POLL}
    assert [a["subject"] for a in alerts(decision, "BrokerFailed")] == ["broker-2"]
    [reconciled] = alerts(decision, "SnapshotReconciled")
    assert reconciled["details"]["brokers"] == "2,3"
    assert set(after.observed_at.brokers) == {0, 1, 2}


def test_a_broker_registered_after_the_poll_is_kept():
    cluster = simple_cluster(3, {"t": (6, 2)})
    joined = Broker(5, "r2", log_dirs=(LogDir("/d0"),))
    state = run(started(cluster), [broker_event(joined, POLL + 300)], POLL + 300, 1).state
    decision = run(state, [snapshot_end(cluster, POLL)], POLL + 400, 2)
    assert decision.state.cluster.broker(5) is not None and decision.state.cluster.broker(5).alive


def test_a_topic_recreated_smaller_loses_the_partitions_it_no_longer_has():
    cluster = simple_cluster(3, {"t": (6, 2)})
    state = started(cluster)
    # "t" is deleted (event lost) and re-created with 2 partitions before the poll.
    smaller = Topic("t", cluster.topics[0].partitions[:2], 1)
    recreated = (topic_event(smaller, T0 + 2000), *(partition_event(p, T0 + 2000) for p in smaller.partitions))
    state = run(state, recreated, T0 + 2000, 1).state
    assert len(state.cluster.topics_by_name["t"].partitions) == 6  # nothing says the others went
    decision = run(state, [snapshot_end(Cluster(cluster.brokers, (smaller,)), POLL)], POLL, 2)
    assert [p.partition for p in decision.state.cluster.topics_by_name["t"].partitions] == [0, 1]
    [reconciled] = alerts(decision, "SnapshotReconciled")
    assert reconciled["details"]["partitions"] == "t-2,t-3,t-4,t-5"


def test_a_start_marker_or_one_without_inventory_changes_nothing():
    cluster = simple_cluster(3, {"a": (2, 2), "b": (2, 2)})
    state = started(cluster)
    empty = Cluster()
    old_writer = snapshot_end(empty, POLL, inventory=False)  # a version 1 END marker
    start = ("SnapshotMarker", {**snapshot_end(empty, POLL)[1], "phase": "START"})
    decision = run(state, [old_writer, start], POLL, 1)
    assert decision.state.cluster == state.cluster and not alerts(decision)


def test_state_without_observation_times_is_reconciled_too():
    cluster = simple_cluster(3, {"a": (2, 2), "b": (2, 2)})
    state = replace(started(cluster), observed_at=ObservationTimes())  # written by an older version
    decision = run(state, [snapshot_end(without_topic(cluster, "b"), POLL)], POLL, 1)
    assert set(decision.state.cluster.topics_by_name) == {"a"}


# --- watcher to pipeline: whatever deletions are lost, one END marker sets the inventory right ------


def pipeline_records(events) -> list[tuple[str, dict]]:
    """The watcher's events as the pipeline decodes them."""
    from schemas.codec import TOPICS, decode, encode

    return [(TOPICS[suffix], decode(TOPICS[suffix], encode(TOPICS[suffix], record)))
            for suffix, _key, record in events]


@settings(max_examples=150, deadline=None)
@given(observations(), observations())
def test_after_lost_deletions_one_snapshot_end_marker_gives_the_clusters_topics_and_brokers(before, after):
    from reassigner.edge.observation import compute_events, compute_snapshot_events

    # Leader epochs never go backwards within a topic (a re-created topic is another matter: see
    # the module doc of handlers.events).
    after = replace(after, partitions={
        key: replace(p, leader_epoch=max(p.leader_epoch, before.partitions[key].leader_epoch))
        if key in before.partitions else p for key, p in after.partitions.items()})
    state = run(ControllerState(), pipeline_records(compute_snapshot_events(before, "s1", T0)), T0, 0).state
    changes = [(s, k, r) for s, k, r in compute_events(before, after, T0 + 1000)
               if not r.get("deleted") and r.get("state") != "UNREGISTERED"]  # the deletions are lost
    state = run(state, pipeline_records(changes), T0 + 1000, 1).state
    end = compute_snapshot_events(after, "s2", T0 + 2000)[-1]  # the snapshot's body is lost too
    state = run(state, pipeline_records([end]), T0 + 2000, 2).state
    assert set(state.cluster.topics_by_name) == set(after.topics)
    assert {b.id for b in state.cluster.brokers} == set(after.brokers)
    assert set(state.observed_at.topics) <= set(after.topics)
