"""Why a reassignment waits: what the last decision found, kept for `list` and `status`.

The batch rule (`planning.movement.batches`) names, for every candidate it examines and does not
start, the limit or guard that refused it ("broker 3 has 2 movements in flight, limit B = 2",
"step leaves 1 in-sync replicas, below min.insync.replicas = 2", "Kafka shows the partition
reassigning ..."). `handlers.progress` keeps those reasons in `ControllerState.waiting`, so the
operator reads the pipeline's own words instead of a second judgement made elsewhere.

What is not examined is explained by the reader from the state (`reassigner.operator.views`):
paused, mode observe, a retry pending, no step possible with the in-sync replicas, or a slot
(once P steps fly the walk stops, and candidates held by L or B are passed over unexamined).

Bounded: at most `MAX_WAITING_REASONS` entries (the first in the batch order), so that a refusal
met by a whole backlog cannot grow the stored state past a small JSON value. Pure.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from planning.model import TopicPartition
from planning.movement.batches import Deferral
from planning.movement.reassignment import Reassignment

MAX_WAITING_REASONS = 1000


def compute_waiting(deferred: Iterable[Deferral],
                    reassignments: Mapping[TopicPartition, Reassignment]) -> dict[TopicPartition, str]:
    """tp → why it did not start now, for the active reassignments the decision deferred."""
    waiting: dict[TopicPartition, str] = {}
    for deferral in deferred:
        if len(waiting) >= MAX_WAITING_REASONS:
            break
        if deferral.tp in reassignments:
            waiting.setdefault(deferral.tp, deferral.reason)
    return waiting
