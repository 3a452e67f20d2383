"""Records and loops for the handler tests: events as the watcher writes them, requests as the
CLI writes them, and a driver that runs `decide` against `planning.simulation.simulator.SimulatedCluster`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from handlers.micro_batch import BatchInputs, Decision
from handlers.decide import decide
from handlers.policy import Policy, effective_limits
from state.model import ControllerState, OutboundMessage
from planning.model import Broker, Cluster, LogDir, PartitionState, Topic, TopicPartition
from planning.movement.batches import PlannedStep
from planning.movement.partition_steps import Step
from planning.simulation.invariants import (
    InvariantLimits,
    check_limits,
    check_started,
    count_in_flight,
    moving_of_steps,
    steps_in_flight,
)
from planning.simulation.simulator import SimulatedCluster, SimulationParams
from schemas import command_kind
from schemas.codec import decode, encode

T0 = 1_800_000_000_000


def envelope(key: str, at_ms: int, message_id: str | None = None) -> dict[str, Any]:
    return {"schema_version": 1, "event_time": at_ms, "id": message_id or f"m-{key}-{at_ms}", "key": key}


def broker_event(broker: Broker, at_ms: int, state: str | None = None) -> tuple[str, dict]:
    state = state or ("UNFENCED" if broker.alive else "FENCED")
    return ("BrokerMembership", {
        **envelope(str(broker.id), at_ms), "snapshot_id": None, "broker_id": broker.id,
        "rack": broker.rack, "host": "127.0.0.1", "port": 9000 + broker.id, "state": state,
        "log_dirs": [d.path for d in broker.log_dirs]})


def topic_event(topic: Topic, at_ms: int, deleted: bool = False) -> tuple[str, dict]:
    return ("TopicState", {
        **envelope(topic.name, at_ms), "snapshot_id": None, "topic": topic.name, "topic_id": topic.topic_id,
        "deleted": deleted, "partition_count": len(topic.partitions),
        "replication_factor": topic.replication_factor, "min_insync_replicas": topic.min_insync_replicas})


def log_dir_event(broker_id: int, d: LogDir, at_ms: int) -> tuple[str, dict]:
    return ("LogDirState", {
        **envelope(str(broker_id), at_ms), "snapshot_id": None, "broker_id": broker_id, "path": d.path,
        "online": d.online, "error": None if d.online else "KAFKA_STORAGE_ERROR",
        "total_bytes": d.total_bytes, "usable_bytes": d.usable_bytes, "replicas": []})


def partition_event(p: PartitionState, at_ms: int) -> tuple[str, dict]:
    return ("PartitionState", {
        **envelope(f"{p.topic}-{p.partition}", at_ms), "snapshot_id": None, "topic": p.topic,
        "partition": p.partition, "replicas": list(p.replicas), "isr": list(p.isr), "leader": p.leader,
        "leader_epoch": p.leader_epoch, "adding": list(p.adding), "removing": list(p.removing),
        "offline_replicas": list(p.offline_replicas), "size_bytes": p.size_bytes,
        "log_dirs": list(p.log_dirs), "eligible_leader_replicas": list(p.eligible_leaders),
        "last_known_elr": list(p.last_known_elr)})


def traffic_event(p: PartitionState, at_ms: int, bytes_in: float | None, bytes_out: float | None,
                  window_ms: int = 60_000) -> tuple[str, dict]:
    """A snapshot's PartitionState of `p` carrying one traffic sample over `window_ms`."""
    schema, record = partition_event(p, at_ms)
    return schema, {**record, "snapshot_id": "snap-traffic", "bytes_in_per_sec": bytes_in,
                    "bytes_out_per_sec": bytes_out, "traffic_window_ms": window_ms}


