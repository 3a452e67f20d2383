"""A harness for pipeline tests against the real stack: a private topic prefix and Redis cluster
name per test, producers of Avro events/requests, and a reader of the output topics."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from confluent_kafka import Consumer, Producer, TopicPartition as KafkaTopicPartition

from schemas.codec import TOPICS, decode, encode, version_headers
from tests.waiting import PATIENCE

# The event-time origin (ms): an hour before this run's start. Tests drive time through event
# times, and the pipeline holds them to its own clock (handlers.decide, TIME: more than 5 min
# ahead is taken for a forged time), so the origin stays behind the real clock even when a
# simulated cluster runs its time faster than the wall clock.
T0 = (int(time.time()) - 3600) * 1000


def broker_event(broker_id: int, state: str, at_ms: int, rack: str | None = None,
                 log_dirs: list[str] | None = None) -> dict:
    return {
        "schema_version": 1, "event_time": at_ms, "id": str(uuid.uuid4()), "key": str(broker_id),
        "snapshot_id": None, "broker_id": broker_id, "rack": rack or f"/dc1/r{broker_id}",
        "host": "127.0.0.1", "port": 9000 + broker_id, "state": state,
        "log_dirs": log_dirs if log_dirs is not None else [f"/data/b{broker_id}/d0"],
    }


def topic_event(topic: str, partitions: int, at_ms: int, min_isr: int = 1, rf: int = 3,
                deleted: bool = False) -> dict:
    return {
        "schema_version": 1, "event_time": at_ms, "id": str(uuid.uuid4()), "key": topic,
        "snapshot_id": None, "topic": topic, "topic_id": None, "deleted": deleted,
        "partition_count": partitions, "replication_factor": rf, "min_insync_replicas": min_isr,
    }


def partition_event(topic: str, partition: int, replicas: list[int], at_ms: int,
                    isr: list[int] | None = None, leader: int | None = None, epoch: int = 0,
                    adding: list[int] | None = None, removing: list[int] | None = None,
                    size_bytes: int = 1000) -> dict:
    isr = list(replicas) if isr is None else isr
    return {
        "schema_version": 1, "event_time": at_ms, "id": str(uuid.uuid4()),
        "key": f"{topic}-{partition}", "snapshot_id": None, "topic": topic,
        "partition": partition, "replicas": replicas, "isr": isr,
        "leader": leader if leader is not None else (isr[0] if isr else None),
        "leader_epoch": epoch, "adding": adding or [], "removing": removing or [],
        "offline_replicas": [], "size_bytes": size_bytes, "log_dirs": [],
    }


def log_dir_event(broker_id: int, path: str, online: bool, at_ms: int,
                  replicas: list[tuple[str, int]] = ()) -> dict:
    return {
        "schema_version": 1, "event_time": at_ms, "id": str(uuid.uuid4()), "key": str(broker_id),
        "snapshot_id": None, "broker_id": broker_id, "path": path, "online": online,
        "error": None if online else "KAFKA_STORAGE_ERROR", "total_bytes": None,
        "usable_bytes": None,
        "replicas": [{"topic": t, "partition": p, "size_bytes": 100, "offset_lag": 0,
                      "is_future": False} for t, p in replicas],
    }


def request(kind: str, fields: dict, at_ms: int, request_id: str | None = None) -> dict:
    request_id = request_id or f"req-{uuid.uuid4().hex[:8]}"
    return {"schema_version": 1, "event_time": at_ms, "id": request_id, "key": request_id,
            "requested_by": "tests", "payload": (kind, fields)}


@dataclass
class Harness:
    bootstrap_servers: str
    prefix: str
    cluster_name: str
    producer: Producer = field(init=False)
    consumers: dict[str, Consumer] = field(default_factory=dict)
    seen: dict[str, list[dict]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.producer = Producer({"bootstrap.servers": self.bootstrap_servers, "acks": "all",
                                  "enable.idempotence": True, "linger.ms": 1})

    def topic(self, suffix: str) -> str:
        return f"{self.prefix}.{suffix}"

    def send(self, suffix: str, record: dict, raw: bytes | None = None) -> None:
        value = raw if raw is not None else encode(TOPICS[suffix], record)
        self.producer.produce(self.topic(suffix), key=(record or {}).get("key", "x").encode(),
                              value=value, headers=version_headers())
        assert self.producer.flush(30) == 0

    def send_together(self, suffix: str, records: list[dict]) -> None:
        """Produce several records with one flush, so that one micro-batch sees them all."""
        for record in records:
            self.producer.produce(self.topic(suffix), key=record["key"].encode(),
                                  value=encode(TOPICS[suffix], record), headers=version_headers())
        assert self.producer.flush(30) == 0

    def _consumer(self, suffix: str) -> Consumer:
        if suffix not in self.consumers:
            consumer = Consumer({"bootstrap.servers": self.bootstrap_servers,
                                 "group.id": f"tests-{uuid.uuid4().hex[:8]}",
                                 "auto.offset.reset": "earliest", "enable.auto.commit": False})
            consumer.subscribe([self.topic(suffix)])
            self.consumers[suffix] = consumer
            self.seen[suffix] = []
        return self.consumers[suffix]

    def read(self, suffix: str, until: Callable[[list[dict]], bool] = lambda seen: True,
             timeout: float = 60.0) -> list[dict]:
        """Everything seen on an output topic so far, waiting until `until(seen)` holds."""
        consumer = self._consumer(suffix)
        deadline = time.monotonic() + timeout * PATIENCE
        while True:
            for message in consumer.consume(500, 0.2):
                if message.error() is None:
                    self.seen[suffix].append(decode(TOPICS[suffix], message.value()))
            if until(self.seen[suffix]) or time.monotonic() > deadline:
                return list(self.seen[suffix])

    def read_to_end(self, suffix: str, timeout: float = 30.0) -> list[dict]:
        """Everything on an output topic up to its end offsets as of this call; fails if they are
        not all read within `timeout`. (The end offsets count the records: the topics are fresh,
        not compacted, and written without transactions.)"""
        consumer = self._consumer(suffix)
        topic = self.topic(suffix)
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        records = sum(high - low for low, high in (
            consumer.get_watermark_offsets(KafkaTopicPartition(topic, p), timeout=10) for p in partitions))
        seen = self.read(suffix, lambda seen: len(seen) >= records, timeout)
        assert len(seen) >= records, f"read {len(seen)} of the {records} records on {topic} in {timeout} s"
        return seen

    def close(self) -> None:
        for consumer in self.consumers.values():
            consumer.close()
        self.producer.flush(10)


def kinds(messages: list[dict]) -> list[str]:
    return [m["payload"][0] if "payload" in m else m.get("kind") for m in messages]


def alerts_of(messages: list[dict], kind: str) -> list[dict]:
    return [m for m in messages if m.get("kind") == kind]


def commands_of(messages: list[dict], kind: str) -> list[dict]:
    return [m for m in messages if m["payload"][0] == kind]


__all__ = ["T0", "Harness", "Any", "KafkaTopicPartition", "alerts_of", "broker_event",
           "commands_of", "kinds", "log_dir_event", "partition_event", "request", "topic_event"]
