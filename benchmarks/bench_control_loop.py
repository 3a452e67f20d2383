"""Control-loop benchmark (issue 6): prints figures, asserts nothing.

The add-broker scenario on a real local cluster, twice, with the same data and the same
replication throttle:

1. **the product**: pipeline (Spark), watcher and executor as separate processes; a broker joins
   and the product rebalances onto it in steps, at most P partitions in flight;
2. **all at once**: a fresh identical cluster; the same final assignment (what the product ended
   with) submitted in one AlterPartitionReassignments call with the throttle set the way
   `kafka-reassign-partitions.sh --execute --throttle` sets it (the rate on every broker, leader
   throttled replicas = the current replicas, follower throttled replicas = the new ones).

A sampler independent of the product asks Kafka every 100 ms which partitions are being
reassigned and what their replica lists are. Figures:
- **idle gap**: for each step Kafka completed (its partition left the reassigning list, or its
  replica list changed without it ever reassigning: a step that only drops or reorders
  replicas), seen by the sampler, while more steps were to come, the time until the next step was submitted (the
  executor's `ReassignmentStep` result, timestamped when AlterPartitionReassignments returned);
  p50 / p99 / max. The sampler's 100 ms period bounds the error (a completion is seen up to
  100 ms late, which makes the gap look shorter by as much);
- total time, from the first submission to the last completion;
- peak partitions reassigning at once and peak extra replicas per partition (replica list length
  over the replication factor).

    .venv/bin/python benchmarks/bench_control_loop.py [--partitions 24] [--megabytes 2]
        [--throttle 2000000] [--max-partition-movements 4]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

RACKS = ("/dc1/r1", "/dc1/r2", "/dc2/r1")
NEW_BROKER_RACK = "/dc2/r2"
TOPIC = "bench"
REPLICATION_FACTOR = 3


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


@dataclass
class Sample:
    at: float
    reassigning: frozenset[int]
    replicas: dict[int, tuple[int, ...]]


@dataclass
class Sampler:
    """Kafka's own view every `period` seconds, in a thread."""
    bootstrap_servers: str
    period: float = 0.1
    samples: list[Sample] = field(default_factory=list)

    def __post_init__(self) -> None:
        from runtime.clients.kafka_admin import ClusterAdmin

        self.admin = ClusterAdmin(self.bootstrap_servers)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "Sampler":
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.time()
            moving = self.admin.list_reassignments()
            partitions, _ = self.admin.describe_partitions()
            self.samples.append(Sample(
                started, frozenset(p for t, p in moving if t == TOPIC),
                {p.partition: tuple(p.replicas) for p in partitions if p.topic == TOPIC}))
            self._stop.wait(max(0.0, self.period - (time.time() - started)))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.admin.close()

    def completions(self) -> list[float]:
        """Times at which a step was first seen complete: a partition no longer reassigning, or
        with a new replica list and not reassigning (a step that only drops or reorders replicas
        completes at once, without ever showing as reassigning)."""
        times = []
        for before, after in zip(self.samples, self.samples[1:]):
            for partition, replicas in after.replicas.items():
                if partition in after.reassigning:
                    continue
                if partition in before.reassigning or replicas != before.replicas.get(partition):
                    times.append(after.at)
        return times

    def peak_moving(self) -> int:
        return max((len(s.reassigning) for s in self.samples), default=0)

    def peak_extra_replicas(self) -> int:
        return max((len(replicas) - REPLICATION_FACTOR for s in self.samples
                    for replicas in s.replicas.values()), default=0)

    def last_completion(self) -> float:
        times = self.completions()
        return times[-1] if times else float("nan")


@dataclass
class Run:
    name: str
    seconds: float
    peak_moving: int
    peak_extra_replicas: int
    gaps: list[float] = field(default_factory=list)
    steps: int = 0
    completions_seen: int = 0