def snapshot_end(cluster: Cluster, at_ms: int, snapshot_id: str = "snap-1",
                 inventory: bool = True) -> tuple[str, dict]:
    """The END marker of a snapshot of `cluster` polled at `at_ms` (with its inventory)."""
    return ("SnapshotMarker", {
        **envelope(snapshot_id, at_ms), "snapshot_id": snapshot_id, "phase": "END",
        "started_at": at_ms, "ended_at": at_ms, "broker_count": len(cluster.brokers),
        "topic_count": len(cluster.topics), "partition_count": len(cluster.partitions_by_tp),
        "log_dir_count": sum(len(b.log_dirs) for b in cluster.brokers), "has_inventory": inventory,
        "topics": [{"name": t.name, "partition_count": len(t.partitions)} for t in cluster.topics] if inventory else [],
        "broker_ids": [b.id for b in cluster.brokers] if inventory else []})


def cluster_events(cluster: Cluster, at_ms: int) -> tuple[tuple[str, dict], ...]:
    """Every broker, topic, dir and partition of `cluster`, in the pipeline's order."""
    events = [broker_event(b, at_ms) for b in cluster.brokers]
    events += [topic_event(t, at_ms) for t in cluster.topics]
    events += [log_dir_event(b.id, d, at_ms) for b in cluster.brokers for d in b.log_dirs]
    events += [partition_event(p, at_ms) for p in cluster.partitions()]
    return tuple(events)


def changed_events(before: Cluster | None, after: Cluster, at_ms: int) -> tuple[tuple[str, dict], ...]:
    """Events for what differs between two views (all of `after` when `before` is None)."""
    if before is None:
        return cluster_events(after, at_ms)
    events = [broker_event(b, at_ms) for b in after.brokers if before.broker(b.id) != b]
    events += [topic_event(t, at_ms) for t in after.topics
               if t.name not in before.topics_by_name
               or before.topics_by_name[t.name].min_insync_replicas != t.min_insync_replicas]
    for b in after.brokers:
        old = before.broker(b.id)
        for d in b.log_dirs:
            if old is None or d not in old.log_dirs:
                events.append(log_dir_event(b.id, d, at_ms))
    events += [partition_event(p, at_ms) for p in after.partitions() if before.partition(p.tp) != p]
    return tuple(events)


def request(kind: str, fields: dict, at_ms: int, request_id: str = "req-1") -> dict:
    return {**envelope(request_id, at_ms, request_id), "requested_by": "tests", "payload": (kind, fields)}


def tick(at_ms: int) -> dict:
    return request("Tick", {}, at_ms, f"tick-{at_ms}")


def reassign(targets: dict[TopicPartition, Iterable[int]], at_ms: int, request_id: str = "req-1",
             additional: bool = False) -> dict:
    return request("Reassign", {"version": 1, "additional": additional, "partitions": [
        {"topic": tp.topic, "partition": tp.partition, "replicas": list(r), "log_dirs": None}
        for tp, r in targets.items()]}, at_ms, request_id)


def commands(decision: Decision, kind: str | None = None) -> list[dict]:
    return [m.record for m in decision.outbox
            if m.topic_suffix == "commands" and (kind is None or command_kind(m.record) == kind)]


def started_steps(decision: Decision) -> tuple[PlannedStep, ...]:
    """The steps a decision starts, read back from its ReassignmentStep commands."""
    started = []
    for record in commands(decision, "ReassignmentStep"):
        f = record["payload"][1]
        step = Step(tuple(f["target_replicas"]), tuple(f["adding"]), tuple(f["removing"]), f["elect_leader"])
        started.append(PlannedStep(TopicPartition(f["topic"], f["partition"]), step))
    return tuple(started)


def alerts(decision: Decision, kind: str | None = None) -> list[dict]:
    return [m.record for m in decision.outbox
            if m.topic_suffix == "alerts" and (kind is None or m.record["kind"] == kind)]


def assert_encodes(messages: Iterable[OutboundMessage]) -> None:
    for m in messages:
        decoded = decode(m.schema, encode(m.schema, m.record))
        assert decoded["id"] == m.record["id"]


