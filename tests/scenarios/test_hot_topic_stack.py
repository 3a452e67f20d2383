"""A hot topic on a real cluster in `balance.mode=bytes`: the rates the product measures with no
agent on the brokers (end offsets, `reassigner.edge.traffic`) decide where its replicas go, and
Kafka shows the result.

One world for the module (brokers 1-3 in racks /dc1/r1, /dc1/r2, /dc2/r1;
`reassigner.dev.harness.world.World`, its demo topics and their sequenced traffic) and three
topics of its own, RF 2 (one replica per DC), all placed on brokers 1 and 3 on purpose:
- `hot`: 4 partitions, written at HOT_RATE each for as long as the module runs (1 KB records);
- `large`: 2 partitions of 12 MB; `small`: 6 partitions of 1 MB (sizes four times apart and more),
  written before the product starts (`Stage.setup(prepare)`): data it finds, not a burst of
  traffic its five-minute mean of bytes in would still carry when the plan is made.

Once the pipeline has measured `hot`'s rate and evened its brokers' dirs, broker 4 joins in /dc2/r2
(`balance.mode=bytes` is the default; the plan's alert must say so). After the plan has run:
- **bytes in as Kafka shows it**: over a window, each partition's end-offset advance × its mean
  record size (describe-log-dirs size / records held), summed over each broker's replicas, puts
  every broker within BAND of the brokers' mean (the plan's ±10 % tolerance on its five-minute
  mean, plus what the demo traffic's jitter and the product's own topics add); a plan of bytes
  that ignored traffic could leave two of `hot`'s replicas on broker 1 and none on broker 2;
- **disk as Kafka shows it**: every broker's bytes of the three topics within BAND of the mean;
- **bytes moved**: what the plan reported equals the sizes, at the plan's time, of the replicas
  that are on a broker now and were not before (the hot replicas grow while they copy, so the
  sizes are read when the plan is made, not after).
"""

from __future__ import annotations

import json
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from rich.console import Console

from planning.model import TopicPartition
from planning.snapshot import cluster_to_json
from reassigner.dev.harness import world as harness
from reassigner.dev.harness.cluster_tools import create_topics, write_bulk
from reassigner.dev.harness.world import MIN_INSYNC_REPLICAS
from reassigner.dev.local.kafka_admin import client_settings
from tests.waiting import PATIENCE

pytestmark = [pytest.mark.stack, pytest.mark.spark, pytest.mark.slow, pytest.mark.scenario]

HOT, LARGE, SMALL = "hot", "large", "small"
ASSIGNMENTS = {HOT: [[1, 3]] * 4, LARGE: [[1, 3]] * 2, SMALL: [[1, 3]] * 6}
OURS = tuple(ASSIGNMENTS)
HOT_RATE = 10_000  # bytes a second into each partition of `hot`
RECORD = 1000
BAND = 0.2
MB = 10**6


