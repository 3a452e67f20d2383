"""The one adapter over the Kafka Admin API (kafka-python's KafkaAdminClient) and the one place
where Kafka client errors become `schemas.errors`.

kafka-python is used because it alone speaks every API the product needs: DescribeCluster with
fenced brokers, ListPartitionReassignments, AlterPartitionReassignments, DescribeLogDirs and
AlterReplicaLogDirs (confluent-kafka exposes none of the last four).

ERRORS (`translate_kafka_error`, for kafka-python and librdkafka alike):
- retriable Kafka errors, lost connections, timeouts, an unknown broker id, no controller →
  `KafkaTransientError` (code = Kafka error name, `retry_after_seconds`);
- UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS,
  INVALID_CONFIG → the product's own subclasses (the pipeline knows these names);
- anything else → `KafkaPermanentError` (code = Kafka error name).
kafka-python spells a few names its own way; they are given the Kafka broker's spelling
(errno 6 NOT_LEADER_OR_FOLLOWER, errno 39 INVALID_REPLICA_ASSIGNMENT).

KAFKA-PYTHON QUIRKS handled here:
- it caches cluster metadata (5 min by default) and the controller id, and routes a request by
  them, raising UnknownBrokerIdError for a broker added since or a controller that died: a new
  client (fresh metadata, the live controller) retries once; still unknown then means not
  registered or fenced → BROKER_NOT_AVAILABLE (permanent);
- it caches the "controller" id (in KRaft any broker forwards controller requests) and never
  forgets it when that broker dies, so every controller request then fails: on any transient
  error the client is closed and re-created (lazily, on the next call);
- its reconnect backoff grows to 30 s by default, which would hide a restarted broker: capped low;
- `describe_log_dirs()` with no partitions fetches all metadata and lists every partition in
  the request: the protocol's null list ("all") is sent instead (4x faster at 10k partitions);
- its `describe_topics()` and `describe_log_dirs()` turn the answer into dicts (`to_dict`),
  which at 10,000 partitions costs more client CPU than decoding it: the Metadata and
  DescribeLogDirs requests are sent by `kafka_fast_reads` (the only module that touches
  kafka-python's private internals) and their answer structs read as they are;
- a client whose bootstrap fails raises from its constructor with its network thread and
  connections left running: it is made through `kafka_fast_reads.open_admin_client`, which
  stops them (one thread and its sockets leaked per reconnect attempt before);
- `describe_configs` answers {} for an unknown topic instead of an error; `alter_configs` answers
  error *strings*; `alter_partition_reassignments` answers an error class per partition.

ONE POLL (`observe`): DescribeCluster first (the live brokers), then the topic metadata, the
ongoing reassignments, min.insync.replicas of the topics known from the last poll and — when due
or hinted (`observation.compute_log_dirs_hint`) — every live broker's DescribeLogDirs are sent
**together** on kafka-python's event loop, so that their broker-side work overlaps (one round
trip of wall time instead of one per request); a new topic's min.insync.replicas is asked
after. Any of those reads that fails is done again alone
through the usual path (with its retries and translation), so the fast path never changes what
an error looks like. Log dirs that are neither due nor hinted are carried over from the previous
poll: they cost as much as the metadata at 10,000 partitions, and a failed dir that holds a
replica shows in the metadata at once (offline replicas), so only an empty dir's failure waits
for the next due read (`log_dirs_interval_seconds`, 2 s by default).

RECONNECTING: a client that cannot be created (cluster unreachable) raises
`KafkaTransientError`, and the next attempt is refused until an exponential backoff (0.5 s doubling
to 10 s) has passed, so a caller that retries in a loop never hot-loops against a dead cluster.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from operator import itemgetter
from typing import Callable, Iterable, Mapping, Sequence, TypeVar

from runtime.backoff import Backoff
from runtime.clients.client_config import ClientConfig
from runtime.clients.kafka_fast_reads import (
    Read,
    gather_reads,
    log_dir_reads,
    open_admin_client,
    read_log_dirs,
    read_metadata,
    read_min_insync_replicas,
    read_reassignments,
    alter_config_op,
    run_read,
)
from runtime.clients.cluster_answers import (
    EMPTY,
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_REPLICAS,
    KAFKA_STORAGE_ERROR,
    BrokerObservation,
    ClusterObservation,
    LogDirObservation,
    PartitionList,
    ReplicaList,
    compute_changed_partitions,
    compute_log_dirs_hint,
    compute_observation,
)
from schemas.errors import (
    InvalidConfigError,
    InvalidReplicaAssignmentError,
    KafkaPermanentError,
    KafkaTransientError,
    NoReassignmentInProgressError,
    ReassignerError,
    UnknownTopicOrPartitionError,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

# A client that cannot be created is not tried again before this backoff has passed.
CONNECT_BACKOFF = Backoff(first_seconds=0.5, most_seconds=10.0)

MIN_INSYNC_REPLICAS = "min.insync.replicas"
BY_REPLICA_KEY = itemgetter(0, 1, 2)  # of a replica row: (topic, partition, is_future)

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
# Client-side conditions that mean "the cluster or a broker is away for now".
TRANSIENT_NAMES = frozenset({
    "UNKNOWN_BROKER_ID", "NO_BROKERS_AVAILABLE", "KAFKA_CONNECTION", "NODE_NOT_READY",
    "KAFKA_TIMEOUT", "REQUEST_TIMED_OUT", "NOT_CONTROLLER", "BROKER_NOT_AVAILABLE",
    "TRANSPORT", "ALL_BROKERS_DOWN", "TIMED_OUT", "CONNECTION_ERROR", "NETWORK_EXCEPTION",
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

    if isinstance(error, LibrdkafkaError):
        return error.name().lstrip("_")
    if isinstance(error, KafkaException) and error.args and isinstance(error.args[0], LibrdkafkaError):
        return error.args[0].name().lstrip("_")
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


def _raise_for(error_class: object, doing: str) -> None:
    """Raise the translation of an error *class* (as kafka-python returns per partition)."""
    import kafka.errors as kafka_errors

    if error_class is None or error_class is kafka_errors.NoError:
        return
    raise translate_kafka_error(error_class(), doing)  # type: ignore[operator]


def _raise_for_string(result: str, doing: str) -> None:
    """kafka-python's alter_configs answers 'OK' or 'ClassName: message' per resource."""
    import kafka.errors as kafka_errors

    if result == "OK":
        return
    class_name, _, detail = result.partition(":")
    error_class = getattr(kafka_errors, class_name.strip(), None)
    if isinstance(error_class, type) and issubclass(error_class, Exception):
        raise translate_kafka_error(error_class(detail.strip()), doing)
    raise KafkaPermanentError(f"{doing}: {result}", "UNKNOWN_SERVER_ERROR")


