"""The canary with no cluster (`reassigner.edge.canary`): the window's accounting (a record charged
to the leader of its partition when it was sent, errors counted apart, null percentiles under
MIN_SAMPLES, a record the codec encodes) and the keeper's decisions, through small fakes of the
Admin API, the producer, the reader and the publisher."""

from __future__ import annotations

import logging
import threading
import time
import uuid

import pytest

from planning.model import Broker
from planning.movement.canary import MIN_SAMPLES, compute_canary_layout
from reassigner.edge.canary import (PROBE, Canary, CanaryKeeper, compute_canary_actions, decode_probe,
                                    encode_probe)
from runtime.clients.cluster_observation import BrokerObservation, PartitionObservation
from runtime.clients.kafka_consumer import ConsumedRecord
from runtime.settings import load_settings
from schemas.codec import decode, encode
from schemas.errors import KafkaPermanentError, KafkaTransientError
from tests.waiting import eventually

TOPIC = "reassigner.canary"
RACKS = {1: "/dc1/r1", 2: "/dc1/r2", 3: "/dc2/r1", 4: "/dc2/r2", 5: "/dc3/r1"}


# --- fakes ----------------------------------------------------------------------------------------


class FakeAdmin:
    """The canary's Admin API calls over a cluster the test describes; records every change asked."""

    def __init__(self, brokers, partitions=None, fenced=()) -> None:
        self.brokers = [BrokerObservation(b, RACKS[b], "localhost", 9000 + b, b in fenced) for b in brokers]
        self.partitions = partitions  # None: the topic is missing
        self.calls: list[tuple] = []
        self.fail: Exception | None = None

    def describe_brokers(self):
        if self.fail is not None:
            raise self.fail
        return list(self.brokers)

    def describe_topic(self, topic):
        assert topic == TOPIC
        return None if self.partitions is None else list(self.partitions)

    def create_topic_with_assignment(self, topic, assignment, configs):
        self.calls.append(("create", topic, dict(assignment), dict(configs)))
        return True

    def create_partitions(self, topic, total, new_assignments):
        self.calls.append(("add", topic, total, tuple(tuple(r) for r in new_assignments)))

    def alter_partition_reassignment(self, topic, partition, replicas):
        self.calls.append(("reassign", topic, partition, tuple(replicas)))

    def elect_preferred_leader(self, topic, partition):
        self.calls.append(("elect", topic, partition))

    def close(self):
        pass


class Delivered:
    """A delivered record as confluent_kafka reports it: `latency()` in seconds."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def latency(self) -> float:
        return self.seconds


class FakeProducer:
    """Keeps each record sent with its delivery callback, for the test to report when it wants."""

    def __init__(self) -> None:
        self.sent: list[dict] = []
        self.refuse: Exception | None = None

    def produce(self, topic, value, partition, on_delivery):
        if self.refuse is not None:
            raise self.refuse
        self.sent.append({"topic": topic, "value": value, "partition": partition, "report": on_delivery})

    def deliver_all(self, error=None, latency: float | None = None) -> None:
        """Report every record; with `latency`, as librdkafka's own measure (`Message.latency`)."""
        pending, self.sent = self.sent, []
        for record in pending:
            record["report"](error, None if latency is None else Delivered(latency))

    def poll(self, _timeout):
        return 0


class FakeReader:
    def follow(self, topic, partitions):
        pass

    def poll_or_raise(self, _timeout):
        return None

    def close(self):
        pass


class FakePublisher:
    def __init__(self) -> None:
        self.published: list[list] = []
        self.fail: Exception | None = None

    def publish_events(self, events, timeout_seconds=30.0):
        if self.fail is not None:
            raise self.fail
        self.published.append(list(events))
        return len(events)

    def close(self):
        pass


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def partition(p, replicas, leader=None, isr=None, adding=(), removing=()):
    replicas = tuple(replicas)
    return PartitionObservation(TOPIC, p, replicas, tuple(isr if isr is not None else replicas),
                                replicas[0] if leader is None else leader, adding=tuple(adding),
                                removing=tuple(removing))


