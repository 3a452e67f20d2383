"""Driver throughput on a large simulated cluster: decisions/s and steps/s of `run_plan`.

Run: .venv/bin/python benchmarks/bench_simulator.py [brokers] [partitions]
"""

from __future__ import annotations

import sys
import time

from planning.movement.batches import Limits
from planning.model import Broker, Cluster, LogDir, PartitionState, Topic
from planning.simulation.simulator import SimulationParams, run_plan
from runtime.settings import load_settings


def build(brokers: int, partitions: int, rf: int = 3) -> tuple[Cluster, dict]:
    old = brokers - brokers // 5  # the last fifth are new, empty brokers
    bs = tuple(Broker(b, rack=f"r{b % 4}", log_dirs=(LogDir("/d1"), LogDir("/d2"))) for b in range(brokers))
    topics, targets = [], {}
    per_topic = 100
    for t in range(partitions // per_topic):
        parts = []
        for n in range(per_topic):
            i = t * per_topic + n
            replicas = tuple((i + k) % old for k in range(rf))
            parts.append(PartitionState(f"t{t}", n, replicas, replicas, replicas[0], size_bytes=10**8 + (i % 7) * 10**7,
                                        log_dirs=("/d1",) * rf))
            if i % 3 == 0:  # move one replica in three partitions onto a new broker
                new = old + i % (brokers - old)
                targets[parts[-1].tp] = (new,) + replicas[1:] if i % 2 else replicas[:-1] + (new,)
        topics.append(Topic(f"t{t}", tuple(parts), 2))
    return Cluster(bs, tuple(topics)), targets


def main() -> None:
    brokers = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    partitions = int(sys.argv[2]) if len(sys.argv) > 2 else 20_000
    cluster, targets = build(brokers, partitions)
    limits = Limits(max_partition_movements=200, max_leader_movements=100, max_replica_movements=2,
                    max_movements_per_broker=5)
    params = SimulationParams(bytes_per_sec=100 * 1024 * 1024, tick_seconds=5.0)
    start = time.perf_counter()
    report = run_plan(cluster, targets, limits, params, stall_timeout=load_settings().step_stall_timeout_seconds)
    elapsed = time.perf_counter() - start
    print(f"brokers={brokers} partitions={partitions} replicas={partitions * 3} moving={len(targets)}")
    print(f"steps={report.steps} decisions={report.decisions} computed={report.decisions_computed} "
          f"finished={report.finished} "
          f"makespan={report.makespan_seconds:.0f}s violations={len(report.invariant_violations)}")
    print(f"peaks: P={report.peak_partition_movements} L={report.peak_leader_movements} "
          f"B={report.peak_movements_per_broker} replicas/partition={report.peak_replicas_per_partition}")
    print(f"wall={elapsed:.1f}s steps/s={report.steps / elapsed:.0f} decisions/s={report.decisions / elapsed:.1f}")


if __name__ == "__main__":
    main()
