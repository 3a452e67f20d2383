"""The cluster side of a pipeline test, played by the in-process simulated cluster.

It stands where the executor, Kafka and the watcher stand: it reads the commands the pipeline
publishes, applies each command id once (as the executor does) to `planning.simulation.simulator`'s
`SimulatedCluster`, advances simulated time, and publishes what changed as PartitionState
events (as the watcher does), with event times from the simulated clock. So a real pipeline
process can be run, killed and restarted against a deterministic "cluster".
"""

from __future__ import annotations

import uuid

from harness import T0, Harness, partition_event
from planning.model import Cluster, TopicPartition
from planning.simulation.simulator import SimulatedCluster, SimulationParams
from schemas.codec import TOPICS, decode


class SimulatedKafka:
    def __init__(self, harness: Harness, cluster: Cluster, bytes_per_sec: int = 10_000) -> None:
        self.harness = harness
        self.sim = SimulatedCluster(cluster, SimulationParams(bytes_per_sec=bytes_per_sec))
        self.now_ms = T0
        self.applied: set[str] = set()
        self.commands: list[dict] = []  # every command read, duplicates included
        self.published = {p.tp: p for p in cluster.partitions()}
        self._consumer = harness._consumer("commands")

    def publish_all(self) -> None:
        for partition in self.sim.snapshot().partitions():
            self._publish(partition)

    def _publish(self, partition) -> None:
        self.harness.send("isr-changes", partition_event(
            partition.topic, partition.partition, list(partition.replicas), self.now_ms,
            isr=list(partition.isr), leader=partition.leader,
            epoch=partition.leader_epoch if partition.leader_epoch >= 0 else 0,
            adding=list(partition.adding), removing=list(partition.removing),
            size_bytes=partition.size_bytes or 0))
        self.published[partition.tp] = partition

    def pump(self, seconds: float = 1.0) -> int:
        """Apply new commands, advance the clock, publish changes; returns commands applied."""
        applied = 0
        for message in self._consumer.consume(500, 0.5):
            if message.error() is not None:
                continue
            command = decode(TOPICS["commands"], message.value())
            self.commands.append(command)
            if command["id"] in self.applied:
                continue
            self.applied.add(command["id"])
            kind, fields = command["payload"]
            tp = TopicPartition(fields.get("topic", ""), fields.get("partition", -1))
            if kind == "ReassignmentStep":
                self.sim.submit_step(tp, fields["target_replicas"])
            elif kind == "CancelReassignment":
                self.sim.cancel(tp)
            elif kind == "ElectLeader":
                self.sim.elect_preferred_leader(tp)
            applied += 1
        self.sim.tick(seconds)
        self.now_ms += int(seconds * 1000)
        for partition in self.sim.snapshot().partitions():
            if self.published.get(partition.tp) != partition:
                self._publish(partition)
        return applied

    def tick_request(self) -> None:
        """Move the pipeline's time forward even when nothing changes."""
        self.harness.send("requests", {
            "schema_version": 1, "event_time": self.now_ms, "id": f"tick-{uuid.uuid4()}",
            "key": "tick", "requested_by": "tests", "payload": ("Tick", {})})