def placed(brokers, replication=3):
    """The canary topic as the layout puts it for `brokers`, every leader its first replica."""
    layout = compute_canary_layout([Broker(b, RACKS[b]) for b in brokers], {}, replication)
    return [partition(p, r) for p, r in sorted(layout.assignment.items())]


def canary(led_by, leaders, *, window=30.0, admin=None):
    settings = load_settings(canary_interval_seconds=0.5, canary_window_seconds=window)
    monotonic = Clock(50.0)
    current = {"leaders": dict(leaders)}
    probe = Canary(CanaryKeeper(admin or FakeAdmin([1, 2, 3]), TOPIC, 3), FakePublisher(), FakeProducer(),
                   FakeReader(), settings, clock=Clock(1_700_000_000.0), monotonic=monotonic,
                   read_leaders=lambda: current["leaders"])
    probe.led_by = dict(led_by)
    return probe, monotonic, current


def samples_of(probe) -> dict[int, dict]:
    assert probe.close_window() == len(probe.publisher.published[-1])
    return {record["broker_id"]: record for _suffix, _key, record in probe.publisher.published[-1]}


# --- the window's accounting ----------------------------------------------------------------------


def test_a_record_is_charged_to_the_broker_that_led_its_partition_when_it_was_sent():
    probe, monotonic, leaders = canary({1: 0, 2: 1}, {0: 1, 1: 2})
    for _ in range(MIN_SAMPLES):
        probe.send_round()
        monotonic.now += 0.004
        probe.producer.deliver_all()  # 4 ms each
    probe.send_round()  # sent while broker 1 leads partition 0 ...
    leaders["leaders"] = {0: 2, 1: 2}  # ... which moves to broker 2 before the acknowledgement comes
    monotonic.now += 0.5
    probe.producer.deliver_all()
    for _ in range(3):
        probe.send_round()
        monotonic.now += 0.002
        probe.producer.deliver_all()

    samples = samples_of(probe)
    assert samples[1]["samples"] == MIN_SAMPLES + 1 and samples[1]["partition"] == 0
    assert samples[1]["produce_p99_ms"] == pytest.approx(500.0) and samples[1]["produce_p50_ms"] == pytest.approx(4.0)
    # Broker 2: its own partition every round, and partition 0 in the last three.
    assert samples[2]["samples"] == MIN_SAMPLES + 1 + 3 + 3 and samples[2]["partition"] == 1
    assert samples[2]["produce_p99_ms"] == pytest.approx(500.0)
    assert {r["errors"] for r in samples.values()} == {0}


def test_the_produce_latency_is_librdkafkas_not_the_reports_threads_wait():
    """The reports' thread ran 300 ms after each acknowledgement (the GIL held by the watcher's
    work): the latency is librdkafka's 4 ms, not 300."""
    probe, monotonic, _ = canary({1: 0}, {0: 1})
    for _ in range(MIN_SAMPLES):
        probe.send_round()
        monotonic.now += 0.3
        probe.producer.deliver_all(latency=0.004)
    samples = samples_of(probe)
    assert samples[1]["produce_p99_ms"] == pytest.approx(4.0) and samples[1]["samples"] == MIN_SAMPLES


def test_failures_and_timeouts_are_errors_kept_out_of_the_percentiles():
    probe, monotonic, _ = canary({1: 0, 2: 1}, {0: 1, 1: 2})
    for _ in range(MIN_SAMPLES):
        probe.send_round()
        monotonic.now += 0.003
        probe.producer.deliver_all()
    for _ in range(2):
        probe.send_round()
        monotonic.now += 30.0  # the timeout
        probe.producer.deliver_all(KafkaTransientError("writing: timed out", "MSG_TIMED_OUT"))
    probe.producer.refuse = BufferError("Local: Queue full")
    probe.send_round()  # never sent: an error too

    samples = samples_of(probe)
    for broker in (1, 2):
        assert samples[broker]["errors"] == 3 and samples[broker]["samples"] == MIN_SAMPLES
        assert samples[broker]["produce_p99_ms"] == pytest.approx(3.0)


