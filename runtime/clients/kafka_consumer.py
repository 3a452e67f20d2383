"""The one door to confluent-kafka consumers: reading topics, and a committing group loop.

- `consumer_config`: a consumer that never commits (it `assign`s partitions; the group id only
  names it); `group_consumer_config`: a member of a consumer group that commits by hand.
- `TopicReader`: a reader that owns no offsets and joins no group (`alerts --follow`, the status
  server, the canary), so many readers never disturb each other or a group: `partitions`,
  `assign` (each partition at its beginning or at its end as it is now), `follow` (a set of
  partitions kept up to date, new ones from their end), `watermarks`, `poll` (`poll_or_raise`
  for a reader that must stop on an error no wait mends), `close`.
- `run_committing_consumer`: a consumer group loop (the webhook forwarder) —
  poll, `handle(record)`, publish what it returns and wait for the ack, then commit.
- `build_consumer`, `is_end_of_partition`: a raw consumer for a config made by the caller.

RULES
- A record reaches the caller as a `ConsumedRecord` (plain values); a consumer error is logged
  at INFO and skipped — librdkafka reconnects and re-routes fetches to a new leader by itself,
  so a broker stopped and restarted under a reader costs a pause, not the reader.
- Kafka errors raised to the caller are `schemas.errors` (`kafka_errors.translate_kafka_error`).
- `run_committing_consumer`, per record in each partition's offset order: `handle(record)`;
  then the `OutgoingMessage` it returned, if any, is published on the side topic and
  acknowledged (`kafka_producer.publish_and_wait`, retried under the one retry policy while the
  cluster is away; stopped meanwhile → nothing committed, the record comes again); only then is the record's offset committed (synchronously). A handler
  that raises `StopWithoutCommit` ends the loop with that record uncommitted: it is delivered
  again after a restart (at least once).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Literal, Mapping

from runtime.backoff import END_LOOKUP, UNTIL_STOPPED, retry_transient
from runtime.clients.client_config import ClientConfig
from runtime.clients.kafka_errors import translate_kafka_error
from runtime.clients.kafka_producer import (build_producer, is_unknown_topic, librdkafka_settings, producer_config,
                                               publish_and_wait)
from schemas.errors import KafkaTransientError, ReassignerError, TransientError

log = logging.getLogger(__name__)

Start = Literal["beginning", "end"]
Headers = tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True)
class ConsumedRecord:
    """One message as read: headers as sent (name/value pairs, in order, repeats kept)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()


@dataclass(frozen=True)
class OutgoingMessage:
    """A message a handler asks `run_committing_consumer` to publish before it commits."""

    key: bytes | None
    value: bytes
    headers: Headers = ()


class StopWithoutCommit(Exception):
    """Raised by a handler: stop now and leave the record's offset uncommitted."""


# --- configurations -----------------------------------------------------------------------------


def _librdkafka(client_config: ClientConfig | None) -> dict[str, str]:
    return dict((client_config or ClientConfig()).librdkafka)


def consumer_config(bootstrap_servers: str, client_config: ClientConfig | None,
                    purpose: str) -> dict[str, Any]:
    """A non-committing consumer (it uses `assign`, so the group id only names it)."""
    return {"bootstrap.servers": bootstrap_servers,
            "group.id": f"reassigner-{purpose}-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False, "enable.partition.eof": False,
            "topic.metadata.refresh.interval.ms": 5000, **_librdkafka(client_config)}


def group_consumer_config(bootstrap_servers: str, client_config: ClientConfig | None,
                          group: str) -> dict[str, Any]:
    """A member of `group` that commits by hand and starts at the earliest offset the first time."""
    return {"bootstrap.servers": bootstrap_servers, "group.id": group,
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "topic.metadata.refresh.interval.ms": 5000, **_librdkafka(client_config)}


def build_consumer(config: Mapping[str, object]):
    """A confluent-kafka Consumer for a config made by the caller (its librdkafka log lines
    through the product's logging: `kafka_producer.librdkafka_settings`)."""
    from confluent_kafka import Consumer

    return Consumer(librdkafka_settings(config))


def is_end_of_partition(error: Any) -> bool:
    """Whether a consumer error is only the end-of-partition event (`enable.partition.eof`)."""
    from confluent_kafka import KafkaError

    return error is not None and error.code() == KafkaError._PARTITION_EOF