def start_cluster(work: Path, cache_dir: Path, partitions: int, megabytes: int):
    from reassigner.dev.harness.cluster_tools import create_topics, write_bulk
    from reassigner.dev.local.stack import LocalStack

    stack = LocalStack(work, cache_dir)
    state = stack.up(brokers=3, log_dirs=2, racks=RACKS)
    create_topics(state.bootstrap_servers, {TOPIC: partitions}, 2)
    write_bulk(state.bootstrap_servers, [(TOPIC, p) for p in range(partitions)], megabytes)
    return stack, state


def step_times(results) -> list[float]:
    """When the executor's AlterPartitionReassignments calls for steps returned (its results)."""
    return sorted(r["event_time"] / 1000 for r in list(results.alerts)
                  if r["command_kind"] == "ReassignmentStep" and r["ok"])


def run_product(work: Path, cache_dir: Path, arguments) -> tuple[Run, dict[int, list[int]]]:
    import redis

    from reassigner.dev.harness.product import ClusterProbe, ProductProcesses, TopicCollector
    from state.controller_store import ControllerStore

    stack, state = start_cluster(work, cache_dir, arguments.partitions, arguments.megabytes)
    environment = {
        "REASSIGNER_CLUSTER_NAME": "bench", "REASSIGNER_CACHE_DIR": str(cache_dir),
        "REASSIGNER_STACK_DIR": str(work), "REASSIGNER_CHECKPOINT_DIR": str(work / "checkpoints"),
        "PYSPARK_PYTHON": sys.executable,
        "REASSIGNER_BROKER_ADD_GRACE_SECONDS": "3",
        "REASSIGNER_MAX_PARTITION_MOVEMENTS": str(arguments.max_partition_movements),
        "REASSIGNER_MAX_LEADER_MOVEMENTS": str(arguments.max_partition_movements),
        "REASSIGNER_MAX_MOVEMENTS_PER_BROKER": str(arguments.max_partition_movements),
        "REASSIGNER_MAX_REPLICA_MOVEMENTS": "1",
        "REASSIGNER_THROTTLE_BYTES_PER_SEC": str(arguments.throttle),
        "REASSIGNER_POLL_INTERVAL_SECONDS": "1",
    }
    product = ProductProcesses(work, environment)
    product.start()
    results = TopicCollector(state.bootstrap_servers, "reassigner.command-results", "CommandResult")
    store = ControllerStore(redis.Redis.from_url(state.redis_url), "bench")
    try:
        deadline = time.monotonic() + 240
        # Its own topics count too: wait for the benchmark topic itself, or the new broker could
        # arrive with the first view, which is a start, not an addition.
        while sum(1 for tp in store.load().cluster.partitions_by_tp
                  if tp.topic == TOPIC) < arguments.partitions:
            product.check_alive()
            if time.monotonic() > deadline:
                raise TimeoutError("the pipeline did not see the cluster within 240 s")
            time.sleep(1)
        print("  product up and sees the cluster; adding broker 4", flush=True)
        sampler = Sampler(state.bootstrap_servers).start()
        stack.add_broker(rack=NEW_BROKER_RACK)
        deadline = time.monotonic() + 900
        # Done: the plan was made, nothing is left in the controller, nothing moves in Kafka.
        while True:
            product.check_alive()
            planned = bool(store.load().reassignments) or bool(step_times(results))
            if planned and not store.load().reassignments and sampler.samples \
                    and not sampler.samples[-1].reassigning:
                break
            if time.monotonic() > deadline:
                raise TimeoutError("the rebalance did not finish within 900 s")
            time.sleep(0.5)
        time.sleep(0.5)
        sampler.stop()
        submissions = step_times(results)
        completions = sampler.completions()
        gaps = []
        for completed in completions:
            following = [s for s in submissions if s >= completed]
            if following:
                gaps.append(following[0] - completed)
        final = {p: info["replicas"] for (t, p), info in ClusterProbe(state.bootstrap_servers)
                 .partitions([TOPIC]).items()}
        run = Run("the product (stepwise, P = %d)" % arguments.max_partition_movements,
                  sampler.last_completion() - submissions[0], sampler.peak_moving(),
                  sampler.peak_extra_replicas(), gaps, len(submissions), len(completions))
        return run, final
    finally:
        results.close()
        product.stop()
        stack.down()