def test_probes_that_overlap_a_stall_of_the_process_are_left_out_of_the_percentiles_not_counted_as_errors(caplog):
    """A garbage collection of the watcher's view holds every thread for about a second: the
    probes completing then would all read ~1 s, on every broker (module STALLS). The stall watch
    saw a wake-up 900 ms late; the probes overlapping it are left out, the others make the p99,
    and a failure is still an error."""
    probe, monotonic, _ = canary({1: 0, 2: 1}, {0: 1, 1: 2})
    for _ in range(MIN_SAMPLES):
        probe.send_round()
        monotonic.now += 0.003
        probe.producer.deliver_all()
    probe.stalls.note(monotonic.now + 0.001, monotonic.now + 0.001)  # on time: no stall
    probe.send_round()
    probe.stalls.note(monotonic.now + 0.010, monotonic.now + 0.910)  # 900 ms late
    monotonic.now += 0.950
    probe.producer.deliver_all()  # both read 950 ms: the process's pause
    probe.send_round()
    monotonic.now += 0.5
    probe.producer.deliver_all(KafkaTransientError("writing: timed out", "MSG_TIMED_OUT"))
    probe.send_round()  # after the stall: measured
    monotonic.now += 0.004
    probe.producer.deliver_all()

    with caplog.at_level(logging.DEBUG, logger="reassigner.edge.canary"):
        samples = samples_of(probe)
    for broker in (1, 2):
        assert samples[broker]["samples"] == MIN_SAMPLES + 1 and samples[broker]["errors"] == 1
        assert samples[broker]["produce_p99_ms"] == pytest.approx(4.0)
    assert "2 measurements left out: they overlapped a stall of this process" in caplog.text


def test_the_stall_watch_notes_late_wake_ups_only_and_forgets_old_ones():
    from reassigner.edge.canary import STALL_MS, StallWatch

    watch = StallWatch(keep=60.0)
    watch.note(10.0, 10.0 + STALL_MS / 1000 * 0.9)  # late, but within what a busy watcher does
    assert not watch.overlaps(9.0, 11.0)
    watch.note(20.0, 21.0)
    assert watch.overlaps(20.5, 20.6) and watch.overlaps(19.0, 20.001) and watch.overlaps(20.999, 22.0)
    assert not watch.overlaps(18.0, 20.0) and not watch.overlaps(21.0, 22.0)
    watch.note(81.5, 81.5)  # a minute after the stall ended: forgotten
    assert not watch.overlaps(20.5, 20.6)
    # The thread's loop on a clock where every wake-up comes 200 ms late, stopped after 5 reads.
    done, reads = threading.Event(), []

    def late_clock() -> float:
        reads.append(None)
        if len(reads) >= 5:
            done.set()
        return 100.0 + 0.2 * len(reads)

    ticks = threading.Thread(target=watch.run, args=(done, late_clock))
    ticks.start()
    ticks.join(5.0)
    assert not ticks.is_alive() and watch.overlaps(100.3, 100.35)


def test_a_broker_with_too_few_samples_gets_null_percentiles_yet_its_sample_is_published():
    probe, monotonic, _ = canary({1: 0, 2: 1}, {0: 1, 1: 2})
    for _ in range(MIN_SAMPLES - 1):
        probe.send_round()
        monotonic.now += 0.003
        probe.producer.deliver_all()
    probe.led_by = {1: 0}  # broker 2 leaves the layout: one record short for it
    probe.send_round()
    monotonic.now += 0.003
    probe.producer.deliver_all()

    samples = samples_of(probe)
    assert samples[1]["samples"] == MIN_SAMPLES and samples[1]["produce_p99_ms"] is not None
    assert samples[2]["samples"] == MIN_SAMPLES - 1
    assert samples[2]["produce_p50_ms"] is None and samples[2]["produce_p99_ms"] is None


