"""The watcher's diff: events only for what changed, and the pipeline, reading them with its own
reader (`handlers.events`), follows the cluster. Properties over generated observations, plus a
few worked examples."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings, strategies as st

from handlers.events import compute_cluster_after_events
from planning.model import Cluster
from runtime.clients.cluster_merge import compute_observation
from runtime.clients.cluster_observation import (
    BrokerObservation,
    ClusterObservation,
    LogDirObservation,
    PartitionObservation,
    ReplicaInDir,
    ReplicaList,
)
from reassigner.edge.observation import (
    Event,
    compute_cluster,
    compute_events,
    compute_snapshot_events,
)
from runtime.settings import load_settings
from schemas.codec import TOPICS, decode, encode
from streams.input_rows import compute_batch_inputs

NOW = 1_700_000_000_000
PIPELINE_SETTINGS = load_settings(topic_prefix="observation-tests")


# --- generated observations -------------------------------------------------------------------


@st.composite
def observations(draw, previous: ClusterObservation | None = None) -> ClusterObservation:
    """Consistent observations: dirs belong to registered brokers, replicas to known brokers,
    partitions of a topic are numbered 0..n-1.

    Given `previous`, a later poll of the same cluster, changed only as Kafka and the watcher
    allow: a topic that keeps its id keeps its partitions (Kafka cannot shrink a topic) and their
    leader epochs never go down; a broker whose dirs were known still lists one (a live broker
    always reports its dirs, and `ClusterAdmin.observe` carries a silent broker's over). A topic
    drawn with the other id was deleted and re-created between the polls; a broker not in
    `previous` may be fenced (first seen while KRaft keeps it fenced)."""
    broker_ids = draw(st.sets(st.integers(1, 6), min_size=1, max_size=5))
    known_brokers = previous.brokers if previous is not None else {}
    brokers = [BrokerObservation(b, draw(st.sampled_from([None, "/dc1/r1", "/dc2/r1"])), "127.0.0.1",
                                 9000 + b, draw(st.booleans()))
               for b in sorted(broker_ids)]
    topic_names = draw(st.sets(st.sampled_from(["a", "b", "c", "orders"]), max_size=3))
    known_topics = previous.topics if previous is not None else {}
    topic_ids = {name: draw(st.sampled_from([f"id-{name}", f"id2-{name}"])) for name in topic_names}
    partitions: list[PartitionObservation] = []
    for name in sorted(topic_names):
        same_topic = name in known_topics and known_topics[name].topic_id == topic_ids[name]
        at_least = known_topics[name].partition_count if same_topic else 1
        for index in range(draw(st.integers(at_least, max(3, at_least)))):
            replicas = tuple(draw(st.permutations(sorted(broker_ids)))[: draw(st.integers(1, len(broker_ids)))])
            isr = tuple(b for b in replicas if draw(st.booleans())) or replicas[:1]
            leader = draw(st.sampled_from([None, *isr]))
            adding = tuple(b for b in replicas[1:] if draw(st.booleans()))
            before = previous.partitions.get((name, index)) if same_topic else None
            lowest_epoch = -1 if before is None else before.leader_epoch
            epoch = draw(st.integers(lowest_epoch, max(3, lowest_epoch)))
            partitions.append(PartitionObservation(name, index, replicas, isr, leader, epoch,
                                                   adding=adding, offline_replicas=()))
    reassignments = {(p.topic, p.partition): (p.adding, ()) for p in partitions if p.adding}
    log_dirs: list[LogDirObservation] = []
    for b in sorted(broker_ids):
        dirs_known = b in known_brokers and bool(known_brokers[b].log_dirs)
        for d in range(draw(st.integers(1 if dirs_known else 0, 2))):
            online = draw(st.booleans())
            hosted = [p for p in partitions if b in p.replicas and online and draw(st.booleans())]
            # As the adapter decodes them (a ReplicaList) or as a plain tuple: the same to the diff.
            listing = draw(st.sampled_from([tuple, ReplicaList.of]))
            log_dirs.append(LogDirObservation(
                b, f"/data/{b}/{d}", online, None if online else "KAFKA_STORAGE_ERROR",
                listing(sorted(ReplicaInDir(p.topic, p.partition, draw(st.booleans()),
                                            draw(st.integers(0, 10**6)), draw(st.integers(0, 9))) for p in hosted)),
                10**9, draw(st.integers(0, 10**9)), online and draw(st.booleans())))
    min_isr = {name: draw(st.sampled_from([None, 1, 2])) for name in topic_names}
    return compute_observation(brokers, partitions, topic_ids, reassignments, log_dirs, min_isr)


def successive_polls():
    """(previous, current): two polls of one cluster, `current` the later (see `observations`)."""
    return observations().flatmap(lambda previous: st.tuples(st.just(previous), observations(previous)))


# --- the pipeline's side ----------------------------------------------------------------------


def pipeline_reads(cluster: Cluster, events: list[Event]) -> Cluster:
    """`cluster` once the pipeline has read `events` in one micro-batch, as it reads what the
    watcher publishes: Avro-encoded on their topics, decoded and put in the pipeline's order by
    `streams.input_rows.compute_batch_inputs`, folded in by `handlers.events`. (The collapse to the
    latest event per subject before that keeps them all: `compute_events` tells each broker,
    topic, dir and partition at most once.)"""
    rows = [(PIPELINE_SETTINGS.topic(suffix), 0, offset, encode(TOPICS[suffix], record))
            for offset, (suffix, _key, record) in enumerate(events)]
    inputs = compute_batch_inputs(0, rows, PIPELINE_SETTINGS)
    assert not inputs.bad_records
    after, _, effects = compute_cluster_after_events(cluster, inputs.events)
    assert not effects.rejected
    return after


def expected_view(previous: ClusterObservation, current: ClusterObservation) -> Cluster:
    """`compute_cluster(current)`, where the poll tells nothing, holding what the pipeline keeps
    by design (the rules of `handlers.events`) from its view of `previous`:
    - min.insync.replicas the broker gave no value for (None; `compute_cluster` shows 1): a
      TopicState with a null min ISR keeps the one known;
    - the dir of a replica no dir described (None, or no dirs at all: an offline dir lists no
      replicas): the partition keeps the dir known for that broker's replica — an offline dir's
      replicas are how a disk failure is told which replicas it hit.
    A topic re-created between the polls (a new topic id) keeps nothing of the old one."""
    known = compute_cluster(previous)
    topics = []
    for topic in compute_cluster(current).topics:
        before = known.topics_by_name.get(topic.name)
        if before is not None and before.topic_id and topic.topic_id and before.topic_id != topic.topic_id:
            before = None
        min_isr = topic.min_insync_replicas
        if current.topics[topic.name].min_insync_replicas is None and before is not None:
            min_isr = before.min_insync_replicas
        topics.append(replace(topic, min_insync_replicas=min_isr, partitions=tuple(
            replace(p, log_dirs=kept_dirs(p.replicas, p.log_dirs, known.partition(p.tp) if before else None))
            for p in topic.partitions)))
    return replace(compute_cluster(current), topics=tuple(topics))


def kept_dirs(replicas, told, before) -> tuple:
    """A replica's dir as told, or else as known before for its broker (see `expected_view`)."""
    known = dict(zip(before.replicas, before.log_dirs)) if before is not None and \
        len(before.log_dirs) == len(before.replicas) else {}
    told = told if len(told) == len(replicas) else (None,) * len(replicas)
    dirs = tuple(d if d is not None else known.get(b) for b, d in zip(replicas, told))
    return dirs if any(d is not None for d in dirs) else ()


def without_volatile_numbers(cluster: Cluster) -> Cluster:
    """Partition sizes and dir usage (the volume's, and the bytes of the replicas a dir holds) are
    volatile: the watcher tells no change of them alone (`field(compare=False)` in
    `cluster_merge`), so the pipeline holds the last ones told. They are the one thing the
    comparison leaves out."""
    return Cluster(
        tuple(replace(b, log_dirs=tuple(replace(d, total_bytes=None, usable_bytes=None, replica_bytes=None)
                                        for d in b.log_dirs))
              for b in cluster.brokers),
        tuple(replace(t, partitions=tuple(replace(p, size_bytes=None) for p in t.partitions))
              for t in cluster.topics))


def assert_the_pipeline_follows(previous: ClusterObservation, current: ClusterObservation) -> None:
    followed = pipeline_reads(compute_cluster(previous), compute_events(previous, current, NOW))
    assert without_volatile_numbers(followed) == without_volatile_numbers(expected_view(previous, current))


# --- properties -------------------------------------------------------------------------------

@settings(max_examples=300, deadline=None, report_multiple_bugs=False)
@given(successive_polls())
def test_the_pipeline_reading_the_events_follows_the_cluster(polls):
    assert_the_pipeline_follows(*polls)


@settings(max_examples=100, deadline=None)
@given(observations())
def test_no_event_when_nothing_changed_and_the_pipeline_view_stays(observation):
    events = compute_events(observation, observation, NOW)
    assert events == []
    assert pipeline_reads(compute_cluster(observation), events) == compute_cluster(observation)


@settings(max_examples=100, deadline=None)
@given(observations())
def test_a_snapshot_alone_rebuilds_the_view_and_counts_itself(observation):
    events = compute_snapshot_events(observation, "snap-1", NOW)
    assert pipeline_reads(Cluster(), events) == compute_cluster(observation)  # sizes included
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


# --- the two defects, one example each --------------------------------------------------------

TWO_BROKERS = [BrokerObservation(1, "/r1", "h", 1, False), BrokerObservation(2, "/r2", "h", 2, False)]


def test_a_topic_re_created_between_two_polls_replaces_the_old_one():
    """Regression: one TopicState with a new topic id tells a re-creation; the pipeline stored no
    topic id and ignored the new incarnation's partitions as stale (their leader epochs start
    again), keeping partitions beyond the new count."""
    old = compute_observation(TWO_BROKERS, [PartitionObservation("t", 0, (1,), (1,), 1, 3),
                                            PartitionObservation("t", 1, (1,), (1,), 1, 3)],
                              {"t": "id-1"}, {}, [], {"t": 1})
    new = compute_observation(TWO_BROKERS, [PartitionObservation("t", 0, (2,), (2,), 2, 0)],
                              {"t": "id-2"}, {}, [], {"t": 1})
    assert pipeline_reads(compute_cluster(old), compute_events(old, new, NOW)) == compute_cluster(new)


def test_a_broker_first_seen_fenced_is_not_alive():
    """Regression: a broker first seen fenced is told REGISTERED ('known but not yet unfenced');
    the pipeline counted REGISTERED as alive and took it for eligible until it unfenced."""
    one = compute_observation(TWO_BROKERS[:1], [], {}, {}, [], {})
    two = compute_observation([TWO_BROKERS[0], replace(TWO_BROKERS[1], fenced=True)], [], {}, {}, [], {})
    assert pipeline_reads(compute_cluster(one), compute_events(one, two, NOW)) == compute_cluster(two)


# --- worked examples --------------------------------------------------------------------------

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


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_a_sliced_snapshot_over_several_polls_leaves_the_pipeline_at_the_last_poll(data):
    """The watcher's SLICED SNAPSHOTS: polls 1..k each publish their changes plus a slice of the
    partitions (as that poll sees them), the last one the END with its inventory; a pipeline
    that knew nothing reads them in order and ends where a pipeline that read a one-poll
    snapshot of the first poll, then each poll's change events, ends (but for volatile sizes)."""
    from reassigner.edge.observation import compute_snapshot_end, compute_snapshot_slice, compute_snapshot_start

    polls = [data.draw(observations())]
    keys = tuple(polls[0].partitions)
    size = data.draw(st.integers(1, max(1, len(keys))))
    slices = [keys[i:i + size] for i in range(0, len(keys), size)] or [()]
    while len(polls) < len(slices):  # one slice a poll, the cluster changing in between
        polls.append(data.draw(observations(polls[-1])))
    view, cluster = None, Cluster()
    for number, (poll, part) in enumerate(zip(polls, slices)):
        at = NOW + number
        events = compute_events(view, poll, at) if view is not None else []
        if number == 0:
            events += compute_snapshot_start(poll, "sliced", at)
        events += compute_snapshot_slice(poll, "sliced", part, at)
        if number == len(polls) - 1:
            events += compute_snapshot_end(poll, "sliced", NOW, at, 0)
        cluster = pipeline_reads(cluster, events)
        view = poll
    # The oracle: a one-poll snapshot of the first poll, then the change events of each next one.
    reference = pipeline_reads(Cluster(), compute_snapshot_events(polls[0], "whole", NOW))
    for before, after in zip(polls, polls[1:]):
        reference = pipeline_reads(reference, compute_events(before, after, NOW + 1))
    last = polls[-1]
    assert (without_untold_dirs(without_volatile_numbers(cluster), last)
            == without_untold_dirs(without_volatile_numbers(reference), last))


def without_untold_dirs(cluster: Cluster, poll: ClusterObservation) -> Cluster:
    """`cluster` without the dir of a replica that `poll` describes in no dir (an offline dir
    lists none). The pipeline keeps the dir it last heard for such a replica; a pipeline that
    started from nothing during a sliced snapshot hears of a partition only in its slice, so it
    may never have heard the dir an earlier poll told: stale either way, and left out here."""
    def dirs(topic: str, partition) -> tuple:
        told = poll.partitions.get((topic, partition.partition))
        told_dirs = dict(zip(told.replicas, told.log_dirs)) if told is not None else {}
        kept = tuple(d if told_dirs.get(b) is not None else None
                     for b, d in zip(partition.replicas, partition.log_dirs))
        return kept if any(d is not None for d in kept) else ()  # no dir known, either way
    return replace(cluster, topics=tuple(
        replace(t, partitions=tuple(replace(p, log_dirs=dirs(t.name, p)) if p.log_dirs else p
                                    for p in t.partitions))
        for t in cluster.topics))
