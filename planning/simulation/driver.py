"""The driver: runs a plan's reassignments through a `SimulatedCluster` and reports what it saw.

`run_plan` loops, one decision point per `tick_seconds`: apply the scheduled events (faults, an
operator's cancel) -> snapshot -> decide (`planning.movement.advance.compute_stepping`:
completion, elections, rolling batch) -> submit -> check the safety invariants (the one checker,
`planning.simulation.invariants`, docs/design.md "Safety invariants") -> tick. It stops when
every record is done and no event is pending, when nothing can move any more, or after
`max_seconds`, and reports peaks per limit, makespan, steps blocked at the end, and every
invariant violation it saw (`SimulationReport`).

COST (1M replicas, 129k partitions to move, 226k steps run in a few minutes): nothing per tick
or per decision walks the cluster or every record. `snapshot()` patches the last view with the
partitions put since (`last_changes`), `compute_stepping` is told those and looks at them and at
the records in flight only, and the driver keeps the in-flight set and the count of active
records. A tick in which nothing the decision reads changed repeats the last decision instead
of computing it (`_Idle`: the same inputs give the same decision).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping, Union

import immutables

from planning.model import Broker, Cluster, TopicPartition
from planning.movement.advance import SteppingDecision, compute_stepping
from planning.movement.batches import Limits, PlannedStep
from planning.movement.cancel import CancelScope, compute_cancel, compute_patched_records, compute_reassign_request
from planning.movement.completion import is_step_stalled
from planning.movement.reassignment import Reassignment, confirm_cancel
from planning.simulation.invariants import (
    InvariantLimits,
    MovingPartition,
    check_completed,
    check_kafka_moves_are_ours,
    check_limits,
    check_started,
    count_in_flight,
    moving_of_steps,
    steps_in_flight,
)
from planning.simulation.simulated_cluster import SimulatedCluster, SimulationParams
from schemas.errors import NoReassignmentInProgressError


@dataclass(frozen=True)
class KillBroker:
    at: float
    broker_id: int


@dataclass(frozen=True)
class RestartBroker:
    at: float
    broker_id: int


@dataclass(frozen=True)
class FailLogDir:
    at: float
    broker_id: int
    path: str


@dataclass(frozen=True)
class RestoreLogDir:
    at: float
    broker_id: int
    path: str


@dataclass(frozen=True)
class CancelReassignments:
    at: float
    scope: CancelScope = CancelScope()
    keep: bool = False


SimulationEvent = Union[KillBroker, RestartBroker, FailLogDir, RestoreLogDir, CancelReassignments]


@dataclass(frozen=True)
class SimulationReport:
    """What one simulated run did. `makespan_seconds` is None when it did not finish."""

    steps: int
    finished: bool
    makespan_seconds: float | None
    decisions: int
    elections: int
    stalled_steps: int
    peak_partition_movements: int
    peak_leader_movements: int
    peak_movements_per_broker: int
    peak_replica_movements: int
    peak_replicas_per_partition: int
    invariant_violations: tuple[str, ...]
    blocked: tuple[tuple[TopicPartition, str], ...]  # steps still waiting at the end, with the reason
    final_replicas: Mapping[TopicPartition, tuple[int, ...]] = field(repr=False)
    reassignments: Mapping[TopicPartition, Reassignment] = field(repr=False)
    decisions_computed: int = 0  # decision points computed; the others repeated an idle decision (run_plan)


def run_plan(
    cluster: Cluster,
    targets: Mapping[TopicPartition, tuple[int, ...]],
    limits: Limits,
    params: SimulationParams = SimulationParams(),
    events: Iterable[SimulationEvent] = (),
    *,
    stall_timeout: float,
) -> SimulationReport:
    """Run the reassignment of `targets` through a simulated copy of `cluster`; `stall_timeout`
    is `step.stall.timeout` in seconds (stall count, and a stalled cancel trusts the view).

    COST: one decision point per `tick_seconds`, each O(what changed + what is in flight), not
    O(cluster): the view is patched (`SimulatedCluster.snapshot`), `compute_stepping` is told
    what changed since its memo, the records are a persistent map, and the driver keeps the
    in-flight set and the count of active records instead of walking every record. A decision
    point whose inputs are those of the last decision, which changed nothing, is not computed
    again — the same records and view give the same decision: the simulated cluster has not
    changed since (`SimulatedCluster.version`), no event is due, and no step crossed the stall
    timeout nor record its retry time in between (the only inputs that move with the clock).
    Its invariants are still checked. `decisions` counts every decision point (one per tick),
    `decisions_computed` the ones computed.
    """
    sim = SimulatedCluster(cluster, params)
    current = {tp: p.replicas for tp, p in cluster.partitions_by_tp.items()}
    records: Mapping[TopicPartition, Reassignment] = immutables.Map(
        compute_reassign_request({}, targets, current, request_id="sim", reason="simulated plan"))
    pending = sorted(events, key=lambda e: e.at)
    observer = _Observer(limits)
    steps = decisions = computed = elections = 0
    stalled: set[tuple[TopicPartition, int]] = set()
    finished_at: float | None = None
    memo = None
    active, flying = _count_records(records)
    idle: _Idle | None = None  # the last decision, while it changed nothing and its inputs hold

    while True:
        applied = False
        while pending and pending[0].at <= sim.now:
            records = _apply_event(sim, records, pending.pop(0))
            applied = True
        if applied:
            records = immutables.Map(records)
            active, flying = _count_records(records)
            idle = None
        decisions += 1
        if idle is not None and idle.holds(sim, records, stall_timeout):
            decision = idle.decision  # the same inputs: the same decision (see COST), carried out again
            for tp in decision.elections:
                elections += sim.elect_preferred_leader(tp)
        else:
            view = sim.snapshot()
            version = sim.version
            changed = None if memo is None or applied else sim.last_changes
            decision = compute_stepping(records, view, limits, sim.now, stall_timeout, memo=memo, changed=changed)
            computed += 1
            memo = decision.memo
            observer.completed({tp: records[tp] for tp in flying}, decision.reassignments, view)
            records = decision.reassignments
            active -= len(decision.finished)
            flying = decision.memo.in_flight
            for tp in decision.elections:
                elections += sim.elect_preferred_leader(tp)
            for tp, _ in decision.stalled:
                flight = records[tp].in_flight
                stalled.add((tp, flight.number if flight else 0))
            observer.started(decision.started, view)
            for planned in decision.started:
                sim.submit_step(planned.tp, planned.step.target, dict(planned.target_log_dirs))
            steps += len(decision.started)
            idle = None
            if not decision.replaced and not decision.started:
                idle = _Idle(decision, version, records, sim.now,
                             {tp: records[tp] for tp in decision.memo.unsettled if tp in records})
        observer.in_flight({tp: records[tp] for tp in flying}, sim)
        if not active and not pending:
            finished_at = sim.now
            break
        nothing_moves = not decision.started and not flying
        if sim.now >= params.max_seconds or (nothing_moves and not pending and not decision.elections):
            break
        sim.tick(params.tick_seconds)

    final = sim.snapshot()
    return SimulationReport(
        steps=steps,
        finished=finished_at is not None,
        makespan_seconds=finished_at,
        decisions=decisions,
        elections=elections,
        stalled_steps=len(stalled),
        peak_partition_movements=observer.peak_partitions,
        peak_leader_movements=observer.peak_leaders,
        peak_movements_per_broker=observer.peak_per_broker,
        peak_replica_movements=observer.peak_replicas_per_step,
        peak_replicas_per_partition=sim.peak_replicas_per_partition,
        invariant_violations=tuple(observer.violations),
        blocked=tuple((d.tp, d.reason) for d in decision.deferred) if finished_at is None else (),
        final_replicas={tp: p.replicas for tp, p in final.partitions_by_tp.items()},
        reassignments=dict(records),
        decisions_computed=computed,
    )


def _count_records(records: Mapping[TopicPartition, Reassignment]) -> tuple[int, frozenset[TopicPartition]]:
    """The number of active records, and the partitions with a step in flight (a full walk:
    at the start and after an event only)."""
    active = sum(1 for r in records.values() if r.active)
    return active, frozenset(tp for tp, r in records.items() if r.in_flight is not None)


@dataclass(frozen=True)
class _Idle:
    """A decision that replaced no record and started no step, with what it was computed from:
    the simulated cluster's version it read, the records (its own output, equal to
    its input), the time, and the records it looked at whatever changed (`SteppingMemo.unsettled`:
    in flight, retrying) — the only ones whose decision reads the clock."""

    decision: SteppingDecision
    version: int
    records: Mapping[TopicPartition, Reassignment]
    at: float
    clocked: Mapping[TopicPartition, Reassignment]

    def holds(self, sim: "SimulatedCluster", records: Mapping, stall_timeout: float) -> bool:
        """The decision now would be this one: nothing it read has changed, and no step crossed
        the stall timeout nor record its retry time between `at` and now."""
        if records is not self.records or sim.version != self.version:
            return False
        for record in self.clocked.values():
            flight = record.in_flight
            if flight is not None and (is_step_stalled(flight.started_at, self.at, stall_timeout)
                                       != is_step_stalled(flight.started_at, sim.now, stall_timeout)):
                return False
            if record.retry_at is not None and (self.at >= record.retry_at) != (sim.now >= record.retry_at):
                return False
        return True


def _apply_event(sim: SimulatedCluster, records: Mapping, event: SimulationEvent) -> Mapping:
    if isinstance(event, KillBroker):
        sim.kill_broker(event.broker_id)
    elif isinstance(event, RestartBroker):
        sim.restart_broker(event.broker_id)
    elif isinstance(event, FailLogDir):
        sim.fail_log_dir(event.broker_id, event.path)
    elif isinstance(event, RestoreLogDir):
        sim.restore_log_dir(event.broker_id, event.path)
    elif isinstance(event, CancelReassignments):
        try:
            decision = compute_cancel(records, event.scope, keep=event.keep)
        except NoReassignmentInProgressError:
            return records
        updated = decision.reassignments
        confirmed = {}
        for tp in decision.cancel_in_kafka:
            if tp in sim.reassigning():
                sim.cancel(tp)  # the executor's "ok" for the CancelReassignment
                confirmed[tp] = confirm_cancel(updated[tp], updated[tp].in_flight.number)
        return compute_patched_records(updated, confirmed)
    return records


class _Observer:
    """What the driver saw: the violations the safety checker (`planning.simulation.invariants`)
    found at every decision, and the peaks per limit for the report."""

    def __init__(self, limits: Limits) -> None:
        self.limits = InvariantLimits.of(limits)
        self.kafka_limits = InvariantLimits(max_partition_movements=limits.max_partition_movements)
        self.violations: list[str] = []
        self.peak_partitions = self.peak_leaders = self.peak_per_broker = self.peak_replicas_per_step = 0

    def started(self, started: tuple[PlannedStep, ...], view: Cluster) -> None:
        self.violations.extend(str(v) for v in check_started(started, view, self.limits))
        for planned in started:
            self.peak_replicas_per_step = max(self.peak_replicas_per_step, len(planned.step.adding))

    def completed(self, before: Mapping, after: Mapping, view: Cluster) -> None:
        """`before`: the records before the decision (those with a step in flight suffice)."""
        self.violations.extend(str(v) for v in check_completed(before, after, view))

    def in_flight(self, records: Mapping[TopicPartition, Reassignment], sim: SimulatedCluster) -> None:
        """Ours (the records: those with a step in flight suffice) against P, L and B; Kafka's
        against P, and all of them ours."""
        ours = steps_in_flight(records)
        counts = count_in_flight(moving_of_steps(ours))
        kafka_moving = sim.reassigning()
        found = (check_limits(counts, self.limits)
                 + check_limits(count_in_flight(MovingPartition(tp) for tp in kafka_moving), self.kafka_limits)
                 + check_kafka_moves_are_ours(kafka_moving, ours))
        self.violations.extend(f"t={sim.now}: {v}" for v in found)
        self.peak_partitions = max(self.peak_partitions, counts.partitions)
        self.peak_leaders = max(self.peak_leaders, counts.leader_movements)
        self.peak_per_broker = max(self.peak_per_broker, counts.busiest_broker)


def cluster_with_brokers(cluster: Cluster, added: Iterable[Broker] = (), draining: Iterable[int] = ()) -> Cluster:
    """`cluster` plus new brokers, with the given brokers marked draining (for `simulate`)."""
    drain = set(draining)
    brokers = {b.id: b for b in cluster.brokers}
    for b in added:
        brokers[b.id] = b
    return cluster.with_brokers(
        replace(b, draining=b.draining or b.id in drain) for _, b in sorted(brokers.items())
    )