def test_a_partition_the_metadata_does_not_show_yet_gets_nothing_and_a_leaderless_one_is_its_brokers():
    probe, monotonic, leaders = canary({1: 0, 2: 1, 3: 2}, {0: 1, 1: None})  # 2 not in the metadata yet
    probe.send_round()
    assert sorted(r["partition"] for r in probe.producer.sent) == [0, 1]
    probe.producer.deliver_all(KafkaTransientError("no leader", "MSG_TIMED_OUT"))
    samples = samples_of(probe)
    assert set(samples) == {1, 2} and samples[2]["errors"] == 1 and samples[2]["partition"] == 1


def test_records_read_back_give_the_end_to_end_latency_of_the_broker_charged_and_others_are_ignored():
    probe, monotonic, _ = canary({1: 0}, {0: 1})
    for _ in range(MIN_SAMPLES):
        probe.send_round()
        monotonic.now += 0.002
        probe.producer.deliver_all()
        monotonic.now += 0.005
        probe.read_back(ConsumedRecord(TOPIC, 0, 0, None, encode_probe(probe.prober_id, 1, monotonic.now - 0.007)))
    other_prober = uuid.uuid4().bytes  # another watcher, or an earlier run of this one
    probe.read_back(ConsumedRecord(TOPIC, 0, 1, None, encode_probe(other_prober, 1, 0.0)))
    probe.read_back(ConsumedRecord(TOPIC, 0, 2, None, b"not a probe"))
    probe.read_back(ConsumedRecord(TOPIC, 0, 3, None, None))

    sample = samples_of(probe)[1]
    assert sample["end_to_end_p50_ms"] == pytest.approx(7.0) and sample["end_to_end_p99_ms"] == pytest.approx(7.0)
    assert sample["produce_p99_ms"] == pytest.approx(2.0)


def test_a_probe_record_reads_back_as_written():
    prober = uuid.uuid4().bytes
    value = encode_probe(prober, 7, 1234.5678)
    assert len(value) == PROBE.size and decode_probe(value) == (prober, 7, 1234.5678)
    assert decode_probe(b"\x02" + value[1:]) is None  # another format


def test_the_window_is_published_as_canary_samples_the_codec_encodes():
    probe, monotonic, _ = canary({1: 0, 2: 1, 3: 2}, {0: 1, 1: 2, 2: 3})
    for _ in range(MIN_SAMPLES):
        probe.send_round()
        monotonic.now += 0.003
        probe.producer.deliver_all()
    monotonic.now = 50.0 + 30.0  # the window began at 50 s (monotonic)
    probe.close_window()
    (events,) = probe.publisher.published
    assert [(suffix, key) for suffix, key, _ in events] == [("canary-samples", "1"), ("canary-samples", "2"),
                                                             ("canary-samples", "3")]
    for _suffix, key, record in events:
        assert decode("CanarySample", encode("CanarySample", record)) == record
        assert record["key"] == key and record["window_ms"] == 30_000
        assert record["event_time"] == 1_700_000_000_000 and uuid.UUID(record["id"])
    assert len({record["id"] for _s, _k, record in events}) == 3
    # The next window starts empty: nothing charged, nothing published.
    assert probe.close_window() == 0 and len(probe.publisher.published) == 1


def test_a_window_that_cannot_be_published_is_lost_with_one_warning_and_the_next_one_is_published(caplog):
    probe, monotonic, _ = canary({1: 0}, {0: 1})
    probe.send_round()
    probe.producer.deliver_all()
    probe.publisher.fail = KafkaTransientError("publishing 1 messages: not acknowledged", "REQUEST_TIMED_OUT")
    with caplog.at_level(logging.WARNING):
        assert probe.close_window() == 0
    assert [r.getMessage() for r in caplog.records if "not published" in r.getMessage()] != []
    probe.publisher.fail = None
    probe.send_round()
    probe.producer.deliver_all()
    assert samples_of(probe)[1]["samples"] == 1  # this window's record only


