"""Intra-broker log-dir moves (KIP-113): which replicas to move between the dirs of one broker
(a dir added, or dirs unbalanced), and how those moves progress.

MEASURE. A replica weighs its partition's size in bytes; on a broker whose replicas report no
bytes at all (a new or idle cluster) every replica weighs 1, so its dirs are evened by count.
A dir's load is the sum of its replicas' weights; its share of the broker's load is in
proportion to its capacity (`total_bytes`) when every online dir of the broker reports one,
else equal. IMBALANCE of a broker = the greatest |load - share| / share over its online dirs:
0 is perfect, 1 means a dir is empty or holds twice its share. The dirs are balanced when it is
at most `logdir.imbalance.threshold`. `compute_dir_imbalance` judges it from the sums each
describe-log-dirs reported (`LogDir.replica_bytes` / `replica_count`, cost O(dirs));
`plan_log_dir_balance` from the partitions themselves.
PLAN (`plan_log_dir_balance`): from the dir furthest above its share to the one furthest below,
largest fitting replica first (the fewest moves), until balanced or no move helps; a replica
moves at most once per plan. Never into an offline dir, a cordoned one (`LogDir.cordoned`: Kafka
takes no new replica there; a cordoned dir above its share is a source like any other, one below
it stays so) or one whose volume would pass `disk.max.usage.percent`; never a replica whose dir
is unknown or offline, of a partition being reassigned, or in `skip`.
PROGRESS (`compute_log_dir_progress`), per move the controller owns (`LogDirTask`):
- the partition is gone or the broker no longer holds a replica of it → ended OBSOLETE;
- its target dir is not an online dir of the broker → ended DIR_OFFLINE;
- the replica is in the target dir and the broker shows no future replica of it →
  ended COMPLETED (REVERTED for a cancel), also for a move never started (nothing to copy);
- started and running `stall_timeout` seconds or more → reported stalled (it keeps running);
- moves not started start under the limit `max_per_broker` moves in flight per broker, largest
  first, only on live brokers and partitions not in `busy` (an inter-broker step in flight:
  Kafka would copy into a dir the step is about to drop). A broker's cancel starts at once.
CANCEL (`begin_log_dir_cancel`): a move not started is dropped; a started one becomes a move
back into its origin dir, issued at once — AlterReplicaLogDirs to the dir the replica is in
makes Kafka drop the future replica, and after a swap it copies the replica back.

Pure: times are seconds passed in, nothing reads a clock, a setting or does I/O.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from enum import Enum
from typing import Collection, Iterable, Mapping

from planning.model import Broker, Cluster, LogDir, PartitionState, PlannedDirMove, TopicPartition, compute_dir_weights


@dataclass(frozen=True)
class LogDirMove:
    """Put broker `broker_id`'s replica of `tp` into log dir `log_dir` (AlterReplicaLogDirs)."""

    topic: str
    partition: int
    broker_id: int
    log_dir: str


def is_log_dir_move_complete(partition: PartitionState, move: LogDirMove, broker: Broker | None) -> bool:
    """Done: the replica is in the target dir and the broker holds no future replica of it (a
    future replica is Kafka's copy in progress, KIP-113)."""
    return (
        move.broker_id in partition.replicas
        and partition.log_dir_of(move.broker_id) == move.log_dir
        and (broker is None or not broker.has_future_replica(partition.tp))
    )


# --- measure --------------------------------------------------------------------------------
def compute_dir_shares(dirs: tuple[LogDir, ...], total_load: float) -> dict[str, float]:
    """Each online dir's share of `total_load`: by capacity when every one reports it, else equal."""
    weights = compute_dir_weights(dirs)
    capacity = sum(weights.values())
    return {path: total_load * weight / capacity for path, weight in weights.items()}


def compute_deviations(loads: Mapping[str, float], shares: Mapping[str, float]) -> dict[str, float]:
    """(load - share) / share per dir; 0 for every dir of an empty broker."""
    return {path: (loads.get(path, 0.0) - share) / share if share > 0 else 0.0
            for path, share in shares.items()}


def compute_dir_imbalance(broker: Broker) -> float | None:
    """The broker's imbalance (MEASURE) from its dirs' reported sums; None when fewer than two
    online dirs or a dir's sums were not reported."""
    online = broker.online_log_dirs
    if len(online) < 2 or any(d.replica_count is None for d in online):
        return None
    by_bytes = sum(d.replica_bytes or 0 for d in online) > 0
    loads = {d.path: float((d.replica_bytes or 0) if by_bytes else d.replica_count) for d in online}
    shares = compute_dir_shares(online, sum(loads.values()))
    deviations = compute_deviations(loads, shares)
    return max((abs(v) for v in deviations.values()), default=0.0)


