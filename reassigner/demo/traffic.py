"""Sequenced traffic for the demo and the scenario tests: proof that nothing is lost.

A producer (acks=all, idempotent) writes records `<partition>:<sequence>` to every partition of
the given topics, round-robin, at a modest rate, for as long as it runs. At the end a consumer
reads every partition from the beginning and checks, per partition, that the sequences it
reads are exactly 0..n-1 in order: zero lost, zero duplicated, zero out of order. Errors the
producer saw are kept; only retriable ones are acceptable.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition


@dataclass
class TrafficReport:
    produced: int = 0
    acknowledged: int = 0
    read: int = 0
    lost: int = 0
    out_of_order: int = 0
    duplicated: int = 0
    fatal_errors: list[str] = field(default_factory=list)
    retriable_errors: int = 0

    @property
    def clean(self) -> bool:
        return not (self.lost or self.out_of_order or self.duplicated or self.fatal_errors)


class SequencedTraffic:
    """Writes sequenced records to every partition of `topics` until stopped."""

    def __init__(self, bootstrap_servers: str, partitions: dict[str, int],
                 records_per_second: float = 200.0) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.partitions = partitions
        self.interval = 1.0 / records_per_second
        self.next_sequence = {(t, p): 0 for t, n in partitions.items() for p in range(n)}
        self.acknowledged: dict[tuple[str, int], int] = {key: 0 for key in self.next_sequence}
        self.report = TrafficReport()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._producer = Producer({
            "bootstrap.servers": bootstrap_servers, "acks": "all", "enable.idempotence": True,
            "linger.ms": 5, "message.timeout.ms": 300000, "log_level": 0,
            "error_cb": self._on_error,
        })

    def _on_error(self, error: KafkaError) -> None:
        if error.fatal():
            self.report.fatal_errors.append(str(error))
        else:
            self.report.retriable_errors += 1

    def _on_delivery(self, error, message) -> None:
        if error is not None:  # the record was not written: the check will show it lost
            self.report.fatal_errors.append(f"{message.topic()}-{message.partition()}: {error}")
            return
        self.report.acknowledged += 1

    def start(self) -> "SequencedTraffic":
        self._thread = threading.Thread(target=self._run, name="demo-traffic", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        keys = list(self.next_sequence)
        index = 0
        while not self._stop.is_set():
            topic, partition = keys[index % len(keys)]
            sequence = self.next_sequence[(topic, partition)]
            try:
                self._producer.produce(topic, value=f"{partition}:{sequence}".encode(),
                                       partition=partition, on_delivery=self._on_delivery)
            except BufferError:
                self._producer.poll(0.5)
                continue
            self.next_sequence[(topic, partition)] = sequence + 1
            self.report.produced += 1
            index += 1
            self._producer.poll(0)
            time.sleep(self.interval)

    def stop_and_verify(self, timeout: float = 120.0) -> TrafficReport:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        self._producer.flush(timeout)
        self.report.read, self.report.lost, self.report.out_of_order, self.report.duplicated = (
            verify_sequences(self.bootstrap_servers, self.next_sequence, timeout))
        return self.report


def verify_sequences(bootstrap_servers: str, expected: dict[tuple[str, int], int],
                     timeout: float) -> tuple[int, int, int, int]:
    """Read every partition from the beginning: (read, lost, out of order, duplicated)."""
    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": f"verify-{uuid.uuid4()}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "log_level": 0})
    consumer.assign([KafkaTopicPartition(t, p, 0) for t, p in expected])
    seen: dict[tuple[str, int], list[int]] = {key: [] for key in expected}
    deadline = time.monotonic() + timeout
    remaining = {key for key, count in expected.items() if count > 0}
    while remaining and time.monotonic() < deadline:
        for message in consumer.consume(1000, 0.5):
            if message.error() is not None:
                continue
            key = (message.topic(), message.partition())
            seen[key].append(int(message.value().decode().split(":")[1]))
            if len(seen[key]) >= expected[key]:
                remaining.discard(key)
    consumer.close()
    read = lost = out_of_order = duplicated = 0
    for key, sequences in seen.items():
        read += len(sequences)
        lost += len(set(range(expected[key])) - set(sequences))
        duplicated += len(sequences) - len(set(sequences))
        out_of_order += sum(1 for a, b in zip(sequences, sequences[1:]) if b < a)
    return read, lost, out_of_order, duplicated