def test_a_missing_acl_stops_the_canary_with_one_line(caplog):
    probe, monotonic, _ = canary({1: 0, 2: 1}, {0: 1, 1: 2})
    probe.send_round()
    denied = KafkaPermanentError("writing: TOPIC_AUTHORIZATION_FAILED", "TOPIC_AUTHORIZATION_FAILED")
    with caplog.at_level(logging.WARNING):
        probe.producer.deliver_all(denied)  # two reports, one line
    assert probe.stopped_by is denied
    assert len([r for r in caplog.records if "the canary stops" in r.getMessage()]) == 1


# --- the keeper -----------------------------------------------------------------------------------


def test_a_missing_topic_is_created_with_the_layouts_assignment():
    admin = FakeAdmin([1, 2, 3, 4])
    probe, _, _ = canary({}, {}, admin=admin)
    assert probe.keep_layout() == 30.0
    layout = compute_canary_layout([Broker(b, RACKS[b]) for b in (1, 2, 3, 4)], {}, 3)
    ((kind, topic, assignment, configs),) = admin.calls
    assert (kind, topic) == ("create", TOPIC) and assignment == dict(layout.assignment)
    assert configs["min.insync.replicas"] == "2" and int(configs["retention.ms"]) <= 24 * 3_600_000
    assert dict(probe.led_by) == dict(layout.led_by) and probe.following == frozenset(layout.led_by.values())


def test_a_single_broker_gets_a_topic_that_acks_all_can_write():
    admin = FakeAdmin([1])
    CanaryKeeper(admin, TOPIC, 3).apply(CanaryKeeper(admin, TOPIC, 3).read())
    ((_kind, _topic, assignment, configs),) = admin.calls
    assert assignment == {0: (1,)} and configs["min.insync.replicas"] == "1"


def test_a_new_broker_gets_a_partition_added_and_nothing_else_changes():
    admin = FakeAdmin([1, 2, 3, 4], placed([1, 2, 3]))
    probe, _, _ = canary({}, {}, admin=admin)
    probe.keep_layout()
    ((kind, topic, total, new),) = admin.calls
    assert (kind, topic, total) == ("add", TOPIC, 4) and len(new) == 1 and new[0][0] == 4 and len(new[0]) == 3
    assert probe.led_by[4] == 3


def test_the_partitions_whose_follower_is_gone_are_reassigned_as_the_layout_says():
    before = placed([1, 2, 3, 4, 5])
    admin = FakeAdmin([1, 2, 3, 4, 5], before, fenced=(5,))
    actions = CanaryKeeper(admin, TOPIC, 3).read()
    layout = compute_canary_layout([Broker(b, RACKS[b]) for b in (1, 2, 3, 4)],
                                   {p.partition: p.replicas for p in before}, 3)
    assert actions.reassign and dict(actions.reassign) == dict(layout.changed)
    assert all(5 not in replicas for replicas in actions.reassign.values())
    assert 5 not in actions.led_by and not actions.elect
    CanaryKeeper(admin, TOPIC, 3).apply(actions)
    assert admin.calls == [("reassign", TOPIC, p, r) for p, r in sorted(layout.changed.items())]


def test_a_partition_led_by_another_broker_than_its_first_replica_gets_its_preferred_leader_elected():
    before = placed([1, 2, 3, 4])
    led_by_two = next(p for p in before if p.replicas[0] == 2)  # 2 restarted: a follower leads, 2 is in the ISR
    now = [partition(p.partition, p.replicas, leader=p.replicas[1]) if p is led_by_two else p for p in before]
    admin = FakeAdmin([1, 2, 3, 4], now)
    probe, _, _ = canary({}, {}, admin=admin)
    probe.keep_layout()
    assert admin.calls == [("elect", TOPIC, led_by_two.partition)]
    assert probe.led_by[2] == led_by_two.partition


