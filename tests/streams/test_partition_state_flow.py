"""The foundation's smoke flow against the real stack: Avro events produced with confluent-kafka,
read by a Spark Structured Streaming query with `from_avro`, written to Redis in `foreachBatch`."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from schemas.codec import encode, partition_key, version_headers
from state.partition_store import PartitionStore
from streams.partition_state_query import start_partition_state_query

pytestmark = [pytest.mark.stack, pytest.mark.spark, pytest.mark.slow]


def partition_state(topic: str, partition: int, isr: list[int], epoch: int) -> dict:
    return {
        "schema_version": 1,
        "event_time": int(time.time() * 1000),
        "id": str(uuid.uuid4()),
        "key": partition_key(topic, partition),
        "topic": topic,
        "partition": partition,
        "replicas": [1, 2, 3],
        "isr": isr,
        "leader": isr[0],
        "leader_epoch": epoch,
        "size_bytes": 1000 * (partition + 1),
        "log_dirs": ["/d0", "/d1", None],
    }


def test_events_flow_from_kafka_through_spark_into_redis(local_stack, spark, redis_client, redis_url,
                                                        tmp_path):
    events_topic = f"smoke.isr-changes.{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": local_stack.bootstrap_servers})
    admin.create_topics([NewTopic(events_topic, num_partitions=2, replication_factor=3)])[
        events_topic].result(30)

    producer = Producer({"bootstrap.servers": local_stack.bootstrap_servers, "acks": "all",
                         "enable.idempotence": True})
    expected: dict[str, list[int]] = {}
    for partition in range(6):
        # Several states per partition: only the last one (highest epoch) must survive.
        for epoch, isr in enumerate(([1], [1, 2], [1, 2, 3][: 1 + partition % 3])):
            record = partition_state("orders", partition, isr, epoch)
            producer.produce(events_topic, key=record["key"].encode(),
                             value=encode("PartitionState", record), headers=version_headers())
        expected[f"orders-{partition}"] = [1, 2, 3][: 1 + partition % 3]
    producer.produce(events_topic, key=b"garbage", value=b"\x00not avro at all\xff\xff")
    assert producer.flush(30) == 0

    cluster_name = f"smoke-{uuid.uuid4().hex[:6]}"
    query = start_partition_state_query(
        spark, local_stack.bootstrap_servers, events_topic, redis_url, cluster_name,
        tmp_path / "checkpoint", trigger_interval="300 milliseconds",
    )
    store = PartitionStore(redis_client, cluster_name)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            stored = store.load_all()
            if {k: v["isr"] for k, v in stored.items()} == expected:
                break
            assert query.exception() is None, query.exception()
            time.sleep(0.5)
        stored = store.load_all()
    finally:
        query.stop()
    assert {k: v["isr"] for k, v in stored.items()} == expected
    assert all(v["leader_epoch"] == 2 for v in stored.values())
    assert stored["orders-3"]["size_bytes"] == 4000
    assert stored["orders-1"]["log_dirs"] == ["/d0", "/d1", None]
    assert store.last_batch() >= 0


def test_a_replayed_batch_changes_nothing(redis_client):
    store = PartitionStore(redis_client, f"replay-{uuid.uuid4().hex[:6]}")
    first = partition_state("t", 0, [1, 2], epoch=5)
    assert store.store_batch(7, [first]) == 1
    assert store.store_batch(7, [partition_state("t", 0, [9], epoch=9)]) == -1
    assert store.store_batch(6, [partition_state("t", 0, [9], epoch=9)]) == -1
    assert store.load("t", 0)["isr"] == [1, 2]
    stale = partition_state("t", 0, [3], epoch=4)
    assert store.store_batch(8, [stale]) == 0
    assert store.load("t", 0)["isr"] == [1, 2]
