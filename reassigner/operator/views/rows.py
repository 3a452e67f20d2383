"""The rows of `list` (and of `status` and the status page): one line per partition, computed
from a ControllerState. Pure.

Step n of m: n is the step in flight (or the number done when none is); m is an estimate —
the steps done, plus the step in flight, plus `compute_step_sequence` from where the partition
will be (the in-flight target, or the current replicas) to the final target, assuming every
step completes with its replicas in sync. The ISR may change the real count (a partition under
min ISR takes bigger steps), so m can move while a reassignment runs (`progress.compute_steps_estimate`).

Why a reassignment waits (`compute_waiting_reason`): the pipeline's own words stored with the
state, else what the state shows (paused, mode, a retry, the ISR, a limit).

Moves of other tools (`compute_external_rows`): the partitions Kafka shows reassigning with no
step of ours in flight (`state.external_moves`), marked `external`, with the reassignment of
ours that waits on each, if any.

Progress, bytes and time left: the movement's meter's (`progress.compute_progress`, the one
place they are computed): per reassignment the bytes its final target adds, those moved
(in sync, or copied so far by a step in flight), its percentage and its time left.

Invariants: nothing here reads a clock (`now_seconds` is an argument) or does I/O; a state that
is inconsistent (a reassignment for a partition the cluster does not show) is shown as it is,
with unknown fields as None, never an exception.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from handlers.policy import Policy, effective_limits, effective_policy
from state.model import ControllerState
from planning.model import PartitionState
from planning.movement.advance import compute_reachable_step
from planning.movement.batches import PlannedStep, compute_limit_refusal
from planning.movement.reassignment import Reassignment, ReassignmentState
from reassigner.operator.views.progress import Figures, Progress, compute_meter


@dataclass(frozen=True)
class ReassignmentRow:
    """One line of `list`: one partition's ongoing reassignment."""

    topic: str
    partition: int
    reassignment_id: str
    state: str
    current_replicas: tuple[int, ...] | None  # as the cluster shows them; None = not observed
    adding: tuple[int, ...]
    removing: tuple[int, ...]
    isr: tuple[int, ...]
    original_replicas: tuple[int, ...]
    final_target: tuple[int, ...]
    step: int  # the step in flight, or the number done when none is in flight
    steps_estimated: int | None  # m of "step n of m"; None when the replicas are unknown
    steps_done: int
    in_flight: bool
    step_target: tuple[int, ...] | None
    step_started_at: float | None
    size_bytes: int | None
    reason: str
    # Bytes, percentage and time (the meter's, `progress.compute_progress`): bytes moved count
    # the copy of a step in flight as it grows; time left includes a wait for a share of the
    # rate; None while the rate is unknown.
    bytes_to_move: int = 0
    bytes_moved: int = 0
    time_left_seconds: float | None = None
    # Why no step of it is in flight (`compute_waiting_reason`); None while one is.
    waiting: str | None = None
    # Its share of the replication rate while a step of it is in flight (rate / steps in
    # flight, as its time left assumes); None otherwise or while the rate is unknown.
    rate_bytes_per_second: float | None = None
    # Its percentage as a fraction (`progress.Figures.fraction`: by bytes, by steps when it has
    # no bytes to move), the header's rule; None when unknown.
    progress: float | None = None

    @property
    def bytes_left(self) -> int:
        return max(0, self.bytes_to_move - self.bytes_moved)


@dataclass(frozen=True)
class InFlightRow:
    """One step of the batch in flight."""

    topic: str
    partition: int
    step: int
    target: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]
    leader_movement: bool
    age_seconds: float | None


