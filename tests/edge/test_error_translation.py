"""Kafka client errors become the product's errors in one place, keeping the Kafka error name."""

from __future__ import annotations

import kafka.errors as kafka_errors
import pytest
from confluent_kafka import KafkaError, KafkaException

from runtime.clients.admin_answers import group_throttled_replicas
from runtime.clients.kafka_errors import translate_kafka_error
from schemas.errors import (
    InvalidReplicaAssignmentError,
    KafkaPermanentError,
    KafkaTransientError,
    NoReassignmentInProgressError,
    UnknownTopicOrPartitionError,
)


@pytest.mark.parametrize("error, expected_type, code", [
    (kafka_errors.NoReassignmentInProgressError(), NoReassignmentInProgressError, "NO_REASSIGNMENT_IN_PROGRESS"),
    (kafka_errors.UnknownTopicOrPartitionError(), UnknownTopicOrPartitionError, "UNKNOWN_TOPIC_OR_PARTITION"),
    (kafka_errors.InvalidReplicationAssignmentError(), InvalidReplicaAssignmentError, "INVALID_REPLICA_ASSIGNMENT"),
    (kafka_errors.ReassignmentInProgressError(), KafkaPermanentError, "REASSIGNMENT_IN_PROGRESS"),
    (kafka_errors.LogDirNotFoundError(), KafkaPermanentError, "LOG_DIR_NOT_FOUND"),
    (kafka_errors.NotLeaderForPartitionError(), KafkaTransientError, "NOT_LEADER_OR_FOLLOWER"),
    (kafka_errors.RequestTimedOutError(), KafkaTransientError, "REQUEST_TIMED_OUT"),
    (kafka_errors.UnknownBrokerIdError(4), KafkaTransientError, "UNKNOWN_BROKER_ID"),
    (kafka_errors.KafkaConnectionError(), KafkaTransientError, "KAFKA_CONNECTION"),
    (RuntimeError("Failed to find active controller id!"), KafkaTransientError, "NOT_CONTROLLER"),
    (ConnectionRefusedError(111, "refused"), KafkaTransientError, "CONNECTION_ERROR"),
    (KafkaException(KafkaError(KafkaError._TRANSPORT)), KafkaTransientError, "TRANSPORT"),
    # librdkafka's watermark lookup during a leader change (regression: was permanent, and a
    # store rebuild on a throttled machine failed on it)
    (KafkaException(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION, "Failed to get watermark offsets")),
     KafkaTransientError, "NOT_LEADER_OR_FOLLOWER"),
    (KafkaException(KafkaError(KafkaError.LEADER_NOT_AVAILABLE)), KafkaTransientError, "LEADER_NOT_AVAILABLE"),
    (KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)), KafkaPermanentError,
     "TOPIC_AUTHORIZATION_FAILED"),
])
def test_kafka_errors_translate_with_their_name(error, expected_type, code):
    translated = translate_kafka_error(error, "doing something")
    assert type(translated) is expected_type
    assert translated.code == code
    assert str(translated).startswith("doing something: ")
    if isinstance(translated, KafkaTransientError):
        assert translated.retry_after_seconds > 0


def test_throttled_replicas_are_grouped_per_topic_as_the_kafka_tool_writes_them():
    grouped = group_throttled_replicas([
        {"topic": "t", "partition": 0, "leader_broker_ids": [1, 2], "follower_broker_ids": [3]},
        {"topic": "t", "partition": 1, "leader_broker_ids": [2], "follower_broker_ids": []},
        {"topic": "u", "partition": 4, "leader_broker_ids": [], "follower_broker_ids": [5]},
    ])
    assert grouped == {
        "t": {"leader.replication.throttled.replicas": "0:1,0:2,1:2",
              "follower.replication.throttled.replicas": "0:3"},
        "u": {"follower.replication.throttled.replicas": "4:5"},
    }

