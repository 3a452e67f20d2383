"""Traffic measured with no broker-side agent, on the real local cluster: between two of the
watcher's snapshots a producer writes a known number of records and a consumer group reads and
commits them; the snapshot's PartitionState carries the bytes the log grew by, and the bytes the
group read, per second of the window (`reassigner.edge.traffic`)."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from reassigner.edge.watcher import Watcher
from runtime.clients.kafka_admin import ClusterAdmin
from runtime.clients.kafka_producer import producer_config
from runtime.settings import load_settings
from tests.edge.test_watcher_sees_cluster import RecordingPublisher
from tests.waiting import eventually

pytestmark = [pytest.mark.stack]

RECORD = b"x" * 1000
WINDOW_SECONDS = 10.0


def produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "compression.type": "none",
                         "linger.ms": 5})
    for _ in range(count):
        producer.produce(topic, RECORD, partition=0)
        producer.poll(0)
    assert producer.flush(30) == 0


def consume_all(bootstrap: str, topic: str, group: str, end: int) -> None:
    """Read partition 0 up to `end` and commit it (synchronously)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    try:
        position = [0]

        def caught_up() -> bool:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                position[0] = message.offset() + 1
            return position[0] >= end

        eventually(caught_up, 60, 0, f"the group {group} reading {topic} up to {end}")
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


def test_bytes_in_and_out_between_two_snapshots_are_what_was_written_and_read(local_stack):
    bootstrap = local_stack.bootstrap_servers
    topic, group, prefix = f"traffic-{uuid.uuid4().hex[:6]}", f"readers-{uuid.uuid4().hex[:6]}", "traffictest"
    quiet = f"quiet-{uuid.uuid4().hex[:6]}"
    creator = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until its futures are done
    for future in creator.create_topics([NewTopic(topic, 1, 3), NewTopic(quiet, 2, 2)]).values():
        future.result(30)
    produce(bootstrap, topic, 100)
    consume_all(bootstrap, topic, group, 100)  # the group exists with a commit at the first sample

    now = [1_000_000.0]  # the watcher's clock: the window is exactly what the test says
    admin = ClusterAdmin(bootstrap)
    publisher = RecordingPublisher(producer_config(bootstrap), prefix)
    watcher = Watcher(admin, publisher, load_settings(topic_prefix=prefix, snapshot_interval_seconds=5),
                      clock=lambda: now[0])

    def size_of_partition() -> int:
        dirs = admin.describe_log_dirs([1, 2, 3])[0]
        return max(size for d in dirs for t, p, future, size, _lag in zip(
            d.replica_list.topics, d.replica_list.partitions, d.replica_list.futures, d.replica_list.sizes,
            d.replica_list.lags) if (t, p, future) == (topic, 0, False))

    def snapshot_tells_both() -> bool:
        publisher.sent.clear()
        now[0] += 5  # a snapshot (and a traffic sample) at every poll
        assert watcher.poll_once().snapshot_id is not None
        return {topic, quiet} <= {e[2]["topic"] for e in publisher.sent if e[0] == "isr-changes"}

    eventually(snapshot_tells_both, 60, 0.5, f"a snapshot that tells {topic} and {quiet}")
    first_size = size_of_partition()
    produce(bootstrap, topic, 2_000)
    consume_all(bootstrap, topic, group, 2_100)
    grown = size_of_partition() - first_size
    publisher.sent.clear()
    now[0] += WINDOW_SECONDS
    outcome = watcher.poll_once()
    assert outcome.snapshot_id is not None

    (event,) = [e[2] for e in publisher.sent if e[0] == "isr-changes" and e[2]["topic"] == topic]
    assert event["traffic_window_ms"] == pytest.approx(WINDOW_SECONDS * 1000, abs=50)
    # The log's mean record size times 2,000 records: what the log grew by (every record the
    # same size; one batch's header more or less).
    assert event["bytes_in_per_sec"] == pytest.approx(grown / WINDOW_SECONDS, rel=0.05)
    assert event["bytes_out_per_sec"] == pytest.approx(grown / WINDOW_SECONDS, rel=0.05)
    assert event["bytes_in_per_sec"] >= 2_000 * len(RECORD) / WINDOW_SECONDS
    # Partitions nobody produced to or read from in the window: zero, not unknown.
    idle = [e[2] for e in publisher.sent if e[0] == "isr-changes" and e[2]["topic"] == quiet]
    assert len(idle) == 2 and all(e["bytes_in_per_sec"] == 0.0 and e["bytes_out_per_sec"] == 0.0 for e in idle)


def test_a_partition_the_metadata_does_not_show_yet_is_left_out_not_the_whole_sample(local_stack):
    """Regression (make test, 2026-11-26): the watcher created its own topics moments before a
    snapshot; the broker answering the offsets' metadata did not know them yet, and the whole
    traffic sample failed (UNKNOWN_TOPIC_OR_PARTITION), so no partition got its rates. A topic
    that does not exist stands for one not propagated yet."""
    bootstrap = local_stack.bootstrap_servers
    topic = f"known-{uuid.uuid4().hex[:6]}"
    creator = AdminClient({"bootstrap.servers": bootstrap})
    for future in creator.create_topics([NewTopic(topic, 1, 3)]).values():
        future.result(30)
    produce(bootstrap, topic, 10)
    admin = ClusterAdmin(bootstrap)
    try:
        offsets = eventually(lambda: admin.read_log_offsets([(topic, 0), (f"not-yet-{topic}", 0)]), 30, 0.5,
                             f"offsets of {topic}")
    finally:
        admin.close()
    assert offsets == {(topic, 0): (0, 10)}