def simple_cluster(n_brokers: int = 3, topics: dict[str, tuple[int, int]] | None = None, min_isr: int = 1,
                   dirs: tuple[str, ...] = ("/d0",), size: int = 10**8) -> Cluster:
    """Brokers 0..n-1 (rack r<i%3>), topics name -> (partitions, RF) placed round robin."""
    brokers = tuple(Broker(b, rack=f"r{b % 3}", log_dirs=tuple(LogDir(d) for d in dirs))
                    for b in range(n_brokers))
    out = []
    for name, (count, rf) in sorted((topics or {"t": (6, 2)}).items()):
        parts = []
        for n in range(count):
            replicas = tuple((n + i) % n_brokers for i in range(rf))
            parts.append(PartitionState(name, n, replicas, replicas, replicas[0], size_bytes=size,
                                        log_dirs=tuple(dirs[(n + i) % len(dirs)] for i in range(rf)),
                                        leader_epoch=0))
        out.append(Topic(name, tuple(parts), min_isr))
    return Cluster(brokers, tuple(out))


@dataclass
class Loop:
    """decide() <-> simulated cluster, one decision per simulated second."""

    sim: SimulatedCluster
    policy: Policy
    state: ControllerState = field(default_factory=ControllerState)
    batch: int = 0
    seen: Cluster | None = None
    decisions: list[Decision] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    peak_in_flight: int = 0
    applied: set[str] = field(default_factory=set)  # command ids, as the executor's ledger keeps them

    @classmethod
    def start(cls, cluster: Cluster, policy: Policy, bytes_per_sec: float = 5 * 10**7) -> "Loop":
        sim = SimulatedCluster(cluster, SimulationParams(bytes_per_sec=bytes_per_sec), now=T0 / 1000)
        return cls(sim, policy)

    @property
    def now_ms(self) -> int:
        return int(round(self.sim.now * 1000))

    def step(self, requests: Iterable[dict] = (), extra_events: Iterable = ()) -> Decision:
        view = self.sim.snapshot()
        events = changed_events(self.seen, view, self.now_ms) + tuple(extra_events)
        self.seen = view
        reqs = tuple(requests) or (tick(self.now_ms),)
        inputs = BatchInputs(self.batch, self.now_ms, events, reqs)
        decision = decide(self.state, inputs, self.policy)
        self.batch += 1
        self.state = decision.state
        self.decisions.append(decision)
        self.check(decision)
        self.apply(decision)
        return decision

    def apply(self, decision: Decision) -> None:
        """Apply the commands as the executor does: a command id seen before is not applied again."""
        for record in commands(decision):
            if record["id"] in self.applied:
                continue
            self.applied.add(record["id"])
            kind, fields = record["payload"]
            if kind in ("ReassignmentStep", "CancelReassignment", "ElectLeader"):
                tp = TopicPartition(fields["topic"], fields["partition"])
            if kind == "ReassignmentStep":
                self.sim.submit_step(tp, fields["target_replicas"])
            elif kind == "CancelReassignment" and tp in self.sim.reassigning():
                self.sim.cancel(tp)
            elif kind == "ElectLeader":
                self.sim.elect_preferred_leader(tp)

    def run(self, seconds: float, until=None) -> None:
        end = self.sim.now + seconds
        while self.sim.now < end:
            self.step()
            if until is not None and until(self):
                return
            self.sim.tick(1.0)

    def idle(self) -> bool:
        return not self.state.reassignments and not self.sim.reassigning()

    def check(self, decision: Decision) -> None:
        """SPEC 6 safety invariants on every decision (`planning.simulation.invariants`): the steps
        in flight against P, L and B; the steps started against the partitions as Kafka shows
        them before they are submitted, and the brokers as the controller knows them."""
        state = decision.state
        limits = InvariantLimits.of(effective_limits(self.policy, state.config))
        counts = count_in_flight(moving_of_steps(steps_in_flight(state.reassignments)))
        self.peak_in_flight = max(self.peak_in_flight, counts.partitions)
        view = Cluster(state.cluster.brokers, self.sim.snapshot().topics)
        found = check_limits(counts, limits) + check_started(started_steps(decision), view, limits)
        self.violations.extend(str(v) for v in found)
        assert_encodes(decision.outbox)
