"""One exception root for the whole product, with Kafka-style error codes.

Hierarchy::

    ReassignerError                       code: UNKNOWN_SERVER_ERROR
    ├── InvalidInputError                 a user's input is wrong; fix it and retry
    │   ├── MalformedInputError           INVALID_REQUEST: unparseable JSON/flags, names file and path
    │   ├── InvalidReplicaAssignmentError INVALID_REPLICA_ASSIGNMENT
    │   ├── UnknownTopicOrPartitionError  UNKNOWN_TOPIC_OR_PARTITION
    │   ├── NoReassignmentInProgressError NO_REASSIGNMENT_IN_PROGRESS
    │   ├── InvalidConfigError            INVALID_CONFIG
    │   ├── SchemaError                   INVALID_REQUEST: a record or schema file does not fit Avro
    │   └── DecodeError                   INVALID_REQUEST: bytes that are not a message (dead letter)
    ├── PlanInfeasibleError               PLAN_INFEASIBLE: no plan keeps the hard constraints
    ├── MissingDependencyError            MISSING_DEPENDENCY: a jar or program the product needs
    ├── LocalStackError                   LOCAL_STACK_ERROR: the local Kafka/Redis/Spark stack
    │   ├── StackNotUpError               the stack state file is missing
    │   ├── UnknownBrokerError            a broker id the stack does not run
    │   ├── PortInUseError                a requested port is taken
    │   └── ProcessStartError             a server did not start (carries its last log lines)
    ├── TransientError                    retry after a delay (broker or Redis briefly away)
    │   └── KafkaTransientError           a retriable Kafka error; code = its Kafka name
    │                                     (REQUEST_TIMED_OUT, NOT_CONTROLLER, NODE_NOT_READY...)
    └── PermanentError                    give up and alert
        ├── FencedError                   FENCED_EPOCH: a newer pipeline instance took over
        ├── StateStoreLostError           STATE_STORE_LOST: the Redis state is not the one this
        │                                 process wrote (emptied, or restored from an older copy)
        └── KafkaPermanentError           a Kafka error retrying will not fix; code = its Kafka
                                          name (REASSIGNMENT_IN_PROGRESS, LOG_DIR_NOT_FOUND...)

Kafka errors that the product names itself (UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT,
NO_REASSIGNMENT_IN_PROGRESS, INVALID_CONFIG) translate to the InvalidInputError subclasses above.

Every message says what was wrong and what to do about it. Third-party errors are translated
into this hierarchy at the edge, one function per library, so that the core never sees them.
A message never carries a secret: it is redacted when the error is made
(`schemas.redaction.redact`: URL passwords, JAAS and properties passwords, registered secrets),
so no printer, log line or alert built from it can leak one.
"""

from __future__ import annotations

from schemas.redaction import redact


class ReassignerError(Exception):
    """Root of every error the product raises on purpose."""

    code = "UNKNOWN_SERVER_ERROR"

    def __init__(self, message: str) -> None:
        message = redact(message)
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class InvalidInputError(ReassignerError):
    code = "INVALID_REQUEST"


class MalformedInputError(InvalidInputError):
    """Input that cannot be parsed: names the source, the JSON path and what was expected."""

    code = "INVALID_REQUEST"

    def __init__(self, source: str, path: str, expected: str, found: object = None) -> None:
        detail = f"{source}: at {path}: expected {expected}"
        if found is not None:
            detail += f", found {found!r}"
        super().__init__(detail)
        self.source = source
        self.path = path
        self.expected = expected


class InvalidReplicaAssignmentError(InvalidInputError):
    code = "INVALID_REPLICA_ASSIGNMENT"


class UnknownTopicOrPartitionError(InvalidInputError):
    code = "UNKNOWN_TOPIC_OR_PARTITION"


class NoReassignmentInProgressError(InvalidInputError):
    code = "NO_REASSIGNMENT_IN_PROGRESS"


class InvalidConfigError(InvalidInputError):
    code = "INVALID_CONFIG"


class SchemaError(InvalidInputError):
    """A record that does not fit its schema, an unknown schema name or version, a bad .avsc file."""


class DecodeError(InvalidInputError):
    """Bytes that do not decode as the topic's record: the message goes to the dead-letter topic."""


class PlanInfeasibleError(ReassignerError):
    """No placement keeps the constraints; `partition` names the one that cannot be placed (a
    `TopicPartition`), when it is one partition's."""

    code = "PLAN_INFEASIBLE"

    def __init__(self, message: str, partition: object | None = None) -> None:
        super().__init__(message)
        self.partition = partition


class MissingDependencyError(ReassignerError):
    """A jar or program the product needs is not there (the message says how to provide it)."""

    code = "MISSING_DEPENDENCY"


class LocalStackError(ReassignerError):
    code = "LOCAL_STACK_ERROR"


class StackNotUpError(LocalStackError):
    pass


class UnknownBrokerError(LocalStackError):
    pass


class PortInUseError(LocalStackError):
    pass


class ProcessStartError(LocalStackError):
    pass


class TransientError(ReassignerError):
    """A failure that may go away by itself: the caller retries after `retry_after_seconds`."""

    code = "TRANSIENT_ERROR"

    def __init__(self, message: str, retry_after_seconds: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after_seconds = retry_after_seconds


class PermanentError(ReassignerError):
    """A failure that retrying will not fix: the caller gives up and alerts."""

    code = "PERMANENT_ERROR"


class FencedError(PermanentError):
    """This pipeline instance's epoch is no longer the current one: a newer instance took over,
    and this one must stop without writing anything more."""

    code = "FENCED_EPOCH"


class StateStoreLostError(PermanentError):
    """The state store no longer holds what this process last wrote to it: it was emptied
    (FLUSHALL, a restart without persistence, a failover to an empty replica) or rolled back (a
    restore from an older backup). Nothing more is written over it; the writer rebuilds it."""

    code = "STATE_STORE_LOST"


class KafkaTransientError(TransientError):
    """A retriable error of a Kafka client or broker; `code` is the Kafka error name."""

    def __init__(self, message: str, kafka_error: str, retry_after_seconds: float = 1.0) -> None:
        super().__init__(message, retry_after_seconds)
        self.code = kafka_error


class KafkaPermanentError(PermanentError):
    """A Kafka error that retrying will not fix; `code` is the Kafka error name."""

    def __init__(self, message: str, kafka_error: str) -> None:
        super().__init__(message)
        self.code = kafka_error


def is_access_denied(error: ReassignerError) -> bool:
    """The cluster refused who we are or what we may do: retrying never helps, a process stops
    (every Kafka `*_AUTHORIZATION_FAILED`, a failed SASL authentication or TLS handshake)."""
    return error.code.endswith("_AUTHORIZATION_FAILED") or error.code in (
        "SASL_AUTHENTICATION_FAILED", "SSL_HANDSHAKE_FAILED")