def test_a_displaced_leader_is_elected_only_once_back_in_the_isr():
    placed_now = placed([1, 2, 3])
    first = placed_now[0]
    leader = first.replicas[1]
    out_of_isr = [partition(0, first.replicas, leader=leader, isr=first.replicas[1:])] + placed_now[1:]
    assert compute_canary_actions([Broker(b, RACKS[b]) for b in (1, 2, 3)], out_of_isr, 3).nothing
    back = [partition(0, first.replicas, leader=leader)] + placed_now[1:]
    assert compute_canary_actions([Broker(b, RACKS[b]) for b in (1, 2, 3)], back, 3).elect == (0,)


def test_a_partition_being_reassigned_is_left_alone_until_its_move_ends():
    placed_now = placed([1, 2, 3, 4])
    target = placed_now[0].replicas
    # Moving off broker 4 (KRaft lists the target first, then the replicas being removed).
    moving = [partition(0, target + (4,), leader=target[1], removing=(4,))] + placed_now[1:]
    actions = compute_canary_actions([Broker(b, RACKS[b]) for b in (1, 2, 3, 4)], moving, 3)
    assert 0 not in actions.reassign and 0 not in actions.elect


def test_nothing_is_done_when_everything_is_in_place():
    admin = FakeAdmin([1, 2, 3, 4], placed([1, 2, 3, 4]))
    probe, _, _ = canary({}, {}, admin=admin)
    assert probe.keep_layout() == 30.0
    assert admin.calls == [] and sorted(probe.led_by) == [1, 2, 3, 4]


def test_a_failed_check_is_retried_after_a_growing_wait_and_a_missing_acl_stops_the_canary(caplog):
    admin = FakeAdmin([1, 2, 3])
    probe, _, _ = canary({}, {}, admin=admin)
    admin.fail = KafkaTransientError("describe cluster: NO_BROKERS_AVAILABLE", "NO_BROKERS_AVAILABLE")
    with caplog.at_level(logging.WARNING):
        waits = [probe.keep_layout() for _ in range(3)]
    assert waits[0] < waits[1] < waits[2] <= 30.0 and probe.stopped_by is None
    assert len([r for r in caplog.records if "will retry in" in r.getMessage()]) == 3
    admin.fail = None
    assert probe.keep_layout() == 30.0 and admin.calls  # created now
    admin.fail = KafkaPermanentError("describe cluster: CLUSTER_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED")
    probe.keep_layout()
    assert probe.stopped_by is admin.fail


# --- the loop and its threads ---------------------------------------------------------------------


class AnsweringProducer(FakeProducer):
    """Acknowledges every record at the reports thread's next poll."""

    def poll(self, timeout):
        pending, self.sent = self.sent, []
        for record in pending:
            record["report"](None, None)
        time.sleep(min(timeout, 0.01))
        return len(pending)


def running_canary(admin, window=0.3):
    settings = load_settings(canary_interval_seconds=0.02, canary_window_seconds=window)
    probe = Canary(CanaryKeeper(admin, TOPIC, 3), FakePublisher(), AnsweringProducer(), FakeReader(), settings,
                   read_leaders=lambda: {p.partition: p.leader for p in admin.partitions or ()})
    stop = threading.Event()
    thread = threading.Thread(target=probe.run, args=(stop,), daemon=True)
    thread.start()
    return probe, stop, thread


def test_run_keeps_the_topic_probes_and_publishes_each_window_until_stopped():
    admin = FakeAdmin([1, 2, 3], placed([1, 2, 3]))
    probe, stop, thread = running_canary(admin)
    try:
        eventually(lambda: len(probe.publisher.published) >= 2, 10, 0.05, "two windows published")
    finally:
        stop.set()
        thread.join(5)
    assert not thread.is_alive()
    brokers = {record["broker_id"] for events in probe.publisher.published for _s, _k, record in events}
    assert brokers == {1, 2, 3} and admin.calls == []


def test_run_ends_by_itself_on_a_missing_acl_and_the_caller_goes_on():
    admin = FakeAdmin([1, 2, 3])
    admin.fail = KafkaPermanentError("describe cluster: CLUSTER_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED")
    probe, stop, thread = running_canary(admin)
    thread.join(5)
    assert not thread.is_alive() and not stop.is_set() and probe.stopped_by is admin.fail
