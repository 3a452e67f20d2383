"""Each partition's traffic from two samples of its offsets, with no broker-side agent (pure).

A `TrafficSample` is what the watcher reads at one moment (`ClusterAdmin.read_traffic`): the
log start (local) and end offsets of every partition with a leader (ListOffsets), and the offsets
every consumer group committed (OffsetFetch). Two samples give each partition's rates over the
time between them (`compute_partition_traffic`):

    record bytes  = size / (end - start)          the log's mean bytes per record as stored
    bytes in/s    = (end₂ - end₁) × record bytes / seconds
    bytes out/s   = Σ over groups committed in both samples of
                    max(0, committed₂ - committed₁) × record bytes / seconds

`size` is the leader's log size (describe-log-dirs), the bytes a follower fetches and a consumer
reads (batches as stored, compressed). The window is the time between the samples.

RULES
- Unknown is None, never a guess: a partition in one sample only, without a size, whose end went
  back (deleted and re-created, truncated after an unclean election), or whose log holds no
  record while its end advanced (the size cannot say what the records weigh). The pipeline keeps
  the last rate it knew where a sample says None (`planning.load`), and counts a partition never
  measured as zero: unknown traffic never blocks a plan.
- No new record is 0 bytes in, whatever the size. A group absent from one of the samples, or
  whose offset went back (reset), adds nothing; consumers that never commit are not seen. When
  the groups could not be read, bytes out is None (unknown), not 0.
- Pure: no clock (the samples carry their times), no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

PartitionKey = tuple[str, int]


@dataclass(frozen=True)
class TrafficSample:
    """Offsets read at `at_ms`: (log start, log end) per partition, and per partition the offset
    each consumer group committed (None when the groups could not be read)."""

    at_ms: int
    offsets: Mapping[PartitionKey, tuple[int, int]] = field(default_factory=dict)
    committed: Mapping[PartitionKey, Mapping[str, int]] | None = None


@dataclass(frozen=True)
class PartitionTraffic:
    bytes_in_per_sec: float | None
    bytes_out_per_sec: float | None
    window_ms: int


@dataclass(frozen=True)
class TrafficWindow:
    """Two samples, the earlier first: what a snapshot's partition events carry rates from."""

    earlier: TrafficSample
    later: TrafficSample

    @property
    def window_ms(self) -> int:
        return self.later.at_ms - self.earlier.at_ms


def compute_partition_traffic(window: TrafficWindow, key: PartitionKey, size_bytes: int | None,
                              ) -> PartitionTraffic | None:
    """The rates of one partition over `window` (module RULES); None when the window is empty
    or the partition was not sampled twice."""
    seconds = window.window_ms / 1000
    before, after = window.earlier.offsets.get(key), window.later.offsets.get(key)
    if seconds <= 0 or before is None or after is None:
        return None
    produced = after[1] - before[1]
    record_bytes = _record_bytes(after, size_bytes)
    if produced < 0:
        bytes_in = None
    elif produced == 0:
        bytes_in = 0.0
    else:
        bytes_in = None if record_bytes is None else produced * record_bytes / seconds
    return PartitionTraffic(bytes_in, _bytes_out(window, key, record_bytes, seconds), window.window_ms)


def _record_bytes(offsets: tuple[int, int], size_bytes: int | None) -> float | None:
    start, end = offsets
    if size_bytes is None or size_bytes < 0 or end <= start:
        return None
    return size_bytes / (end - start)


def _bytes_out(window: TrafficWindow, key: PartitionKey, record_bytes: float | None,
               seconds: float) -> float | None:
    earlier, later = window.earlier.committed, window.later.committed
    if earlier is None or later is None:
        return None
    before, after = earlier.get(key, {}), later.get(key, {})
    consumed = sum(max(0, offset - before[group]) for group, offset in after.items() if group in before)
    if consumed == 0:
        return 0.0
    return None if record_bytes is None else consumed * record_bytes / seconds
