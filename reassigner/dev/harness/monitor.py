"""An invariant monitor that samples the real cluster, independently of the product.

Every `interval` (default 250 ms) it asks Kafka (Admin API) for every partition of every topic
and the ongoing reassignments, turns each reassignment into a `PartitionSample`, and judges
them with the one checker of the safety invariants, `planning.simulation.invariants`
(which holds the rules, docs/design.md "Safety invariants"; this module reads Kafka and keeps
the series). From outside, Kafka shows
rules 1a-b (partitions moving <= P, reassignments moving leadership <= L: the target's first
replica is not the leader), 2c (no partition under min ISR while reassigning with every replica
on a live broker) and 4c (no second step on a moving partition: Kafka keeps one reassignment per
partition, so a second step shows as its target changing without the reassignment ending in
between). Rule 4c is judged on two consecutive samples less than `OVERLAP_WINDOW` apart only:
further apart, the first step may have completed and the next started between them (the
product's loop — watcher poll, micro-batch, executor — takes about a second).
Peaks are recorded for the summary, and every sample's steps in flight are kept (`series`) so
that a test can check a limit changed at run time against what Kafka showed after the change.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace

from planning.model import TopicPartition
from runtime.clients.client_config import ClientConfig
from reassigner.dev.local.kafka_admin import PLAINTEXT
from planning.simulation.invariants import (
    InvariantLimits,
    PartitionSample,
    check_limits,
    check_min_isr_while_reassigning,
    check_targets_unchanged,
    count_in_flight,
    moving_shown_by_kafka,
)

OVERLAP_WINDOW = 0.4  # seconds; see the module docstring

Key = tuple[str, int]


@dataclass
class MonitorReport:
    samples: int = 0
    peak_partitions_moving: int = 0
    peak_leader_movements: int = 0
    violations: list[str] = field(default_factory=list)
    overlap_checks: int = 0  # consecutive-sample pairs judged for "two steps in one partition"
    failed_samples: int = 0  # samples Kafka did not answer (a broker being killed, say)
    last_error: str = ""
    longest_gap_seconds: float = 0.0  # longest time without a successful sample


@dataclass(frozen=True)
class Sample:
    """What Kafka showed at `at` (wall clock, seconds): each moving partition's step target."""

    at: float
    moving: dict[Key, frozenset[int]]
    leader_moves: int = 0  # of those, the ones whose target's first replica is not the leader


