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

ELIGIBLE LEADERS (KIP-966; only on a cluster with `eligible.leader.replicas.version` on): Kafka
keeps eligible leader replicas only while a partition's ISR is below its min ISR, and the
Metadata answer does not carry them. So after the merge, the partitions below min ISR or
leaderless — among those the merge did not carry over and those that were at the last poll
(`ClusterObservation.under_min_isr`), never all of them — are asked again with
DescribeTopicPartitions for their topics, and their observations get the answer. A healthy
cluster pays nothing; a degraded one one request and a copy of the partition map. A failed read
leaves them as the merge made them (the carried ones keep what they had) and is tried at the
next poll.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Mapping, Sequence

from runtime.clients.admin_answers import (
    compute_log_dirs,
    compute_min_insync_replicas,
    compute_partitions,
    compute_reassignments,
)
from runtime.clients.cluster_merge import (
    compute_changed_partitions,
    compute_lagging_reassignments,
    compute_log_dirs_hint,
    compute_observation,
)
from runtime.clients.cluster_observation import EMPTY, ClusterObservation, LogDirObservation
from schemas.errors import ReassignerError
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
                    log_dirs_due: bool = True, eligible_leaders: bool = False) -> ClusterObservation:
    """One poll (see the module doc). Log dirs are read when `log_dirs_due` or when the metadata
    hints a change, else carried over from `previous`; with `eligible_leaders`, the partitions
    under min ISR get theirs (ELIGIBLE LEADERS)."""
    observation = _observe(admin, previous, log_dirs_due)
    if not eligible_leaders:
        return observation
    return _with_eligible_leaders(admin, observation, previous or EMPTY)


def _with_eligible_leaders(admin: ClusterAdmin, observation: ClusterObservation,
                           previous: ClusterObservation) -> ClusterObservation:
    """`observation` with the eligible leader replicas of its partitions under min ISR (module
    doc, ELIGIBLE LEADERS)."""
    partitions, topics = observation.partitions, observation.topics
    changed = compute_changed_partitions(previous, observation)
    looked_at = set(partitions) if changed is None else set(changed) | previous.under_min_isr

    def under_min_isr(key) -> bool:
        p = partitions.get(key)
        if p is None:
            return False
        topic = topics.get(key[0])
        needed = topic.min_insync_replicas if topic is not None and topic.min_insync_replicas else 1
        return p.leader is None or len(p.isr) < needed

    under = frozenset(key for key in looked_at if under_min_isr(key))
    if not under:
        return replace(observation, under_min_isr=under) if previous.under_min_isr else observation
    try:
        answer = admin.describe_eligible_leaders(sorted({topic for topic, _ in under}))
    except ReassignerError as error:
        log.debug("eligible leaders not read (again at the next poll): %s", error)
        return replace(observation, under_min_isr=under)
    patched = {}
    for key in under:
        p = partitions[key]
        eligible, last_known = answer.get(key, ((), ()))
        if (p.eligible_leaders, p.last_known_elr) != (eligible, last_known):
            patched[key] = replace(p, eligible_leaders=eligible, last_known_elr=last_known)
    if not patched:
        return replace(observation, under_min_isr=under)
    merged = dict(partitions)
    merged.update(patched)
    index = observation.merge_index()
    derived = None if index is None else replace(index, partitions=merged, changed=index.changed | set(patched))
    return replace(observation, partitions=merged, derived=derived, under_min_isr=under)


def _observe(admin: ClusterAdmin, previous: ClusterObservation | None,
             log_dirs_due: bool) -> ClusterObservation:
    """The poll without eligible leaders (see the module doc)."""
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
    # A move the list says ended while the metadata still shows its replicas is kept one more poll.
    reassignments = compute_lagging_reassignments(previous, partitions, reassignments)
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