class ClusterAdmin:
    """Admin API calls with Kafka errors translated; re-creates its client after a failure."""

    def __init__(self, bootstrap_servers: str, client_config: ClientConfig | None = None,
                 request_timeout_ms: int = 15000) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.client_config = client_config or ClientConfig()
        self.request_timeout_ms = request_timeout_ms
        self._client = None
        self._connect_delays = CONNECT_BACKOFF.delays()
        self._next_connect_at = 0.0

    # --- client lifecycle -----------------------------------------------------------------------
    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except Exception:  # closing a half-broken client must not hide the real error
                log.debug("closing the admin client failed", exc_info=True)

    def __enter__(self) -> "ClusterAdmin":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _connected(self):
        if self._client is not None:
            return self._client
        now = time.monotonic()
        if now < self._next_connect_at:
            wait = self._next_connect_at - now
            raise KafkaTransientError(
                f"the cluster at {self.bootstrap_servers} was unreachable; next attempt in {wait:.1f} s",
                "NO_BROKERS_AVAILABLE", retry_after_seconds=wait)
        try:
            self._client = open_admin_client(**compute_admin_options(
                self.bootstrap_servers, self.request_timeout_ms, self.client_config))
        except Exception as error:
            backoff = next(self._connect_delays)
            self._next_connect_at = time.monotonic() + backoff
            translated = translate_kafka_error(error, f"connecting to {self.bootstrap_servers}")
            if isinstance(translated, KafkaTransientError):
                translated.retry_after_seconds = backoff
            raise translated from None
        self._connect_delays = CONNECT_BACKOFF.delays()
        return self._client

    def _call(self, doing: str, action: Callable[[object], T]) -> T:
        """Run `action(client)`; translate errors; handle the stale-metadata and dead-controller
        quirks (see module doc)."""
        import kafka.errors as kafka_errors

        for attempt in (1, 2):
            client = self._connected()
            try:
                return action(client)
            except kafka_errors.UnknownBrokerIdError as error:
                if attempt == 1:
                    # The cached metadata, or the cached controller id (kafka-python never
                    # forgets it when that broker dies), names a broker that is gone: a new client
                    # reads both afresh. Refreshing the metadata alone kept the dead controller.
                    log.debug("%s: broker %s unknown to the cached metadata; new client", doing, error)
                    self.close()
                    continue
                # Still unknown after a fresh metadata read: the broker is not registered, or
                # fenced (metadata lists unfenced brokers only). Retrying will not help soon.
                raise KafkaPermanentError(
                    f"{doing}: BROKER_NOT_AVAILABLE: broker {error} is not registered and "
                    "unfenced in the cluster metadata", "BROKER_NOT_AVAILABLE") from None
            except Exception as error:
                translated = translate_kafka_error(error, doing)
                if isinstance(translated, KafkaTransientError):
                    # A fresh client forgets the cached controller id and metadata; one more
                    # try with it, since the first failure often was just that cache.
                    self.close()
                    if attempt == 1:
                        log.debug("%s: %s; retrying with a new client", doing, translated)
                        continue
                raise translated from None
        raise AssertionError("unreachable")

    # --- describe -------------------------------------------------------------------------------
    def describe_brokers(self) -> list[BrokerObservation]:
        """Every registered broker, fenced ones included (DescribeCluster)."""
        answer = self._call("describe cluster", lambda c: c.describe_cluster())
        return [
            BrokerObservation(broker_id=b["broker_id"], rack=b.get("rack"), host=b.get("host"),
                              port=b.get("port"), fenced=bool(b.get("is_fenced", False)))
            for b in answer["brokers"]
        ]

    def describe_partitions(self) -> tuple[PartitionList, dict[str, str | None]]:
        """Every partition of every topic (Metadata) and the topic ids (see `compute_partitions`)."""
        return compute_partitions(self._call("describe topics", lambda c: run_read(c, read_metadata)))

    def read_assignment(self, topic: str, partition: int,
                        ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]] | None:
        """(replicas, adding, removing) of one partition now, asked of the cluster (Metadata of
        its topic and ListPartitionReassignments of it alone); None when it does not exist."""
        found, _ids = compute_partitions(self._call(f"describe topic {topic}",
                                                    lambda c: run_read(c, read_metadata, [topic])))
        replicas = next((p.replicas for p in found if p.partition == partition), None)
        if replicas is None:
            return None
        moving = compute_reassignments(self._call(
            f"list the reassignment of {topic}-{partition}",
            lambda c: c.list_partition_reassignments({topic: [partition]})))
        adding, removing = moving.get((topic, partition), ((), ()))
        return replicas, adding, removing

    def list_reassignments(self) -> dict[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...]]]:
        """Ongoing reassignments: (topic, partition) → (adding, removing)."""
        return compute_reassignments(
            self._call("list partition reassignments", lambda c: c.list_partition_reassignments()))

    def describe_log_dirs(self, broker_ids: Iterable[int]) -> tuple[list[LogDirObservation], set[int]]:
        """Log dirs of each broker (DescribeLogDirs), and the brokers that could not answer."""
        dirs: list[LogDirObservation] = []
        unreachable: set[int] = set()
        for broker_id in sorted(broker_ids):
            try:
                answer = self._call(f"describe log dirs of broker {broker_id}",
                                    lambda c, b=broker_id: run_read(c, read_log_dirs, b))
            except (KafkaTransientError, KafkaPermanentError) as error:
                log.debug("%s", error)
                unreachable.add(broker_id)
                continue
            dirs.extend(compute_log_dirs(broker_id, answer))
        return dirs, unreachable

    def read_together(self, reads: Mapping[str, tuple[Read, tuple]]) -> dict[str, object]:
        """Send several reads at once (`reads`: name → (a `_read_*` coroutine, its arguments
        after the client)); each answer is the read's result or the exception it raised. The
        caller redoes a failed read alone (see ONE POLL)."""
        return self._call("read the cluster", lambda c: gather_reads(c, reads))

    def describe_min_insync_replicas(self, topics: Sequence[str]) -> dict[str, int | None]:
        """Effective min.insync.replicas per topic (None where the broker gave no value)."""
        if not topics:
            return {}
        answer = self._call("describe topic configs", lambda c: run_read(c, read_min_insync_replicas, topics))
        return compute_min_insync_replicas(topics, answer)  # type: ignore[arg-type]

    def observe(self, previous: ClusterObservation | None = None,
                log_dirs_due: bool = True) -> ClusterObservation:
        """One poll (see ONE POLL in the module doc). Log dirs are read when `log_dirs_due` or
        when the metadata hints a change, else carried over from `previous`; those of a broker
        that cannot answer are carried over too (nothing new is known about them; its fencing
        tells the rest)."""
        previous = previous or EMPTY
        brokers = self.describe_brokers()
        live = sorted(b.broker_id for b in brokers if not b.fenced)
        read_dirs = log_dirs_due or compute_log_dirs_hint(previous, brokers) is not None
        reads: dict[str, tuple[Read, tuple]] = {"metadata": (read_metadata, ()),
                                                "reassignments": (read_reassignments, ())}
        known_topics = sorted(previous.topics)
        if known_topics:  # the topics of the last poll; a new one is asked about below
            reads["min isr"] = (read_min_insync_replicas, (known_topics,))
        if read_dirs:
            reads |= log_dir_reads(live)
        answers = self.read_together(reads)
        metadata = answers["metadata"]
        if isinstance(metadata, BaseException):
            partitions, topic_ids = self.describe_partitions()
        else:
            partitions, topic_ids = compute_partitions(metadata)  # type: ignore[arg-type]
        listed = answers["reassignments"]
        reassignments = (self.list_reassignments() if isinstance(listed, BaseException)
                         else compute_reassignments(listed))
        configs = answers.get("min isr")
        if isinstance(configs, BaseException):
            min_isr = self.describe_min_insync_replicas(known_topics)
        else:
            min_isr = compute_min_insync_replicas(known_topics, configs or {})  # type: ignore[arg-type]
        min_isr |= self.describe_min_insync_replicas(sorted(set(topic_ids) - set(known_topics)))
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
            answers |= self.read_together(log_dir_reads(live))
        log_dirs, unreachable = self._log_dirs_of(live, answers)
        silent = unreachable | {b.broker_id for b in brokers if b.fenced}
        log_dirs += [d for (broker_id, _), d in previous.log_dirs.items() if broker_id in silent]
        return compute_observation(brokers, partitions, topic_ids, reassignments, log_dirs, min_isr, previous)

    def _log_dirs_of(self, broker_ids: Sequence[int], answers: Mapping[str, object],
                     ) -> tuple[list[LogDirObservation], set[int]]:
        """The dirs of `log_dir_reads` answers; a broker whose read failed is asked again alone."""
        dirs: list[LogDirObservation] = []
        unreachable: set[int] = set()
        for broker_id in broker_ids:
            answer = answers[f"log dirs {broker_id}"]
            if isinstance(answer, BaseException):
                again, failed = self.describe_log_dirs([broker_id])
                dirs += again
                unreachable |= failed
            else:
                dirs += compute_log_dirs(broker_id, answer)  # type: ignore[arg-type]
        return dirs, unreachable

    # --- change ---------------------------------------------------------------------------------
    def alter_partition_reassignment(self, topic: str, partition: int,
                                     target_replicas: Sequence[int] | None) -> None:
        """Start (or replace) a reassignment to `target_replicas`; None cancels the one running."""
        from kafka.structs import TopicPartition

        doing = (f"cancel reassignment of {topic}-{partition}" if target_replicas is None else
                 f"reassign {topic}-{partition} to {list(target_replicas)}")
        target = None if target_replicas is None else [int(b) for b in target_replicas]
        answer = self._call(doing, lambda c: c.alter_partition_reassignments(
            {TopicPartition(topic, partition): target}))
        for error_class in answer.values():
            _raise_for(error_class, doing)

    def elect_preferred_leader(self, topic: str, partition: int) -> None:
        """Preferred-leader election for one partition; 'not needed' counts as done."""
        self._call(f"elect the preferred leader of {topic}-{partition}",
                   lambda c: c.elect_leaders(0, {topic: [partition]}))

    def alter_replica_log_dir(self, broker_id: int, topic: str, partition: int, path: str) -> None:
        """Ask `broker_id` to hold its replica of the partition in `path` (AlterReplicaLogDirs).
        For a replica the broker does not host yet, Kafka remembers the dir and answers
        NOT_LEADER_OR_FOLLOWER (a transient error here): the caller retries once it exists."""
        doing = f"move replica {topic}-{partition} on broker {broker_id} to {path}"
        answer = self._call(doing, lambda c: c.alter_replica_log_dirs(
            {(topic, partition, broker_id): path}))
        for error_class in answer.values():
            _raise_for(error_class, doing)

    def alter_broker_configs(self, broker_ids: Iterable[int], configs: Mapping[str, str | None]) -> None:
        """IncrementalAlterConfigs on each broker: SET a value, DELETE where the value is None."""
        from kafka.admin import ConfigResource, ConfigResourceType
        AlterConfigOp = alter_config_op()

        entries = {name: ((AlterConfigOp.DELETE, None) if value is None else (AlterConfigOp.SET, value))
                   for name, value in configs.items()}
        for broker_id in sorted(set(broker_ids)):
            doing = f"alter configs {sorted(configs)} of broker {broker_id}"
            answer = self._call(doing, lambda c, b=broker_id: c.alter_configs(
                [ConfigResource(ConfigResourceType.BROKER, str(b), dict(entries))],
                raise_on_unknown=False, incremental=True))
            for result in answer.get("broker", {}).values():
                _raise_for_string(result, doing)

    def alter_topic_configs(self, configs_by_topic: Mapping[str, Mapping[str, str | None]]) -> None:
        """IncrementalAlterConfigs on topics: SET a value, DELETE where the value is None."""
        if not configs_by_topic:
            return
        from kafka.admin import ConfigResource, ConfigResourceType
        AlterConfigOp = alter_config_op()

        resources = [
            ConfigResource(ConfigResourceType.TOPIC, topic, {
                name: ((AlterConfigOp.DELETE, None) if value is None else (AlterConfigOp.SET, value))
                for name, value in configs.items()})
            for topic, configs in sorted(configs_by_topic.items())
        ]
        doing = f"alter configs of topics {sorted(configs_by_topic)}"
        answer = self._call(doing, lambda c: c.alter_configs(resources, raise_on_unknown=False,
                                                             incremental=True))
        for topic, result in answer.get("topic", {}).items():
            _raise_for_string(result, f"alter configs of topic {topic}")

    def describe_broker_configs(self, broker_id: int, names: Sequence[str]) -> dict[str, str | None]:
        """Current values of some dynamic configs of one broker (for checks and tests)."""
        from kafka.admin import ConfigResource, ConfigResourceType

        answer = self._call(f"describe configs of broker {broker_id}", lambda c: c.describe_configs(
            [ConfigResource(ConfigResourceType.BROKER, str(broker_id), {n: None for n in names})],
            config_filter="all"))
        found = answer.get("broker", {}).get(str(broker_id), {})
        return {n: found.get(n, {}).get("value") for n in names}

    def describe_topic_configs(self, topic: str, names: Sequence[str]) -> dict[str, str | None]:
        from kafka.admin import ConfigResource, ConfigResourceType

        answer = self._call(f"describe configs of topic {topic}", lambda c: c.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic, {n: None for n in names})],
            config_filter="all"))
        found = answer.get("topic", {}).get(topic, {})
        return {n: found.get(n, {}).get("value") for n in names}

    def describe_dynamic_configs(self, broker_ids: Iterable[int], topics: Iterable[str],
                                 names: Sequence[str]) -> dict[tuple[int | str, str], str | None]:
        """The values of `names` set on each broker itself (source DYNAMIC_BROKER_CONFIG: not a
        cluster-wide default, not a static one) and on each topic (DYNAMIC_TOPIC_CONFIG), keyed
        (broker id or topic, name); None where not set there. One DescribeConfigs call."""
        from kafka.admin import ConfigResource, ConfigResourceType

        brokers, topic_list = sorted(set(broker_ids)), sorted(set(topics))
        resources = ([ConfigResource(ConfigResourceType.BROKER, str(b), {n: None for n in names}) for b in brokers]
                     + [ConfigResource(ConfigResourceType.TOPIC, t, {n: None for n in names}) for t in topic_list])
        if not resources:
            return {}
        answer = self._call(f"describe configs {list(names)} of brokers {brokers} and topics {topic_list}",
                            lambda c: c.describe_configs(resources, config_filter="all"))
        found: dict[tuple[int | str, str], str | None] = {}
        for kind, source, keys in (("broker", "DYNAMIC_BROKER_CONFIG", brokers),
                                   ("topic", "DYNAMIC_TOPIC_CONFIG", topic_list)):
            for key in keys:
                configs = answer.get(kind, {}).get(str(key), {})
                for name in names:
                    entry = configs.get(name) or {}
                    found[(key, name)] = entry.get("value") if entry.get("config_source") == source else None
        return found

    def ensure_topics(self, names: Iterable[str], partitions: int,
                      replication_factor: int | None = None) -> list[str]:
        """The one way the product creates its topics: those of `names` that do not exist yet,
        with `partitions` (the `event_topic_partitions` setting) and a replication factor of
        min(3, registered brokers) unless given; an existing topic is left as it is. Returns the
        ones created."""
        from kafka.admin import NewTopic

        wanted = sorted(set(names))
        existing = set(self._call("list topics", lambda c: c.list_topics()))
        missing = [n for n in wanted if n not in existing]
        if not missing:
            return []
        if replication_factor is None:
            replication_factor = max(1, min(3, len(self.describe_brokers())))
        created: list[str] = []
        for name in missing:
            try:
                self._call(f"create topic {name}", lambda c, n=name: c.create_topics(
                    [NewTopic(n, num_partitions=partitions, replication_factor=replication_factor)]))
                created.append(name)
            except KafkaPermanentError as error:
                if error.code == "TOPIC_AUTHORIZATION_FAILED":
                    raise KafkaPermanentError(
                        f"cannot create topic {name}: the principal lacks Create on it; create the "
                        "product's topics beforehand, or grant it, e.g.: kafka-acls.sh --add "
                        f"--allow-principal <principal> --operation Create --topic {name.rsplit('.', 1)[0]}. "
                        "--resource-pattern-type prefixed", error.code) from None
                if error.code != "TOPIC_ALREADY_EXISTS":  # another instance was quicker
                    raise
        return created


