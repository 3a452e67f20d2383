"""Encode/decode throughput of the message codec: fastavro (what `schemas.codec` uses) against
the Apache `avro` package, on realistic PartitionState records (the most frequent message: one
per partition per snapshot). Both write the same bytes: plain schemaless Avro binary.

Run:  .venv/bin/python benchmarks/bench_codec.py [--records 5000] [--repeat 5]

Prints records per second (best of `--repeat` runs) and ratios; asserts nothing.
"""

from __future__ import annotations

import argparse
import io
import json
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import avro.io  # noqa: E402
import avro.schema  # noqa: E402
import fastavro  # noqa: E402

import schemas  # noqa: E402
from schemas.codec import without_logical_types  # noqa: E402
from schemas.loader import compute_self_contained_schema  # noqa: E402


def compute_partition_states(count: int, seed: int = 7) -> list[dict]:
    """Partitions of a 30-broker cluster, RF 3 (a few RF 5 and some mid-reassignment)."""
    rng = random.Random(seed)
    topics = [f"topic-{index:03d}.events" for index in range(max(1, count // 50))]
    records = []
    for index in range(count):
        topic = topics[index % len(topics)]
        partition = index // len(topics)
        replication = 5 if index % 20 == 0 else 3
        replicas = rng.sample(range(30), replication + (1 if index % 10 == 0 else 0))
        isr = [broker for broker in replicas if rng.random() > 0.05] or replicas[:1]
        adding = replicas[-1:] if index % 10 == 0 else []
        records.append({
            "schema_version": 1,
            "event_time": 1_767_225_600_000 + index,
            "id": f"{rng.getrandbits(128):032x}",
            "key": f"{topic}-{partition}",
            "snapshot_id": "snap-0042" if index % 2 else None,
            "topic": topic,
            "partition": partition,
            "replicas": replicas,
            "isr": isr,
            "leader": isr[0],
            "leader_epoch": rng.randrange(0, 200),
            "adding": adding,
            "removing": replicas[:1] if adding else [],
            "offline_replicas": [],
            "size_bytes": rng.randrange(0, 50 * 2**30),
            "log_dirs": [f"/var/lib/kafka/data-{rng.randrange(2)}" for _ in replicas],
        })
    return records


def best_rate(function: Callable[[], object], count: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - started)
    return count / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=5)
    arguments = parser.parse_args()

    records = compute_partition_states(arguments.records)
    plain_schema = without_logical_types(compute_self_contained_schema("PartitionState"))
    fast_schema = fastavro.parse_schema(plain_schema)
    apache_schema = avro.schema.parse(json.dumps(plain_schema))
    apache_writer = avro.io.DatumWriter(apache_schema)
    apache_reader = avro.io.DatumReader(apache_schema, apache_schema)

    def fastavro_raw_encode(record: dict) -> bytes:
        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, fast_schema, record)
        return buffer.getvalue()

    def apache_encode(record: dict) -> bytes:
        buffer = io.BytesIO()
        apache_writer.write(record, avro.io.BinaryEncoder(buffer))
        return buffer.getvalue()

    def apache_decode(data: bytes) -> dict:
        return apache_reader.read(avro.io.BinaryDecoder(io.BytesIO(data)))

    encoded = [schemas.encode("PartitionState", record) for record in records]
    assert encoded == [apache_encode(record) for record in records], "the libraries disagree on bytes"
    assert [apache_decode(data) for data in encoded[:50]] == [schemas.decode("PartitionState", data) for data in encoded[:50]]

    count, repeat = len(records), arguments.repeat
    rates = {
        ("encode", "schemas.encode (fastavro + validation)"): best_rate(
            lambda: [schemas.encode("PartitionState", record) for record in records], count, repeat),
        ("encode", "schemas.encode(validate=False)"): best_rate(
            lambda: [schemas.encode("PartitionState", record, validate=False) for record in records], count, repeat),
        ("encode", "fastavro.schemaless_writer"): best_rate(
            lambda: [fastavro_raw_encode(record) for record in records], count, repeat),
        ("encode", "avro (Apache) DatumWriter"): best_rate(
            lambda: [apache_encode(record) for record in records], count, repeat),
        ("decode", "schemas.decode (fastavro + checks)"): best_rate(
            lambda: [schemas.decode("PartitionState", data) for data in encoded], count, repeat),
        ("decode", "fastavro.schemaless_reader"): best_rate(
            lambda: [fastavro.schemaless_reader(io.BytesIO(data), fast_schema) for data in encoded], count, repeat),
        ("decode", "avro (Apache) DatumReader"): best_rate(
            lambda: [apache_decode(data) for data in encoded], count, repeat),
    }
    mean_size = sum(map(len, encoded)) / len(encoded)
    print(f"PartitionState records: {count}, mean encoded size {mean_size:.0f} bytes, best of {repeat}")
    print(f"python {sys.version.split()[0]}, fastavro {fastavro.__version__}, avro {avro.__version__}")
    for operation in ("encode", "decode"):
        apache = rates[(operation, f"avro (Apache) Datum{'Writer' if operation == 'encode' else 'Reader'}")]
        for (kind, name), rate in rates.items():
            if kind == operation:
                print(f"  {operation}  {name:42s} {rate:>10,.0f} records/s   x{rate / apache:5.1f} vs avro")


if __name__ == "__main__":
    main()