# --- plan -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class LogDirPlan:
    """The moves for one broker and the imbalance before and (as planned) after them."""

    broker_id: int
    moves: tuple[PlannedDirMove, ...]
    imbalance_before: float
    imbalance_after: float
    by_bytes: bool
    loads_before: Mapping[str, float]
    loads_after: Mapping[str, float]


def plan_log_dir_balance(cluster: Cluster, broker_id: int, threshold: float,
                         skip: Collection[TopicPartition] = frozenset(),
                         max_usage_percent: float | None = None) -> LogDirPlan:
    """The moves that even out the dirs of `broker_id` (see PLAN); none when it has fewer than
    two online dirs, is unknown, or is balanced already.

    Repeat: take the online dir furthest above its share (source) and the one furthest below
    (destination); move the largest replica of the source that is no larger than what the source
    must shed and the destination may take — each byte moved is a byte needed, so largest-first
    gives the fewest moves and no overshoot the fewest bytes; when no replica is that small, the
    smallest one if the move lowers the greater deviation of the two dirs. Stop when balanced,
    when no move helps, or when every replica has moved once (which bounds the loop). Never into
    an offline or a cordoned dir, nor into one whose volume would then be fuller than
    `max_usage_percent` (where the dir reports its volume's size).
    """
    broker = cluster.broker(broker_id)
    online = broker.online_log_dirs if broker is not None else ()
    disk_room = {d.path: room for d in online if (room := d.room_bytes(max_usage_percent)) is not None}
    receiving = {d.path for d in online if not d.cordoned}  # the dirs a replica may move into
    placed: dict[str, list[tuple[TopicPartition, int, bool]]] = {d.path: [] for d in online}
    for partition in cluster.partitions():
        if broker_id not in partition.replicas:
            continue
        path = partition.log_dir_of(broker_id)
        if path in placed:  # a replica that may not move still weighs on its dir
            may_move = not partition.reassigning and partition.tp not in skip
            placed[path].append((partition.tp, partition.size_bytes or 0, may_move))
    by_bytes = any(size > 0 for replicas in placed.values() for _, size, _ in replicas)

    def weight(size: int) -> float:
        return float(size) if by_bytes else 1.0

    loads = {path: sum(weight(size) for _, size, _ in replicas) for path, replicas in placed.items()}
    shares = compute_dir_shares(online, sum(loads.values()))

    def imbalance() -> float:
        return max((abs(v) for v in compute_deviations(loads, shares).values()), default=0.0)

    before, loads_before = imbalance(), dict(loads)
    movable = {path: sorted(((weight(size), tp, size) for tp, size, may_move in replicas
                             if may_move and weight(size) > 0),
                            key=lambda item: (-item[0], item[1]))
               for path, replicas in placed.items()}
    moves: list[PlannedDirMove] = []
    while len(online) >= 2 and imbalance() > threshold:
        deviations = compute_deviations(loads, shares)
        source = max(deviations, key=lambda p: (deviations[p], p))
        destination = min(receiving, key=lambda p: (deviations[p], p), default=source)
        room = min(loads[source] - shares[source], shares[destination] - loads[destination])
        space = disk_room.get(destination, float("inf"))
        candidates = [item for item in movable[source] if item[2] <= space]
        if room <= 0 or not candidates:
            break
        chosen = next((item for item in candidates if item[0] <= room), None)
        if chosen is None:
            smallest = candidates[-1]
            worst = max(abs(deviations[source]), abs(deviations[destination]))
            after_source = (loads[source] - smallest[0] - shares[source]) / shares[source]
            after_destination = (loads[destination] + smallest[0] - shares[destination]) / shares[destination]
            if max(abs(after_source), abs(after_destination)) >= worst:
                break
            chosen = smallest
        movable[source].remove(chosen)
        load, tp, size = chosen
        loads[source] -= load
        loads[destination] += load
        if destination in disk_room:
            disk_room[destination] -= size
        moves.append(PlannedDirMove(tp, broker_id, source, destination, size))
    return LogDirPlan(broker_id, tuple(moves), before, imbalance(), by_bytes, loads_before, dict(loads))


# --- progress -------------------------------------------------------------------------------
@dataclass(frozen=True)
class LogDirTask:
    """One intra-broker move the controller owns (kept in `ControllerState.log_dir_moves`).

    task_id: the plan (or request) it belongs to; with the broker, partition and `number` it
        makes the command id. number: commands issued for it so far (the move, then a cancel).
    origin_dir: the dir the replica was in when the move was planned (None = unknown).
    started_at: when its command was issued (seconds), None while it waits for a slot.
    cancelling: it is a move back into `target_dir` (the former origin) after a cancel.
    """

    tp: TopicPartition
    broker_id: int
    target_dir: str
    origin_dir: str | None
    size_bytes: int
    reason: str
    task_id: str
    number: int = 0
    started_at: float | None = None
    cancelling: bool = False

    @property
    def key(self) -> tuple[int, TopicPartition]:
        return (self.broker_id, self.tp)

    @property
    def move(self) -> LogDirMove:
        return LogDirMove(self.tp.topic, self.tp.partition, self.broker_id, self.target_dir)

    def command_id(self) -> str:
        return f"{self.task_id}:{self.tp}@{self.broker_id}:{self.number}:LogDirMove"