class SteadyLoad:
    """Writes RECORD-byte records to each partition of `topic` at `rate` bytes a second."""

    def __init__(self, bootstrap: str, client, topic: str, partitions: int, rate: int) -> None:
        self.topic, self.partitions, self.rate = topic, partitions, rate
        self.producer = Producer(client_settings(bootstrap, client, acks="all", **{"linger.ms": 50}))
        self.stop = threading.Event()
        self.errors: list[str] = []
        self.thread = threading.Thread(target=self._run, name="hot-load", daemon=True)

    def _run(self) -> None:
        value, per_tick = b"h" * RECORD, max(1, self.rate // RECORD // 10)  # ten ticks a second
        started, ticks = time.monotonic(), 0
        while not self.stop.is_set():
            for partition in range(self.partitions):
                for _ in range(per_tick):
                    try:
                        self.producer.produce(self.topic, value=value, partition=partition,
                                              on_delivery=self._delivered)
                    except BufferError:
                        self.producer.poll(0.1)
            self.producer.poll(0)
            ticks += 1
            self.stop.wait(max(0.0, started + ticks / 10 - time.monotonic()))
        self.producer.flush(30)

    def _delivered(self, error, _message) -> None:
        if error is not None and len(self.errors) < 10:
            self.errors.append(str(error))

    def start(self) -> "SteadyLoad":
        self.thread.start()
        return self

    def close(self) -> None:
        self.stop.set()
        self.thread.join(60)


@pytest.fixture(scope="module")
def world(tmp_path_factory, cache_dir):
    directory = tmp_path_factory.mktemp("hot-topic")
    with open(directory / "story.txt", "w") as story:
        demo = harness.World(directory / "stack", cache_dir, patience=PATIENCE, console=Console(file=story, width=120))
        load = None

        def prepare():  # before the product starts: the bulk data is found, not measured as traffic
            nonlocal load
            create_topics(demo.bootstrap, {t: len(a) for t, a in ASSIGNMENTS.items()}, MIN_INSYNC_REPLICAS,
                          assignments=ASSIGNMENTS, client=demo.client)
            write_bulk(demo.bootstrap, [(LARGE, p) for p in range(2)], 12, client=demo.client)
            write_bulk(demo.bootstrap, [(SMALL, p) for p in range(6)], 1, client=demo.client)
            load = SteadyLoad(demo.bootstrap, demo.client, HOT, 4, HOT_RATE).start()

        try:
            demo.setup(prepare)
            demo.wait("the pipeline has measured the hot topic's rate", lambda: all(
                (p := demo.controller_state().cluster.partition(TopicPartition(HOT, n))) is not None
                and (p.bytes_in_per_sec or 0) >= 0.7 * HOT_RATE for n in range(4)), 240)
            yield demo, load
        finally:
            if load is not None:
                load.close()
            demo.keep_logs(directory / "logs")
            demo.teardown()


def replica_sizes(demo, broker_ids) -> dict[tuple[str, int, int], int]:
    """(topic, partition, broker) → the replica's size, every topic but the product's own."""
    return {(topic, partition, b): size for b in broker_ids for d in demo.probe.log_dirs(b).values()
            for (topic, partition), size in d["replicas"].items() if not topic.startswith("reassigner.")}


def observed_bytes_in(demo, broker_ids, window: float = 30.0) -> tuple[dict[int, float], dict[tuple[str, int], float]]:
    """Per broker, the bytes a second written to its replicas as Kafka shows them over `window`
    seconds (every topic's partitions: end-offset advance × size / records held), and per partition."""
    partitions = demo.probe.partitions()
    consumer = Consumer(client_settings(demo.bootstrap, demo.client, **{"group.id": "hot-topic-probe"}))
    try:
        def ends():
            return {key: consumer.get_watermark_offsets(KafkaTopicPartition(*key), timeout=15)
                    for key in partitions}
        first, started = ends(), time.monotonic()
        time.sleep(window)  # the measurement's window itself, not a wait for a condition
        last, elapsed = ends(), time.monotonic() - started
    finally:
        consumer.close()
    sizes = {}
    for b in broker_ids:
        for d in demo.probe.log_dirs(b).values():
            for key, size in d["replicas"].items():
                sizes[key] = max(size, sizes.get(key, 0))
    rates = {}
    for key, (low, high) in last.items():
        held = high - low
        rates[key] = (high - first[key][1]) * (sizes.get(key, 0) / held if held > 0 else 0.0) / elapsed
    per_broker = {b: 0.0 for b in broker_ids}
    for key, info in partitions.items():
        for b in info["replicas"]:
            if b in per_broker:
                per_broker[b] += rates[key]
    return per_broker, rates


def spread(values: dict[int, float]) -> str:
    mean = sum(values.values()) / len(values)
    return ", ".join(f"{b}: {v / 1000:.1f} KB ({v / mean:.2f}x)" for b, v in sorted(values.items()))


def test_a_broker_added_in_bytes_mode_takes_its_share_of_a_hot_topics_traffic(world):
    demo, load = world
    before, _ = observed_bytes_in(demo, (1, 2, 3), window=15)
    demo.say(f"  bytes in before: {spread(before)}")
    # The product first evens the dirs of brokers 1 and 3 (the data went into them before it
    # started): the broker joins once those moves are over, so that its plan is the test's.
    demo.wait("the log-dir balance's moves over", lambda: not any(
        d["futures"] for b in (1, 2, 3) for d in demo.probe.log_dirs(b).values()), 300)
    held_before = set(replica_sizes(demo, (1, 2, 3)))
    since = demo.alerts.mark()
    added = demo.stack.add_broker(rack="/dc2/r2")
    brokers = (1, 2, 3, added.id)
    plan = demo.alerts.wait_for("PlanCreated", since, 180)
    at_plan = replica_sizes(demo, (1, 2, 3))
    seen = demo.controller_state().cluster  # what the plan was made on, near enough
    (demo.stack_dir.parent / "planned-on.json").write_text(json.dumps(cluster_to_json(seen)))
    details = plan["details"]
    demo.say(f"  plan: {plan['message']}; {details}")
    assert details.get("balance_mode") == "bytes", plan
    demo.wait("the plan ran (every partition in sync, nothing moving)", lambda: demo.settled(since), 300)
    assert not load.errors, load.errors

    rates, per_partition = observed_bytes_in(demo, brokers)
    mean = sum(rates.values()) / len(rates)
    placed = demo.probe.partitions(list(OURS))
    hot = {b: sum(1 for (t, _), i in placed.items() if t == HOT and b in i["replicas"]) for b in brokers}
    demo.say(f"  bytes in after: {spread(rates)}; hot replicas per broker {hot}")
    assert all(abs(v - mean) <= BAND * mean for v in rates.values()), (
        f"bytes in after {spread(rates)}; hot replicas {hot}; plans {demo.alerts.of_kind('PlanCreated', since)}")

    held = {b: sum(size for (t, _, broker), size in replica_sizes(demo, brokers).items()
                   if broker == b and t in OURS) for b in brokers}
    disk_mean = sum(held.values()) / len(held)
    demo.say(f"  disk after (the module's topics): {spread(held)}")
    assert all(abs(v - disk_mean) <= BAND * disk_mean for v in held.values()), (held, details)

    # What Kafka copied: the replicas on a broker now that were not there before the plan, at the
    # sizes their partitions had when it was made (the largest replica then: a copy under way is smaller).
    now = replica_sizes(demo, brokers)
    size_at_plan = {}
    for (topic, partition, _), size in at_plan.items():
        size_at_plan[(topic, partition)] = max(size, size_at_plan.get((topic, partition), 0))
    copied = sum(size_at_plan.get((t, p), 0) for (t, p, b) in now if (t, p, b) not in held_before)
    reported = int(details["bytes_moved"])
    assert abs(copied - reported) <= 0.05 * reported + MB, (copied, reported, details)
    demo.product.check_alive()
