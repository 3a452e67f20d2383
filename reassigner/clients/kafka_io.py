"""The operator package's one door to confluent-kafka: client configs, topics, error translation.

- `build_producer`: idempotent (`enable.idempotence`, acks=all), so a retried request is written
  once; the `--command-config` security settings merged in.
- `consumer_config`: a consumer that never commits (followers read, they do not own offsets).
- `ensure_topics`: create the product's topics that are missing (RF = min(3, brokers)), so that
  `request ...` or `alerts --follow` work before the pipeline has ever run.
- `translate_kafka_error`: a `KafkaError` → `KafkaTransientError` (retriable) or
  `KafkaPermanentError`, named by the Kafka error; nothing else in the package inspects one.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any, Iterable, Mapping, NoReturn

from reassigner.errors import KafkaPermanentError, KafkaTransientError, ReassignerError

log = logging.getLogger(__name__)


def build_producer(bootstrap_servers: str, client_config: Mapping[str, str]):
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": bootstrap_servers, "enable.idempotence": True,
                     "acks": "all", "linger.ms": 5, "message.timeout.ms": 30000,
                     **client_config})


def consumer_config(bootstrap_servers: str, client_config: Mapping[str, str],
                    purpose: str) -> dict[str, Any]:
    """A non-committing consumer (it uses `assign`, so the group id only names it)."""
    return {"bootstrap.servers": bootstrap_servers,
            "group.id": f"reassigner-{purpose}-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False, "enable.partition.eof": False,
            "topic.metadata.refresh.interval.ms": 5000, **client_config}


def ensure_topics(bootstrap_servers: str, client_config: Mapping[str, str],
                  topics: Iterable[str], partitions: int = 3, timeout: float = 30.0) -> None:
    """Create those of `topics` that do not exist yet; an existing topic is left as it is."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap_servers, **client_config})
    try:
        metadata = admin.list_topics(timeout=timeout)
    except KafkaException as error:
        raise translate_kafka_error(error.args[0], f"listing topics at {bootstrap_servers}") from None
    missing = [t for t in dict.fromkeys(topics) if t not in metadata.topics]
    if not missing:
        return
    rf = min(3, max(1, len(metadata.brokers)))
    futures = admin.create_topics([NewTopic(t, num_partitions=partitions, replication_factor=rf)
                                   for t in missing])
    for topic, future in futures.items():
        try:
            future.result(timeout)
            log.info("created topic %s (%d partitions, RF %d)", topic, partitions, rf)
        except KafkaException as error:
            if error.args[0].name() != "TOPIC_ALREADY_EXISTS":
                raise translate_kafka_error(error.args[0], f"creating topic {topic}") from None


def topic_partitions(consumer, topic: str, timeout: float = 15.0) -> list[int]:
    """Partition ids of `topic` as the cluster reports them now (empty when it does not exist)."""
    from confluent_kafka import KafkaException

    try:
        metadata = consumer.list_topics(topic, timeout=timeout)
    except KafkaException as error:
        raise translate_kafka_error(error.args[0], f"describing topic {topic}") from None
    found = metadata.topics.get(topic)
    if found is None or found.error is not None:
        return []
    return sorted(found.partitions)


def translate_kafka_error(error: Any, doing: str) -> ReassignerError:
    """A confluent-kafka `KafkaError` → our hierarchy, named by its Kafka error name."""
    name = error.name() if hasattr(error, "name") else "UNKNOWN"
    text = error.str() if hasattr(error, "str") else str(error)
    retriable = bool(getattr(error, "retriable", lambda: False)()) or name.startswith("_")
    if retriable:
        return KafkaTransientError(f"{doing}: {text}; is the cluster reachable?", name)
    return KafkaPermanentError(f"{doing}: {text}", name)


def raise_delivery_failure(topic: str, error: Any, timeout_seconds: float) -> NoReturn:
    if error is None:
        raise KafkaTransientError(
            f"publishing to {topic}: not acknowledged within {timeout_seconds:g} s; is the "
            "cluster reachable (--bootstrap-server)?", "REQUEST_TIMED_OUT")
    raise translate_kafka_error(error, f"publishing to {topic}")
