"""How far the movement is and how long it will take: bytes to move, bytes moved,
the observed replication rate and the time left, per reassignment and for all of them. The
figures every view shows are computed from these in one place
(`reassigner.operator.views.progress.compute_progress`).

BYTES, per reassignment (a replica weighs its partition's size in bytes):
    to move = the replicas of its final target that were not among its original replicas;
    moved   = those of them the partition already holds in sync (in the ISR), plus what the
              copies in flight of the others hold so far (IN FLIGHT), each at most the size;
    left    = to move - moved.
A cancelled reassignment stepping back has its original replicas as final target: what it
copies back counts the same way. Invariant: 0 <= moved <= to move.

IN FLIGHT: a step in flight copies its adding replicas; what a copy holds so far is the size the
receiving broker's dir last told for it (`LogDir.copying_bytes`, kept from the watcher's
LogDirState events, which tell a dir again while a copy into it grows), at most the partition's
size. A copy no dir told yet counts 0. So bytes move as they copy, not only when a step ends.

RATE (`ReplicationMeter`): the bytes copied since the current movement began — the first step
started while none was in flight — divided by the time since then: the bytes of the steps
completed since then, plus what the copies in flight hold now. It restarts when nothing is in
flight and no reassignment waits. It is trusted once a step of the movement has completed
(`compute_rate`): before that, it is what the first copies hold by the watcher's last look over
the seconds since they began, which the watcher's and the pipeline's lag make far too low (on
the local stack, a time left of an hour for a movement that took 34 s). Until then, the views
take the throttle rate times the brokers receiving a copy, when a throttle is set; else this
early figure, the only one there is.
FINISHED (`ReplicationMeter.finished*`): the reassignments of the current movement
that ended — completed, cancelled, stopped, their topic deleted, given up after failed steps — and
so left the state, with their steps (`steps_done` as they ended) and their bytes to move, counted
as moved: an ended reassignment is over, nothing waits for what it did not copy. Counted where
they end (`compute_finished_work`: the movement decision, a step given up, a topic deleted), with
the same reset as the rate: so the overall progress of a movement
(`reassigner.operator.views.progress.compute_progress`) is the state's alone — partitions total =
active + finished, done = finished — whoever reads it and since when.

TIME LEFT (`compute_finish_times`), one method for every reassignment and for all of them: the
movement copies at its rate as one pipe, the reassignments in order — those with a step in
flight first (the least left first: they finish first), then those waiting, in the order given
— and each finishes once the bytes left of those before it and its own are copied: its time
left is that sum over the rate. The movement's time left is the last one's: all bytes left /
rate. So no row promises more than the header, and the header is the plain arithmetic an
operator checks. (Sharing the rate among the steps in flight, each at rate / k, was tried: one
big partition queued last then counted its bytes at a k-th of the rate, and on the local stack
the header said 168 s where 27 s were left.)
Pure: times are epoch milliseconds (or seconds from now) passed in; nothing reads a clock.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable, Mapping, Sequence

from planning.model import Cluster, PartitionState, TopicPartition
from planning.movement.reassignment import Reassignment


@dataclass(frozen=True)
class FinishedWork:
    """Reassignments that ended, their steps and their bytes to move (see FINISHED)."""

    reassignments: int = 0
    steps: int = 0
    bytes: int = 0


@dataclass(frozen=True)
class ReplicationMeter:
    """since_ms: when the current movement began (None: nothing moves). bytes_copied: bytes of
    the steps completed since then. finished, finished_steps, finished_bytes: the reassignments
    of this movement that ended since then, their steps and their bytes (FINISHED). A meter
    stored before the finished fields existed loads with zeros (the positional order is kept)."""

    since_ms: int | None = None
    bytes_copied: int = 0
    finished: int = 0
    finished_steps: int = 0
    finished_bytes: int = 0


@dataclass(frozen=True)
class MovementBytes:
    to_move: int
    moved: int

    @property
    def left(self) -> int:
        return max(0, self.to_move - self.moved)


def compute_reassignment_bytes(record: Reassignment, partition: PartitionState | None,
                               copied: Mapping[int, int] | None = None) -> MovementBytes:
    """BYTES of one reassignment, as the cluster shows its partition now; `copied`: broker →
    what its copy in flight holds (`compute_copied_bytes`; none given, copies count 0)."""
    size = (partition.size_bytes or 0) if partition is not None else 0
    new = set(record.final_target) - set(record.original_replicas)
    in_sync = set(partition.isr) if partition is not None else set()
    copying = sum(min(max(0, copied.get(b, 0)), size) for b in new - in_sync) if copied else 0
    return MovementBytes(len(new) * size, len(new & in_sync) * size + copying)


def compute_copied_bytes(record: Reassignment, cluster: Cluster) -> dict[int, int]:
    """IN FLIGHT: for each adding replica of `record`'s step in flight, the bytes its copy holds
    as the receiving broker's dirs last told (at most the partition's size); empty when no step
    is in flight, a copy no dir told is absent (counts 0)."""
    flight = record.in_flight
    if flight is None or not flight.step.adding:
        return {}
    partition = cluster.partition(record.tp)
    size = (partition.size_bytes or 0) if partition is not None else 0
    copied: dict[int, int] = {}
    for broker_id in flight.step.adding:
        broker = cluster.broker(broker_id)
        told = [n for d in broker.log_dirs if (n := d.copied_bytes(record.tp)) is not None] if broker else []
        if told:
            copied[broker_id] = min(max(told), size)
    return copied


def compute_completed_step_bytes(before: Mapping[TopicPartition, Reassignment],
                                 completed: Iterable[TopicPartition], cluster: Cluster) -> int:
    """Bytes copied by the steps that completed (`completed`, as the stepping decision names
    them): the adding replicas of each one's step in flight, as `before` holds it."""
    copied = 0
    for tp in completed:
        old = before.get(tp)
        if old is None or old.in_flight is None:
            continue
        partition = cluster.partition(tp)
        copied += len(old.in_flight.step.adding) * ((partition.size_bytes or 0) if partition is not None else 0)
    return copied


