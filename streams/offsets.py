"""Exactly-once by Kafka offsets: which input records a batch applies, and where a query starts.

The controller state in Redis records, atomically with the state and the outbox of each batch,
the greatest offset it consumed on every input topic-partition (`applied`: "topic:partition" is
not used here; keys are `(topic, partition)` pairs). From that one fact:

- a micro-batch applies exactly its records *above* `applied` (`compute_unapplied`); a batch with
  none is a replay (Spark re-runs the last batch after a restart) and changes nothing. Spark's
  batch ids play no part, so a fresh checkpoint dir, a restored old one or none is safe;
- a query starts reading right after `applied` (`compute_starting_offsets`; Spark reads
  `startingOffsets` only when the checkpoint is new), so a new host does not re-read history;
- a checkpoint *ahead* of `applied` on some partition (Redis restored from an older backup, or a
  checkpoint copied from elsewhere) would skip records never applied (`compute_checkpoint_gap`):
  the shell discards such a checkpoint and starts from `applied` instead;
- a partition whose log now ends at or below its applied offset (the topic was deleted and made
  again, or an unclean leader election truncated it) would have its new records skipped as
  replays: its applied offset is forgotten at start (`compute_truncated`), and it is read again
  from the start of its log.

Every record of a batch counts as consumed, also those the collapse dropped (superseded state)
and those that failed to decode (they became dead letters): `compute_consumed`.

All functions but `read_checkpoint_positions` are pure.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Mapping

TopicPartitionKey = tuple[str, int]

EARLIEST = -2  # Spark's code for "the start of the log" in a startingOffsets JSON


def compute_consumed(offsets: Iterable[tuple[str, int, int]]) -> dict[TopicPartitionKey, int]:
    """The greatest offset per (topic, partition) among `(topic, partition, offset)` triples."""
    consumed: dict[TopicPartitionKey, int] = {}
    for topic, partition, offset in offsets:
        key = (topic, partition)
        if offset > consumed.get(key, -1):
            consumed[key] = offset
    return consumed


def compute_unapplied(rows: Iterable, applied: Mapping[TopicPartitionKey, int]) -> list:
    """The rows (tuples starting with topic, partition, offset) above their partition's applied
    offset, in their order."""
    return [row for row in rows if row[2] > applied.get((row[0], row[1]), -1)]


def compute_advanced(applied: Mapping[TopicPartitionKey, int],
                     consumed: Mapping[TopicPartitionKey, int]) -> dict[TopicPartitionKey, int]:
    """The entries of `consumed` that move `applied` forward (offsets only ever grow)."""
    return {key: offset for key, offset in consumed.items() if offset > applied.get(key, -1)}


def compute_truncated(applied: Mapping[TopicPartitionKey, int],
                      log_ends: Mapping[TopicPartitionKey, int]) -> list[TopicPartitionKey]:
    """Partitions whose log now ends at or below the applied offset (re-created or truncated)."""
    return sorted(key for key, offset in applied.items()
                  if key in log_ends and log_ends[key] <= offset)


def compute_starting_offsets(partitions: Mapping[str, Iterable[int]],
                             applied: Mapping[TopicPartitionKey, int]) -> str:
    """Spark's `startingOffsets` JSON: for every partition of every input topic, the offset after
    the applied one, or the earliest for a partition never applied (Spark insists on every
    partition being named once any is)."""
    starts = {topic: {str(p): applied[(topic, p)] + 1 if (topic, p) in applied else EARLIEST
                      for p in sorted(ids)}
              for topic, ids in sorted(partitions.items())}
    return json.dumps(starts, separators=(",", ":"), sort_keys=True)


def compute_checkpoint_gap(positions: Mapping[TopicPartitionKey, int],
                           applied: Mapping[TopicPartitionKey, int],
                           log_starts: Mapping[TopicPartitionKey, int] | None = None,
                           ) -> list[TopicPartitionKey]:
    """Partitions where the checkpoint would start reading after a record never applied.

    `positions` are where the checkpoint resumes (the end offsets of its last committed batch);
    the first record not applied is `applied + 1` (0 for a partition never applied), or the log
    start when retention removed the records before it (`log_starts`, when known). A position
    beyond a compacted-away gap can look like a gap here too; discarding the checkpoint then only
    costs reading a few records again, never losing one."""
    starts = log_starts or {}
    return sorted(key for key, position in positions.items()
                  if position > max(applied.get(key, -1) + 1, starts.get(key, 0)))


def read_checkpoint_positions(checkpoint_dir: Path) -> dict[TopicPartitionKey, int] | None:
    """Where a Structured Streaming checkpoint with one Kafka source resumes reading: the offsets
    of its last committed batch; None when there is none (a new checkpoint) or it cannot be read.

    Layout (Spark 3/4): `offsets/<batch>` holds "v1", a metadata line, then one JSON line per
    source (`{"topic": {"0": 42}}`); `commits/<batch>` exists once that batch finished."""
    commits = checkpoint_dir / "commits"
    if not commits.is_dir():
        return None
    committed = [int(p.name) for p in commits.iterdir() if p.name.isdigit()]
    if not committed:
        return None
    try:
        lines = (checkpoint_dir / "offsets" / str(max(committed))).read_text().splitlines()
        by_topic = json.loads(lines[2])
    except (OSError, IndexError, ValueError):
        return None
    return {(topic, int(p)): int(offset) for topic, ends in by_topic.items()
            for p, offset in ends.items()}


__all__ = ["compute_advanced", "compute_checkpoint_gap", "compute_consumed", "compute_starting_offsets",
           "compute_truncated", "compute_unapplied", "read_checkpoint_positions"]
