"""The committing group loop's order under a cluster outage, with fake clients: handle, publish
and wait for the ack (waited out while the cluster is away), only then commit."""

from __future__ import annotations

import threading

import runtime.clients.kafka_consumer as door
from runtime.clients.kafka_consumer import OutgoingMessage


class FakeMessage:
    def __init__(self, offset: int) -> None:
        self._offset = offset

    def error(self):
        return None

    def topic(self):
        return "p.alerts"

    def partition(self):
        return 0

    def offset(self):
        return self._offset

    def key(self):
        return b"k"

    def value(self):
        return b"v"

    def headers(self):
        return []


class FakeConsumer:
    def __init__(self, log: list) -> None:
        self.log, self.pending = log, [FakeMessage(7)]

    def subscribe(self, topics, on_assign=None):
        on_assign(self, [0])

    def poll(self, _timeout):
        return self.pending.pop(0) if self.pending else None

    def commit(self, message, asynchronous):
        self.log.append(("commit", message.offset()))

    def close(self):
        pass


class FlakyProducer:
    """Not acknowledged twice (the cluster away), then written."""

    def __init__(self, log: list) -> None:
        self.log, self.failures_left, self._report = log, 2, None

    def produce(self, topic, key, value, headers, on_delivery):
        self.log.append(("produce", topic))
        self._report = on_delivery

    def flush(self, _timeout):
        if self.failures_left:
            self.failures_left -= 1
            return 1  # still queued: not acknowledged in time
        self._report(None, None)
        return 0


def test_the_side_publish_waits_out_an_outage_and_the_commit_comes_after_it(monkeypatch):
    log: list = []
    monkeypatch.setattr(door, "build_consumer", lambda config: FakeConsumer(log))
    monkeypatch.setattr(door, "build_producer", lambda config: FlakyProducer(log))
    stop = threading.Event()

    def handle(record):
        log.append(("handle", record.offset))
        return OutgoingMessage(b"k", b"dead letter")

    def commit_then_stop(original=FakeConsumer.commit):
        def commit(self, message, asynchronous):
            original(self, message, asynchronous)
            stop.set()
        return commit

    monkeypatch.setattr(FakeConsumer, "commit", commit_then_stop())
    door.run_committing_consumer("b:9092", None, "p.alerts", "g", handle, "p.dead-letter", stop, purpose="test")
    assert log == [("handle", 7), ("produce", "p.dead-letter"), ("produce", "p.dead-letter"),
                   ("produce", "p.dead-letter"), ("commit", 7)]


def test_a_stop_during_the_outage_leaves_the_record_uncommitted(monkeypatch):
    log: list = []
    producer = FlakyProducer(log)
    producer.failures_left = 10**6
    monkeypatch.setattr(door, "build_consumer", lambda config: FakeConsumer(log))
    monkeypatch.setattr(door, "build_producer", lambda config: producer)
    stop = threading.Event()
    threading.Timer(1.0, stop.set).start()
    door.run_committing_consumer("b:9092", None, "p.alerts", "g", lambda r: OutgoingMessage(b"k", b"x"),
                                 "p.dead-letter", stop, purpose="test")
    assert ("commit", 7) not in log and log.count(("produce", "p.dead-letter")) >= 2


class CommitRefusing:
    """A consumer whose commits fail with the given librdkafka errors first, then succeed."""

    def __init__(self, *codes: int) -> None:
        self.codes = list(codes)
        self.committed: list[int] = []

    def commit(self, message, asynchronous: bool) -> None:
        from confluent_kafka import KafkaError, KafkaException

        assert asynchronous is False
        if self.codes:
            raise KafkaException(KafkaError(self.codes.pop(0)))
        self.committed.append(message.offset())


def test_a_coordinator_loading_or_moving_is_waited_out_not_fatal(monkeypatch):
    """Regression: COORDINATOR_LOAD_IN_PROGRESS from the commit stopped the executor's thread for
    good (a loaded 4.4 stack, this session's cordon test); no command was applied after it."""
    from confluent_kafka import KafkaError

    monkeypatch.setattr(door, "UNTIL_STOPPED", door.UNTIL_STOPPED.giving_up_after(30))
    consumer = CommitRefusing(KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.NOT_COORDINATOR)
    assert door.commit_consumed(consumer, FakeMessage(7), threading.Event(), "committing") is True
    assert consumer.committed == [7] and consumer.codes == []


def test_a_commit_a_rebalance_made_void_is_dropped_and_the_loop_goes_on(caplog):
    from confluent_kafka import KafkaError

    consumer = CommitRefusing(KafkaError.ILLEGAL_GENERATION)
    assert door.commit_consumed(consumer, FakeMessage(8), threading.Event(), "committing") is True
    assert consumer.committed == [] and "delivered again" in caplog.text


def test_a_stop_during_a_coordinator_outage_leaves_the_message_uncommitted():
    from confluent_kafka import KafkaError

    stop = threading.Event()
    stop.set()
    consumer = CommitRefusing(*[KafkaError.COORDINATOR_NOT_AVAILABLE] * 3)
    assert door.commit_consumed(consumer, FakeMessage(9), stop, "committing") is False
    assert consumer.committed == []