def commit_consumed(consumer, message, stop: threading.Event, doing: str) -> bool:
    """Commit `message`'s offset, synchronously. A group coordinator loading, moving or away is
    waited out under the one retry policy (regression: COORDINATOR_LOAD_IN_PROGRESS, raised by
    the commit, stopped the executor for good on a loaded 4.4 cluster). A commit the group made
    void (a rebalance: another generation) is logged and dropped: the message is delivered again
    to the partition's owner, whose duplicate check keeps it from being applied twice. False when
    `stop` was set before the commit went through (the message is then delivered again)."""
    from confluent_kafka import KafkaException

    def commit() -> None:
        try:
            consumer.commit(message=message, asynchronous=False)
        except KafkaException as error:
            raise translate_kafka_error(error, doing) from None
    try:
        retry_transient(commit, doing, UNTIL_STOPPED, stop, log)
    except TransientError:
        return False  # stopped meanwhile
    except ReassignerError as error:
        log.warning("%s: %s; the message will be delivered again", doing, error)
    return True


def topic_partitions(consumer, topic: str, timeout: float = 15.0) -> list[int]:
    """Partition ids of `topic` as the cluster reports them now (empty when it does not exist)."""
    from confluent_kafka import KafkaException

    try:
        metadata = consumer.list_topics(topic, timeout=timeout)
    except KafkaException as error:
        raise translate_kafka_error(error, f"describing topic {topic}") from None
    found = metadata.topics.get(topic)
    if found is None or found.error is not None:
        return []
    return sorted(found.partitions)


def _record(message, purpose: str) -> ConsumedRecord | None:
    """The message as a `ConsumedRecord`; None for no message or a consumer error (logged)."""
    if message is None:
        return None
    if message.error():
        log.info("%s consumer: %s (librdkafka retries by itself)", purpose, message.error())
        return None
    return ConsumedRecord(topic=message.topic(), partition=message.partition(), offset=message.offset(),
                          key=message.key(), value=message.value(),
                          headers=tuple((k, v) for k, v in (message.headers() or [])))


# --- reading without a group ---------------------------------------------------------------------


class TopicReader:
    """A consumer that `assign`s partitions itself and never commits (see the module docstring)."""

    def __init__(self, bootstrap_servers: str, client_config: ClientConfig | None, purpose: str) -> None:
        self.purpose = purpose
        self._consumer = build_consumer(consumer_config(bootstrap_servers, client_config, purpose))

    def partitions(self, topic: str) -> list[int]:
        """Partition ids of `topic` now; empty while it does not exist."""
        return topic_partitions(self._consumer, topic)

    def assign(self, starts: Iterable[tuple[str, int, Start]], stop: threading.Event) -> None:
        """Read each `(topic, partition, start)` from its beginning, or from its end as it is now.

        An end is an explicit offset (the high watermark), so a message produced after `assign`
        returns is never skipped by a late `latest` lookup; a broker briefly away is asked again
        every 0.5 s until `stop` (a partition not resolved by then is left out)."""
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        assignment = []
        for topic, partition, start in starts:
            if start == "beginning":
                assignment.append(TopicPartition(topic, partition, OFFSET_BEGINNING))
                continue
            try:  # a broker briefly away: asked again under the one retry policy
                _low, high = retry_transient(lambda: self._watermarks(topic, partition, timeout=5.0),
                                             f"reading the end of {topic}-{partition}", END_LOOKUP, stop, log)
            except TransientError:
                continue  # stopped before the broker answered: left out
            assignment.append(TopicPartition(topic, partition, high))
        self._consumer.assign(assignment)

    def follow(self, topic: str, partitions: Iterable[int]) -> None:
        """Read exactly `partitions` of `topic` from now on: a partition new to the reader from its
        end as its leader resolves it (no lookup here, so a partition without a leader never
        holds the caller up; what is written before that end is resolved is not read), the ones
        it reads already where they are (nothing in flight is skipped), and any other dropped."""
        from confluent_kafka import OFFSET_END, KafkaException, TopicPartition

        wanted = set(partitions)
        try:
            held = {(tp.topic, tp.partition) for tp in self._consumer.assignment()}
            dropped = [TopicPartition(t, p) for t, p in sorted(held) if t != topic or p not in wanted]
            added = [TopicPartition(topic, p, OFFSET_END) for p in sorted(wanted) if (topic, p) not in held]
            if dropped:
                self._consumer.incremental_unassign(dropped)
            if added:
                self._consumer.incremental_assign(added)
        except KafkaException as error:
            raise translate_kafka_error(error, f"assigning {topic} {sorted(wanted)}") from None

    def poll_or_raise(self, timeout: float) -> ConsumedRecord | None:
        """As `poll`, for a reader that must know when reading cannot go on: a consumer error
        that waiting mends (a broker away, a leader moving, a partition created moments ago and
        not yet known where it is asked: librdkafka retries them all by itself) is logged at
        DEBUG and skipped; any other (TOPIC_AUTHORIZATION_FAILED, ...) is raised, translated."""
        message = self._consumer.poll(timeout)
        if message is None:
            return None
        error = message.error()
        if error is not None:
            translated = translate_kafka_error(error, f"{self.purpose} consumer")
            if isinstance(translated, TransientError) or is_unknown_topic(translated):
                log.debug("%s", translated)
                return None
            raise translated
        return _record(message, self.purpose)

    def watermarks(self, topic: str, partitions: Iterable[int], timeout: float = 10.0) -> dict[int, tuple[int, int]]:
        """partition → (low, high) watermark offsets, asked of the leaders now (not cached)."""
        return {p: self._watermarks(topic, p, timeout) for p in partitions}

    def _watermarks(self, topic: str, partition: int, timeout: float) -> tuple[int, int]:
        from confluent_kafka import KafkaException, TopicPartition

        doing = f"reading the offsets of {topic}-{partition}"
        try:
            answer = self._consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                          timeout=timeout, cached=False)
        except KafkaException as error:
            raise translate_kafka_error(error, doing) from None
        if answer is None:
            raise KafkaTransientError(f"{doing}: no answer within {timeout:g} s", "REQUEST_TIMED_OUT")
        low, high = answer
        return low, high

    def poll(self, timeout: float) -> ConsumedRecord | None:
        """The next record, or None after `timeout` seconds (or on a consumer error, logged)."""
        return _record(self._consumer.poll(timeout), self.purpose)

    def tail(self, topics: Iterable[str], count: int, timeout: float = 15.0) -> list[ConsumedRecord]:
        """The newest `count` records of every partition of `topics` (fewer where the log holds
        fewer, or where they did not all arrive within `timeout` seconds). Re-assigns the
        reader: what it was reading before is left."""
        from confluent_kafka import TopicPartition

        ends: dict[tuple[str, int], int] = {}
        assignment = []
        for topic in topics:
            for partition, (low, high) in self.watermarks(topic, self.partitions(topic)).items():
                if high > low:
                    ends[(topic, partition)] = high
                    assignment.append(TopicPartition(topic, partition, max(low, high - count)))
        self._consumer.assign(assignment)
        records: list[ConsumedRecord] = []
        deadline = time.monotonic() + timeout
        while ends and time.monotonic() < deadline:
            record = self.poll(0.5)
            if record is None:
                continue
            records.append(record)
            if record.offset >= ends.get((record.topic, record.partition), 0) - 1:
                ends.pop((record.topic, record.partition), None)
        return records

    def close(self) -> None:
        self._consumer.close()

    def __enter__(self) -> "TopicReader":
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


