"""The product's own decision path against a simulated cluster, to the end (issue 17, item 3):
prints figures, asserts nothing.

What runs is what the pipeline's driver runs for every micro-batch — decode (fastavro) →
`handlers.decide.decide_isolating` → `ControllerStore.commit` on a real Redis (AOF) — and what
the executor does with the commands (`ReassignmentStep` → AlterPartitionReassignments,
`ElectLeader`, `CancelReassignment`; throttles need no simulation), against
`planning.simulation.simulator.SimulatedCluster` in place of Kafka, whose changed partitions come
back as PartitionState events and whose command results as CommandResult events, one batch per
simulated second with a Tick.

The scene: N partitions (RF 3, topics of 1,000, sizes 20-100 MB), max(30, N / 1,000) brokers
with 2 dirs; 20 empty brokers join (BrokerMembership + their dirs) and 5 brokers are
decommissioned (a Decommission request), mode auto, then it runs until no reassignment is left.
Every batch is judged with the SPEC 6 checker (`planning.simulation.invariants`): steps in
flight against P, L, B (ours) and P (Kafka's), Kafka moving nothing we have no step for, every
started step (rules 1d, 2a, 3, 4a) and every completed one (2b). The checks look at the steps in
flight and the partitions the batch changed, never the whole cluster, so the run's cost is the
product's.

    .venv/bin/python benchmarks/bench_decision_path.py [--partitions 333334] [--add 20] [--drain 5]
        [--max-partition-movements 200] [--json]

Figures: wall and CPU, batches (decisions), steps, steps per wall second, the placement of the
whole rebalance (the first batches' CPU), CPU per batch (p50 / p99 / max), the longest Redis
command (SLOWLOG), violations (first ten), peak steps in flight, driver RSS.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from handlers.decide import decide_isolating  # noqa: E402
from handlers.policy import effective_limits  # noqa: E402
from planning.model import Broker, TopicPartition  # noqa: E402
from planning.movement.batches import PlannedStep  # noqa: E402
from planning.movement.partition_steps import Step  # noqa: E402
from planning.simulation.invariants import (  # noqa: E402
    InvariantLimits,
    MovingPartition,
    check_completed,
    check_kafka_moves_are_ours,
    check_limits,
    check_started,
    count_in_flight,
    moving_of_steps,
)
from planning.simulation.simulator import SimulatedCluster, SimulationParams  # noqa: E402
from schemas.codec import encode  # noqa: E402
from state.model import ControllerState  # noqa: E402
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import T0, broker_dirs, build_cluster, header, partition_record  # noqa: E402
from runtime.heap import HeapKeeper  # noqa: E402

MB = 10**6


class DecisionPath:
    """The pipeline driver's batch (decode → decide → commit) and the executor, in one loop."""

    def __init__(self, store, state: ControllerState, settings, policy, sim: SimulatedCluster) -> None:
        self.store, self.state, self.settings, self.policy, self.sim = store, state, settings, policy, sim
        self.offset = self.number = 0
        self.rows: list[tuple] = []
        self.seen = sim.snapshot()
        self.in_flight: set[TopicPartition] = set()
        self.applied: set[str] = set()
        self.violations: list[str] = []
        self.batch_cpu: list[float] = []
        self.steps = self.peak_in_flight = 0
        self.heap = HeapKeeper()

    @property
    def now_ms(self) -> int:
        return int(round(self.sim.now * 1000))

    def add(self, suffix: str, schema: str, record: dict) -> None:
        self.offset += 1
        self.rows.append((self.settings.topic(suffix), 0, self.offset, encode(schema, record)))

    def event(self, suffix: str, schema: str, key: str, fields: dict) -> None:
        self.number += 1
        self.add(suffix, schema, {**header(key, self.now_ms, self.number), **fields})

    def tell_changed_partitions(self) -> None:
        """PartitionState events for what the simulated cluster changed since the last batch
        (`SimulatedCluster.last_changes`: the partitions put since its last snapshot)."""
        view = self.sim.snapshot()
        for tp in sorted(self.sim.last_changes):
            p = view.partition(tp)
            if p != self.seen.partition(tp):
                self.number += 1
                self.add("isr-changes", "PartitionState", partition_record(p, self.now_ms, self.number))
        self.seen = view

    def batch(self) -> None:
        from streams.input_rows import compute_batch_inputs

        self.tell_changed_partitions()
        self.event("requests", "Request", "tick", {"requested_by": "pipeline", "payload": ("Tick", {})})
        rows, self.rows = self.rows, []
        started = time.process_time()
        batch_id = self.state.last_batch + 1
        inputs = compute_batch_inputs(batch_id, rows, self.settings)
        decision = decide_isolating(self.state, replace(inputs, clock_ms=self.now_ms), self.policy)
        after = decision.state.with_changes(last_batch=batch_id, epoch=self.state.epoch)
        self.store.commit(batch_id, self.state, after, decision.outbox,
                          {(self.settings.topic("isr-changes"), 0): self.offset})
        self.heap.after_batch()  # as the driver does (runtime.heap)
        self.batch_cpu.append(time.process_time() - started)
        before, self.state = self.state, after
        self.check_and_execute(before, decision)

    def check_and_execute(self, before: ControllerState, decision) -> None:
        """SPEC 6 on this batch, then the commands as the executor applies them (a command id seen
        before is not applied again), each answered by a CommandResult."""
        state = self.state
        limits = InvariantLimits.of(effective_limits(self.policy, state.config))
        started: list[PlannedStep] = []
        commands = [m.record for m in decision.outbox if m.topic_suffix == "commands"]
        for record in commands:
            kind, fields = record["payload"]
            if kind == "ReassignmentStep":
                step = Step(tuple(fields["target_replicas"]), tuple(fields["adding"]), tuple(fields["removing"]),
                            fields["elect_leader"])
                started.append(PlannedStep(TopicPartition(fields["topic"], fields["partition"]), step))
        # Completed steps: judged on the view the decision saw (rule 2b); only the steps that were
        # in flight can have ended.
        was = {tp: before.reassignments[tp] for tp in self.in_flight if tp in before.reassignments}
        now = {tp: state.reassignments[tp] for tp in was if tp in state.reassignments}
        view = state.cluster  # the partitions as the batch's events told them, the brokers as known
        found = list(check_completed(was, now, view))
        found += check_started(started, view, limits)
        for record in commands:
            self.execute(record)
        self.in_flight = {tp for tp in self.in_flight | {s.tp for s in started}
                          if (r := state.reassignments.get(tp)) is not None and r.in_flight is not None}
        ours = {tp: state.reassignments[tp].in_flight.step for tp in self.in_flight}
        counts = count_in_flight(moving_of_steps(ours))
        kafka_moving = self.sim.reassigning()
        found += check_limits(counts, limits)
        found += check_limits(count_in_flight(MovingPartition(tp) for tp in kafka_moving),
                              InvariantLimits(max_partition_movements=limits.max_partition_movements))
        found += check_kafka_moves_are_ours(kafka_moving, ours)
        self.violations.extend(f"t={self.sim.now - T0 / 1000:.0f}s: {v}" for v in found)
        self.peak_in_flight = max(self.peak_in_flight, counts.partitions)

    def execute(self, record: dict) -> None:
        if record["id"] in self.applied:
            return
        self.applied.add(record["id"])
        kind, fields = record["payload"]
        ok, error = True, None
        if kind in ("ReassignmentStep", "CancelReassignment", "ElectLeader"):
            tp = TopicPartition(fields["topic"], fields["partition"])
            if kind == "ReassignmentStep":
                self.sim.submit_step(tp, fields["target_replicas"])
                self.steps += 1
            elif kind == "CancelReassignment":
                if tp in self.sim.reassigning():
                    self.sim.cancel(tp)
                else:
                    ok, error = False, "NO_REASSIGNMENT_IN_PROGRESS"
            else:
                self.sim.elect_preferred_leader(tp)
        self.event("command-results", "CommandResult", record["key"], {
            "command_id": record["id"], "command_kind": kind, "epoch": record["epoch"],
            "reassignment_id": record.get("reassignment_id"), "step": record.get("step") or 0, "ok": ok,
            "error_code": error, "message": ""})


