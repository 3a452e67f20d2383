"""An invariant monitor that samples the real cluster, independently of the product.

Every `interval` (default 250 ms) it asks Kafka (Admin API) for every partition and the ongoing
reassignments, and checks the SPEC 6 safety invariants as Kafka shows them:
- partitions with a reassignment in flight never exceed P (`max_partition_movements`);
- reassignments in flight that move leadership (the target's first replica is not the current
  leader) never exceed L;
- no partition is under min ISR while it is being reassigned with every replica on a live
  broker (under min ISR because of a step, not because of a failure);
Kafka itself shows at most one reassignment per partition, so "two steps in flight for one
partition" cannot be observed here; the product's state is checked for it instead by the
pipeline's own tests. Peaks are recorded for the summary.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field


@dataclass
class MonitorReport:
    samples: int = 0
    peak_partitions_moving: int = 0
    peak_leader_movements: int = 0
    violations: list[str] = field(default_factory=list)


class InvariantMonitor:
    def __init__(self, bootstrap_servers: str, max_partition_movements: int,
                 max_leader_movements: int, min_isr: dict[str, int], interval: float = 0.25) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.max_partition_movements = max_partition_movements
        self.max_leader_movements = max_leader_movements
        self.min_isr = min_isr
        self.interval = interval
        self.report = MonitorReport()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="invariant-monitor", daemon=True)

    def start(self) -> "InvariantMonitor":
        self._thread.start()
        return self

    def stop(self) -> MonitorReport:
        self._stop.set()
        self._thread.join(10)
        return self.report

    def _run(self) -> None:
        from kafka.admin import KafkaAdminClient

        client = None
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                if client is None:
                    client = KafkaAdminClient(bootstrap_servers=self.bootstrap_servers,
                                              request_timeout_ms=5000)
                self.sample(client)
            except Exception:  # a broker being killed by the story: sample again next time
                if client is not None:
                    client.close()
                client = None
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))
        if client is not None:
            client.close()

    def sample(self, client) -> None:
        brokers = {b["broker_id"]: b for b in client.describe_cluster()["brokers"]}
        live = {b for b, info in brokers.items() if not info.get("is_fenced")}
        moving = client.list_partition_reassignments()
        described = client.describe_topics(sorted(self.min_isr))
        by_key = {(t["name"], p["partition_index"]): p for t in described for p in t["partitions"]}
        in_flight = []
        for key, reassignment in (moving or {}).items():
            topic, partition = getattr(key, "topic", None), getattr(key, "partition", None)
            if topic is None:
                topic, partition = key
            in_flight.append(((topic, partition), reassignment))
        leader_moves = 0
        for (topic, partition), reassignment in in_flight:
            state = by_key.get((topic, partition))
            if state is None:
                continue
            replicas = list(state["replica_nodes"])
            removing = set(reassignment.get("removing_replicas", []))
            target = [b for b in replicas if b not in removing]
            if target and target[0] != state["leader_id"]:
                leader_moves += 1
            isr = state["isr_nodes"]
            if (len(isr) < self.min_isr.get(topic, 1) and set(replicas) <= live
                    and not state.get("offline_replicas")):
                self.report.violations.append(
                    f"{topic}-{partition} under min ISR ({len(isr)} < {self.min_isr[topic]}) "
                    f"while reassigning, every replica live")
        report = self.report
        report.samples += 1
        report.peak_partitions_moving = max(report.peak_partitions_moving, len(in_flight))
        report.peak_leader_movements = max(report.peak_leader_movements, leader_moves)
        if len(in_flight) > self.max_partition_movements:
            report.violations.append(f"{len(in_flight)} partitions moving > P = "
                                     f"{self.max_partition_movements}")
        if leader_moves > self.max_leader_movements:
            report.violations.append(f"{leader_moves} leader movements > L = "
                                     f"{self.max_leader_movements}")
