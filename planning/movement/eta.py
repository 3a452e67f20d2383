"""How far the movement is and how long it will take: bytes to move, bytes moved,
the observed replication rate and the time left, per reassignment and for all of them.

BYTES, per reassignment (a replica weighs its partition's size in bytes):
    to move = the replicas of its final target that were not among its original replicas;
    moved   = those of them the partition already holds in sync (in the ISR);
    left    = to move - moved.
A cancelled reassignment stepping back has its original replicas as final target: what it
copies back counts the same way.

RATE (`ReplicationMeter`): the bytes of the steps completed since the current movement began —
the first step started while none was in flight — divided by the time since then. It restarts
when nothing is in flight and no reassignment waits. Unknown (None) until a step completed: an
estimate from nothing would be a guess.

FINISHED (`ReplicationMeter.finished*`): the reassignments of the current movement
that ended — completed, cancelled, stopped, their topic deleted, given up after failed steps — and
so left the state, with their steps (`steps_done` as they ended) and their bytes to move, counted
as moved: an ended reassignment is over, nothing waits for what it did not copy. Counted where
they end (`compute_finished_work`: the movement decision, a step given up, a topic deleted), with
the same reset as the rate: so the overall progress of a movement
(`reassigner.operator.views.compute_overall_progress`) is the state's alone — partitions total =
active + finished, done = finished — whoever reads it and since when.

TIME LEFT: for all reassignments, bytes left / rate. For one, its bytes left / its share of the
rate (rate / steps in flight): how long it takes once it runs, since steps share the brokers'
bandwidth; a reassignment still waiting for a slot waits on top of that.

Pure: times are epoch milliseconds passed in; nothing reads a clock.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable, Mapping

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


def compute_reassignment_bytes(record: Reassignment, partition: PartitionState | None) -> MovementBytes:
    """BYTES of one reassignment, as the cluster shows its partition now."""
    size = (partition.size_bytes or 0) if partition is not None else 0
    new = set(record.final_target) - set(record.original_replicas)
    in_sync = set(partition.isr) if partition is not None else set()
    return MovementBytes(len(new) * size, len(new & in_sync) * size)


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


def compute_rate(meter: ReplicationMeter, now_ms: int) -> float | None:
    """RATE in bytes per second; None while unknown."""
    if meter.since_ms is None or meter.bytes_copied <= 0 or now_ms <= meter.since_ms:
        return None
    return meter.bytes_copied / ((now_ms - meter.since_ms) / 1000.0)


def compute_time_left(bytes_left: int, rate: float | None, share: int = 1) -> float | None:
    """TIME LEFT in seconds for `bytes_left` at `rate` split `share` ways; None while unknown."""
    if bytes_left <= 0:
        return 0.0
    if not rate:
        return None
    return bytes_left / (rate / max(1, share))
