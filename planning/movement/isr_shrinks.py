"""ISR shrinks outside the moves: which brokers drop out of the in-sync set of partitions the
product is not moving, counted per broker over the last minutes (pure).

WHY. A movement's copies compete with the clients' traffic and with the brokers' own replication
(issue: an adaptive throttle). A replica of a partition that is *not* moving falling out of its
ISR is the cluster saying so: its follower could not keep up. Shrinks of the moving partitions
are the movement's own business (a new replica joins late, an old one leaves) and are not
counted. The adaptive throttle reads the count (`throttle_control.BrokerSignal.
isr_shrinks_outside`); `status`, the page and `/metrics` show it.

RULE.
- A loss (`compute_isr_losses`): a broker in the partition's ISR before an event and, after it,
  still among its replicas but out of its ISR. A broker that left the replicas (a move that
  ended) lost nothing; a partition seen for the first time lost nothing.
- A partition is moving (`is_moving`) while the product has a reassignment for it, another tool
  is moving it, or Kafka shows it adding or removing replicas, before or after the event.
- The window (`add_isr_shrinks`, `count_isr_shrinks`, `count_isr_shrinks_since`): per broker, counts in buckets of
  `BUCKET_MS` (ten seconds) by event time, each with the time of its latest shrink; a bucket
  older than `WINDOW_MS` (ten minutes) is dropped when the window is next written; counts read
  only the buckets within it. Shrinks *since* a time (the throttle's last change, decided on the
  events up to its time) are those of the buckets whose latest shrink is after it: a shrink
  later in the bucket the change fell in counts (it was lost when only buckets that began after
  the change were read), one before the change alone in its bucket does not; the count then may
  include the bucket's earlier shrinks, and the throttle reads only whether there are any.

INVARIANTS: at most `WINDOW_MS / BUCKET_MS + 1` buckets per broker, each count positive and its
latest shrink within it, a broker with none absent; the same events give the same window (event
times only, no clock).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Iterable, Mapping

from planning.model import PartitionState

BUCKET_MS = 10_000  # fine enough for the throttle to tell the shrinks after its last change
WINDOW_MS = 600_000

# broker -> ((bucket start ms, shrinks, latest shrink ms), ...), oldest first
IsrShrinkWindow = Mapping[int, tuple[tuple[int, int, int], ...]]


def compute_isr_losses(before: PartitionState | None, after: PartitionState) -> tuple[int, ...]:
    """The brokers that fell out of the partition's ISR and are still among its replicas."""
    if before is None:
        return ()
    isr, replicas = set(after.isr), set(after.replicas)
    return tuple(sorted(b for b in before.isr if b not in isr and b in replicas))


def is_moving(before: PartitionState | None, after: PartitionState, reassigned: bool) -> bool:
    """Whether a shrink of this partition is the movement's own (module RULE)."""
    return (reassigned or bool(after.adding or after.removing)
            or (before is not None and bool(before.adding or before.removing)))


def add_isr_shrinks(window: IsrShrinkWindow, losses: Iterable[tuple[int, int]], now_ms: int) -> IsrShrinkWindow:
    """`window` with each (broker, event time ms) loss counted, and the buckets older than
    `WINDOW_MS` before `now_ms` dropped; `window` itself when nothing changes."""
    horizon = now_ms - WINDOW_MS
    counts: dict[int, dict[int, tuple[int, int]]] = {}
    for broker, at_ms in losses:
        if at_ms > horizon:
            bucket = at_ms - at_ms % BUCKET_MS
            per = counts.setdefault(broker, {})
            count, latest = per.get(bucket, (0, at_ms))
            per[bucket] = (count + 1, max(latest, at_ms))
    stale = any(buckets and buckets[0][0] + BUCKET_MS <= horizon for buckets in window.values())
    if not counts and not stale:
        return window
    result: dict[int, tuple[tuple[int, int, int], ...]] = {}
    for broker in sorted(set(window) | set(counts)):
        merged = {bucket: (count, latest) for bucket, count, latest in window.get(broker, ())}
        for bucket, (count, latest) in counts.get(broker, {}).items():
            had, before = merged.get(bucket, (0, latest))
            merged[bucket] = (had + count, max(before, latest))
        kept = tuple(sorted((bucket, count, latest) for bucket, (count, latest) in merged.items()
                            if bucket + BUCKET_MS > horizon))
        if kept:
            result[broker] = kept
    return MappingProxyType(result)


def count_isr_shrinks(window: IsrShrinkWindow, broker: int, now_ms: int) -> int:
    """The broker's shrinks outside the moves within `WINDOW_MS` before `now_ms`."""
    horizon = now_ms - WINDOW_MS
    return sum(count for bucket, count, _latest in window.get(broker, ()) if bucket + BUCKET_MS > horizon)


def count_isr_shrinks_since(window: IsrShrinkWindow, broker: int, since_ms: int) -> int:
    """The broker's shrinks outside the moves in the buckets whose latest shrink is after
    `since_ms` (module RULE; the adaptive throttle's signal: shrinks after its last change, not
    those it answered, whose times are at most its own)."""
    return sum(count for _bucket, count, latest in window.get(broker, ()) if latest > since_ms)
