"""What a commit writes (`state.controller_store.compute_changes`): only what the batch changed,
found without walking the topics it did not touch. Pure: no Redis."""

from __future__ import annotations

from dataclasses import replace

from handlers.events import compute_cluster_after_events
from planning.model import Broker, Cluster, LogDir, PartitionState, Topic, TopicPartition
from state.stored_forms import compute_changed_partitions, compute_changes, tp_field
from state.model import ControllerState


def cluster(topics=20, partitions=50) -> Cluster:
    brokers = tuple(Broker(b, log_dirs=(LogDir(f"/d{b}/a"), LogDir(f"/d{b}/b"))) for b in range(4))
    return Cluster(brokers, tuple(
        Topic(f"t{t}", tuple(PartitionState(f"t{t}", n, (n % 4, (n + 1) % 4), (n % 4, (n + 1) % 4), n % 4,
                                            log_dirs=(f"/d{n % 4}/a", f"/d{(n + 1) % 4}/b"), leader_epoch=1)
                             for n in range(partitions)), 1)
        for t in range(topics)))


def isr_event(p: PartitionState, isr) -> tuple[str, dict]:
    return ("PartitionState", {"event_time": 1, "id": "x", "key": f"{p.topic}-{p.partition}", "topic": p.topic,
                               "partition": p.partition, "replicas": list(p.replicas), "isr": list(isr),
                               "leader": p.leader, "leader_epoch": p.leader_epoch + 1, "log_dirs": list(p.log_dirs)})


def test_an_isr_event_writes_its_partition_and_leaves_every_other_topic_untouched():
    before = cluster()
    p = before.partition(TopicPartition("t3", 7))
    after, _, _ = compute_cluster_after_events(before, [isr_event(p, p.replicas[:1])])
    new_objects = [t.name for t in after.topics if t is not before.topics_by_name[t.name]]
    assert new_objects == ["t3"]
    changed, gone = compute_changed_partitions(before, after)
    assert list(changed) == [p.tp] and gone == []
    changes = compute_changes(ControllerState(cluster=before), ControllerState(cluster=after))
    assert changes["partitions"]["set"][0] == tp_field(p.tp) and len(changes["partitions"]["set"]) == 2


def test_new_dir_sums_rewrite_no_partition_but_a_changed_dir_list_rewrites_that_brokers():
    """Regression: LogDirState events (every step changes a dir's replicas) changed a broker,
    and any broker change rewrote every partition with dirs."""
    before = cluster()
    brokers = list(before.brokers)
    brokers[1] = replace(brokers[1], log_dirs=(replace(brokers[1].log_dirs[0], replica_bytes=10**9, replica_count=9),
                                               brokers[1].log_dirs[1]))
    summed = before.with_brokers(brokers)
    changes = compute_changes(ControllerState(cluster=before), ControllerState(cluster=summed))
    assert "partitions" not in changes and "brokers" in changes
    brokers[1] = replace(brokers[1], log_dirs=(LogDir("/d1/new"),) + brokers[1].log_dirs)
    renumbered = before.with_brokers(brokers)
    changes = compute_changes(ControllerState(cluster=before), ControllerState(cluster=renumbered))
    written = changes["partitions"]["set"][::2]
    expected = sorted(tp_field(p.tp) for p in before.partitions() if 1 in p.replicas)
    assert sorted(written) == expected and len(written) < len(before.partitions_by_tp)


def test_a_deleted_topic_and_a_partition_dropped_are_removed():
    before = cluster(topics=3, partitions=4)
    fewer = Cluster(before.brokers, (before.topics[0], replace(before.topics[1], partitions=before.topics[1].partitions[:2])))
    changed, gone = compute_changed_partitions(before, fewer)
    assert changed == {}
    assert sorted(gone) == sorted([TopicPartition("t1", 2), TopicPartition("t1", 3)]
                                  + [p.tp for p in before.topics[2].partitions])


def test_with_partitions_keeps_untouched_topics_and_the_topic_id():
    before = Cluster(cluster(topics=2, partitions=2).brokers,
                     tuple(replace(t, topic_id=f"id-{t.name}") for t in cluster(topics=2, partitions=2).topics))
    p = before.partition(TopicPartition("t1", 0))
    after = before.with_partitions([replace(p, isr=p.replicas[:1])])
    assert after.topics[0] is before.topics[0] and after.topics[1].topic_id == "id-t1"


def test_the_partition_index_is_carried_over_and_stays_exact():
    before = cluster(topics=4, partitions=5)
    assert len(before.partitions_by_tp) == 20  # built: from now on it is carried over
    p = before.partition(TopicPartition("t1", 2))
    events = [isr_event(p, p.replicas[:1]),
              ("TopicState", {"event_time": 1, "id": "d", "key": "t2", "topic": "t2", "deleted": True}),
              ("PartitionState", {"event_time": 1, "id": "n", "key": "new-0", "topic": "new", "partition": 0,
                                  "replicas": [0, 1], "isr": [0, 1], "leader": 0, "leader_epoch": 0})]
    after, _, _ = compute_cluster_after_events(before, events)
    assert "partitions_by_tp" in after.__dict__  # carried over, not rebuilt
    assert dict(after.partitions_by_tp) == {q.tp: q for q in after.partitions()}
    assert after.partition(TopicPartition("t1", 2)).isr == p.replicas[:1]
    assert after.partition(TopicPartition("t2", 0)) is None and after.partition(TopicPartition("new", 0)) is not None
    drained = after.with_brokers(replace(b, draining=b.id == 3) for b in after.brokers)
    assert drained.__dict__["partitions_by_tp"] == after.partitions_by_tp


def test_the_waiting_reasons_are_stored_in_meta_only_when_they_change():
    from state.stored_forms import meta_to_storage

    before = ControllerState()
    after = before.with_changes(waiting={TopicPartition("t", 1): "broker 3 has 2 movements in flight, limit B = 2"})
    changes = compute_changes(before, after)
    assert "waiting" in changes["meta"]["set"]
    assert "meta" not in compute_changes(after, after.with_changes(waiting=dict(after.waiting)))
    assert meta_to_storage(after)["waiting"] == '[["t", 1, "broker 3 has 2 movements in flight, limit B = 2"]]'


def test_a_batch_without_topic_events_carries_the_topics_tuple_and_a_broker_change_still_lands():
    """Cost: a Tick or a broker-only batch walked every topic to rebuild the same tuple."""
    before = cluster()
    unchanged, _, _ = compute_cluster_after_events(before, [])
    assert unchanged is before
    event = ("BrokerMembership", {"event_time": 1, "id": "b", "key": "broker-2", "broker_id": 2,
                                  "rack": "/r9", "state": "UNFENCED", "log_dirs": ["/d2/a", "/d2/b"]})
    after, _, _ = compute_cluster_after_events(before, [event])
    assert after.topics is before.topics
    assert after.broker(2).rack == "/r9" and after.partitions_by_tp == before.partitions_by_tp
