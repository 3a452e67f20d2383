"""What `list`, `status` and the status page show, computed from a ControllerState. Pure.

Rows are frozen dataclasses with JSON forms (`*_to_json`), so the terminal tables, `--json` and
the HTTP API show the same numbers.

Step n of m: n is the step in flight (or the number done when none is); m is an estimate —
the steps done, plus the step in flight, plus `compute_step_sequence` from where the partition
will be (the in-flight target, or the current replicas) to the final target, assuming every
step completes with its replicas in sync. The ISR may change the real count (a partition under
min ISR takes bigger steps), so m can move while a reassignment runs; progress is steps done / m.

Why a reassignment waits (`compute_waiting_reason`): the pipeline's own words stored with the
state, else what the state shows (paused, mode, a retry, the ISR, a limit).

Moves of other tools (`compute_external_rows`): the partitions Kafka shows reassigning with no
step of ours in flight (`state.external_moves`), marked `external`, with the reassignment of
ours that waits on each, if any.

Bytes and time left (`planning.movement.eta`): per reassignment the bytes its final target adds,
those already in sync, and the time left at its share of the observed replication rate; overall
the sums and the time left at the whole rate.

Overall progress over a MOVEMENT (`compute_overall_progress`, issue 19 item 7): a finished
reassignment leaves the state, so its rows alone cannot say "12 of 15 done" (regression: the
overall bar read 0 % with 12 of 15 partitions finished, the 3 left not started). The pipeline
counts the reassignments of the current movement that ended, with their steps and bytes, in the
state's replication meter (`planning.movement.eta`, FINISHED): partitions total = active +
finished, done = finished, steps and bytes likewise, an ended one all done. So `status`, its
`--json`, the page and /metrics show the same overall progress, from the state alone, whenever
they are started. `StatusView.overall_progress` is that fraction (JSON: `movement`); `steps_done`
and `steps_estimated` stay the active reassignments' sums (JSON: `progress`).

Invariants: nothing here reads a clock (`now_seconds` is an argument) or does I/O; a state that
is inconsistent (a reassignment for a partition the cluster does not show) is shown as it is,
with unknown fields as None, never an exception.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, Mapping

from handlers.policy import (Policy, compute_excluded_pattern, compute_excluded_topics, effective_limits,
                             effective_policy)
from state.model import ControllerState
from planning.model import PartitionState
from planning.movement.advance import compute_reachable_step
from planning.movement.batches import PlannedStep, compute_limit_refusal
from planning.movement.eta import ReplicationMeter, compute_rate, compute_reassignment_bytes, compute_time_left
from planning.movement.reassignment import Reassignment
from planning.movement.partition_steps import compute_step_sequence

REPLICA_MOVEMENTS_KEY = "reassignment.max.concurrent.replica.movements"


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
    # Bytes and time (planning.movement.eta): time left is at this reassignment's share of the
    # observed rate once it runs; None while the rate is unknown.
    bytes_to_move: int = 0
    bytes_moved: int = 0
    time_left_seconds: float | None = None
    # Why no step of it is in flight (`compute_waiting_reason`); None while one is.
    waiting: str | None = None
    # Its share of the observed replication rate while a step of it is in flight (rate / steps
    # in flight, as its time left assumes); None otherwise or while the rate is unknown.
    rate_bytes_per_second: float | None = None

    @property
    def bytes_left(self) -> int:
        return max(0, self.bytes_to_move - self.bytes_moved)

    @property
    def progress(self) -> float | None:
        """Steps done / estimated steps (1.0 at the end); None when unknown."""
        if not self.steps_estimated:
            return None
        return min(1.0, self.steps_done / self.steps_estimated)


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


@dataclass(frozen=True)
class BrokerRow:
    id: int
    rack: str | None
    alive: bool
    draining: bool
    dirs_online: int
    dirs_total: int
    offline_dirs: tuple[str, ...]
    replicas: int
    leaders: int
    cannot_host: int = 0  # partitions its failed dirs held, kept off it until it restarts
    # Per online dir, as describe-log-dirs last told: (path, replicas, bytes); None = not reported.
    dirs: tuple[tuple[str, int | None, int | None], ...] = ()


@dataclass(frozen=True)
class DiskRow:
    """One log dir of one broker: what describe-log-dirs last told (None = not reported)."""

    broker_id: int
    path: str
    online: bool
    replicas: int | None
    replica_bytes: int | None
    total_bytes: int | None  # the volume's size (KIP-827, Kafka 3.3+)
    usable_bytes: int | None

    @property
    def used_fraction(self) -> float | None:
        """Share of the volume in use (anything on it, not only Kafka's replicas)."""
        if not self.total_bytes or self.usable_bytes is None:
            return None
        return min(1.0, max(0.0, (self.total_bytes - self.usable_bytes) / self.total_bytes))


@dataclass(frozen=True)
class PartitionProblem:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int | None
    min_insync_replicas: int


@dataclass(frozen=True)
class OverallProgress:
    """The movement's (module docstring: MOVEMENT): finished reassignments included."""

    partitions_total: int = 0
    partitions_done: int = 0
    steps_done: int = 0
    steps_estimated: int = 0
    bytes_to_move: int = 0
    bytes_moved: int = 0

    @property
    def fraction(self) -> float | None:
        """Steps done / steps estimated, finished reassignments included; None when nothing moves."""
        if not self.steps_estimated:
            return None
        return min(1.0, self.steps_done / self.steps_estimated)


@dataclass(frozen=True)
class StatusView:
    brokers: tuple[BrokerRow, ...]
    under_replicated: tuple[PartitionProblem, ...]
    under_min_isr: tuple[PartitionProblem, ...]
    offline: tuple[PartitionProblem, ...]
    reassignments: tuple[ReassignmentRow, ...]
    in_flight: tuple[InFlightRow, ...]
    topics: int
    partitions: int
    steps_done: int
    steps_estimated: int
    epoch: int
    last_batch: int
    proposals: tuple[str, ...]
    config: Mapping[str, str]
    # Topic selection (`topics.include` / `topics.exclude`, overrides applied): the topics only
    # healed and drained, never rebalanced. Empty patterns when the view was built without a policy.
    topics_include: str = ""
    topics_exclude: str = ""
    excluded_topics: tuple[str, ...] = ()
    log_dir_moves: tuple[LogDirMoveRow, ...] = ()
    bytes_to_move: int = 0
    bytes_moved: int = 0
    replication_rate: float | None = None  # bytes per second observed since the movement began
    time_left_seconds: float | None = None  # all reassignments, at that rate
    paused: bool = False  # `reassignment.paused` in force (`request pause`); False without a policy
    disks: tuple[DiskRow, ...] = ()  # every log dir of every broker, by (broker, path)
    proposal_views: tuple["ProposalView", ...] = ()  # the proposals with their moves
    external: tuple[ExternalRow, ...] = ()  # moves of other tools Kafka shows
    movement: OverallProgress = OverallProgress()  # the movement's, finished reassignments included

    @property
    def bytes_left(self) -> int:
        return max(0, self.bytes_to_move - self.bytes_moved)

    @property
    def overall_progress(self) -> float | None:
        """The movement's steps done / estimated, finished reassignments included (MOVEMENT)."""
        return self.movement.fraction


def compute_reassignment_rows(state: ControllerState, default_replica_movements: int,
                              now_seconds: float | None = None,
                              policy: Policy | None = None) -> tuple[ReassignmentRow, ...]:
    """The rows of `list`, sorted by (topic, partition); with `now_seconds`, the time left; with
    `policy` (the static settings'), why each waiting one waits in full."""
    movements = _replica_movements(state.config, default_replica_movements)
    rate = compute_rate(state.replication_meter, int(now_seconds * 1000)) if now_seconds is not None else None
    share = sum(1 for r in state.reassignments.values() if r.in_flight is not None)
    flying = [PlannedStep(tp, r.in_flight.step) for tp, r in sorted(state.compute_records_in_flight().items())]
    return tuple(replace(_row(state, r, movements, rate, share),
                         waiting=compute_waiting_reason(state, r, policy, flying, now_seconds),
                         rate_bytes_per_second=rate / max(1, share) if rate and r.in_flight is not None else None)
                 for _tp, r in sorted(state.reassignments.items()))


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
        limits = effective_limits(policy, state.config)
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


def external_row_to_json(row: ExternalRow) -> dict[str, Any]:
    return _plain(asdict(row))


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


def compute_status(state: ControllerState, default_replica_movements: int,
                   now_seconds: float | None = None, policy: Policy | None = None) -> StatusView:
    """Everything `status` and the status page show; `policy` (the static settings') adds the
    topic selection in force."""
    cluster = state.cluster
    replicas_on: dict[int, int] = {}
    leaders_on: dict[int, int] = {}
    under_replicated, under_min_isr, offline = [], [], []
    for p in cluster.partitions():
        for b in p.replicas:
            replicas_on[b] = replicas_on.get(b, 0) + 1
        if p.leader is not None and p.leader >= 0:
            leaders_on[p.leader] = leaders_on.get(p.leader, 0) + 1
        min_isr = cluster.min_isr(p.topic)
        problem = PartitionProblem(p.topic, p.partition, tuple(p.replicas), tuple(p.isr),
                                   p.leader if p.leader is not None and p.leader >= 0 else None, min_isr)
        if problem.leader is None:
            offline.append(problem)
        if len(set(p.isr)) < len(set(p.replicas) - set(p.adding)):
            under_replicated.append(problem)
        if len(set(p.isr)) < min_isr:
            under_min_isr.append(problem)
    brokers = tuple(
        BrokerRow(b.id, b.rack, b.alive, b.draining, sum(1 for d in b.log_dirs if d.online),
                  len(b.log_dirs), tuple(d.path for d in b.log_dirs if not d.online),
                  replicas_on.get(b.id, 0), leaders_on.get(b.id, 0), len(b.cannot_host),
                  tuple((d.path, d.replica_count, d.replica_bytes) for d in b.online_log_dirs))
        for b in sorted(cluster.brokers, key=lambda b: b.id)
    )
    rows = compute_reassignment_rows(state, default_replica_movements, now_seconds, policy)
    rate = compute_rate(state.replication_meter, int(now_seconds * 1000)) if now_seconds is not None else None
    left = sum(r.bytes_left for r in rows)
    return StatusView(
        brokers=brokers,
        under_replicated=tuple(under_replicated),
        under_min_isr=tuple(under_min_isr),
        offline=tuple(offline),
        reassignments=rows,
        in_flight=compute_in_flight(state, now_seconds),
        topics=len(cluster.topics),
        partitions=sum(len(t.partitions) for t in cluster.topics),
        steps_done=sum(r.steps_done for r in rows),
        steps_estimated=sum(r.steps_estimated or 0 for r in rows),
        epoch=state.epoch,
        last_batch=state.last_batch,
        proposals=tuple(sorted(state.proposals)),
        config=dict(state.config),
        **_topic_selection(state, policy),
        log_dir_moves=compute_log_dir_move_rows(state, now_seconds),
        bytes_to_move=sum(r.bytes_to_move for r in rows),
        bytes_moved=sum(r.bytes_moved for r in rows),
        replication_rate=rate,
        time_left_seconds=compute_time_left(left, rate) if rows else None,
        paused=policy is not None and effective_policy(policy, state.config).paused,
        disks=compute_disk_rows(cluster),
        proposal_views=tuple(compute_proposal_view(state, pid, policy) for pid in sorted(state.proposals)),
        external=compute_external_rows(state, now_seconds),
        movement=compute_overall_progress(state.replication_meter, rows),
    )


def compute_disk_rows(cluster) -> tuple[DiskRow, ...]:
    """Disk usage per broker and log dir (offline dirs too: they show as such)."""
    return tuple(DiskRow(b.id, d.path, d.online, d.replica_count, d.replica_bytes, d.total_bytes, d.usable_bytes)
                 for b in sorted(cluster.brokers, key=lambda b: b.id) for d in b.log_dirs)


# --- overall progress over a movement ----------------------------------------------------------------


def compute_overall_progress(meter: ReplicationMeter, rows: tuple[ReassignmentRow, ...]) -> OverallProgress:
    """The movement's progress (MOVEMENT): the active reassignments `rows` as they are (an
    unknown estimate counts at least the steps done, and 1), plus the ones the meter counted
    finished, all done."""
    return OverallProgress(
        partitions_total=len(rows) + meter.finished,
        partitions_done=meter.finished,
        steps_done=sum(r.steps_done for r in rows) + meter.finished_steps,
        steps_estimated=sum(max(r.steps_estimated or 0, r.steps_done, 1) for r in rows) + meter.finished_steps,
        bytes_to_move=sum(r.bytes_to_move for r in rows) + meter.finished_bytes,
        bytes_moved=sum(min(r.bytes_moved, r.bytes_to_move) for r in rows) + meter.finished_bytes,
    )


def overall_progress_to_json(progress: OverallProgress) -> dict[str, Any]:
    return {**asdict(progress), "fraction": progress.fraction}


def _topic_selection(state: ControllerState, policy: Policy | None) -> dict[str, Any]:
    if policy is None:
        return {}
    effective = effective_policy(policy, state.config)
    return {
        "topics_include": effective.topics_include,
        "topics_exclude": compute_excluded_pattern(effective),
        "excluded_topics": tuple(sorted(compute_excluded_topics((t.name for t in state.cluster.topics), effective))),
    }


# --- JSON forms -----------------------------------------------------------------------------------


def reassignment_row_to_json(row: ReassignmentRow) -> dict[str, Any]:
    data = _plain(asdict(row))
    data["progress"] = row.progress
    data["step_label"] = step_label(row)
    data["bytes_left"] = row.bytes_left
    return data


def status_to_json(view: StatusView) -> dict[str, Any]:
    return {
        "brokers": [_plain(asdict(b)) for b in view.brokers],
        "under_replicated": [_plain(asdict(p)) for p in view.under_replicated],
        "under_min_isr": [_plain(asdict(p)) for p in view.under_min_isr],
        "offline": [_plain(asdict(p)) for p in view.offline],
        "reassignments": [reassignment_row_to_json(r) for r in view.reassignments],
        "in_flight": [_plain(asdict(s)) for s in view.in_flight],
        "topics": view.topics,
        "partitions": view.partitions,
        # the active reassignments' (their rows summed); "movement": finished ones included
        "progress": {"steps_done": view.steps_done, "steps_estimated": view.steps_estimated,
                     "fraction": OverallProgress(steps_done=view.steps_done,
                                                 steps_estimated=view.steps_estimated).fraction,
                     "bytes_to_move": view.bytes_to_move,
                     "bytes_moved": view.bytes_moved, "bytes_left": view.bytes_left,
                     "replication_rate_bytes_per_second": view.replication_rate,
                     "time_left_seconds": view.time_left_seconds},
        "epoch": view.epoch,
        "last_batch": view.last_batch,
        "proposals": list(view.proposals),
        "paused": view.paused,
        "config": dict(view.config),
        "topic_selection": {"include": view.topics_include, "exclude": view.topics_exclude,
                            "excluded_topics": list(view.excluded_topics)},
        "log_dir_moves": [_plain(asdict(m)) for m in view.log_dir_moves],
        "disks": [{**_plain(asdict(d)), "used_fraction": d.used_fraction} for d in view.disks],
        "proposal_details": [proposal_to_json(p) for p in view.proposal_views],
        "external": [external_row_to_json(e) for e in view.external],
        "movement": overall_progress_to_json(view.movement),
    }


def step_label(row: ReassignmentRow) -> str:
    """"step 2 of 4", "step 2 of ?" when the estimate is unknown, "0 of 3" before the first."""
    total = "?" if row.steps_estimated is None else str(row.steps_estimated)
    return f"step {row.step} of {total}"


# --- helpers --------------------------------------------------------------------------------------


def _row(state: ControllerState, r: Reassignment, movements: int, rate: float | None = None,
         share: int = 1) -> ReassignmentRow:
    partition = state.cluster.partition(r.tp)
    moving = compute_reassignment_bytes(r, partition)
    estimated = _estimate_steps(r, partition, movements, state.cluster.min_isr(r.tp.topic))
    in_flight = r.in_flight
    return ReassignmentRow(
        topic=r.tp.topic,
        partition=r.tp.partition,
        reassignment_id=r.reassignment_id,
        state=r.state.value,
        current_replicas=tuple(partition.replicas) if partition else None,
        adding=tuple(partition.adding) if partition else (),
        removing=tuple(partition.removing) if partition else (),
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
        bytes_to_move=moving.to_move,
        bytes_moved=moving.moved,
        time_left_seconds=compute_time_left(moving.left, rate, share),
    )


def _estimate_steps(r: Reassignment, partition: PartitionState | None, movements: int,
                    min_isr: int) -> int | None:
    if r.in_flight is not None:
        start, isr, done = tuple(r.in_flight.step.target), tuple(r.in_flight.step.target), r.steps_done + 1
    elif partition is not None and partition.replicas:
        start, isr, done = tuple(partition.replicas), tuple(partition.isr), r.steps_done
    else:
        return None
    if not r.final_target:
        return None
    try:
        remaining = compute_step_sequence(start, r.final_target, isr, max(1, movements), max(1, min_isr))
    except Exception:  # an invalid list in a stored state: show it, do not fail the view
        return None
    return done + len(remaining)


def _replica_movements(config: Mapping[str, str], default: int) -> int:
    try:
        return max(1, int(config.get(REPLICA_MOVEMENTS_KEY, default)))
    except (TypeError, ValueError):
        return max(1, default)


def _seconds(started_at: float) -> float:
    """`started_at` is seconds; a value that looks like milliseconds is read as such."""
    return started_at / 1000.0 if started_at > 1e11 else float(started_at)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


# --- proposals (mode approve) ---------------------------------------------------------------------


@dataclass(frozen=True)
class ProposalMoveRow:
    """One partition of a proposal: where it is, where the proposal puts it."""

    topic: str
    partition: int
    current_replicas: tuple[int, ...] | None  # None: the partition is not observed any more
    target: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]
    size_bytes: int | None