def run(partitions: int, add: int, drain: int, max_partition_movements: int, redis_client,
        bytes_per_sec: float = 100 * MB, max_seconds: float = 6 * 3600) -> dict:
    from runtime.settings import compute_policy, load_settings
    from state.controller_store import ControllerStore

    settings = load_settings(cluster_name=f"sim-{partitions}", max_partition_movements=max_partition_movements,
                             max_movements_per_broker=max(5, max_partition_movements // 10),
                             max_leader_movements=max_partition_movements, broker_add_grace_seconds=0)
    policy = compute_policy(settings)
    redis_client.flushall()
    redis_client.config_set("slowlog-log-slower-than", 0)
    redis_client.config_set("slowlog-max-len", 1_000_000)
    wall, cpu = time.perf_counter(), time.process_time()
    cluster = build_cluster(partitions, lambda topic, partition: (20 + (topic * 31 + partition) % 81) * MB)
    state = ControllerState(cluster=cluster, epoch=1)
    store = ControllerStore(redis_client, settings.cluster_name)
    store.commit(1, ControllerState(), state.with_changes(last_batch=1), [])
    state = state.with_changes(last_batch=1)
    sim = SimulatedCluster(cluster, SimulationParams(bytes_per_sec=bytes_per_sec, max_seconds=max_seconds),
                           now=T0 / 1000)
    path = DecisionPath(store, state, settings, policy, sim)
    setup_wall = time.perf_counter() - wall
    redis_client.slowlog_reset()
    first_new = max(b.id for b in cluster.brokers) + 1
    for broker_id in range(first_new, first_new + add):
        broker = Broker(broker_id, f"/dc{broker_id % 3}/r{broker_id % 9}", True, False, broker_dirs(broker_id))
        sim.add_broker(broker)
        path.event("broker-membership", "BrokerMembership", str(broker_id), {
            "snapshot_id": None, "broker_id": broker_id, "rack": broker.rack, "host": "10.0.0.1",
            "port": 9092, "state": "UNFENCED", "log_dirs": [d.path for d in broker.log_dirs]})
        for d in broker.log_dirs:
            path.event("disk-failures", "LogDirState", str(broker_id), {
                "snapshot_id": None, "broker_id": broker_id, "path": d.path, "online": True, "error": None,
                "total_bytes": d.total_bytes, "usable_bytes": d.usable_bytes, "replicas": []})
    drained = [b.id for b in cluster.brokers[:drain]]
    if drained:
        path.event("requests", "Request", "decommission", {"requested_by": "bench", "payload": (
            "Decommission", {"broker_ids": drained})})
    batches = 0
    while True:
        path.batch()
        batches += 1
        active = path.state.reassignments
        if batches > 3 and not active and not path.in_flight and not sim.reassigning():
            break
        if sim.now - T0 / 1000 > max_seconds:
            break
        sim.tick(1.0)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    final = sim.snapshot()
    on_drained = sum(1 for p in final.partitions() if set(p.replicas) & set(drained))
    on_new = sum(1 for p in final.partitions() for b in p.replicas if b >= first_new)
    longest_ms = max((e["duration"] for e in redis_client.slowlog_get(1_000_000)), default=0) / 1000
    spent = sorted(path.batch_cpu)
    return {
        "partitions": partitions, "replicas": 3 * partitions, "brokers": len(cluster.brokers) + add,
        "added": add, "drained": drained, "max_partition_movements": max_partition_movements,
        "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "setup_wall_s": round(setup_wall, 1),
        "batches": batches, "steps": path.steps, "steps_per_wall_s": round(path.steps / wall, 1),
        "simulated_s": round(sim.now - T0 / 1000),
        "finished": not path.state.reassignments,
        "batch_cpu_ms": {"p50": round(statistics.median(spent) * 1000, 1),
                         "p99": round(spent[int(0.99 * (len(spent) - 1))] * 1000, 1),
                         "max": round(spent[-1] * 1000, 1), "first": round(path.batch_cpu[0] * 1000, 1)},
        "longest_redis_command_ms": round(longest_ms, 1),
        "peak_steps_in_flight": path.peak_in_flight,
        "replicas_on_drained_brokers_after": on_drained, "replicas_on_new_brokers_after": on_new,
        "violations": len(path.violations), "first_violations": path.violations[:10],
        "rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=333_334)
    parser.add_argument("--add", type=int, default=20)
    parser.add_argument("--drain", type=int, default=5)
    parser.add_argument("--max-partition-movements", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    arguments = parser.parse_args()

    import redis

    from reassigner.dev.local.processes import free_port, stop
    from reassigner.dev.local.redis_server import start_redis

    work = Path(tempfile.mkdtemp(prefix="bench-decision-path-"))
    port = free_port()
    pid = start_redis(port, work / "redis")
    try:
        figures = run(arguments.partitions, arguments.add, arguments.drain, arguments.max_partition_movements,
                      redis.Redis(port=port, socket_timeout=120))
    finally:
        stop(pid, timeout_seconds=30)
    print(json.dumps(figures, indent=None if not arguments.json else 2))


if __name__ == "__main__":
    main()
