"""One poll of the cluster through the Admin API (`ClusterAdmin.observe`): every read it needs,
sent together, merged into one `ClusterObservation`.

ONE POLL: DescribeCluster first (the live brokers), then the topic metadata, the ongoing
reassignments, min.insync.replicas of the topics known from the last poll and — when due or
hinted (`compute_log_dirs_hint`) — every live broker's DescribeLogDirs are sent **together** on
kafka-python's event loop, so that their broker-side work overlaps (one round trip of wall time
instead of one per request); a new topic's min.insync.replicas is asked after.

INVARIANTS
- A read that fails in the batch is done again alone through the adapter's usual path (with its
  retries and translation), so the fast path never changes what an error looks like.
- Log dirs that are neither due nor hinted are carried over from the previous poll: they cost
  as much as the metadata at 10,000 partitions, and a failed dir that holds a replica shows in
  the metadata at once (offline replicas), so only an empty dir's failure waits for the next
  due read (`log_dirs_interval_seconds`, 2 s by default).
- The dirs of a broker that cannot answer, or is fenced, are carried over too: nothing new is
  known about them, and its fencing tells the rest.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Mapping, Sequence

from runtime.clients.admin_answers import (
    compute_log_dirs,
    compute_min_insync_replicas,
    compute_partitions,
    compute_reassignments,
)
from runtime.clients.cluster_merge import compute_changed_partitions, compute_log_dirs_hint, compute_observation
from runtime.clients.cluster_observation import EMPTY, ClusterObservation, LogDirObservation
from runtime.clients.kafka_fast_reads import (
    Read,
    log_dir_reads,
    read_metadata,
    read_min_insync_replicas,
    read_reassignments,
)

if TYPE_CHECKING:
    from runtime.clients.kafka_admin import ClusterAdmin

log = logging.getLogger(__name__)


def observe_cluster(admin: ClusterAdmin, previous: ClusterObservation | None = None,
                    log_dirs_due: bool = True) -> ClusterObservation:
    """One poll (see the module doc). Log dirs are read when `log_dirs_due` or when the metadata
    hints a change, else carried over from `previous`."""
    previous = previous or EMPTY
    brokers = admin.describe_brokers()
    live = sorted(b.broker_id for b in brokers if not b.fenced)
    read_dirs = log_dirs_due or compute_log_dirs_hint(previous, brokers) is not None
    reads: dict[str, tuple[Read, tuple]] = {"metadata": (read_metadata, ()),
                                            "reassignments": (read_reassignments, ())}
    known_topics = sorted(previous.topics)
    if known_topics:  # the topics of the last poll; a new one is asked about below
        reads["min isr"] = (read_min_insync_replicas, (known_topics,))
    if read_dirs:
        reads |= log_dir_reads(live)
    answers = admin.read_together(reads)
    metadata = answers["metadata"]
    if isinstance(metadata, BaseException):
        partitions, topic_ids = admin.describe_partitions()
    else:
        partitions, topic_ids = compute_partitions(metadata)  # type: ignore[arg-type]
    listed = answers["reassignments"]
    reassignments = (admin.list_reassignments() if isinstance(listed, BaseException)
                     else compute_reassignments(listed))
    configs = answers.get("min isr")
    if isinstance(configs, BaseException):
        min_isr = admin.describe_min_insync_replicas(known_topics)
    else:
        min_isr = compute_min_insync_replicas(known_topics, configs or {})  # type: ignore[arg-type]
    min_isr |= admin.describe_min_insync_replicas(sorted(set(topic_ids) - set(known_topics)))
    registered = {b.broker_id for b in brokers}
    if not read_dirs:
        carried = [d for (broker_id, _), d in previous.log_dirs.items() if broker_id in registered]
        observation = compute_observation(brokers, partitions, topic_ids, reassignments, carried, min_isr,
                                          previous)
        # Only the partitions the merge did not carry over can hint (the others are equal).
        changed = compute_changed_partitions(previous, observation)
        hint = compute_log_dirs_hint(previous, brokers, partitions if changed is None else
                                     [observation.partitions[key] for key in changed])
        if hint is None:
            return observation
        log.debug("reading the log dirs before they are due: %s", hint)
        answers |= admin.read_together(log_dir_reads(live))
    log_dirs, unreachable = _log_dirs_of(admin, live, answers)
    silent = unreachable | {b.broker_id for b in brokers if b.fenced}
    log_dirs += [d for (broker_id, _), d in previous.log_dirs.items() if broker_id in silent]
    return compute_observation(brokers, partitions, topic_ids, reassignments, log_dirs, min_isr, previous)


def _log_dirs_of(admin: ClusterAdmin, broker_ids: Sequence[int], answers: Mapping[str, object],
                 ) -> tuple[list[LogDirObservation], set[int]]:
    """The dirs of `log_dir_reads` answers; a broker whose read failed is asked again alone."""
    dirs: list[LogDirObservation] = []
    unreachable: set[int] = set()
    for broker_id in broker_ids:
        answer = answers[f"log dirs {broker_id}"]
        if isinstance(answer, BaseException):
            again, failed = admin.describe_log_dirs([broker_id])
            dirs += again
            unreachable |= failed
        else:
            dirs += compute_log_dirs(broker_id, answer)  # type: ignore[arg-type]
    return dirs, unreachable
