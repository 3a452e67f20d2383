"""Throttle benchmark (issue 19 item 1): prints figures, asserts nothing.

The same kind of partition (RF 1, 60 MB by default) moved from broker 1 to broker 2 at the same
replication throttle by two movers, on one local stack started here:

1. **Kafka's tool**: `kafka-reassign-partitions.sh --execute --throttle <rate>` (its class, from
   the jars), then `--verify` once the move is over (which removes its throttles);
2. **the product**: the handlers decide (the `decide` every pipeline batch runs) and the real
   executor applies their commands through the real commands topic
   (`reassigner.dev.harness.handlers_loop.HandlersLoop`; Spark's micro-batching left out).

Each round moves one fresh partition per mover, in alternating order (round 1: Kafka's tool
first, round 2: the product first, ...), so neither mover always runs on a warmer cluster.
Each move's duration is sampled independently of both (`MoveTimer`, every 100 ms): from the
first sample showing the partition moving to the first showing it at its target with nothing
moving. A throttle set late lets the copy start at full speed (the operator's report: ≤ 5 s for
the product against 67 s for Kafka's tool, 10 MB at 100,000 B/s). Target: the product within
20 % of Kafka's tool.

WHY 1 MB/s AND 60 MB, not the operator's 100,000 B/s and 10 MB: Kafka's replication quota is
checked before a fetch, and a fetch that is allowed returns up to `replica.fetch.max.bytes`
(1 MiB) of whole record batches (here ~0.9 MB each). At 100,000 B/s one batch is 9 s of quota,
so a 10 MB move is ~11 lumps and its duration depends on where the quota's 1 s windows fall: the
same tool took 110.4 s in one run and 66.0 s in another (the product 74.8 s and 67.2 s). At
1 MB/s a lump is ~1 s of 60, and the two movers' rounds agree within 10 %.

    .venv/bin/python benchmarks/bench_throttle.py [--megabytes 60] [--rate 1000000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--megabytes", type=int, default=60, help="data in each moved partition")
    parser.add_argument("--rate", type=int, default=1_000_000, help="replication throttle, bytes per second")
    parser.add_argument("--rounds", type=int, default=2, help="moves per mover, in alternating order")
    arguments = parser.parse_args()

    from runtime.clients.kafka_admin import ClusterAdmin
    from reassigner.dev.harness.cluster_tools import create_topics, write_bulk
    from reassigner.dev.harness.handlers_loop import HandlersLoop, MoveTimer, run_kafka_reassign_tool
    from reassigner.dev.local import adopt_machine_disk_settings
    from reassigner.dev.local.stack import LocalStack
    from runtime.settings import compute_policy, load_settings

    adopt_machine_disk_settings()  # the stack's dirs share this machine's disk

    settings = load_settings()
    work = Path(tempfile.mkdtemp(prefix="bench-throttle-"))
    stack = LocalStack(work / "stack", settings.cache_dir)
    state = stack.up(brokers=3)
    nominal = arguments.megabytes * 1_000_000 / arguments.rate
    timeout = 30 * nominal + 120
    print(f"one partition of {arguments.megabytes} MB, RF 1, moved from broker 1 to broker 2 at "
          f"{arguments.rate:,} B/s (nominal {nominal:.0f} s), {arguments.rounds} rounds", flush=True)
    admin = ClusterAdmin(state.bootstrap_servers)
    policy = compute_policy(load_settings(throttle_bytes_per_sec=arguments.rate))

    def move_with_kafkas_tool(topic: str) -> float:
        with MoveTimer(admin, topic, 0, [2]) as timer:
            run_kafka_reassign_tool(state.bootstrap_servers, stack.classpath(state), work, {(topic, 0): [2]},
                                    ["--execute", "--throttle", str(arguments.rate)])
            seconds = timer.wait(timeout)
        run_kafka_reassign_tool(state.bootstrap_servers, stack.classpath(state), work, {(topic, 0): [2]}, ["--verify"])
        return seconds

    def move_with_the_product(topic: str) -> float:
        with HandlersLoop(state.bootstrap_servers, state.redis_url, policy) as loop:
            with MoveTimer(admin, topic, 0, [2]) as timer:
                started = time.monotonic()
                loop.run_until_settled([loop.reassign({(topic, 0): [2]})], timeout=timeout)
                return timer.wait(max(1.0, timeout - (time.monotonic() - started)))

    movers = {"Kafka's tool": move_with_kafkas_tool, "the product": move_with_the_product}
    durations: dict[str, list[float]] = {name: [] for name in movers}
    try:
        for round_number in range(arguments.rounds):
            topics = {name: f"bench-throttle-{round_number}-{index}-{uuid.uuid4().hex[:6]}"
                      for index, name in enumerate(movers)}
            create_topics(state.bootstrap_servers, {t: 1 for t in topics.values()}, 1,
                          assignments={t: [[1]] for t in topics.values()})
            write_bulk(state.bootstrap_servers, [(t, 0) for t in topics.values()], arguments.megabytes)
            order = list(movers) if round_number % 2 == 0 else list(reversed(movers))
            for name in order:
                seconds = movers[name](topics[name])
                durations[name].append(seconds)
                print(f"  round {round_number + 1}, {name}: {seconds:.1f} s", flush=True)

        kafka, product = durations["Kafka's tool"], durations["the product"]
        print("\n## Throttle (issue 19 item 1)")
        print("| mover | " + " | ".join(f"round {r + 1}" for r in range(arguments.rounds)) + " | median |")
        print("|---|" + "---:|" * (arguments.rounds + 1))
        for name, label in (("Kafka's tool", "Kafka's kafka-reassign-partitions.sh --throttle"),
                            ("the product", "the product (handlers → executor)")):
            row = durations[name]
            print(f"| {label} | " + " | ".join(f"{s:.1f} s" for s in row) + f" | {statistics.median(row):.1f} s |")
        ratios = [p / k for p, k in zip(product, kafka)]
        ratio = statistics.median(product) / statistics.median(kafka)
        print(f"ratio per round (product / Kafka's tool): {', '.join(f'{r:.2f}' for r in ratios)}; "
              f"of the medians: {ratio:.2f} (target 0.80-1.20: {'met' if 0.8 <= ratio <= 1.2 else 'NOT met'})")
    finally:
        admin.close()
        stack.down()


if __name__ == "__main__":
    main()
