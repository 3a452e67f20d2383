"""The one producer of the product (confluent-kafka): its configuration, and publish-and-wait.

- `producer_config`: idempotent, acks=all, the `--command-config` security settings merged in;
  every component builds its producer from it (`build_producer`); `probe_producer_config` is
  the canary's, which measures (no batching, no idempotence, a bounded delivery time).
- `read_partition_leaders`: who leads each partition of one topic, asked of the cluster now.
- `build_producer` (and `kafka_consumer.build_consumer`) make every confluent-kafka client of
  the product through `librdkafka_settings`: librdkafka's own log lines go to the Python
  logger `librdkafka` (the product's log format, redacted, repeats within a minute counted
  instead of printed), never raw to stderr.
- `publish_and_wait`: one message, returned only once acknowledged, else `KafkaTransientError`
  (the caller retries under `runtime.backoff`).
- `publish_all_and_wait`: many messages, acknowledged as a whole (the pipeline's outbox, the
  watcher's events through `EventPublisher`).

INVARIANTS
- acks=all and enable.idempotence: a message is written once and in order per partition even
  when the producer retries internally. (The canary's probes alone are not idempotent: they
  carry no product record, only a send time.)
- Keys and the `schema_version` header follow `schemas.codec`; the value is the codec's plain
  Avro binary of the topic's record.
- `publish_events` returns only when every message is acknowledged; otherwise it raises
  `KafkaTransientError` (the caller keeps its view unchanged and publishes again, which the
  state-carrying events make harmless).
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any, Iterable, Mapping, NoReturn

from runtime.clients.client_config import ClientConfig
from runtime.clients.kafka_errors import translate_kafka_error
from schemas.errors import KafkaTransientError, ReassignerError, UnknownTopicOrPartitionError
from schemas.codec import TOPICS, encode, topic_name, version_headers

log = logging.getLogger(__name__)

LIBRDKAFKA_LOGGER_NAME = "librdkafka"
REPEAT_WINDOW_SECONDS = 60.0


class RepeatedLineFilter(logging.Filter):
    """Lets through the first of identical librdkafka lines (the same level and text, the
    trailing "(after 0ms in state CONNECT...)" aside) within `window_seconds`, and the next one
    after the window with how many were held back: a broker that is away is said once a minute,
    not every reconnect (librdkafka retries every few hundred ms).

    A broker librdkafka cannot reach (refused, unreachable, disconnected) is logged at its error
    level; for the product that is an outage it rides out under the one retry policy, not an
    error of its own, so such a line is a WARNING (a dead broker's group coordinator otherwise
    put ERROR lines in a clean stop's log)."""

    _SUFFIX = re.compile(r"\s*\((?:[^()]|\([^()]*\))*\)\s*$")  # "(after 0ms ..., 1 identical error(s) ...)"
    _UNREACHABLE = re.compile(r"Connection refused|Connect to .* failed|Disconnected|Broker transport failure"
                              r"|all brokers? (?:are )?down|No route to host|Connection reset", re.IGNORECASE)

    def __init__(self, window_seconds: float = REPEAT_WINDOW_SECONDS, clock=time.monotonic) -> None:
        super().__init__()
        self.window_seconds = window_seconds
        self.clock = clock
        self._last: dict[tuple[int, str], list] = {}  # key -> [time shown, repeats held back]

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.WARNING and self._UNREACHABLE.search(record.getMessage()):
            record.levelno, record.levelname = logging.WARNING, logging.getLevelName(logging.WARNING)
        key = (record.levelno, self._SUFFIX.sub("", record.getMessage()))
        now = self.clock()
        seen = self._last.get(key)
        if seen is not None and now - seen[0] < self.window_seconds:
            seen[1] += 1
            return False
        if seen is not None and seen[1]:
            record.msg = f"{record.getMessage()} ({seen[1]} more like it in the last {now - seen[0]:.0f} s)"
            record.args = ()
        if len(self._last) > 1000:  # bounded: a long outage over many brokers
            self._last.clear()
        self._last[key] = [now, 0]
        return True


librdkafka_log = logging.getLogger(LIBRDKAFKA_LOGGER_NAME)
librdkafka_log.addFilter(RepeatedLineFilter())


def librdkafka_settings(config: Mapping[str, object]) -> dict:
    """The configuration every confluent-kafka client of the product is made with: `config`
    plus `logger`, so that librdkafka's log lines reach the `librdkafka` logger (served by the
    client's poll/flush) instead of being written raw to stderr by librdkafka's thread."""
    return {"logger": librdkafka_log, **config}


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


def probe_producer_config(bootstrap_servers: str, client_config: ClientConfig | None, client_id: str,
                          timeout_ms: int) -> dict:
    """A producer that measures rather than publishes (the canary's, `reassigner.edge.canary`):
    `producer_config` with its security settings, and on top of them what a measurement needs:
    acks=all (the latency includes the followers' fetches), every record sent at once and alone
    (linger 0, no compression), no idempotence (its ordering is of no use to a probe), a record
    not acknowledged within `timeout_ms` reported as failed, and a topic never created by
    asking for it (the canary's is made with its layout, never with the broker's defaults)."""
    return {**producer_config(bootstrap_servers, client_config, client_id),
            "acks": "all", "enable.idempotence": False, "linger.ms": 0, "compression.type": "none",
            "message.timeout.ms": int(timeout_ms), "request.timeout.ms": int(min(timeout_ms, 30000)),
            "allow.auto.create.topics": False,
            # New partitions and moved leaders are learned within seconds, not librdkafka's 5 minutes.
            "topic.metadata.refresh.interval.ms": 10000}


UNKNOWN_TOPIC_CODES = frozenset({"UNKNOWN_TOPIC_OR_PARTITION", "UNKNOWN_TOPIC_OR_PART", "UNKNOWN_TOPIC",
                                 "UNKNOWN_PARTITION"})
"""A topic or partition the cluster does not know (yet), as the broker and librdkafka name it
(`kafka_errors` keeps librdkafka's `UNKNOWN_TOPIC_OR_PART` spelling)."""


def is_unknown_topic(error: ReassignerError) -> bool:
    return isinstance(error, UnknownTopicOrPartitionError) or error.code in UNKNOWN_TOPIC_CODES


def read_partition_leaders(client, topic: str, timeout_seconds: float) -> dict[int, int | None] | None:
    """The leader of each partition of `topic` as the cluster tells a confluent-kafka producer or
    consumer now: one Metadata request of that topic alone, whose answer also refreshes the
    client's own routing. partition → leader id, None for a partition without one; None when
    the topic does not exist. Raises the translated error (REQUEST_TIMED_OUT, ... or
    TOPIC_AUTHORIZATION_FAILED) when it cannot be read within `timeout_seconds`."""
    from confluent_kafka import KafkaException

    doing = f"reading the leaders of {topic}"
    try:
        metadata = client.list_topics(topic, timeout=timeout_seconds)
    except KafkaException as error:
        raise translate_kafka_error(error, doing) from None
    found = metadata.topics.get(topic)
    if found is None:
        return None
    if found.error is not None and not found.partitions:
        error = translate_kafka_error(found.error, doing)
        if is_unknown_topic(error):
            return None
        raise error
    return {p: (m.leader if m.leader >= 0 else None) for p, m in sorted(found.partitions.items())}


def build_producer(config: Mapping[str, object]):
    """A confluent-kafka Producer for a config made by `producer_config`."""
    from confluent_kafka import Producer

    return Producer(librdkafka_settings(config))


def _send_and_flush(producer, messages: Iterable[tuple[str, bytes, bytes, object]],
                    timeout_seconds: float) -> tuple[int, int, list]:
    """Produce every `(topic, key, value, headers)` message, then flush: (how many were sent,
    how many are still unacknowledged, the delivery reports' errors)."""
    errors: list = []

    def on_delivery(error, _message) -> None:
        if error is not None:
            errors.append(error)

    count = 0
    for topic, key, value, headers in messages:
        while True:
            try:
                producer.produce(topic, key=key, value=value, headers=headers, on_delivery=on_delivery)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.1)
        count += 1
        if count % 10000 == 0:
            producer.poll(0)
    return count, producer.flush(timeout_seconds), errors