def compute_finished_work(finished: Iterable[Reassignment], cluster: Cluster) -> FinishedWork:
    """FINISHED of the reassignments that ended in a decision, as they ended (`cluster`: the
    view that decision saw; a partition it does not show weighs nothing)."""
    count = steps = copied = 0
    for record in finished:
        count += 1
        steps += record.steps_done
        copied += compute_reassignment_bytes(record, cluster.partition(record.tp)).to_move
    return FinishedWork(count, steps, copied)


def advance_meter(meter: ReplicationMeter, copied: int, moving: bool, now_ms: int,
                  finished: FinishedWork = FinishedWork()) -> ReplicationMeter:
    """The meter after a decision that saw `copied` bytes of steps complete and `finished` end;
    `moving` = a step is in flight or a reassignment waits after it. Nothing moving: a new
    meter, the movement is over (what ended with it is not counted in the next)."""
    if not moving:
        return ReplicationMeter()
    if meter.since_ms is None:  # keeps what ended earlier in the same batch (`add_finished_work`)
        meter = replace(meter, since_ms=now_ms)
    if copied:
        meter = replace(meter, bytes_copied=meter.bytes_copied + copied)
    return add_finished_work(meter, finished)


def add_finished_work(meter: ReplicationMeter, finished: FinishedWork) -> ReplicationMeter:
    """The meter counting `finished` too; for the reassignments that end outside the movement
    decision (a step given up, a topic deleted): the decision at the end of the batch resets
    it if nothing moves any more."""
    if not finished.reassignments:
        return meter
    return replace(meter, finished=meter.finished + finished.reassignments,
                   finished_steps=meter.finished_steps + finished.steps,
                   finished_bytes=meter.finished_bytes + finished.bytes)


def compute_rate(meter: ReplicationMeter, now_ms: int, in_flight_bytes: int = 0) -> float | None:
    """RATE in bytes per second, `in_flight_bytes` being what the copies in flight hold now
    (IN FLIGHT); None while unknown or not yet trusted (no step of the movement completed)."""
    copied = meter.bytes_copied + max(0, in_flight_bytes)
    if meter.since_ms is None or meter.bytes_copied <= 0 or copied <= 0 or now_ms <= meter.since_ms:
        return None
    return copied / ((now_ms - meter.since_ms) / 1000.0)


def compute_early_rate(meter: ReplicationMeter, now_ms: int, in_flight_bytes: int = 0) -> float | None:
    """The rate before any step completed (RATE): what the first copies hold over the time
    since they began; None when nothing was seen copied."""
    if meter.since_ms is None or in_flight_bytes <= 0 or now_ms <= meter.since_ms:
        return None
    return in_flight_bytes / ((now_ms - meter.since_ms) / 1000.0)


def compute_time_left(bytes_left: int, rate: float | None, share: int = 1) -> float | None:
    """Seconds for `bytes_left` at `rate` split `share` ways; None while unknown."""
    if bytes_left <= 0:
        return 0.0
    if not rate:
        return None
    return bytes_left / (rate / max(1, share))


def compute_finish_times(work: Sequence[tuple[int, bool]], rate: float | None) -> tuple[float | None, ...]:
    """TIME LEFT, in seconds from now, of each reassignment of `work` — (bytes left, a step in
    flight), the waiting ones in the order they will run — at the movement's `rate`; None for
    those that depend on an unknown rate (with bytes left, or after one that has)."""
    order = sorted((i for i, (_left, flying) in enumerate(work) if flying), key=lambda i: (max(0, work[i][0]), i)) \
        + [i for i, (_left, flying) in enumerate(work) if not flying]
    finish: list[float | None] = [None] * len(work)
    before = 0
    for i in order:
        before += max(0, work[i][0])
        if before <= 0:
            finish[i] = 0.0
        elif rate and rate > 0:
            finish[i] = before / rate
    return tuple(finish)