def run_all_at_once(work: Path, cache_dir: Path, arguments, final: dict[int, list[int]]) -> Run:
    from kafka.structs import TopicPartition

    from runtime.clients.cluster_observation import FOLLOWER_THROTTLED_RATE, LEADER_THROTTLED_RATE
    from runtime.clients.kafka_admin import ClusterAdmin, group_throttled_replicas

    stack, state = start_cluster(work, cache_dir, arguments.partitions, arguments.megabytes)
    admin = ClusterAdmin(state.bootstrap_servers)
    try:
        stack.add_broker(rack=NEW_BROKER_RACK)
        partitions, _ = admin.describe_partitions()
        current = {p.partition: list(p.replicas) for p in partitions if p.topic == TOPIC}
        moving = {p: final[p] for p in current if sorted(final[p]) != sorted(current[p])
                  or final[p] != current[p]}
        rate = str(arguments.throttle)
        admin.alter_broker_configs(sorted(stack.load().brokers),
                                   {LEADER_THROTTLED_RATE: rate, FOLLOWER_THROTTLED_RATE: rate})
        admin.alter_topic_configs(group_throttled_replicas([
            {"topic": TOPIC, "partition": p, "leader_broker_ids": current[p],
             "follower_broker_ids": [b for b in final[p] if b not in current[p]]}
            for p in moving]))
        sampler = Sampler(state.bootstrap_servers).start()
        submitted = time.time()
        admin._call("reassign all at once", lambda c: c.alter_partition_reassignments(
            {TopicPartition(TOPIC, p): target for p, target in moving.items()}))
        deadline = time.monotonic() + 900
        while True:
            time.sleep(0.5)
            if sampler.samples and sampler.samples[-1].at > submitted + 0.5 \
                    and not sampler.samples[-1].reassigning:
                break
            if time.monotonic() > deadline:
                raise TimeoutError("the all-at-once reassignment did not finish within 900 s")
        sampler.stop()
        return Run("all at once (`--execute` style)", sampler.last_completion() - submitted,
                   sampler.peak_moving(), sampler.peak_extra_replicas(), [], 1)
    finally:
        admin.close()
        stack.down()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--partitions", type=int, default=24)
    parser.add_argument("--megabytes", type=int, default=2, help="data per partition")
    parser.add_argument("--throttle", type=int, default=2_000_000, help="bytes per second")
    parser.add_argument("--max-partition-movements", type=int, default=4)
    arguments = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    from runtime.settings import load_settings

    cache_dir = load_settings().cache_dir
    work = Path(tempfile.mkdtemp(prefix="bench-control-loop-"))
    print(f"add a broker to 3 brokers; topic {TOPIC}: {arguments.partitions} partitions x "
          f"{arguments.megabytes} MB, RF 3; throttle {arguments.throttle:,} B/s", flush=True)
    product, final = run_product(work / "product", cache_dir, arguments)
    print("  product run done; now the same final assignment all at once", flush=True)
    baseline = run_all_at_once(work / "baseline", cache_dir, arguments, final)

    print("\n## Control loop (issue 6)")
    gaps = product.gaps
    if gaps:
        print(f"idle gap between a step completing and the next submission, over {len(gaps)} of "
              f"{product.completions_seen} step completions seen: p50 {percentile(gaps, 0.5) * 1000:.0f} ms, p99 "
              f"{percentile(gaps, 0.99) * 1000:.0f} ms, max {max(gaps) * 1000:.0f} ms, mean "
              f"{statistics.mean(gaps) * 1000:.0f} ms (targets 1,500 / 3,000 ms)")
    print("| run | total time | steps submitted | peak partitions reassigning | peak extra replicas "
          "per partition |")
    print("|---|---:|---:|---:|---:|")
    for run in (product, baseline):
        print(f"| {run.name} | {run.seconds:.1f} s | {run.steps} | {run.peak_moving} | "
              f"{run.peak_extra_replicas} |")
    print(f"total time ratio (product / all at once): {product.seconds / baseline.seconds:.2f}")


if __name__ == "__main__":
    main()
