"""Validation of explicit replica targets (a `Reassign` request) against a cluster.

Each guard is named for what it refuses and raises with the numbers and the partition named:
- `require_known_partition`      -> UnknownTopicOrPartitionError (UNKNOWN_TOPIC_OR_PARTITION)
- `require_non_empty`            -> InvalidReplicaAssignmentError (INVALID_REPLICA_ASSIGNMENT)
- `require_non_negative_ids`     -> InvalidReplicaAssignmentError
- `require_no_duplicates`        -> InvalidReplicaAssignmentError
- `require_known_brokers`        -> InvalidReplicaAssignmentError
- `require_live_brokers`         -> InvalidReplicaAssignmentError (dead, draining or no online dir)
- `require_hostable`             -> InvalidReplicaAssignmentError (a new replica on a broker whose
                                   failed log dir held the partition, before it restarted, or
                                   whose every online dir is cordoned)
- `require_satisfiable_replication_factor` -> InvalidReplicaAssignmentError
- `require_log_dirs_match`       -> InvalidReplicaAssignmentError (one dir per replica)

`validate_targets` runs them all in that order, partitions in (topic, partition) order, so the
first error reported is deterministic. Pure: no I/O, the cluster is only read.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from planning.model import Cluster, TopicPartition
from schemas.errors import InvalidReplicaAssignmentError, UnknownTopicOrPartitionError


def require_known_partition(cluster: Cluster, tp: TopicPartition) -> None:
    if tp.topic not in cluster.topics_by_name:
        raise UnknownTopicOrPartitionError(f"{tp}: topic {tp.topic!r} does not exist")
    if cluster.partition(tp) is None:
        count = len(cluster.topics_by_name[tp.topic].partitions)
        raise UnknownTopicOrPartitionError(
            f"{tp}: topic {tp.topic!r} has {count} partitions, no partition {tp.partition}"
        )


def require_non_empty(tp: TopicPartition, replicas: Sequence[int]) -> None:
    if len(replicas) == 0:
        raise InvalidReplicaAssignmentError(f"{tp}: the replica list is empty")


def require_non_negative_ids(tp: TopicPartition, replicas: Sequence[int]) -> None:
    negative = [b for b in replicas if b < 0]
    if negative:
        raise InvalidReplicaAssignmentError(
            f"{tp}: broker ids must be non-negative, found {negative} in {list(replicas)}"
        )


def require_no_duplicates(tp: TopicPartition, replicas: Sequence[int]) -> None:
    seen: set[int] = set()
    twice = sorted({b for b in replicas if b in seen or seen.add(b)})
    if twice:
        raise InvalidReplicaAssignmentError(
            f"{tp}: broker(s) {twice} appear more than once in {list(replicas)}"
        )


def require_known_brokers(cluster: Cluster, tp: TopicPartition, replicas: Sequence[int]) -> None:
    unknown = [b for b in replicas if cluster.broker(b) is None]
    if unknown:
        raise InvalidReplicaAssignmentError(
            f"{tp}: broker(s) {unknown} are not in the cluster "
            f"(known: {sorted(cluster.brokers_by_id)})"
        )


def require_live_brokers(cluster: Cluster, tp: TopicPartition, replicas: Sequence[int]) -> None:
    for b in replicas:
        broker = cluster.broker(b)
        if broker is None:
            continue
        if not broker.alive:
            raise InvalidReplicaAssignmentError(f"{tp}: broker {b} is dead")
        if broker.draining:
            raise InvalidReplicaAssignmentError(f"{tp}: broker {b} is being drained")
        if not broker.eligible:
            raise InvalidReplicaAssignmentError(f"{tp}: broker {b} has no online log dir")


def require_hostable(cluster: Cluster, tp: TopicPartition, replicas: Sequence[int]) -> None:
    """Kafka would never start the replica: it keeps the partition marked as residing in the
    broker's offline dir until the broker restarts (`Broker.cannot_host`); or the broker takes no
    new replica: every online dir of it is cordoned (`Broker.cordoned`)."""
    partition = cluster.partition(tp)
    current = set(partition.replicas) if partition is not None else set()
    for b in replicas:
        if b not in current and b in cluster.brokers_that_cannot_host(tp):
            if b in cluster.cordoned_broker_ids and tp not in cluster.broker(b).cannot_host:
                raise InvalidReplicaAssignmentError(
                    f"{tp}: broker {b} takes no new replica: every online log dir of it is cordoned "
                    f"(cordoned.log.dirs); uncordon one or choose another")
            raise InvalidReplicaAssignmentError(
                f"{tp}: broker {b} cannot host this partition until it restarts: its failed log "
                f"dir held it; restart the broker (after replacing the disk) or choose another"
            )


def require_satisfiable_replication_factor(
    cluster: Cluster, tp: TopicPartition, replicas: Sequence[int]
) -> None:
    eligible = len(cluster.eligible_broker_ids)
    if len(replicas) > eligible:
        raise InvalidReplicaAssignmentError(
            f"{tp}: needs {len(replicas)} replicas but only {eligible} brokers are eligible"
        )


def require_log_dirs_match(
    tp: TopicPartition, replicas: Sequence[int], log_dirs: Sequence[str | None] | None
) -> None:
    if log_dirs is not None and len(log_dirs) != len(replicas):
        raise InvalidReplicaAssignmentError(
            f"{tp}: {len(log_dirs)} log dirs given for {len(replicas)} replicas"
        )


def validate_target(
    cluster: Cluster,
    tp: TopicPartition,
    replicas: Sequence[int],
    log_dirs: Sequence[str | None] | None = None,
) -> None:
    """Raise on the first thing wrong with one explicit target; return None when it is usable."""
    require_known_partition(cluster, tp)
    require_non_empty(tp, replicas)
    require_non_negative_ids(tp, replicas)
    require_no_duplicates(tp, replicas)
    require_known_brokers(cluster, tp, replicas)
    require_live_brokers(cluster, tp, replicas)
    require_hostable(cluster, tp, replicas)
    require_satisfiable_replication_factor(cluster, tp, replicas)
    require_log_dirs_match(tp, replicas, log_dirs)


def validate_targets(
    cluster: Cluster,
    targets: Mapping[TopicPartition, Sequence[int]],
    log_dirs: Mapping[TopicPartition, Sequence[str | None] | None] | None = None,
) -> None:
    """Validate every target; partitions are checked in (topic, partition) order."""
    for tp in sorted(targets):
        validate_target(cluster, tp, targets[tp], (log_dirs or {}).get(tp))
