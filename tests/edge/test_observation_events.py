"""The watcher's diff: events only for what changed, and a reader that applies them follows the
cluster. Properties over generated observations, plus a few worked examples."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings, strategies as st

from reassigner.clients.cluster_answers import (
    EMPTY,
    BrokerObservation,
    ClusterObservation,
    LogDirObservation,
    PartitionObservation,
    ReplicaInDir,
    compute_observation,
)
from reassigner.edge.observation import (
    apply_events,
    compute_cluster,
    compute_events,
    compute_snapshot_events,
)
from schemas.codec import TOPICS, decode, encode

NOW = 1_700_000_000_000


@st.composite
def observations(draw) -> ClusterObservation:
    """Consistent observations: dirs belong to registered brokers, replicas to known brokers,
    partitions of a topic are numbered 0..n-1."""
    broker_ids = draw(st.sets(st.integers(1, 6), min_size=1, max_size=5))
    brokers = [BrokerObservation(b, draw(st.sampled_from([None, "/dc1/r1", "/dc2/r1"])), "127.0.0.1",
                                 9000 + b, draw(st.booleans())) for b in sorted(broker_ids)]
    topic_names = draw(st.sets(st.sampled_from(["a", "b", "c", "orders"]), max_size=3))
    partitions: list[PartitionObservation] = []
    for name in sorted(topic_names):
        for index in range(draw(st.integers(1, 3))):
            replicas = tuple(draw(st.permutations(sorted(broker_ids)))[: draw(st.integers(1, len(broker_ids)))])
            isr = tuple(b for b in replicas if draw(st.booleans())) or replicas[:1]
            leader = draw(st.sampled_from([None, *isr]))
            adding = tuple(b for b in replicas[1:] if draw(st.booleans()))
            partitions.append(PartitionObservation(
                name, index, replicas, isr, leader, draw(st.integers(-1, 3)), offline_replicas=()))
            partitions[-1] = replace(partitions[-1], adding=adding)
    reassignments = {(p.topic, p.partition): (p.adding, ()) for p in partitions if p.adding}
    log_dirs: list[LogDirObservation] = []
    for b in sorted(broker_ids):
        for d in range(draw(st.integers(0, 2))):
            online = draw(st.booleans())
            hosted = [p for p in partitions if b in p.replicas and online and draw(st.booleans())]
            log_dirs.append(LogDirObservation(
                b, f"/data/{b}/{d}", online, None if online else "KAFKA_STORAGE_ERROR",
                tuple(sorted(ReplicaInDir(p.topic, p.partition, draw(st.booleans()),
                                          draw(st.integers(0, 10**6))) for p in hosted)),
                10**9, draw(st.integers(0, 10**9))))
    min_isr = {name: draw(st.sampled_from([None, 1, 2])) for name in topic_names}
    topic_ids = {name: draw(st.sampled_from([f"id-{name}", f"id2-{name}"])) for name in topic_names}
    return compute_observation(brokers, partitions, topic_ids, reassignments, log_dirs, min_isr)


@settings(max_examples=300, deadline=None)
@given(observations(), observations())
def test_a_reader_applying_the_events_follows_the_cluster(before, after):
    events = compute_events(before, after, NOW)
    assert apply_events(before, events) == after


@settings(max_examples=100, deadline=None)
@given(observations())
def test_no_event_when_nothing_changed(observation):
    assert compute_events(observation, observation, NOW) == []


@settings(max_examples=100, deadline=None)
@given(observations())
def test_a_snapshot_alone_rebuilds_the_view_and_counts_itself(observation):
    events = compute_snapshot_events(observation, "snap-1", NOW)
    assert apply_events(EMPTY, events) == observation
    start, end = events[0][2], events[-1][2]
    assert (start["phase"], end["phase"]) == ("START", "END")
    body = events[1:-1]
    assert all(record["snapshot_id"] == "snap-1" for _, _, record in events)
    counted = {suffix: sum(1 for s, _, _ in body if s == suffix) for suffix in
               ("broker-membership", "topic-state", "isr-changes", "disk-failures")}
    assert (end["broker_count"], end["topic_count"], end["partition_count"], end["log_dir_count"]) == (
        counted["broker-membership"], counted["topic-state"], counted["isr-changes"], counted["disk-failures"])
    # The END marker carries the inventory the pipeline reconciles with (SPEC 2); START does not.
    assert not start["has_inventory"] and end["has_inventory"]
    assert {t["name"]: t["partition_count"] for t in end["topics"]} == {
        name: sum(1 for key in observation.partitions if key[0] == name) for name in observation.topics}
    assert end["broker_ids"] == sorted(observation.brokers)
    assert end["started_at"] == NOW and all(record["event_time"] == NOW for _, _, record in body)


@settings(max_examples=60, deadline=None)
@given(observations(), observations())
def test_every_event_fits_its_schema_and_key_convention(before, after):
    for suffix, key, record in compute_events(before, after, NOW) + compute_snapshot_events(after, "s", NOW):
        assert decode(TOPICS[suffix], encode(TOPICS[suffix], record))["key"] == key


def cluster(*, fenced_3=False, isr=(1, 2, 3), dir_online=True, sizes=100) -> ClusterObservation:
    brokers = [BrokerObservation(1, "/r1", "h", 1, False), BrokerObservation(2, "/r2", "h", 2, False),
               BrokerObservation(3, "/r3", "h", 3, fenced_3)]
    partitions = [PartitionObservation("t", 0, (1, 2, 3), isr, 1, 0)]
    dirs = [LogDirObservation(b, f"/d{b}", dir_online or b != 2, None if dir_online or b != 2 else "KAFKA_STORAGE_ERROR",
                              (ReplicaInDir("t", 0, False, sizes),) if dir_online or b != 2 else (), 10**9, 10**9 - sizes)
            for b in (1, 2, 3)]
    return compute_observation(brokers, partitions, {"t": "id"}, {}, dirs, {"t": 2})


def test_growing_partitions_and_shrinking_free_space_are_not_events():
    assert compute_events(cluster(sizes=100), cluster(sizes=10**6), NOW) == []


def test_a_fenced_broker_and_the_isr_shrink_are_told():
    events = compute_events(cluster(), cluster(fenced_3=True, isr=(1, 2)), NOW)
    assert [(s, k) for s, k, _ in events] == [("broker-membership", "3"), ("isr-changes", "t-0")]
    assert events[0][2]["state"] == "FENCED"
    assert events[1][2]["isr"] == [1, 2]


def test_a_failed_dir_is_told_once_with_its_error():
    events = compute_events(cluster(), cluster(dir_online=False), NOW)
    kinds = [(s, k) for s, k, _ in events]
    assert ("disk-failures", "2") in kinds
    record = next(r for s, _, r in events if s == "disk-failures")
    assert (record["online"], record["error"], record["replicas"]) == (False, "KAFKA_STORAGE_ERROR", [])
    # the partition lost the dir of its replica on broker 2
    assert next(r for s, _, r in events if s == "isr-changes")["log_dirs"] == ["/d1", None, "/d3"]


def test_new_broker_is_registered_or_unfenced_and_a_gone_one_unregistered():
    base = cluster()
    new = ClusterObservation({**base.brokers, 4: BrokerObservation(4, "/r1", "h", 4, True)},
                             base.topics, base.partitions, base.log_dirs)
    (event,) = compute_events(base, new, NOW)
    assert event[2]["state"] == "REGISTERED"
    (event,) = compute_events(new, base, NOW)
    assert (event[2]["state"], event[2]["host"], event[2]["port"]) == ("UNREGISTERED", None, None)


def test_deleted_topic_is_one_event_after_the_rest():
    base = cluster()
    gone = ClusterObservation(base.brokers, {}, {}, {
        k: replace(d, replicas=()) for k, d in base.log_dirs.items()})
    events = compute_events(base, gone, NOW)
    assert events[-1][0] == "topic-state" and events[-1][2]["deleted"] is True
    assert not any(s == "isr-changes" for s, _, _ in events)


def test_planning_model_of_an_observation():
    model = compute_cluster(cluster(fenced_3=True, dir_online=False))
    assert [b.alive for b in model.brokers] == [True, True, False]
    assert model.brokers[1].log_dirs[0].online is False
    (topic,) = model.topics
    assert topic.min_insync_replicas == 2
    assert topic.partitions[0].size_bytes == 100
    assert topic.partitions[0].log_dirs == ("/d1", None, "/d3")