def publish_and_wait(producer, topic: str, key: bytes, value: bytes, headers: object,
                     timeout_seconds: float = 30.0) -> None:
    """Send one message and wait for its acknowledgement; raises the translated delivery error
    (or REQUEST_TIMED_OUT) when it is not written."""
    _count, remaining, errors = _send_and_flush(producer, [(topic, key, value, headers)], timeout_seconds)
    if remaining or errors:
        raise_delivery_failure(topic, errors[0] if errors else None, timeout_seconds)


def raise_delivery_failure(topic: str, error: Any, timeout_seconds: float) -> NoReturn:
    """The error of a message that was not acknowledged: its delivery report's error, else a
    timeout (no report within `timeout_seconds`)."""
    if error is None:
        raise KafkaTransientError(
            f"publishing to {topic}: not acknowledged within {timeout_seconds:g} s; is the "
            "cluster reachable (--bootstrap-server)?", "REQUEST_TIMED_OUT")
    raise translate_kafka_error(error, f"publishing to {topic}")


def publish_all_and_wait(producer, messages: Iterable[tuple[str, bytes, bytes, object]],
                         timeout_seconds: float = 30.0) -> int:
    """Send `(topic, key, value, headers)` messages and wait until every one is acknowledged;
    returns how many. Raises `KafkaTransientError` when any is not (the caller retries the
    whole batch: the idempotent producer and state-carrying records make a repeat harmless)."""
    count, remaining, errors = _send_and_flush(producer, messages, timeout_seconds)
    if remaining or errors:
        failures = [f"{error.name()}: {error.str()}" for error in errors[:3]]
        raise KafkaTransientError(
            f"publishing {count} messages: {remaining} not acknowledged within "
            f"{timeout_seconds:.0f} s, failures: {failures}",
            errors[0].name().lstrip("_") if errors else "REQUEST_TIMED_OUT",
            retry_after_seconds=1.0)
    return count


class EventPublisher:
    """Encodes and sends `(topic_suffix, key, record)` events to `<prefix>.<suffix>`."""

    def __init__(self, config: Mapping[str, object], topic_prefix: str) -> None:
        self.topic_prefix = topic_prefix
        self._producer = build_producer(config)
        self._headers = version_headers()

    def publish_events(self, events: Iterable[tuple[str, str, dict]], timeout_seconds: float = 30.0) -> int:
        return publish_all_and_wait(
            self._producer, ((topic_name(suffix, self.topic_prefix), key.encode(), encode(TOPICS[suffix], record),
                              self._headers) for suffix, key, record in events), timeout_seconds)

    def close(self, timeout_seconds: float = 5.0) -> None:
        self._producer.flush(timeout_seconds)