def compute_admin_options(bootstrap_servers: str, request_timeout_ms: int,
                          client_config: ClientConfig) -> dict[str, object]:
    """KafkaAdminClient's keyword arguments: ours, then the command config's on top (its
    `client.id` included: Kafka's own tools accept one, and it named a keyword twice)."""
    return {
        "bootstrap_servers": bootstrap_servers,
        "request_timeout_ms": request_timeout_ms,
        "bootstrap_timeout_ms": min(10000, request_timeout_ms),
        "reconnect_backoff_max_ms": 1000,
        "metadata_max_age_ms": 30000,
        "client_id": "reassigner-admin",
        **dict(client_config.kafka_python),
    }


def ensure_topics(bootstrap_servers: str, client_config: ClientConfig | None, names: Iterable[str],
                  partitions: int, replication_factor: int | None = None) -> list[str]:
    """`ClusterAdmin.ensure_topics` with a client of its own, for a process that needs no other
    Admin call (the pipeline, the operator CLI)."""
    with ClusterAdmin(bootstrap_servers, client_config) as admin:
        created = admin.ensure_topics(names, partitions, replication_factor)
    for name in created:
        log.info("created topic %s (%d partitions)", name, partitions)
    return created


def compute_min_insync_replicas(topics: Sequence[str], answer: Mapping) -> dict[str, int | None]:
    """Per topic the effective min.insync.replicas of a DescribeConfigs answer (None where the
    broker gave no value: kafka-python answers nothing for an unknown topic)."""
    found = answer.get("topic", {})
    result: dict[str, int | None] = {}
    for topic in topics:
        value = found.get(topic, {}).get(MIN_INSYNC_REPLICAS, {}).get("value")
        result[topic] = int(value) if value not in (None, "") else None
    return result


