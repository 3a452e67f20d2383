"""The reduce step on real Spark: the collapse at the driver (small batches) and the collapse in
Spark (big batches) keep exactly the same rows, and both keep what the pipeline needs: the
latest state per subject, every request, result and undecodable record."""

from __future__ import annotations

import random

import pytest

from harness import T0, broker_event, log_dir_event, partition_event, request
from schemas.codec import TOPICS, encode

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


def test_driver_and_spark_collapse_keep_the_same_rows(spark):
    from runtime.settings import load_settings
    from streams.pipeline import annotate_batch, collapse_in_spark, decode_records, latest_per_subject

    settings = load_settings(topic_prefix="reduce")
    rows = kafka_rows(settings, seed=7)
    # With includeHeaders the Kafka source gives every row its headers (the writer's schema version).
    with_headers = [(*row, [("schema_version", b"4")]) for row in rows]
    frame = spark.createDataFrame(with_headers, "topic string, partition int, offset long, key binary, "
                                                "value binary, headers array<struct<key: string, value: binary>>")
    annotated = annotate_batch(decode_records(frame, settings), settings)

    def identity(row) -> tuple:
        return (row.topic, row.partition, row.offset, row.decoded_ok)

    from streams.pipeline import compute_writer_version

    assert {compute_writer_version(r.headers) for r in annotated.collect()} == {4}

    at_driver = sorted(identity(r) for r in latest_per_subject(annotated.collect()))
    in_spark = sorted(identity(r) for r in collapse_in_spark(annotated).collect())
    assert at_driver == in_spark

    kept = {(t, p, o) for t, p, o, _ in at_driver}
    # One row per partition, the newest; one per broker; one per (broker, dir).
    partition_rows = [r for r in rows if r[0] == settings.topic("isr-changes") and r[3] != b"garbage"]
    newest = {}
    for topic, partition, offset, key, _ in partition_rows:
        newest[key] = max(newest.get(key, (partition, offset)), (partition, offset))
    assert {(settings.topic("isr-changes"), p, o) for p, o in newest.values()} <= kept
    assert sum(1 for t, *_ in at_driver if t == settings.topic("broker-membership")) == 2
    assert sum(1 for t, *_ in at_driver if t == settings.topic("disk-failures")) == 4
    # Every request survives, garbage included (marked undecodable, for the dead-letter topic).
    assert sum(1 for t, *_ in at_driver if t == settings.topic("requests")) == 4
    assert sorted(ok for *_, ok in at_driver if not ok) == [False, False]