@dataclass(frozen=True)
class ProposalView:
    """`request show ID`: a proposal, its moves and when it expires."""

    proposal_id: str
    reason: str
    created_at_ms: int
    expires_at_ms: int | None  # None without the policy
    moves: tuple[ProposalMoveRow, ...]

    @property
    def replica_moves(self) -> int:
        return sum(len(m.adding) for m in self.moves)


def compute_proposal_view(state: ControllerState, proposal_id: str, policy: Policy | None = None) -> ProposalView:
    """The proposal `proposal_id` (InvalidInputError naming the waiting ones if none)."""
    from handlers.proposals import require_proposal

    proposal = require_proposal(state.proposals, proposal_id)
    moves = []
    for tp, target in sorted(proposal.targets.items()):
        partition = state.cluster.partition(tp)
        current = tuple(partition.replicas) if partition is not None else None
        moves.append(ProposalMoveRow(tp.topic, tp.partition, current, tuple(target),
                                     tuple(b for b in target if b not in (current or ())),
                                     tuple(b for b in (current or ()) if b not in target),
                                     partition.size_bytes if partition is not None else None))
    expiry = effective_policy(policy, state.config).proposal_expiry_seconds if policy is not None else None
    return ProposalView(proposal.proposal_id, proposal.reason, proposal.created_at_ms,
                        None if expiry is None else proposal.created_at_ms + int(expiry * 1000), tuple(moves))


def proposal_to_reassignment_json(view: ProposalView) -> dict[str, Any]:
    """The proposal as Kafka's reassignment JSON, as `kafka-reassign-partitions.sh
    --reassignment-json-file` reads it (no `log_dirs`: the brokers choose, the tool's default)."""
    from planning.model import TopicPartition
    from planning.snapshot import reassignment_to_json

    targets = {TopicPartition(m.topic, m.partition): m.target for m in view.moves}
    return reassignment_to_json(targets)


def proposal_to_json(view: ProposalView) -> dict[str, Any]:
    return {**_plain(asdict(view)), "replica_moves": view.replica_moves,
            "reassignment": proposal_to_reassignment_json(view)}
