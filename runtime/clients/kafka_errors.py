"""The one place where Kafka client errors become `schemas.errors`, for kafka-python (the Admin
API) and librdkafka (producers, consumers) alike.

THE RULE (`translate_kafka_error`):
- retriable Kafka errors, lost connections, timeouts, an unknown broker id, no controller, a
  group coordinator loading or moving →
  `KafkaTransientError` (code = Kafka error name, `retry_after_seconds`);
- UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS,
  INVALID_CONFIG → the product's own subclasses (the pipeline knows these names);
- anything else → `KafkaPermanentError` (code = Kafka error name).
kafka-python and librdkafka spell a few names their own way; they are given the Kafka broker's
spelling (errno 6 NOT_LEADER_OR_FOLLOWER, librdkafka's NOT_LEADER_FOR_PARTITION too; errno 39
INVALID_REPLICA_ASSIGNMENT). A partition whose leadership is moving (NOT_LEADER_OR_FOLLOWER,
LEADER_NOT_AVAILABLE, a fenced or unknown leader epoch, an offset not yet available) is
transient whichever library says so: Kafka's protocol marks them retriable, and librdkafka's
offset lookups report them without its retriable flag. Where kafka-python answers
an error *class* per partition, or an error *string* per resource (`alter_configs`), the
`raise_for_*` helpers raise the same translation.

INVARIANTS
- An error that is already a `ReassignerError` passes unchanged; the message always starts with
  what was being done ("doing: NAME: detail").
- The client libraries are imported where an error is read, never at import time.
"""

from __future__ import annotations

from schemas.errors import (
    InvalidConfigError,
    InvalidReplicaAssignmentError,
    KafkaPermanentError,
    KafkaTransientError,
    NoReassignmentInProgressError,
    ReassignerError,
    UnknownTopicOrPartitionError,
)

# Kafka's own spelling where kafka-python differs (by errno).
KAFKA_NAMES_BY_ERRNO = {-1: "UNKNOWN_SERVER_ERROR", 6: "NOT_LEADER_OR_FOLLOWER",
                        39: "INVALID_REPLICA_ASSIGNMENT"}
PRODUCT_ERRORS: dict[str, type[ReassignerError]] = {
    "UNKNOWN_TOPIC_OR_PARTITION": UnknownTopicOrPartitionError,
    "INVALID_REPLICA_ASSIGNMENT": InvalidReplicaAssignmentError,
    "NO_REASSIGNMENT_IN_PROGRESS": NoReassignmentInProgressError,
    "INVALID_CONFIG": InvalidConfigError,
}
# librdkafka's local conditions that waiting will not fix (the rest, timeouts and transport
# errors, mean the cluster or a broker is away for now).
LOCAL_PERMANENT_NAMES = frozenset({
    "AUTHENTICATION", "SSL", "INVALID_ARG", "UNKNOWN_PROTOCOL", "NOT_IMPLEMENTED",
    "UNSUPPORTED_FEATURE", "FATAL", "INVALID_TYPE", "MSG_SIZE_TOO_LARGE", "UNKNOWN_TOPIC",
    "UNKNOWN_PARTITION", "KEY_SERIALIZATION", "VALUE_SERIALIZATION",
})
# librdkafka's names where the broker's differ.
KAFKA_NAMES_BY_LIBRDKAFKA_NAME = {"NOT_LEADER_FOR_PARTITION": "NOT_LEADER_OR_FOLLOWER"}
# Conditions that mean "the cluster, a broker or a partition's leadership is away for now".
TRANSIENT_NAMES = frozenset({
    "UNKNOWN_BROKER_ID", "NO_BROKERS_AVAILABLE", "KAFKA_CONNECTION", "NODE_NOT_READY",
    "KAFKA_TIMEOUT", "REQUEST_TIMED_OUT", "NOT_CONTROLLER", "BROKER_NOT_AVAILABLE",
    "TRANSPORT", "ALL_BROKERS_DOWN", "TIMED_OUT", "CONNECTION_ERROR", "NETWORK_EXCEPTION",
    "NOT_LEADER_OR_FOLLOWER", "LEADER_NOT_AVAILABLE", "FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH",
    "OFFSET_NOT_AVAILABLE", "COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR",
    "NOT_COORDINATOR_FOR_GROUP",
})


