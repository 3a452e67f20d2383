"""What verifying the store costs a commit (`state.controller_store`, VERIFIED): prints figures,
asserts nothing.

The same small batch (one partition's ISR changed, as a Tick or an ISR event commits) is
committed `--batches` times against a real Redis, once by a store object that took the store over
(its commit script also checks the incarnation token and the batch before) and once by one that
did not (the checks skipped), on a state of `--partitions` partitions. Printed: the median wall
time of one commit call from this process (Redis round trip and script included) for each, and
their ratio.

    python benchmarks/bench_commit_verified.py --redis-url redis://127.0.0.1:6379/0
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planning.model import Broker, Cluster, LogDir, PartitionState, Topic  # noqa: E402
from state.controller_store import ControllerStore  # noqa: E402
from state.model import ControllerState  # noqa: E402


def state_of(partitions: int) -> ControllerState:
    brokers = tuple(Broker(i, f"/dc{i % 3}/r{i % 2}", True, False, (LogDir(f"/data/b{i}/d0"),)) for i in range(30))
    topics = tuple(
        Topic(f"t{t}", tuple(PartitionState(f"t{t}", p, (p % 30, (p + 1) % 30, (p + 2) % 30),
                                            (p % 30, (p + 1) % 30, (p + 2) % 30), p % 30, 1000)
                             for p in range(1000)), 2)
        for t in range(max(1, partitions // 1000)))
    return ControllerState(cluster=Cluster(brokers, topics))


def commit_times(client, base: ControllerState, batches: int, verified: bool) -> list[float]:
    """Seconds of each of `batches` commits, each changing the ISR of one partition, on a store
    of its own (taken over first when `verified`); the store is removed after."""
    store = ControllerStore(client, f"bench-commit-{uuid.uuid4().hex[:8]}")
    epoch = store.take_over() if verified else 0
    try:
        state = base.with_changes(epoch=epoch, last_batch=0)
        store.commit(0, ControllerState(), state, [])  # the whole view first, as a first batch does
        times = []
        topic = state.cluster.topics[0]
        for batch in range(1, batches + 1):
            partition = topic.partitions[batch % len(topic.partitions)]
            changed = replace(partition, isr=partition.isr[:2] if batch % 2 else partition.replicas)
            after = state.with_cluster(state.cluster.with_partitions([changed])).with_changes(last_batch=batch)
            started = time.perf_counter()
            assert store.commit(batch, state, after, [])  # every commit writes (no replay)
            times.append(time.perf_counter() - started)
            state = after
        return times
    finally:
        client.delete(*client.keys(f"reassigner:{{{store.cluster_name}}}:*"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--partitions", type=int, default=300_000)
    parser.add_argument("--batches", type=int, default=500)
    arguments = parser.parse_args()
    import redis

    client = redis.Redis.from_url(arguments.redis_url)
    base = state_of(arguments.partitions)
    results = {}
    for name, verified in (("unverified", False), ("verified", True), ("unverified again", False)):
        results[name] = statistics.median(commit_times(client, base, arguments.batches, verified)) * 1000
        print(f"{name:>17}: median commit {results[name]:.3f} ms ({arguments.batches} commits, "
              f"{arguments.partitions:,} partitions)")
    baseline = (results["unverified"] + results["unverified again"]) / 2
    print(f"verified / unverified: {results['verified'] / baseline:.2f}")


if __name__ == "__main__":
    main()