def compute_partitions(topics: Iterable) -> tuple[PartitionList, dict[str, str | None]]:
    """Metadata answer structs as partitions (a `PartitionList`, which the poll merge compares in
    C) and topic ids. A topic being deleted (topic-level error other than LEADER_NOT_AVAILABLE,
    or no partitions) is left out."""
    partitions = PartitionList()
    states = partitions.states
    topic_ids: dict[str, str | None] = {}
    for topic in topics:
        # LEADER_NOT_AVAILABLE (5) right after creation still lists the partitions.
        if topic.error_code not in (0, 5) or not topic.partitions:
            continue
        name = topic.name
        topic_ids[name] = str(topic.topic_id) if topic.topic_id else None
        for p in topic.partitions:
            leader = p.leader_id
            leader = None if leader is None or leader < 0 else leader
            replicas, isr = tuple(p.replica_nodes), tuple(p.isr_nodes)
            offline = tuple(p.offline_replicas or ())
            states.append((name, p.partition_index, replicas, isr, leader, p.leader_epoch, offline))
    return partitions, topic_ids


def compute_reassignments(answer: Mapping) -> dict[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...]]]:
    """kafka-python's list_partition_reassignments answer: (topic, partition) → (adding, removing)."""
    return {(tp.topic, tp.partition): (tuple(r["adding_replicas"]), tuple(r["removing_replicas"]))
            for tp, r in answer.items()}


