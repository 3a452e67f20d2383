"""The reduce step on real Spark: a batch collapsed in Spark first (big batches) and one collapsed
at the driver only (small batches) give the handlers exactly the same inputs, and they keep what
the pipeline needs: the latest state per subject, every request and result, every undecodable
record as a bad record."""

from __future__ import annotations

import random

import pytest

from harness import T0, broker_event, log_dir_event, partition_event, request
from schemas.codec import TOPICS, encode
from schemas.loader import CURRENT_SCHEMA_VERSION

pytestmark = [pytest.mark.spark]


def kafka_rows(settings, seed: int) -> list[tuple[str, int, int, bytes, bytes]]:
    """(topic, partition, offset, key, value) as the Kafka source gives them: several states per
    partition and per log dir, two dirs of one broker, requests, and garbage."""
    generator = random.Random(seed)
    offsets: dict[tuple[str, int], int] = {}
    rows = []

    def add(suffix: str, key: str, value: bytes, partition: int = 0) -> None:
        topic = settings.topic(suffix)
        offset = offsets.get((topic, partition), 0)
        offsets[(topic, partition)] = offset + 1
        rows.append((topic, partition, offset, key.encode(), value))

    for _ in range(60):
        p = generator.randrange(8)
        add("isr-changes", f"orders-{p}", encode(TOPICS["isr-changes"], partition_event(
            "orders", p, [1, 2, 3], T0 + generator.randrange(1000), isr=[1, 2, 3][:1 + p % 3])),
            partition=p % 3)
    for broker in (1, 2):
        for state in ("REGISTERED", "UNFENCED"):
            add("broker-membership", str(broker),
                encode(TOPICS["broker-membership"], broker_event(broker, state, T0)))
        for path in ("/d0", "/d1"):
            for online in (True, False):
                add("disk-failures", str(broker), encode(TOPICS["disk-failures"], log_dir_event(
                    broker, path, online, T0, [])))
    for index in range(3):
        add("requests", "tick", encode("Request", request("Tick", {}, T0 + index)))
    add("isr-changes", "garbage", b"\x07not avro\xff")
    add("requests", "garbage", b"")
    generator.shuffle(rows)
    return rows


def test_driver_and_spark_collapse_give_the_same_inputs(spark):
    from runtime.settings import load_settings
    from streams.batch_plan import annotate_collapsible, as_input_row, collapse_in_spark
    from streams.input_rows import compute_batch_inputs

    settings = load_settings(topic_prefix="reduce")
    rows = kafka_rows(settings, seed=7)
    # With includeHeaders the Kafka source gives every row its headers (the writer's schema version,
    # the one `encode` wrote with: an older one would read the newer fields as trailing bytes).
    version = str(CURRENT_SCHEMA_VERSION).encode()
    with_headers = [(*row, [("schema_version", version)]) for row in rows]
    frame = spark.createDataFrame(with_headers, "topic string, partition int, offset long, key binary, "
                                                "value binary, headers array<struct<key: string, value: binary>>")
    raw = [as_input_row(r) for r in frame.collect()]
    assert {r.writer_version for r in raw} == {CURRENT_SCHEMA_VERSION}
    collapsed = [as_input_row(r) for r in collapse_in_spark(annotate_collapsible(frame, settings)).collect()]
    assert len(collapsed) < len(raw)

    at_driver = compute_batch_inputs(0, raw, settings)
    after_spark = compute_batch_inputs(0, collapsed, settings)
    assert at_driver == after_spark

    kept = {(o.source_topic, o.partition, o.offset) for key, o in at_driver.origins.items() if key[0] == "events"}
    # One event per partition, the newest; one per broker; one per (broker, dir).
    partition_rows = [r for r in rows if r[0] == settings.topic("isr-changes") and r[3] != b"garbage"]
    newest = {}
    for topic, partition, offset, key, _ in partition_rows:
        newest[key] = max(newest.get(key, (partition, offset)), (partition, offset))
    assert {(settings.topic("isr-changes"), p, o) for p, o in newest.values()} == {
        k for k in kept if k[0] == settings.topic("isr-changes")}
    assert sum(1 for t, *_ in kept if t == settings.topic("broker-membership")) == 2
    assert sum(1 for t, *_ in kept if t == settings.topic("disk-failures")) == 4
    # Every decodable request survives; the garbage of each topic becomes a bad record.
    assert len(at_driver.requests) == 3
    assert sorted(b.source_topic for b in at_driver.bad_records) == sorted(
        [settings.topic("isr-changes"), settings.topic("requests")])
