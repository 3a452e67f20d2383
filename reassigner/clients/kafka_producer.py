"""Publishing the product's Avro messages with an idempotent confluent-kafka producer.

INVARIANTS
- acks=all and enable.idempotence: a message is written once and in order per partition even
  when the producer retries internally.
- Keys and the `schema_version` header follow `schemas.codec`; the value is the codec's plain
  Avro binary of the topic's record.
- `publish_events` returns only when every message is acknowledged; otherwise it raises
  `KafkaTransientError` (the caller keeps its view unchanged and publishes again, which the
  state-carrying events make harmless).
"""

from __future__ import annotations

import logging
from typing import Iterable, Mapping

from reassigner.clients.client_config import ClientConfig
from reassigner.errors import KafkaTransientError
from schemas.codec import TOPICS, encode, topic_name, version_headers

log = logging.getLogger(__name__)


def producer_config(bootstrap_servers: str, client_config: ClientConfig | None = None,
                    client_id: str = "reassigner") -> dict:
    config = {
        "bootstrap.servers": bootstrap_servers,
        "client.id": client_id,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 5,
        "compression.type": "lz4",
        "message.timeout.ms": 30000,
        "reconnect.backoff.max.ms": 2000,
        # librdkafka's own lines ("Connect to ... failed") would flood stderr during an outage;
        # failures reach us through delivery callbacks and are logged once, with the retry.
        "log_level": 0,
    }
    config.update((client_config or ClientConfig()).librdkafka)
    return config


class EventPublisher:
    """Encodes and sends `(topic_suffix, key, record)` events to `<prefix>.<suffix>`."""

    def __init__(self, config: Mapping[str, object], topic_prefix: str) -> None:
        from confluent_kafka import Producer

        self.topic_prefix = topic_prefix
        self._producer = Producer(dict(config))
        self._headers = version_headers()

    def publish_events(self, events: Iterable[tuple[str, str, dict]], timeout_seconds: float = 30.0) -> int:
        failures: list[str] = []

        def on_delivery(error, _message) -> None:
            if error is not None:
                failures.append(f"{error.name()}: {error.str()}")

        count = 0
        for suffix, key, record in events:
            value = encode(TOPICS[suffix], record)
            topic = topic_name(suffix, self.topic_prefix)
            while True:
                try:
                    self._producer.produce(topic, key=key.encode(), value=value,
                                           headers=self._headers, on_delivery=on_delivery)
                    break
                except BufferError:  # the local queue is full: let deliveries drain it
                    self._producer.poll(0.1)
            count += 1
            if count % 10000 == 0:
                self._producer.poll(0)
        remaining = self._producer.flush(timeout_seconds)
        if remaining or failures:
            raise KafkaTransientError(
                f"publishing {count} messages: {remaining} not acknowledged within "
                f"{timeout_seconds:.0f} s, failures: {failures[:3]}",
                failures[0].split(":")[0].lstrip("_") if failures else "REQUEST_TIMED_OUT",
                retry_after_seconds=1.0)
        return count

    def close(self, timeout_seconds: float = 5.0) -> None:
        self._producer.flush(timeout_seconds)