class InvariantMonitor:
    def __init__(self, bootstrap_servers: str, max_partition_movements: int,
                 max_leader_movements: int, min_isr: dict[str, int], interval: float = 0.25,
                 client: ClientConfig = PLAINTEXT) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.client = client
        self.max_partition_movements = max_partition_movements
        self.max_leader_movements = max_leader_movements
        self.min_isr = dict(min_isr)  # topics not named here count with min ISR 1
        self.interval = interval
        self.report = MonitorReport()
        self.series: list[Sample] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="invariant-monitor", daemon=True)

    def start(self) -> "InvariantMonitor":
        self._thread.start()
        return self

    def stop(self) -> MonitorReport:
        self._stop.set()
        self._thread.join(10)
        return self.report

    def watch_topic(self, topic: str, min_insync_replicas: int) -> None:
        """Check a topic created after the start against its own min ISR."""
        with self._lock:
            self.min_isr[topic] = min_insync_replicas

    def samples_since(self, wall_time: float) -> list[Sample]:
        with self._lock:
            return [s for s in self.series if s.at >= wall_time]

    def peaks_since(self, wall_time: float) -> tuple[int, int]:
        """(partitions moving, leader movements): the most Kafka showed at once since `wall_time`."""
        samples = self.samples_since(wall_time)
        return (max((len(s.moving) for s in samples), default=0),
                max((s.leader_moves for s in samples), default=0))

    def latest(self) -> Sample | None:
        with self._lock:
            return self.series[-1] if self.series else None

    def _run(self) -> None:
        from runtime.clients.kafka_fast_reads import open_admin_client

        client = None
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                if client is None:
                    client = open_admin_client(bootstrap_servers=self.bootstrap_servers,
                                               request_timeout_ms=5000, **self.client.kafka_python)
                self.sample(client)
            except Exception as error:  # a broker being killed by the story: sample again next time
                self.report.failed_samples += 1
                self.report.last_error = f"{time.strftime('%H:%M:%S')} {error!r}"[:300]
                if client is not None:
                    client.close()
                client = None
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))
        if client is not None:
            client.close()

    def sample(self, client) -> None:
        """One sample: what Kafka shows, judged by `planning.simulation.invariants`."""
        at = time.time()
        brokers = {b["broker_id"]: b for b in client.describe_cluster()["brokers"]}
        live = {b for b, info in brokers.items() if not info.get("is_fenced")}
        moving = client.list_partition_reassignments()
        described = client.describe_topics()
        by_key = {(t["name"], p["partition_index"]): p for t in described for p in t["partitions"]}
        with self._lock:
            min_isr = dict(self.min_isr)
        samples = tuple(partition_sample(key, reassignment, by_key, live, min_isr)
                        for key, reassignment in (moving or {}).items())
        in_flight: dict[Key, frozenset[int]] = {(s.tp.topic, s.tp.partition): frozenset(s.target) for s in samples}
        counts = count_in_flight(moving_shown_by_kafka(samples))
        violations = list(check_min_isr_while_reassigning(samples))
        report = self.report
        with self._lock:
            previous = self.series[-1] if self.series else None
            self.series.append(Sample(at, in_flight, counts.leader_movements))
        if previous is not None:
            report.longest_gap_seconds = max(report.longest_gap_seconds, at - previous.at)
        if previous is not None and at - previous.at <= OVERLAP_WINDOW:
            report.overlap_checks += 1
            violations += check_targets_unchanged(_by_tp(previous.moving), _by_tp(in_flight))
        report.samples += 1
        report.peak_partitions_moving = max(report.peak_partitions_moving, counts.partitions)
        report.peak_leader_movements = max(report.peak_leader_movements, counts.leader_movements)
        violations += check_limits(counts, InvariantLimits(self.max_partition_movements, self.max_leader_movements))
        report.violations.extend(f"{time.strftime('%H:%M:%S', time.localtime(at))} {v}" for v in violations)


def partition_sample(key, reassignment: dict, by_key: dict[Key, dict], live: set[int],
                     min_isr: dict[str, int]) -> PartitionSample:
    """One reassignment in progress as kafka-python answers it, with the partition's metadata
    (`describe_topics`) when it has it. The replicas come from the same answer as the
    reassignment: the topic metadata may lag behind it by a moment. Replicas on fenced brokers
    count as offline."""
    topic, partition = getattr(key, "topic", None), getattr(key, "partition", None)
    if topic is None:
        topic, partition = key
    state = by_key.get((topic, partition))
    replicas = tuple(reassignment.get("replicas") or (state["replica_nodes"] if state else []))
    moving = PartitionSample(TopicPartition(topic, partition), replicas,
                             adding=tuple(reassignment.get("adding_replicas") or ()),
                             removing=tuple(reassignment.get("removing_replicas") or ()),
                             min_isr=min_isr.get(topic, 1), reassigning=True, described=False)
    if state is None:
        return moving
    leader = state["leader_id"]  # -1 when the partition has none
    offline = [b for b in state["replica_nodes"] if b not in live] + list(state.get("offline_replicas") or ())
    return replace(moving, isr=tuple(state["isr_nodes"]), leader=leader if leader is not None and leader >= 0 else None,
                   offline=tuple(dict.fromkeys(offline)), described=True)


def _by_tp(moving: dict[Key, frozenset[int]]) -> dict[TopicPartition, frozenset[int]]:
    return {TopicPartition(topic, partition): target for (topic, partition), target in moving.items()}