# --- a committing consumer group -----------------------------------------------------------------


def run_committing_consumer(bootstrap_servers: str, client_config: ClientConfig | None, topic: str,
                            group: str, handle: Callable[[ConsumedRecord], OutgoingMessage | None],
                            side_topic: str, stop: threading.Event, *, purpose: str,
                            on_ready: Callable[[], None] | None = None,
                            ack_timeout_seconds: float = 30.0) -> None:
    """Consume `topic` in `group` until `stop`: handle, publish on `side_topic`, commit — in that
    order (see the module docstring). `on_ready()` once partitions are first assigned."""
    consumer = build_consumer(group_consumer_config(bootstrap_servers, client_config, group))
    producer = build_producer(producer_config(bootstrap_servers, client_config, f"reassigner-{purpose}"))
    ready = threading.Event()

    def assigned(_consumer, partitions) -> None:
        if partitions and not ready.is_set():
            ready.set()
            if on_ready:
                on_ready()

    consumer.subscribe([topic], on_assign=assigned)
    try:
        while not stop.is_set():
            message = consumer.poll(0.5)
            record = _record(message, purpose)
            if record is None:
                continue
            try:
                outgoing = handle(record)
            except StopWithoutCommit:
                break  # neither done nor published: delivered again after a restart
            if outgoing is not None:
                try:  # a cluster outage is waited out: the record stays uncommitted meanwhile
                    retry_transient(lambda: publish_and_wait(producer, side_topic, outgoing.key, outgoing.value,
                                                             list(outgoing.headers), ack_timeout_seconds),
                                    f"publishing to {side_topic}", UNTIL_STOPPED, stop, log)
                except KafkaTransientError:
                    if stop.is_set():
                        break  # stopped in an outage: not committed, delivered again after a restart
                    raise
            if not commit_consumed(consumer, message, stop, f"committing {topic}"):
                break
    finally:
        consumer.close()
        producer.flush(5)