@dataclass(frozen=True)
class ExternalRow:
    """A partition another tool moves (`state.external_moves`): marked `external` in `list` and
    `status`. `held_by`: the reassignment of ours that waits on it, if any."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]
    since_ms: int
    age_seconds: float | None
    held_by: str | None
    kind: str = "external"


@dataclass(frozen=True)
class LogDirMoveRow:
    """One intra-broker move the controller owns: waiting for a slot, copying, or moving back."""

    topic: str
    partition: int
    broker_id: int
    origin_dir: str | None
    target_dir: str
    size_bytes: int
    state: str  # waiting | copying | cancelling
    current_dir: str | None  # where the cluster shows the replica now
    future_replica: bool  # Kafka shows the copy in progress
    age_seconds: float | None
    task_id: str
    reason: str


def compute_reassignment_rows(state: ControllerState, default_replica_movements: int,
                              now_seconds: float | None = None, policy: Policy | None = None,
                              progress: Progress | None = None) -> tuple[ReassignmentRow, ...]:
    """The rows of `list`, sorted by (topic, partition); with `now_seconds`, the time left; with
    `policy` (the static settings'), why each waiting one waits in full. The figures are
    `progress`'s (`compute_progress` of the same state and time when not given)."""
    if progress is None:
        progress = compute_meter(state, default_replica_movements, now_seconds, policy)
    flying = [PlannedStep(tp, r.in_flight.step) for tp, r in sorted(state.compute_records_in_flight().items())]
    paused = policy is not None and effective_policy(policy, state.config).paused
    rows = []
    for tp, r in sorted(state.reassignments.items()):
        waiting = compute_waiting_reason(state, r, policy, flying, now_seconds)
        rows.append(replace(_row(state, r, progress.rows.get(tp, Figures()), progress.steps_estimated.get(tp)),
                            state=compute_shown_state(r, paused), waiting=waiting,
                            rate_bytes_per_second=progress.share_of_rate(tp, r.in_flight is not None)))
    return tuple(rows)


def compute_shown_state(record: Reassignment, paused: bool) -> str:
    """What a row says the reassignment is doing: `running` (a step towards its target is in
    flight), `reverting` / `cancelling` (stepping back, or its step being cancelled in Kafka), else
    `paused` (`reassignment.paused`) or `waiting` (the row's `waiting` says for what)."""
    if record.state is ReassignmentState.CANCELLING:
        return "cancelling"
    if record.in_flight is not None:
        return "reverting" if record.state is ReassignmentState.REVERTING else "running"
    return "paused" if paused else "waiting"


def compute_waiting_reason(state: ControllerState, record: Reassignment, policy: Policy | None,
                           flying: list[PlannedStep], now_seconds: float | None = None) -> str | None:
    """Why `record` has no step in flight, in the pipeline's words where it gave them:
    1. the batch rule's refusal the last decision stored (`state.waiting`: a broker, the ISR,
       min.insync.replicas, Kafka reassigning it);
    2. paused (`reassignment.paused`) or mode observe: no step starts at all;
    3. a failed step's retry pending;
    4. no step possible with the replicas in sync now (it waits for the ISR);
    5. a limit (P, L, B) with the steps in flight now (the walk passes such candidates over
       unexamined, so the reason is computed here with the batch rule's own function);
    6. else: planned, its step starts at the next decision.
    Before all: moved by another tool (`state.external_moves`), in the batch rule's words.
    None when a step is in flight. Without `policy` the limits and mode are unknown: 1, 3, 6."""
    if record.in_flight is not None:
        return None
    external = state.external_moves.get(record.tp)
    if external is not None:
        return (f"moved by another tool: Kafka shows the partition reassigning (adding {list(external.adding)}, "
                f"removing {list(external.removing)}) with no step of ours in flight")
    stored = state.waiting.get(record.tp)
    if stored is not None:
        return stored
    effective = effective_policy(policy, state.config) if policy is not None else None
    if effective is not None and effective.paused:
        return "paused: no step starts until `reassigner request resume`"
    if effective is not None and effective.mode == "observe":
        return "mode observe: no step starts"
    if record.retry_at is not None and (now_seconds is None or now_seconds < record.retry_at):
        return "a failed step is retried after a pause (step.retry.max)"
    partition = state.cluster.partition(record.tp)
    if partition is None:
        return "its partition is not observed yet"
    if effective is not None:
        limits = effective_limits(policy, state.config, state.throttles)
        step = compute_reachable_step(record, partition, state.cluster, limits)
        if step is None:
            return (f"no step possible with in-sync replicas {list(partition.isr)} of {list(partition.replicas)}: "
                    "it waits for the ISR")
        refusal = compute_limit_refusal(step, flying, limits)
        if refusal is not None:
            return f"waits for a slot: {refusal}"
    return "its next step starts at the next decision"


def compute_in_flight(state: ControllerState, now_seconds: float | None = None) -> tuple[InFlightRow, ...]:
    """The batch in flight: every step Kafka is executing, oldest first."""
    rows = []
    for tp, r in sorted(state.reassignments.items()):
        if r.in_flight is None:
            continue
        started = r.in_flight.started_at
        age = None if now_seconds is None or started is None else max(0.0, now_seconds - _seconds(started))
        step = r.in_flight.step
        rows.append(InFlightRow(tp.topic, tp.partition, r.in_flight.number, tuple(step.target),
                                tuple(step.adding), tuple(step.removing), step.leader_movement, age))
    return tuple(sorted(rows, key=lambda row: (-(row.age_seconds or 0.0), row.topic, row.partition)))


def compute_external_rows(state: ControllerState, now_seconds: float | None = None) -> tuple[ExternalRow, ...]:
    """The moves of other tools, by (topic, partition); with `now_seconds`, how long they were seen."""
    rows = []
    for tp, move in sorted(state.external_moves.items()):
        record = state.reassignments.get(tp)
        rows.append(ExternalRow(
            tp.topic, tp.partition, tuple(move.replicas), tuple(move.adding), tuple(move.removing), move.since_ms,
            None if now_seconds is None else max(0.0, now_seconds - move.since_ms / 1000.0),
            record.reassignment_id if record is not None else None))
    return tuple(rows)


def compute_log_dir_move_rows(state: ControllerState, now_seconds: float | None = None) -> tuple[LogDirMoveRow, ...]:
    """The intra-broker moves, by (broker, topic, partition)."""
    rows = []
    for (broker_id, tp), task in sorted(state.log_dir_moves.items(), key=lambda item: (item[0][0], item[0][1])):
        partition = state.cluster.partition(tp)
        broker = state.cluster.broker(broker_id)
        started = task.started_at
        rows.append(LogDirMoveRow(
            tp.topic, tp.partition, broker_id, task.origin_dir, task.target_dir, task.size_bytes,
            "waiting" if started is None else ("cancelling" if task.cancelling else "copying"),
            partition.log_dir_of(broker_id) if partition is not None else None,
            broker is not None and broker.has_future_replica(tp),
            None if now_seconds is None or started is None else max(0.0, now_seconds - started),
            task.task_id, task.reason))
    return tuple(rows)


def step_label(row: ReassignmentRow) -> str:
    """"step 2 of 4", "step 2 of ?" when the estimate is unknown, "0 of 3" before the first."""
    total = "?" if row.steps_estimated is None else str(row.steps_estimated)
    return f"step {row.step} of {total}"


# --- helpers --------------------------------------------------------------------------------------


def _row(state: ControllerState, r: Reassignment, figures: Figures, estimated: int | None) -> ReassignmentRow:
    partition = state.cluster.partition(r.tp)
    adding, removing = _changes(partition, r)
    in_flight = r.in_flight
    return ReassignmentRow(
        topic=r.tp.topic,
        partition=r.tp.partition,
        reassignment_id=r.reassignment_id,
        state=r.state.value,
        current_replicas=tuple(partition.replicas) if partition else None,
        adding=adding,
        removing=removing,
        isr=tuple(partition.isr) if partition else (),
        original_replicas=tuple(r.original_replicas),
        final_target=tuple(r.final_target),
        step=in_flight.number if in_flight else r.steps_done,
        steps_estimated=estimated,
        steps_done=r.steps_done,
        in_flight=in_flight is not None,
        step_target=tuple(in_flight.step.target) if in_flight else None,
        step_started_at=in_flight.started_at if in_flight else None,
        size_bytes=partition.size_bytes if partition else None,
        reason=r.reason,
        bytes_to_move=figures.bytes_to_move,
        bytes_moved=figures.bytes_moved,
        time_left_seconds=figures.time_left_seconds,
        progress=figures.fraction,
    )


def _changes(partition: PartitionState | None, r: Reassignment) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(adding, removing) shown: Kafka's while it moves the partition, else what is left to add
    and to drop to reach the target (the final one; the original replicas when reverting)."""
    if partition is None:
        return (), ()
    if partition.adding or partition.removing:
        return tuple(partition.adding), tuple(partition.removing)
    target = r.original_replicas if r.state is ReassignmentState.REVERTING else r.final_target
    current = set(partition.replicas)
    return tuple(b for b in target if b not in current), tuple(b for b in partition.replicas if b not in target)


def _seconds(started_at: float) -> float:
    """`started_at` is seconds; a value that looks like milliseconds is read as such."""
    return started_at / 1000.0 if started_at > 1e11 else float(started_at)