class LogDirEnding(str, Enum):
    COMPLETED = "completed"
    REVERTED = "reverted"
    OBSOLETE = "obsolete"
    DIR_OFFLINE = "dir_offline"


@dataclass(frozen=True)
class LogDirProgress:
    tasks: Mapping[tuple[int, TopicPartition], LogDirTask]  # still active, started ones updated
    started: tuple[LogDirTask, ...]
    finished: tuple[tuple[LogDirTask, LogDirEnding], ...]
    stalled: tuple[LogDirTask, ...]


def compute_log_dir_progress(
    tasks: Mapping[tuple[int, TopicPartition], LogDirTask], cluster: Cluster,
    busy: Collection[TopicPartition], max_per_broker: int, now: float, stall_timeout: float,
    start_moves: bool = True,
) -> LogDirProgress:
    """Completions, endings, stalls and the moves to start now (see PROGRESS)."""
    remaining: dict[tuple[int, TopicPartition], LogDirTask] = {}
    finished: list[tuple[LogDirTask, LogDirEnding]] = []
    stalled: list[LogDirTask] = []
    for key in sorted(tasks, key=lambda k: (k[0], k[1])):
        task = tasks[key]
        ending = _compute_ending(task, cluster)
        if ending is not None:
            finished.append((task, ending))
            continue
        remaining[key] = task
        if task.started_at is not None and now - task.started_at >= stall_timeout:
            stalled.append(task)
    started: list[LogDirTask] = []
    if start_moves:
        in_flight = [t.move for t in remaining.values() if t.started_at is not None]
        waiting = {t.move: t for t in remaining.values() if t.started_at is None and t.tp not in busy}
        for move in compute_log_dir_batch(waiting, in_flight, cluster, max_per_broker):
            task = replace(waiting[move], started_at=now, number=waiting[move].number + 1)
            remaining[task.key] = task
            started.append(task)
    return LogDirProgress(remaining, tuple(started), tuple(finished), tuple(stalled))


def _compute_ending(task: LogDirTask, cluster: Cluster) -> LogDirEnding | None:
    partition = cluster.partition(task.tp)
    broker = cluster.broker(task.broker_id)
    if partition is None or broker is None or task.broker_id not in partition.replicas:
        return LogDirEnding.OBSOLETE
    if task.target_dir not in {d.path for d in broker.online_log_dirs}:
        return LogDirEnding.DIR_OFFLINE
    if is_log_dir_move_complete(partition, task.move, broker):
        return LogDirEnding.REVERTED if task.cancelling else LogDirEnding.COMPLETED
    return None


def begin_log_dir_cancel(task: LogDirTask, cluster: Cluster, now: float) -> LogDirTask | None:
    """The move back (issued at once), or None when there is nothing to undo (see CANCEL)."""
    if task.started_at is None or task.cancelling:
        return None if task.started_at is None else task
    partition = cluster.partition(task.tp)
    back = task.origin_dir or (partition.log_dir_of(task.broker_id) if partition is not None else None)
    if back is None:
        return None
    return replace(task, target_dir=back, origin_dir=task.target_dir, cancelling=True,
                   started_at=now, number=task.number + 1, reason=f"cancelled: {task.reason}")


def compute_log_dir_batch(
    candidates: Iterable[LogDirMove], in_flight: Iterable[LogDirMove], cluster: Cluster, max_per_broker: int
) -> tuple[LogDirMove, ...]:
    """Log-dir moves to start now: largest replica first, at most `max_per_broker` in flight on
    one broker (`reassignment.max.concurrent.logdir.movements.per.broker`), one move per
    replica, only into online dirs of live brokers."""
    per_broker: Counter = Counter(m.broker_id for m in in_flight)
    busy = {(m.topic, m.partition, m.broker_id) for m in in_flight}
    chosen: list[LogDirMove] = []

    def size(move: LogDirMove) -> float:
        p = cluster.partition(TopicPartition(move.topic, move.partition))
        return -(p.size_bytes if p is not None and p.size_bytes is not None else float("inf"))

    for move in sorted(candidates, key=lambda m: (size(m), m.topic, m.partition, m.broker_id)):
        broker = cluster.broker(move.broker_id)
        key = (move.topic, move.partition, move.broker_id)
        if key in busy or broker is None or not broker.alive:
            continue
        if move.log_dir not in {d.path for d in broker.online_log_dirs}:
            continue
        if per_broker[move.broker_id] >= max_per_broker:
            continue
        chosen.append(move)
        busy.add(key)
        per_broker[move.broker_id] += 1
    return tuple(chosen)
