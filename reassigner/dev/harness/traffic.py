"""Sequenced traffic for the demo and the scenario tests: proof that nothing is lost.

A producer (acks=all, idempotent) writes records `<partition>:<sequence>` to every partition of
the given topics, round-robin, at a modest rate, for as long as it runs. At the end a consumer
reads every partition from the beginning and checks, per partition, that the sequences it
reads are exactly 0..n-1 in order: zero lost, zero duplicated, zero out of order. Errors the
producer saw are kept; only retriable ones are acceptable.

Two kinds of missing record are told apart, because they mean different things:
- *lost*: Kafka acknowledged it (acks=all) and it cannot be read back — data loss;
- *unacknowledged*: the producer never got an acknowledgement (delivery failed, or still
  queued when the final flush gave up) and it is not in the log either — the write failed.
Both fail the check; the report names the first few (partition, sequence, offset if acknowledged).
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from runtime.clients.client_config import ClientConfig
from reassigner.dev.local.kafka_admin import PLAINTEXT, client_settings


@dataclass
class TrafficReport:
    produced: int = 0
    acknowledged: int = 0
    read: int = 0
    lost: int = 0
    unacknowledged: int = 0
    out_of_order: int = 0
    duplicated: int = 0
    fatal_errors: list[str] = field(default_factory=list)
    retriable_errors: int = 0
    missing: list[str] = field(default_factory=list)  # the first few missing records, described
    # For a partition with a missing record: its first delivery reports and the first sequences
    # its log holds (a lost record is one of a partition's first, produced while its replicas were
    # still coming in sync: see `Stage.setup`).
    evidence: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (self.lost or self.unacknowledged or self.out_of_order or self.duplicated
                    or self.fatal_errors)

    def problems(self) -> str:
        """What made the check fail, in a line (empty when clean)."""
        parts = []
        if self.unacknowledged:
            parts.append(f"{self.unacknowledged} never acknowledged")
        if self.missing:
            parts.append("missing: " + ", ".join(self.missing))
        if self.fatal_errors:
            parts.append(f"producer errors: {self.fatal_errors[:3]}")
        if self.evidence:
            parts.append("evidence: " + "; ".join(self.evidence))
        return "; ".join(parts)


FIRST_REPORTS = 3  # delivery reports kept per partition, and log sequences shown, as evidence
EVIDENCE_PARTITIONS = 5  # partitions missing a record that the evidence describes


@dataclass(frozen=True)
class SequenceCheck:
    """The comparison of what was produced, acknowledged and read (see `compare_sequences`)."""

    read: int
    lost: int
    unacknowledged: int
    out_of_order: int
    duplicated: int
    missing: list[str]
    missing_partitions: tuple[tuple[str, int], ...] = ()  # every partition missing a record


def compare_sequences(produced: dict[tuple[str, int], int],
                      acknowledged: dict[tuple[str, int], dict[int, int]],
                      seen: dict[tuple[str, int], list[int]], describe: int = 5) -> SequenceCheck:
    """Per partition: `produced` sequences 0..n-1, `acknowledged` sequence -> offset, `seen` the
    sequences read in log order. A missing sequence is lost if it was acknowledged, else
    unacknowledged; the first `describe` of them are described."""
    read = lost = unacknowledged = out_of_order = duplicated = 0
    missing: list[str] = []
    missing_partitions: list[tuple[str, int]] = []
    for key, count in sorted(produced.items()):
        sequences = seen.get(key, [])
        acked = acknowledged.get(key, {})
        read += len(sequences)
        duplicated += len(sequences) - len(set(sequences))
        out_of_order += sum(1 for a, b in zip(sequences, sequences[1:]) if b < a)
        absent = sorted(set(range(count)) - set(sequences))
        if absent:
            missing_partitions.append(key)
        for sequence in absent:
            offset = acked.get(sequence)
            if offset is None:
                unacknowledged += 1
            else:
                lost += 1
            if len(missing) < describe:
                where = f"acknowledged at offset {offset}" if offset is not None else "never acknowledged"
                missing.append(f"{key[0]}-{key[1]} #{sequence} ({where})")
    return SequenceCheck(read, lost, unacknowledged, out_of_order, duplicated, missing, tuple(missing_partitions))


class SequencedTraffic:
    """Writes sequenced records to every partition of `topics` until stopped."""

    def __init__(self, bootstrap_servers: str, partitions: dict[str, int],
                 records_per_second: float = 200.0, client: ClientConfig = PLAINTEXT) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.client = client
        self.partitions = partitions
        self.interval = 1.0 / records_per_second
        self.next_sequence = {(t, p): 0 for t, n in partitions.items() for p in range(n)}
        # sequence -> offset of every acknowledged record, per partition
        self.acknowledged: dict[tuple[str, int], dict[int, int]] = {
            key: {} for key in self.next_sequence}
        # The first FIRST_REPORTS delivery reports of each partition, as they came (see `evidence`)
        self.first_reports: dict[tuple[str, int], list[str]] = {key: [] for key in self.next_sequence}
        self.report = TrafficReport()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._producer = Producer(client_settings(bootstrap_servers, client, **{
            "acks": "all", "enable.idempotence": True, "linger.ms": 5,
            "message.timeout.ms": 300000, "error_cb": self._on_error,
        }))

    def _on_error(self, error: KafkaError) -> None:
        if error.fatal():
            self.report.fatal_errors.append(str(error))
        else:
            self.report.retriable_errors += 1

    def _on_delivery(self, error, message) -> None:
        reports = self.first_reports.get((message.topic(), message.partition()))
        if reports is not None and len(reports) < FIRST_REPORTS:
            value = message.value()
            shown = value.decode(errors="replace") if isinstance(value, bytes) else repr(value)
            reports.append(f"{shown}@{message.offset()}" + (f" ({error})" if error else ""))
        if error is not None:  # the record was not written: the check will show it lost
            self.report.fatal_errors.append(f"{message.topic()}-{message.partition()}: {error}")
            return
        self.report.acknowledged += 1
        # Anything odd about an acknowledgement (a value that is not ours, a sequence acknowledged
        # twice) is recorded, not dropped: a counter alone can say every record was acknowledged
        # while some sequence is neither in this map nor in the log.
        key = (message.topic(), message.partition())
        try:
            sequence = int(message.value().decode().split(":")[1])
            acked = self.acknowledged[key]
        except Exception as odd:  # noqa: BLE001 - a diagnostic must never stop the delivery thread
            self.report.fatal_errors.append(f"odd acknowledgement {key} {message.value()!r}: {odd!r}")
            return
        if sequence in acked:
            self.report.fatal_errors.append(f"{key[0]}-{key[1]} #{sequence} acknowledged twice "
                                            f"(offsets {acked[sequence]} and {message.offset()})")
        acked[sequence] = message.offset()

    def start(self) -> "SequencedTraffic":
        self._thread = threading.Thread(target=self._run, name="demo-traffic", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            self._produce_until_stopped()
        except Exception as error:  # noqa: BLE001 - reported by stop_and_verify, not lost
            self.report.fatal_errors.append(f"the traffic thread stopped: {error!r}")

    def _produce_until_stopped(self) -> None:
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
        still_queued = self._producer.flush(timeout)
        if still_queued:
            self.report.fatal_errors.append(f"{still_queued} records still unacknowledged after "
                                            f"the final flush ({timeout:.0f} s)")
        seen = read_sequences(self.bootstrap_servers, self.next_sequence, timeout, self.client)
        check = compare_sequences(self.next_sequence, self.acknowledged, seen)
        self.report.read, self.report.lost = check.read, check.lost
        self.report.unacknowledged, self.report.missing = check.unacknowledged, check.missing
        self.report.out_of_order, self.report.duplicated = check.out_of_order, check.duplicated
        self.report.evidence = [
            f"{t}-{p}: first delivery reports [{', '.join(self.first_reports[(t, p)])}], "
            f"log starts {seen[(t, p)][:FIRST_REPORTS]}"
            for t, p in check.missing_partitions[:EVIDENCE_PARTITIONS]]
        return self.report


def read_sequences(bootstrap_servers: str, expected: dict[tuple[str, int], int],
                   timeout: float, client: ClientConfig = PLAINTEXT) -> dict[tuple[str, int], list[int]]:
    """Read every partition from the beginning: the sequences per partition, in log order."""
    consumer = Consumer(client_settings(bootstrap_servers, client, **{
        "group.id": f"verify-{uuid.uuid4()}", "enable.auto.commit": False,
        "auto.offset.reset": "earliest"}))
    consumer.assign([KafkaTopicPartition(t, p, 0) for t, p in expected])
    seen: dict[tuple[str, int], list[int]] = {key: [] for key in expected}
    deadline = time.monotonic() + timeout
    # Read each partition up to its end (the producer has stopped): a missing record then shows
    # at once instead of the reader waiting for a count it will never reach.
    end_offsets = {key: _end_offset(consumer, key, deadline) for key in expected}
    remaining = {key for key, end in end_offsets.items() if end > 0}
    while remaining and time.monotonic() < deadline:
        for message in consumer.consume(1000, 0.5):
            if message.error() is not None:
                continue
            key = (message.topic(), message.partition())
            seen[key].append(int(message.value().decode().split(":")[1]))
            if message.offset() + 1 >= end_offsets[key]:
                remaining.discard(key)
    consumer.close()
    return seen


def _end_offset(consumer: Consumer, key: tuple[str, int], deadline: float) -> int:
    """The partition's high watermark, retried until `deadline` (None means the query timed out)."""
    while True:
        try:
            offsets = consumer.get_watermark_offsets(KafkaTopicPartition(*key, 0), timeout=10)
        except KafkaException:
            offsets = None
        if offsets is not None:
            return offsets[1]
        if time.monotonic() >= deadline:
            raise TimeoutError(f"no end offset for {key[0]}-{key[1]}: its leader does not answer")
        time.sleep(0.5)
