"""Reassignments the product did not start ("external"): moves Kafka shows that no step of ours explains.

`kafka-reassign-partitions.sh --execute`, Cruise Control, Strimzi or a person may move
partitions while the product runs. A partition is **external** when Kafka shows it reassigning
(adding or removing replicas) and the product has no step in flight for it. `list`, `status`, the
status page and `/api/status` show them (marked `external`), and they are respected:

- no step of ours starts on such a partition: the batch rule refuses a candidate whose partition
  Kafka shows reassigning (`planning.movement.batches`, "moved by another tool"), so a plan of
  ours that includes it waits, with that reason, until Kafka shows the move ended;
- a plan made while such a move runs takes the partition as at that move's target, never as
  Kafka's combined replica list (`handlers.plans`, `completion.compute_shown_replicas`);
- a step of ours that another tool cancels or replaces is noticed at the next observation that
  can tell (`planning.movement.completion` INTERRUPTED: one that showed the step, or the first
  one read after the executor applied it, so also when no poll ever showed it running), ended,
  and the partition is stepped again from where Kafka has it
  (`planning.movement.advance.compute_stepping`).

RULES (`compute_external_moves`):
- an entry keeps what Kafka showed (replicas, adding, removing) and since when (the event time
  of the batch that first showed this move); other adding or removing replicas are another
  move (a new `since_ms`), other replicas alone are the same move;
- `held`: a reassignment of ours exists for the partition and waits on the move (its alert
  said so); set once per move;
- the set is kept incrementally: only the partitions `looked_at` (those whose `PartitionState`
  or record changed since the last decision, from the state's change log) are judged again,
  O(changed); without that list (a restart, a write around the setters) every reassigning
  partition and every entry is: O(partitions), once.
Pure: no clock (`now_ms` is passed in), no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable, Mapping

from planning.model import Cluster, TopicPartition
from planning.movement.reassignment import Reassignment


@dataclass(frozen=True)
class ExternalMove:
    """A move of one partition that the product did not start, as Kafka showed it."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]
    since_ms: int  # event time of the batch that first showed this move
    held: bool = False  # a reassignment of ours waits on it (and was told so)


@dataclass(frozen=True)
class ExternalUpdate:
    """The external moves after a decision, and what changed: `started` (a new move, or another
    one on the same partition), `held` (an existing move a reassignment of ours now waits on),
    `ended` (Kafka no longer shows it, or a step of ours now explains it)."""

    moves: Mapping[TopicPartition, ExternalMove]
    started: tuple[TopicPartition, ...] = ()
    held: tuple[TopicPartition, ...] = ()
    ended: tuple[TopicPartition, ...] = ()


def compute_external_moves(previous: Mapping[TopicPartition, ExternalMove], cluster: Cluster,
                           reassignments: Mapping[TopicPartition, Reassignment], now_ms: int,
                           looked_at: Iterable[TopicPartition] | None) -> ExternalUpdate:
    """See RULES in the module docstring; `looked_at` None: every partition."""
    if looked_at is None:
        candidates = set(previous)
        candidates.update(p.tp for p in cluster.partitions() if p.reassigning)
    else:
        candidates = set(looked_at)
    moves = dict(previous)
    started: list[TopicPartition] = []
    held: list[TopicPartition] = []
    ended: list[TopicPartition] = []
    touched = False
    for tp in sorted(candidates):
        partition = cluster.partition(tp)
        record = reassignments.get(tp)
        old = previous.get(tp)
        if partition is None or not partition.reassigning or (record is not None and record.in_flight is not None):
            if old is not None:
                del moves[tp]
                ended.append(tp)
            continue
        ours = record is not None
        if old is None or (old.adding, old.removing) != (partition.adding, partition.removing):
            moves[tp] = ExternalMove(partition.replicas, partition.adding, partition.removing, now_ms, ours)
            started.append(tp)
            continue
        if ours and not old.held:
            old = replace(old, held=True)
            held.append(tp)
        if old.replicas != partition.replicas:
            old = replace(old, replicas=partition.replicas)
        if old is not previous[tp]:
            moves[tp] = old
            touched = True
    if not (started or held or ended or touched):
        return ExternalUpdate(previous)  # the same mapping: nothing to store
    return ExternalUpdate(moves, tuple(started), tuple(held), tuple(ended))
