"""The canary on a real cluster (`reassigner.edge.canary`): it makes its topic with one partition
led by each broker, publishes per broker CanarySamples with produce and end-to-end percentiles
every window, gives a broker that joins a partition of its own, and rides out a broker that stops
(its partition left idle, the others measured on). Runs its own 3-broker stack: it adds and
stops a broker. Short interval and windows (0.1 s, 5 s: 50 records per broker per window)."""

from __future__ import annotations

import threading

import pytest

from planning.movement.canary import MIN_SAMPLES
from reassigner.edge.canary import build_canary
from runtime.clients.kafka_admin import ClusterAdmin
from runtime.clients.kafka_consumer import TopicReader
from runtime.settings import load_settings
from schemas.codec import decode, writer_version_from_headers
from schemas.errors import TransientError
from tests.waiting import eventually

pytestmark = [pytest.mark.stack, pytest.mark.slow, pytest.mark.long]  # a stack of its own: `make test-slow`

PREFIX = "canarytest"
WINDOW_SECONDS = 5.0


@pytest.fixture(scope="module")
def stack(private_stack):
    return private_stack


@pytest.fixture(scope="module")
def settings(stack):
    return load_settings(bootstrap_servers=stack[1].bootstrap_servers, topic_prefix=PREFIX,
                         canary_interval_seconds=0.1, canary_window_seconds=WINDOW_SECONDS)


@pytest.fixture(scope="module")
def admin(settings):
    with ClusterAdmin(settings.bootstrap_servers) as client:
        yield client


@pytest.fixture(scope="module")
def canary(settings, admin):
    """The canary running in its thread, as the watcher process runs it (its samples' topic made
    beforehand, as the watcher's `prepare_topics` does)."""
    admin.ensure_topics([settings.topic("canary-samples")], partitions=1)
    running = build_canary(settings, None)
    stop = threading.Event()
    thread = threading.Thread(target=running.run, args=(stop,), name="canary", daemon=True)
    thread.start()
    yield running
    stop.set()
    thread.join(30)
    running.close()
    assert not thread.is_alive(), "the canary did not end when stopped"


class Samples:
    """Every CanarySample published so far, read from the beginning of the samples' topic."""

    def __init__(self, settings) -> None:
        self.reader = TopicReader(settings.bootstrap_servers, None, "canary-test")
        self.reader.assign([(settings.topic("canary-samples"), 0, "beginning")], threading.Event())
        self.seen: list[dict] = []

    def read(self) -> list[dict]:
        while (record := self.reader.poll(0.2)) is not None:
            self.seen.append(decode("CanarySample", record.value, writer_version_from_headers(list(record.headers))))
        return self.seen

    def since(self, count: int) -> list[dict]:
        return self.read()[count:]


@pytest.fixture(scope="module")
def samples(settings, canary):
    reader = Samples(settings)
    yield reader
    reader.reader.close()


def led_partitions(admin, topic: str) -> dict[int, int] | None:
    """broker → the partition it leads whose first replica it is; None while the topic cannot be read."""
    try:
        partitions = admin.describe_topic(topic)
    except TransientError:
        return None
    if partitions is None:
        return None
    return {p.leader: p.partition for p in partitions if p.leader is not None and p.replicas[:1] == (p.leader,)}


def live_brokers(admin) -> set[int]:
    return {b.broker_id for b in admin.describe_brokers() if not b.fenced}


def measured(records: list[dict], broker: int) -> list[dict]:
    """The windows of `broker` with both percentiles known and no error."""
    return [r for r in records if r["broker_id"] == broker and r["produce_p99_ms"] is not None
            and r["end_to_end_p99_ms"] is not None and r["errors"] == 0]


def test_the_canary_topic_has_one_partition_led_by_each_broker(settings, admin, canary):
    topic = settings.topic("canary")
    brokers = live_brokers(admin)

    def each_broker_leads_one():
        led = led_partitions(admin, topic)
        return led if led is not None and set(led) == brokers else None

    led = eventually(each_broker_leads_one, 60, 0.5, f"{topic} with one partition led by each of {sorted(brokers)}")
    partitions = admin.describe_topic(topic)
    assert len(partitions) == len(brokers) and len(set(led.values())) == len(brokers)
    assert all(len(p.replicas) == 3 and len(set(p.replicas)) == 3 for p in partitions)
    assert admin.describe_topic_configs(topic, ["min.insync.replicas"]) == {"min.insync.replicas": "2"}


def test_every_broker_gets_canary_samples_with_produce_and_end_to_end_percentiles(settings, admin, samples):
    brokers = live_brokers(admin)

    def every_broker_measured():
        records = samples.read()
        return all(measured(records, b) for b in brokers)

    eventually(every_broker_measured, 2 * WINDOW_SECONDS + 60, 0.5,
               f"CanarySamples with percentiles for every broker of {sorted(brokers)}")
    led = led_partitions(admin, settings.topic("canary"))
    for broker in brokers:
        window = measured(samples.read(), broker)[-1]
        assert window["samples"] >= MIN_SAMPLES and window["partition"] == led[broker]
        assert 0 < window["produce_p50_ms"] <= window["produce_p99_ms"] < 1000 * WINDOW_SECONDS
        assert 0 < window["end_to_end_p50_ms"] <= window["end_to_end_p99_ms"] < 1000 * WINDOW_SECONDS
        # A window closes at the loop's first turn after its end: never shorter than the setting.
        assert window["window_ms"] >= 1000 * WINDOW_SECONDS - 1


def test_a_broker_that_joins_gets_a_partition_of_its_own_and_is_measured(stack, settings, admin, samples):
    topic = settings.topic("canary")
    before = len(admin.describe_topic(topic))
    joined = stack[0].add_broker().id
    start = len(samples.read())

    def joined_leads_one():
        led = led_partitions(admin, topic)
        return led is not None and joined in led

    eventually(joined_leads_one, 120, 0.5, f"a partition of {topic} led by broker {joined}")
    assert len(admin.describe_topic(topic)) == before + 1  # added, nothing taken from the others
    eventually(lambda: measured(samples.since(start), joined), 2 * WINDOW_SECONDS + 60, 0.5,
               f"CanarySamples with percentiles for broker {joined}")


def test_a_broker_that_stops_leaves_its_partition_idle_and_the_others_are_measured_on(stack, settings, admin,
                                                                                        samples):
    topic = settings.topic("canary")
    gone = max(live_brokers(admin))
    stack[0].stop_broker(gone)
    eventually(lambda: gone not in live_brokers(admin), 60, 0.5, f"broker {gone} fenced or gone")
    others = live_brokers(admin)

    def others_hold_nothing_on_it():
        led = led_partitions(admin, topic)
        if led is None or set(led) != others:
            return False
        partitions = {p.partition: p for p in admin.describe_topic(topic)}
        return all(gone not in partitions[p].replicas and not partitions[p].adding and not partitions[p].removing
                   for p in led.values())

    eventually(others_hold_nothing_on_it, 120, 0.5,
               f"the partitions led by {sorted(others)} moved off broker {gone} and led by their first replica")
    start = len(samples.read())

    def two_windows_measured_without_it():
        records = samples.since(start)
        ends = sorted({r["event_time"] for r in records})
        if len(ends) < 2:
            return False
        last_two = [r for r in records if r["event_time"] in ends[-2:]]
        return gone not in {r["broker_id"] for r in last_two} and all(
            len(measured(last_two, b)) == 2 for b in others)

    eventually(two_windows_measured_without_it, 4 * WINDOW_SECONDS + 60, 0.5,
               f"two windows measuring every broker of {sorted(others)} and none of broker {gone}")
