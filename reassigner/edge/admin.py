"""The one adapter over the Kafka Admin API (kafka-python's KafkaAdminClient) and the one place
where Kafka client errors become `reassigner.errors`.

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
- it caches cluster metadata (5 min by default) and routes a request for a broker id by that
  cache, raising UnknownBrokerIdError for a broker added since: refresh the metadata and retry
  once; still unknown then means not registered or fenced → BROKER_NOT_AVAILABLE (permanent);
- it caches the "controller" id (in KRaft any broker forwards controller requests) and never
  forgets it when that broker dies, so every controller request then fails: on any transient
  error the client is closed and re-created (lazily, on the next call);
- its reconnect backoff grows to 30 s by default, which would hide a restarted broker: capped low;
- `describe_log_dirs()` with no partitions fetches all metadata and lists every partition in
  the request: the protocol's null list ("all") is sent instead (4x faster at 10k partitions);
- `describe_configs` answers {} for an unknown topic instead of an error; `alter_configs` answers
  error *strings*; `alter_partition_reassignments` answers an error class per partition.

RECONNECTING: a client that cannot be created (cluster unreachable) raises
`KafkaTransientError`, and the next attempt is refused until an exponential backoff (0.5 s doubling
to 10 s) has passed, so a caller that retries in a loop never hot-loops against a dead cluster.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from typing import Callable, Iterable, Mapping, Sequence, TypeVar

from reassigner.edge.client_config import ClientConfig
from reassigner.edge.observation import (
    KAFKA_STORAGE_ERROR,
    BrokerObservation,
    ClusterObservation,
    LogDirObservation,
    PartitionObservation,
    ReplicaInDir,
    compute_observation,
)
from reassigner.errors import (
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

LEADER_THROTTLED_RATE = "leader.replication.throttled.rate"
FOLLOWER_THROTTLED_RATE = "follower.replication.throttled.rate"
LOG_DIR_THROTTLED_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"
MIN_INSYNC_REPLICAS = "min.insync.replicas"

# Kafka's own spelling where kafka-python differs (by errno).
KAFKA_NAMES_BY_ERRNO = {-1: "UNKNOWN_SERVER_ERROR", 6: "NOT_LEADER_OR_FOLLOWER",
                        39: "INVALID_REPLICA_ASSIGNMENT"}
PRODUCT_ERRORS: dict[str, type[ReassignerError]] = {
    "UNKNOWN_TOPIC_OR_PARTITION": UnknownTopicOrPartitionError,
    "INVALID_REPLICA_ASSIGNMENT": InvalidReplicaAssignmentError,
    "NO_REASSIGNMENT_IN_PROGRESS": NoReassignmentInProgressError,
    "INVALID_CONFIG": InvalidConfigError,
}
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

    if isinstance(error, KafkaException) and error.args and isinstance(error.args[0], LibrdkafkaError):
        return error.args[0].name().lstrip("_")
    errno = getattr(error, "errno", None)
    if isinstance(errno, int) and errno in KAFKA_NAMES_BY_ERRNO and hasattr(type(error), "message"):
        return KAFKA_NAMES_BY_ERRNO[errno]
    message = getattr(type(error), "message", None)
    if isinstance(message, str) and message.isupper():
        return message
    return _snake_upper(type(error).__name__)


def translate_kafka_error(error: BaseException, doing: str) -> ReassignerError:
    """The `reassigner.errors` form of any exception raised by a Kafka client while `doing`."""
    if isinstance(error, ReassignerError):
        return error
    from confluent_kafka import KafkaError as LibrdkafkaError, KafkaException

    name = kafka_error_name(error)
    detail = str(error) or type(error).__name__
    message = f"{doing}: {name}: {detail}"
    if name in PRODUCT_ERRORS:
        return PRODUCT_ERRORS[name](message)
    if isinstance(error, KafkaException) and error.args and isinstance(error.args[0], LibrdkafkaError):
        retriable = error.args[0].retriable() or name in TRANSIENT_NAMES
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
        self._connect_failures = 0
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
        from kafka.admin import KafkaAdminClient

        try:
            self._client = KafkaAdminClient(
                bootstrap_servers=self.bootstrap_servers,
                request_timeout_ms=self.request_timeout_ms,
                bootstrap_timeout_ms=min(10000, self.request_timeout_ms),
                reconnect_backoff_max_ms=1000,
                metadata_max_age_ms=30000,
                client_id="reassigner-admin",
                **dict(self.client_config.kafka_python),
            )
        except Exception as error:
            self._connect_failures += 1
            backoff = min(10.0, 0.5 * 2 ** (self._connect_failures - 1))
            self._next_connect_at = time.monotonic() + backoff
            translated = translate_kafka_error(error, f"connecting to {self.bootstrap_servers}")
            if isinstance(translated, KafkaTransientError):
                translated.retry_after_seconds = backoff
            raise translated from None
        self._connect_failures = 0
        return self._client

    def _refresh_metadata(self) -> None:
        client = self._client
        if client is not None:
            client._manager.run(client._manager.cluster.refresh_metadata)

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
                    log.debug("%s: broker unknown to cached metadata; refreshing", doing)
                    try:
                        self._refresh_metadata()
                    except Exception:
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

    def describe_partitions(self) -> tuple[list[PartitionObservation], dict[str, str | None]]:
        """Every partition of every topic (Metadata) and the topic ids. A topic being deleted
        (topic-level error other than LEADER_NOT_AVAILABLE, or no partitions) is left out."""
        topics = self._call("describe topics", lambda c: c.describe_topics())
        partitions: list[PartitionObservation] = []
        topic_ids: dict[str, str | None] = {}
        for topic in topics:
            # LEADER_NOT_AVAILABLE (5) right after creation still lists the partitions.
            if topic.get("error_code", 0) not in (0, 5) or not topic.get("partitions"):
                continue
            topic_id = topic.get("topic_id")
            topic_ids[topic["name"]] = str(topic_id) if topic_id else None
            for p in topic["partitions"]:
                leader = p.get("leader_id", -1)
                partitions.append(PartitionObservation(
                    topic=topic["name"], partition=p["partition_index"],
                    replicas=tuple(p["replica_nodes"]), isr=tuple(p["isr_nodes"]),
                    leader=None if leader is None or leader < 0 else leader,
                    leader_epoch=p.get("leader_epoch", -1),
                    offline_replicas=tuple(p.get("offline_replicas") or ()),
                ))
        return partitions, topic_ids

    def list_reassignments(self) -> dict[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...]]]:
        """Ongoing reassignments: (topic, partition) → (adding, removing)."""
        answer = self._call("list partition reassignments", lambda c: c.list_partition_reassignments())
        return {(tp.topic, tp.partition): (tuple(r["adding_replicas"]), tuple(r["removing_replicas"]))
                for tp, r in answer.items()}

    def describe_log_dirs(self, broker_ids: Iterable[int]) -> tuple[list[LogDirObservation], set[int]]:
        """Log dirs of each broker (DescribeLogDirs), and the brokers that could not answer."""
        dirs: list[LogDirObservation] = []
        unreachable: set[int] = set()
        for broker_id in sorted(broker_ids):
            try:
                answer = self._call(f"describe log dirs of broker {broker_id}",
                                    lambda c, b=broker_id: _describe_all_log_dirs(c, b))
            except (KafkaTransientError, KafkaPermanentError) as error:
                log.debug("%s", error)
                unreachable.add(broker_id)
                continue
            dirs.extend(compute_log_dirs(answer))
        return dirs, unreachable

    def describe_min_insync_replicas(self, topics: Sequence[str]) -> dict[str, int | None]:
        """Effective min.insync.replicas per topic (None where the broker gave no value)."""
        if not topics:
            return {}
        from kafka.admin import ConfigResource, ConfigResourceType

        resources = [ConfigResource(ConfigResourceType.TOPIC, t, {MIN_INSYNC_REPLICAS: None})
                     for t in topics]
        answer = self._call("describe topic configs",
                            lambda c: c.describe_configs(resources, config_filter="all"))
        found = answer.get("topic", {})
        result: dict[str, int | None] = {}
        for topic in topics:
            value = found.get(topic, {}).get(MIN_INSYNC_REPLICAS, {}).get("value")
            result[topic] = int(value) if value not in (None, "") else None
        return result

    def observe(self, previous: ClusterObservation | None = None) -> ClusterObservation:
        """One full poll. Log dirs of a broker that cannot answer are carried over from
        `previous` (nothing new is known about them; its fencing tells the rest)."""
        brokers = self.describe_brokers()
        partitions, topic_ids = self.describe_partitions()
        reassignments = self.list_reassignments()
        live = [b.broker_id for b in brokers if not b.fenced]
        log_dirs, unreachable = self.describe_log_dirs(live)
        silent = unreachable | {b.broker_id for b in brokers if b.fenced}
        if previous is not None:
            log_dirs += [d for (broker_id, _), d in previous.log_dirs.items() if broker_id in silent]
        min_isr = self.describe_min_insync_replicas(sorted(topic_ids))
        return compute_observation(brokers, partitions, topic_ids, reassignments, log_dirs, min_isr)

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
        from kafka.admin._configs import AlterConfigOp

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
        from kafka.admin._configs import AlterConfigOp

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

    def ensure_topics(self, names: Iterable[str], partitions: int = 1,
                      replication_factor: int | None = None) -> list[str]:
        """Create the topics that do not exist yet; returns the ones created. The replication
        factor defaults to min(3, registered brokers)."""
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
                if error.code != "TOPIC_ALREADY_EXISTS":  # another instance was quicker
                    raise
        return created


def _describe_all_log_dirs(client, broker_id: int) -> list[dict]:
    """DescribeLogDirs of every partition on one broker. kafka-python's public method, given no
    partitions, first fetches the whole cluster metadata and then lists every partition in the
    request (0.8 s instead of 0.2 s per broker at 10,000 partitions); the protocol's null topic
    list means "all" on its own, so that is what is sent."""
    if hasattr(client, "_async_describe_log_dirs"):
        return client._manager.run(client._async_describe_log_dirs, None, [broker_id])
    return client.describe_log_dirs(brokers=[broker_id])


def compute_log_dirs(answer: Sequence[Mapping]) -> list[LogDirObservation]:
    """kafka-python's describe_log_dirs answer as observations (error 56 = dir offline)."""
    import kafka.errors as kafka_errors

    dirs: list[LogDirObservation] = []
    for broker in answer:
        for entry in broker.get("log_dirs", []):
            error_code = entry.get("error_code", 0)
            error = None
            if error_code:
                error = (KAFKA_STORAGE_ERROR if error_code == 56
                         else kafka_error_name(kafka_errors.for_code(error_code)()))
            replicas = tuple(sorted(
                ReplicaInDir(topic["name"], part["partition_index"],
                             bool(part.get("is_future_key", False)),
                             int(part.get("partition_size", 0)), int(part.get("offset_lag", 0)))
                for topic in entry.get("topics", []) for part in topic.get("partitions", [])
            ))
            total, usable = entry.get("total_bytes"), entry.get("usable_bytes")
            dirs.append(LogDirObservation(
                broker_id=broker["broker"], path=entry["log_dir"], online=error_code == 0,
                error=error, replicas=replicas,
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