def compute_log_dirs(broker_id: int, results: Iterable) -> list[LogDirObservation]:
    """One broker's DescribeLogDirs answer structs as observations (error 56 = dir offline)."""
    import kafka.errors as kafka_errors

    dirs: list[LogDirObservation] = []
    for entry in results:
        error_code = entry.error_code
        error = None
        if error_code:
            error = (KAFKA_STORAGE_ERROR if error_code == 56
                     else kafka_error_name(kafka_errors.for_code(error_code)()))
        # Plain rows, sorted by key, not a dataclass per replica (see `ReplicaList`). The topic
        # names are not interned: at 1-2 replicas per topic entry (many topics) `sys.intern`
        # cost the decoding 330 ms a dirs read at 300k partitions to save the merge 17 ms.
        rows = [(topic.name, part.partition_index, bool(part.is_future_key), int(part.partition_size or 0),
                 int(part.offset_lag or 0)) for topic in entry.topics or () for part in topic.partitions]
        rows.sort(key=BY_REPLICA_KEY)
        total, usable = entry.total_bytes, entry.usable_bytes
        dirs.append(LogDirObservation(
            broker_id=broker_id, path=entry.log_dir, online=error_code == 0, error=error,
            replicas=ReplicaList.of_rows(rows),
            total_bytes=total if total is not None and total >= 0 else None,
            usable_bytes=usable if usable is not None and usable >= 0 else None,
        ))
    return dirs


def group_throttled_replicas(partitions: Iterable[Mapping]) -> dict[str, dict[str, str]]:
    """ThrottledPartition records → per topic the two `*.replication.throttled.replicas` values
    (`partition:broker,...`), as Kafka's reassignment tool writes them."""
    leaders: dict[str, list[str]] = defaultdict(list)
    followers: dict[str, list[str]] = defaultdict(list)
    for p in partitions:
        leaders[p["topic"]] += [f"{p['partition']}:{b}" for b in p.get("leader_broker_ids", [])]
        followers[p["topic"]] += [f"{p['partition']}:{b}" for b in p.get("follower_broker_ids", [])]
    grouped: dict[str, dict[str, str]] = {}
    for topic in sorted(leaders.keys() | followers.keys()):
        configs = {LEADER_THROTTLED_REPLICAS: ",".join(leaders[topic]),
                   FOLLOWER_THROTTLED_REPLICAS: ",".join(followers[topic])}
        grouped[topic] = {name: value for name, value in configs.items() if value}
    return grouped
