"""Throttle benchmark (issue 19 item 1): prints figures, asserts nothing.

The same partition (RF 1, ~10 MB by default) moved from broker 1 to broker 2 at the same
replication throttle, twice, on one local stack started here:

1. **Kafka's tool**: `kafka-reassign-partitions.sh --execute --throttle <rate>` (its class, from
   the jars), then `--verify` once the move is over (which removes its throttles);
2. **the product**: the handlers decide (the `decide` every pipeline batch runs) and the real
   executor applies their commands through the real commands topic
   (`reassigner.dev.harness.handlers_loop.HandlersLoop`; Spark's micro-batching left out).

Each move's duration is sampled independently of both (`MoveTimer`, every 100 ms): from the
first sample showing the partition moving to the first showing it at its target with nothing
moving. A throttle set late lets the copy start at full speed (the operator's report: ≤ 5 s for
the product against 67 s for Kafka's tool, 10 MB at 100,000 B/s). Target: the product within
20 % of Kafka's tool.

    .venv/bin/python benchmarks/bench_throttle.py [--megabytes 10] [--rate 100000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--megabytes", type=int, default=10, help="data in the moved partition")
    parser.add_argument("--rate", type=int, default=100_000, help="replication throttle, bytes per second")
    arguments = parser.parse_args()

    from reassigner.clients.kafka_admin import ClusterAdmin
    from reassigner.dev.harness.cluster_tools import create_topics, write_bulk
    from reassigner.dev.harness.handlers_loop import HandlersLoop, MoveTimer, run_kafka_reassign_tool
    from reassigner.dev.local.stack import LocalStack
    from reassigner.settings import compute_policy, load_settings

    settings = load_settings()
    work = Path(tempfile.mkdtemp(prefix="bench-throttle-"))
    stack = LocalStack(work / "stack", settings.cache_dir)
    state = stack.up(brokers=3)
    nominal = arguments.megabytes * 1_000_000 / arguments.rate
    print(f"one partition of {arguments.megabytes} MB, RF 1, moved from broker 1 to broker 2 at "
          f"{arguments.rate:,} B/s (nominal {nominal:.0f} s)", flush=True)
    admin = ClusterAdmin(state.bootstrap_servers)
    try:
        topics = {name: f"bench-throttle-{name}-{uuid.uuid4().hex[:6]}" for name in ("kafka", "product")}
        create_topics(state.bootstrap_servers, {t: 1 for t in topics.values()}, 1,
                      assignments={t: [[1]] for t in topics.values()})
        write_bulk(state.bootstrap_servers, [(t, 0) for t in topics.values()], arguments.megabytes)

        tool = topics["kafka"]
        with MoveTimer(admin, tool, 0, [2]) as timer:
            run_kafka_reassign_tool(state.bootstrap_servers, settings.cache_dir, work, {(tool, 0): [2]},
                                    ["--execute", "--throttle", str(arguments.rate)])
            kafka_seconds = timer.wait(30 * nominal + 120)
        run_kafka_reassign_tool(state.bootstrap_servers, settings.cache_dir, work, {(tool, 0): [2]}, ["--verify"])
        print(f"  Kafka's tool: {kafka_seconds:.1f} s", flush=True)

        ours = topics["product"]
        policy = compute_policy(load_settings(throttle_bytes_per_sec=arguments.rate))
        with HandlersLoop(state.bootstrap_servers, state.redis_url, policy) as loop:
            with MoveTimer(admin, ours, 0, [2]) as timer:
                started = time.monotonic()
                loop.run_until_settled([loop.reassign({(ours, 0): [2]})], timeout=30 * nominal + 120)
                product_seconds = timer.wait(max(1.0, 30 * nominal + 120 - (time.monotonic() - started)))
            steps = len(loop.commands_of("ReassignmentStep"))
        print(f"  the product: {product_seconds:.1f} s ({steps} steps)", flush=True)

        print("\n## Throttle (issue 19 item 1)")
        print("| mover | move time | nominal (size / rate) |")
        print("|---|---:|---:|")
        print(f"| Kafka's kafka-reassign-partitions.sh --throttle | {kafka_seconds:.1f} s | {nominal:.0f} s |")
        print(f"| the product (handlers → executor) | {product_seconds:.1f} s | {nominal:.0f} s |")
        ratio = product_seconds / kafka_seconds
        print(f"ratio (product / Kafka's tool): {ratio:.2f} (target 0.80-1.20: "
              f"{'met' if 0.8 <= ratio <= 1.2 else 'NOT met'})")
    finally:
        admin.close()
        stack.down()


if __name__ == "__main__":
    main()