def _snake_upper(name: str) -> str:
    if name.endswith("Error"):
        name = name[: -len("Error")]
    out = [name[0]]
    for previous, char in zip(name, name[1:]):
        if char.isupper() and not previous.isupper():
            out.append("_")
        out.append(char)
    return "".join(out).upper()


def kafka_error_name(error: BaseException) -> str:
    """The Kafka error name of a kafka-python or confluent-kafka exception."""
    from confluent_kafka import KafkaError as LibrdkafkaError, KafkaException

    if isinstance(error, KafkaException) and error.args and isinstance(error.args[0], LibrdkafkaError):
        error = error.args[0]
    if isinstance(error, LibrdkafkaError):
        name = error.name().lstrip("_")
        return KAFKA_NAMES_BY_LIBRDKAFKA_NAME.get(name, name)
    errno = getattr(error, "errno", None)
    if isinstance(errno, int) and errno in KAFKA_NAMES_BY_ERRNO and hasattr(type(error), "message"):
        return KAFKA_NAMES_BY_ERRNO[errno]
    message = getattr(type(error), "message", None)
    if isinstance(message, str) and message.isupper():
        return message
    return _snake_upper(type(error).__name__)


def translate_kafka_error(error: object, doing: str) -> ReassignerError:
    """The `schemas.errors` form of any exception raised by a Kafka client while `doing`, or
    of a confluent-kafka `KafkaError` as a delivery report gives it."""
    if isinstance(error, ReassignerError):
        return error
    from confluent_kafka import KafkaError as LibrdkafkaError, KafkaException

    if isinstance(error, LibrdkafkaError):
        error = KafkaException(error)

    name = kafka_error_name(error)
    detail = str(error) or type(error).__name__
    message = f"{doing}: {name}: {detail}"
    if name in PRODUCT_ERRORS:
        return PRODUCT_ERRORS[name](message)
    if isinstance(error, KafkaException) and error.args and isinstance(error.args[0], LibrdkafkaError):
        local = error.args[0].code() < 0  # librdkafka's own condition (timed out, transport...)
        retriable = (error.args[0].retriable() or name in TRANSIENT_NAMES
                     or (local and name not in LOCAL_PERMANENT_NAMES))
    elif isinstance(error, (OSError, TimeoutError, ConnectionError)):
        retriable, name = True, "CONNECTION_ERROR"
    elif isinstance(error, RuntimeError) and "controller" in detail.lower():
        retriable, name = True, "NOT_CONTROLLER"  # kafka-python: "Failed to find active controller id!"
    elif isinstance(error, ValueError):
        return InvalidReplicaAssignmentError(message)  # kafka-python's check of replica lists
    else:
        retriable = bool(getattr(error, "retriable", False)) or name in TRANSIENT_NAMES
    if retriable:
        return KafkaTransientError(message, name, retry_after_seconds=1.0)
    return KafkaPermanentError(message, name)


def raise_for_error_class(error_class: object, doing: str) -> None:
    """Raise the translation of an error *class* (as kafka-python returns per partition)."""
    import kafka.errors as kafka_errors

    if error_class is None or error_class is kafka_errors.NoError:
        return
    raise translate_kafka_error(error_class(), doing)  # type: ignore[operator]


def raise_for_result_string(result: str, doing: str) -> None:
    """kafka-python's alter_configs answers 'OK' or 'ClassName: message' per resource."""
    import kafka.errors as kafka_errors

    if result == "OK":
        return
    class_name, _, detail = result.partition(":")
    error_class = getattr(kafka_errors, class_name.strip(), None)
    if isinstance(error_class, type) and issubclass(error_class, Exception):
        raise translate_kafka_error(error_class(detail.strip()), doing)
    raise KafkaPermanentError(f"{doing}: {result}", "UNKNOWN_SERVER_ERROR")
