"""The movement's progress, one meter for every view: `compute_progress(state, now)` gives the
figures of each reassignment and of the whole movement, and the page, `status` (its table and
`--json`), GET /api/status and /metrics all show them from it, never computed again. Pure.

RULE — the same three counts for a row and for the movement, from the same definitions:
    partitions  done / total: the movement's total = active reassignments + those of the
                movement that ended (the state's replication meter, `planning.movement.eta`
                FINISHED), done = those ended; a row is 0 of 1 (it leaves the state when done);
    steps       done / estimated: a row's steps done and its estimate ("step n of m", at least
                the steps done, and 1); the movement's = the rows' sums + the ended ones' steps;
    bytes       moved / to move (`planning.movement.eta` BYTES): the final target's new
                replicas in sync, plus the bytes the copies in flight hold so far (IN FLIGHT:
                the sizes Kafka's describe-log-dirs tells for the adding replicas on their
                brokers); the movement's = the rows' sums + the ended ones' bytes, all moved.
ONE PERCENTAGE (`Figures.fraction`): bytes moved / bytes to move; by steps only where nothing
has bytes to move (empty partitions, leadership-only moves, sizes not told yet). The header and
each row use the same rule; partitions and steps are shown as counts beside it.

ETA (`planning.movement.eta` TIME LEFT): one method for the rows and the header — the movement
copies at its rate as one pipe, the rows in order (those in flight, least left first, then the
waiting), each done once the bytes left before it and its own are copied; the header's is the
last row's, all bytes left / rate. The rate is the one observed since the movement began
(copies in flight counted, `eta.compute_rate`), once a step of it completed; before that, the
throttle in force (`throttle.bytes.per.sec`) times the brokers receiving a copy, when one is
set; else the early observed figure (`eta.compute_early_rate`); else unknown.

Invariants (property-tested, tests/operator/test_progress_meter.py): done <= total for every
count; the movement's counts are the rows' plus the ended ones; its fraction lies in [0, 1];
its time left is the greatest row's, all bytes left / rate; a copy in flight raises
bytes moved by what it holds. Nothing here reads a clock (`now_seconds` is an argument).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from handlers.policy import Policy, effective_policy
from planning.model import Cluster, PartitionState
from planning.movement.eta import (compute_copied_bytes, compute_early_rate, compute_finish_times, compute_rate,
                                   compute_reassignment_bytes)
from planning.movement.partition_steps import compute_step_sequence
from planning.movement.reassignment import Reassignment
from planning.model import TopicPartition
from state.model import ControllerState

REPLICA_MOVEMENTS_KEY = "reassignment.max.concurrent.replica.movements"


@dataclass(frozen=True)
class Figures:
    """The counts of one reassignment or of the movement (RULE), and its time left (ETA)."""

    partitions_done: int = 0
    partitions_total: int = 0
    steps_done: int = 0
    steps_estimated: int = 0
    bytes_moved: int = 0
    bytes_to_move: int = 0
    time_left_seconds: float | None = None

    @property
    def bytes_left(self) -> int:
        return max(0, self.bytes_to_move - self.bytes_moved)

    @property
    def fraction(self) -> float | None:
        """ONE PERCENTAGE: by bytes, by steps where nothing has bytes to move; None when
        nothing moves."""
        if self.bytes_to_move > 0:
            return min(1.0, self.bytes_moved / self.bytes_to_move)
        if self.steps_estimated > 0:
            return min(1.0, self.steps_done / self.steps_estimated)
        return None


@dataclass(frozen=True)
class Progress:
    """The meter's reading: the movement's figures, each active reassignment's, and the rate
    they were timed at. `rate_source`: "observed", "throttle" (no byte seen copied yet, the
    throttle rate assumed) or None (unknown: no time left). `in_flight`: steps in flight, which
    share the rate; `copying_bytes`: what their copies hold so far (IN FLIGHT)."""

    movement: Figures = Figures()
    rows: Mapping[TopicPartition, Figures] = field(default_factory=dict)
    rate_bytes_per_second: float | None = None
    rate_source: str | None = None
    in_flight: int = 0
    copying_bytes: int = 0
    steps_estimated: Mapping[TopicPartition, int | None] = field(default_factory=dict)  # "m", None = unknown

    def share_of_rate(self, tp: TopicPartition, flying: bool) -> float | None:
        """The rate a reassignment with a step in flight copies at (the rate / steps in flight)."""
        if not flying or not self.rate_bytes_per_second:
            return None
        return self.rate_bytes_per_second / max(1, self.in_flight)


def compute_progress(state: ControllerState, now_seconds: float | None, default_replica_movements: int = 1,
                     throttle_bytes_per_sec: int | None = None) -> Progress:
    """The meter (module doc) over `state` at `now_seconds` (None: no rate, no time left);
    `throttle_bytes_per_sec`: the throttle in force, the rate assumed before one is observed."""
    cluster = state.cluster
    meter = state.replication_meter
    movements = compute_replica_movements(state.config, default_replica_movements)
    records = sorted(state.reassignments.items())
    figures: list[tuple[TopicPartition, Figures, bool]] = []
    estimates: dict[TopicPartition, int | None] = {}
    copying = flying = 0
    receiving: set[int] = set()
    for tp, record in records:
        partition = cluster.partition(tp)
        copied = compute_copied_bytes(record, cluster)
        copying += sum(copied.values())
        if record.in_flight is not None:
            flying += 1
            receiving.update(record.in_flight.step.adding)
        moving = compute_reassignment_bytes(record, partition, copied)
        estimate = compute_steps_estimate(record, partition, movements, cluster)
        estimates[tp] = estimate
        figures.append((tp, Figures(0, 1, record.steps_done, max(estimate or 0, record.steps_done, 1),
                                    moving.moved, moving.to_move), record.in_flight is not None))
    rate, source = None, None
    if now_seconds is not None and figures:
        now_ms = int(now_seconds * 1000)
        rate = compute_rate(meter, now_ms, copying)
        source = "observed" if rate is not None else None
        if rate is None and throttle_bytes_per_sec:
            rate, source = float(throttle_bytes_per_sec) * max(1, len(receiving)), "throttle"
        if rate is None and (rate := compute_early_rate(meter, now_ms, copying)) is not None:
            source = "observed"
    finish = compute_finish_times([(f.bytes_left, running) for _tp, f, running in figures], rate)
    rows = {tp: _timed(f, left) for (tp, f, _running), left in zip(figures, finish)}
    movement = Figures(
        partitions_done=meter.finished,
        partitions_total=meter.finished + len(rows),
        steps_done=meter.finished_steps + sum(f.steps_done for f in rows.values()),
        steps_estimated=meter.finished_steps + sum(f.steps_estimated for f in rows.values()),
        bytes_moved=meter.finished_bytes + sum(f.bytes_moved for f in rows.values()),
        bytes_to_move=meter.finished_bytes + sum(f.bytes_to_move for f in rows.values()),
        time_left_seconds=(None if any(t is None for t in finish) else max(finish, default=0.0)) if rows else None,
    )
    return Progress(movement, rows, rate, source, flying, copying, estimates)


def compute_meter(state: ControllerState, default_replica_movements: int, now_seconds: float | None,
                  policy: Policy | None) -> Progress:
    """`compute_progress` with the throttle in force (`throttle.bytes.per.sec`, overrides
    applied; none without a policy): what every view reads its figures from."""
    throttle = effective_policy(policy, state.config).throttle_bytes_per_sec if policy is not None else None
    return compute_progress(state, now_seconds, default_replica_movements, throttle)


def compute_steps_estimate(record: Reassignment, partition: PartitionState | None, movements: int,
                           cluster: Cluster) -> int | None:
    """"m" of "step n of m": the steps done, plus the step in flight, plus `compute_step_sequence`
    from where the partition will be (the in-flight target, or the current replicas) to the
    final target, assuming every step completes with its replicas in sync; None when the
    replicas are unknown."""
    if record.in_flight is not None:
        start = isr = tuple(record.in_flight.step.target)
        done = record.steps_done + 1
    elif partition is not None and partition.replicas:
        start, isr, done = tuple(partition.replicas), tuple(partition.isr), record.steps_done
    else:
        return None
    if not record.final_target:
        return None
    try:
        remaining = compute_step_sequence(start, record.final_target, isr, max(1, movements),
                                          max(1, cluster.min_isr(record.tp.topic)))
    except Exception:  # an invalid list in a stored state: show it, do not fail the view
        return None
    return done + len(remaining)


def compute_replica_movements(config: Mapping[str, str], default: int) -> int:
    """The replica movements a step may make (`reassignment.max.concurrent.replica.movements`)."""
    try:
        return max(1, int(config.get(REPLICA_MOVEMENTS_KEY, default)))
    except (TypeError, ValueError):
        return max(1, default)


def _timed(figures: Figures, seconds: float | None) -> Figures:
    return Figures(figures.partitions_done, figures.partitions_total, figures.steps_done, figures.steps_estimated,
                   figures.bytes_moved, figures.bytes_to_move, seconds)
