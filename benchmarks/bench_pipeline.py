"""Pipeline benchmark (issue 4): prints figures, asserts nothing.

On a real local Kafka (1 broker) and Redis, with the real Spark query in this process:
1. event-to-command latency: a Reassign request for one partition at a time, at a steady rate;
   time from the request reaching Kafka (its produce acknowledgement) to the step command
   reaching Kafka (the command's log-append timestamp); p50 / p99;
2. a burst of ISR events (default 100,000: 10 per partition over 10,000 partitions) produced at
   once; time from the first produce to the pipeline having applied the last of them;
3. Redis memory per partition with 100,000 partitions in the controller state;
4. the micro-batch duration, by phase (Spark, decode, decide, persist, publish).

    .venv/bin/python benchmarks/bench_pipeline.py [--samples 40] [--burst 100000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "pipeline"))

from confluent_kafka import Consumer, Producer  # noqa: E402

from harness import T0, broker_event, partition_event, request, topic_event  # noqa: E402
from schemas.codec import TOPICS, decode, encode, version_headers  # noqa: E402


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--burst", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=10_000)
    arguments = parser.parse_args()

    import redis

    from runtime.settings import compute_policy
    from reassigner.dev.local.stack import LocalStack
    from runtime.settings import load_settings
    from state.controller_store import ControllerStore
    from runtime.clients.kafka_admin import ensure_topics
    from streams.query import compute_topic_names, run_pipeline
    from streams.runner import PipelineRunner
    from streams.spark_session import build_spark_session

    work = Path(tempfile.mkdtemp(prefix="bench-pipeline-"))
    settings0 = load_settings()
    stack = LocalStack(work / "stack", settings0.cache_dir)
    state = stack.up(brokers=1, log_dirs=1)
    try:
        prefix = f"b{uuid.uuid4().hex[:6]}"
        settings = load_settings(bootstrap_servers=state.bootstrap_servers, redis_url=state.redis_url,
                                 topic_prefix=prefix, cluster_name=prefix, tick_interval_seconds=0,
                                 trigger_interval="100 milliseconds", max_partition_movements=1000,
                                 max_leader_movements=1000, max_movements_per_broker=1000)
        ensure_topics(state.bootstrap_servers, None, compute_topic_names(settings), 1, replication_factor=1)
        producer = Producer({"bootstrap.servers": state.bootstrap_servers, "acks": "all",
                             "enable.idempotence": True, "linger.ms": 5, "log_level": 0})
        policy = compute_policy(settings)
        client = redis.Redis.from_url(state.redis_url)
        runner = PipelineRunner(settings, client, producer, policy)
        spark = build_spark_session(settings0.cache_dir, master="local[2]")
        query = run_pipeline(spark, settings, runner, {}, work / "checkpoint", tick_interval_seconds=0)

        def send(suffix: str, record: dict) -> None:
            producer.produce(f"{prefix}.{suffix}", key=record["key"].encode(),
                             value=encode(TOPICS[suffix], record, validate=False),
                             headers=version_headers())

        # The first view: brokers 1-4, a topic of `partitions` partitions on brokers 1-3.
        for broker in (1, 2, 3, 4):
            send("broker-membership", broker_event(broker, "UNFENCED", T0))
        send("topic-state", topic_event("bench", arguments.partitions, T0))
        for p in range(arguments.partitions):
            send("isr-changes", partition_event("bench", p, [1, 2, 3], T0, leader=1))
        producer.flush(60)
        while len(runner.state.cluster.partitions_by_tp) < arguments.partitions:
            time.sleep(0.2)
        print(f"first view of {arguments.partitions} partitions applied")

        # 1. latency: one Reassign request at a time, steady rate (2 per second).
        consumer = Consumer({"bootstrap.servers": state.bootstrap_servers, "group.id": prefix,
                             "auto.offset.reset": "latest", "enable.auto.commit": False,
                             "log_level": 0})
        consumer.subscribe([f"{prefix}.commands"])
        consumer.poll(2)
        latencies = []
        for sample in range(arguments.samples):
            acknowledged: list[float] = []
            record = request("Reassign", {"partitions": [
                {"topic": "bench", "partition": sample, "replicas": [1, 2, 4], "log_dirs": None}],
                "additional": True}, T0 + 1000 + sample)
            producer.produce(f"{prefix}.requests", key=record["key"].encode(),
                             value=encode("Request", record), headers=version_headers(),
                             on_delivery=lambda e, m: acknowledged.append(m.timestamp()[1] / 1000))
            producer.flush(10)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                message = consumer.poll(0.05)
                if message is None or message.error() is not None:
                    continue
                command = decode("Command", message.value())
                if command["payload"][1].get("partition") == sample:
                    latencies.append(message.timestamp()[1] / 1000 - acknowledged[0])
                    break
            time.sleep(0.5)
        consumer.close()
        phases = dict(runner.stats.last_phase_seconds or {})

        # 2. burst of ISR events.
        count = arguments.burst
        per_partition = max(1, count // arguments.partitions)
        started = time.perf_counter()
        last_epoch = 100 + per_partition
        for round_ in range(per_partition):
            for p in range(min(arguments.partitions, count)):
                isr = [1, 2, 3] if round_ == per_partition - 1 else [1, 2]
                send("isr-changes", partition_event("bench", p, [1, 2, 3], T0 + 5000 + round_,
                                                    isr=isr, leader=1, epoch=101 + round_))
            producer.poll(0)
        producer.flush(120)
        produced = time.perf_counter() - started
        from planning.model import TopicPartition

        last = TopicPartition("bench", arguments.partitions - 1)
        while True:
            partition = runner.state.cluster.partition(last)
            if partition is not None and partition.leader_epoch >= last_epoch:
                break
            time.sleep(0.05)
        drained = time.perf_counter() - started
        query.stop()

        # 3. Redis memory per partition (100,000 partitions).
        from state.model import ControllerState
        from planning.model import Broker, Cluster, LogDir, PartitionState, Topic

        brokers = tuple(Broker(i, f"/dc{i % 3}/r{i % 4}", True, False,
                               (LogDir(f"/var/lib/kafka/broker-{i}/data-0"),
                                LogDir(f"/var/lib/kafka/broker-{i}/data-1"))) for i in range(1, 31))
        topics = []
        for t in range(100):
            topics.append(Topic(f"topic-{t}", tuple(
                PartitionState(f"topic-{t}", p, (1 + p % 30, 1 + (p + 1) % 30, 1 + (p + 2) % 30),
                               (1 + p % 30, 1 + (p + 1) % 30, 1 + (p + 2) % 30), 1 + p % 30,
                               123_456_789, (f"/var/lib/kafka/broker-{1 + p % 30}/data-0",
                                             f"/var/lib/kafka/broker-{1 + (p + 1) % 30}/data-1",
                                             f"/var/lib/kafka/broker-{1 + (p + 2) % 30}/data-0"),
                               leader_epoch=17)
                for p in range(1000)), 2))
        store = ControllerStore(client, f"memory-{prefix}")
        before = client.info("memory")["used_memory"]
        store.commit(0, ControllerState(), ControllerState(cluster=Cluster(brokers, tuple(topics))), [])
        after = client.info("memory")["used_memory"]
        per_key = client.memory_usage(store.keys["partitions"]) / 100_000
    finally:
        stack.down()

    print("\n## Pipeline (issue 4)")
    print(f"event-to-command latency over {len(latencies)} requests: "
          f"p50 {percentile(latencies, 0.5) * 1000:.0f} ms, p99 {percentile(latencies, 0.99) * 1000:.0f} ms, "
          f"mean {statistics.mean(latencies) * 1000:.0f} ms (targets 400 / 1500 ms)")
    print(f"burst of {per_partition * arguments.partitions:,} ISR events over {arguments.partitions:,} "
          f"partitions: produced in {produced:.1f} s, all applied {drained:.1f} s after the first "
          f"(target 20 s)")
    print(f"Redis memory per partition at 100,000 partitions: {per_key:.0f} bytes (hash), "
          f"{(after - before) / 100_000:.0f} bytes (used_memory delta) (target 300)")
    print("micro-batch phases of the last latency sample: "
          + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in phases.items()))


if __name__ == "__main__":
    main()
