"""The typed answer of one poll of the Admin API, and its merge (pure), under one name for the
code outside `runtime.clients` that reads them: the names are defined in
`runtime.clients.cluster_observation` (the observation's types, and Kafka's config names a poll
reads or the throttles write) and `runtime.clients.cluster_merge` (the merge of one poll's
answers, and what it tells the watcher's diff). Code inside `runtime.clients` imports those.
"""

from __future__ import annotations

from runtime.clients.cluster_merge import (
    compute_changed_log_dirs,
    compute_changed_partitions,
    compute_log_dirs_hint,
    compute_observation,
    compute_partition_sizes,
    compute_replication_factor,
)
from runtime.clients.cluster_observation import (
    EMPTY,
    FOLLOWER_THROTTLED_RATE,
    FOLLOWER_THROTTLED_REPLICAS,
    KAFKA_STORAGE_ERROR,
    LEADER_THROTTLED_RATE,
    LEADER_THROTTLED_REPLICAS,
    LOG_DIR_THROTTLED_RATE,
    MIN_INSYNC_REPLICAS,
    BrokerObservation,
    ClusterObservation,
    LogDirKey,
    LogDirObservation,
    MergeIndex,
    PartitionKey,
    PartitionList,
    PartitionObservation,
    PartitionState,
    ReplicaInDir,
    ReplicaKey,
    ReplicaList,
    TopicObservation,
)

__all__ = [
    "EMPTY", "FOLLOWER_THROTTLED_RATE", "FOLLOWER_THROTTLED_REPLICAS", "KAFKA_STORAGE_ERROR",
    "LEADER_THROTTLED_RATE", "LEADER_THROTTLED_REPLICAS", "LOG_DIR_THROTTLED_RATE", "MIN_INSYNC_REPLICAS",
    "BrokerObservation", "ClusterObservation", "LogDirKey", "LogDirObservation", "MergeIndex", "PartitionKey",
    "PartitionList", "PartitionObservation", "PartitionState", "ReplicaInDir", "ReplicaKey", "ReplicaList",
    "TopicObservation", "compute_changed_log_dirs", "compute_changed_partitions", "compute_log_dirs_hint",
    "compute_observation", "compute_partition_sizes", "compute_replication_factor",
]
