"""The one adapter over the Kafka Admin API (kafka-python's KafkaAdminClient): its calls, with
Kafka's errors translated (`kafka_errors`) and its answers read into the typed observation
(`admin_answers`, `cluster_observation`); one poll of the cluster is `observe` (`cluster_poll`).

kafka-python is used because it alone speaks every API the product needs: DescribeCluster with
fenced brokers, ListPartitionReassignments, AlterPartitionReassignments, DescribeLogDirs and
AlterReplicaLogDirs (confluent-kafka exposes none of the last four).

KAFKA-PYTHON QUIRKS handled here:
- it caches cluster metadata (5 min by default) and the controller id, and routes a request by
  them, raising UnknownBrokerIdError for a broker added since or a controller that died: a new
  client (fresh metadata, the live controller) retries once; still unknown then means not
  registered or fenced → BROKER_NOT_AVAILABLE (permanent);
- in KRaft any broker forwards controller requests, yet it never forgets a cached controller
  that died, so every controller request would fail: on any transient error the client is
  closed and re-created (lazily, on the next call);
- its reconnect backoff grows to 30 s by default, which would hide a restarted broker: capped low;
- `describe_log_dirs()` lists every partition in its request, and it and `describe_topics()`
  turn the answer into dicts, which at 10,000 partitions costs more than the broker's work: those
  requests are sent by `kafka_fast_reads` (the null list, "all"; the answer structs kept), the
  one module that touches kafka-python's internals; it also makes the client, since one whose
  bootstrap fails leaves its network thread and sockets running;
- `describe_configs` answers {} for an unknown topic instead of an error; `alter_configs` answers
  error *strings*; `alter_partition_reassignments` answers an error class per partition.

RECONNECTING: a client that cannot be created (cluster unreachable) raises `KafkaTransientError`,
and the next attempt is refused until a backoff (`runtime.backoff.ADMIN_RECONNECT`) has passed,
so a caller that retries in a loop never hot-loops against a dead cluster.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Callable, Iterable, Mapping, Sequence, TypeVar

from runtime.backoff import ADMIN_RECONNECT
from runtime.kafka_versions import ClusterFeatures
from runtime.clients.admin_answers import (
    compute_log_dirs,
    compute_min_insync_replicas,
    compute_partitions,
    compute_reassignments,
    group_throttled_replicas,
)
from runtime.clients.client_config import ClientConfig
from runtime.clients.cluster_observation import (BrokerObservation, ClusterObservation, LogDirObservation, PartitionList,
                                                 PartitionObservation)
from runtime.clients.cluster_poll import observe_cluster
from runtime.clients.kafka_errors import raise_for_error_class, raise_for_result_string, translate_kafka_error
from runtime.clients.kafka_fast_reads import (
    Read,
    alter_config_op,
    gather_reads,
    open_admin_client,
    read_cluster_features,
    read_log_dirs,
    read_metadata,
    read_min_insync_replicas,
    run_read,
)
from schemas.errors import KafkaPermanentError, KafkaTransientError, UnknownTopicOrPartitionError

# The adapter's names, and two answer readers the benchmarks read through this module.
__all__ = ["ClusterAdmin", "compute_admin_options", "ensure_topics", "compute_log_dirs", "group_throttled_replicas"]

log = logging.getLogger(__name__)

T = TypeVar("T")


class ClusterAdmin:
    """Admin API calls with Kafka errors translated; re-creates its client after a failure."""

    def __init__(self, bootstrap_servers: str, client_config: ClientConfig | None = None,
                 request_timeout_ms: int = 15000) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.client_config = client_config or ClientConfig()
        self.request_timeout_ms = request_timeout_ms
        self._client = None
        self._connect_delays = ADMIN_RECONNECT.delays()
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
        self._connect_delays = ADMIN_RECONNECT.delays()
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
    def describe_kafka(self) -> ClusterFeatures:
        """The cluster's finalized feature levels (ApiVersions v3+, from any broker) and the
        newest version of each request its brokers answer (`runtime.kafka_versions`)."""
        def read(client) -> ClusterFeatures:
            finalized, versions = run_read(client, read_cluster_features)
            return ClusterFeatures(finalized, versions)
        return self._call("reading the cluster's finalized features", read)

    def describe_eligible_leaders(self, topics: Sequence[str],
                                  ) -> dict[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...]]]:
        """(eligible leader replicas, last known ELR) of every partition of `topics` that has
        either (DescribeTopicPartitions, KIP-966; pages followed), by (topic, partition)."""
        def read(client) -> dict[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...]]]:
            found: dict[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...]]] = {}
            cursor = None
            while True:
                answer = client.describe_topic_partitions(list(topics), cursor=cursor)
                for topic in answer["topics"]:
                    for p in topic["partitions"]:
                        eligible = tuple(p.get("eligible_leader_replicas") or ())
                        last_known = tuple(p.get("last_known_elr") or ())
                        if eligible or last_known:
                            found[(topic["name"], p["partition_index"])] = (eligible, last_known)
                cursor = answer.get("next_cursor")
                if cursor is None:
                    return found
        return self._call(f"describe the eligible leaders of {len(topics)} topics", read)

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

    def describe_topic(self, topic: str) -> list[PartitionObservation] | None:
        """The partitions of one topic, in partition order, with the reassignments in flight among
        them (`adding`, `removing`): Metadata of that topic alone, then ListPartitionReassignments
        of its partitions alone, so the cost does not grow with the cluster (the canary's keeper
        reads its topic this way). None when the topic does not exist, or is being deleted;
        raises for any other topic error (TOPIC_AUTHORIZATION_FAILED: no Describe on it)."""
        import kafka.errors as kafka_errors

        doing = f"describe topic {topic}"
        answer = self._call(doing, lambda c: run_read(c, read_metadata, [topic]))
        for found in answer:  # UNKNOWN_TOPIC_OR_PARTITION (3): missing; LEADER_NOT_AVAILABLE (5): just created
            if found.name == topic and found.error_code not in (0, 3, 5):
                raise_for_error_class(kafka_errors.for_code(found.error_code), doing)
        listed, _ids = compute_partitions(answer)
        partitions = sorted((p for p in listed if p.topic == topic), key=lambda p: p.partition)
        if not partitions:
            return None
        moving = compute_reassignments(self._call(
            f"list the reassignments of {topic}",
            lambda c: c.list_partition_reassignments({topic: [p.partition for p in partitions]})))
        return [replace(p, adding=moving[(topic, p.partition)][0], removing=moving[(topic, p.partition)][1])
                if (topic, p.partition) in moving else p for p in partitions]

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
        caller redoes a failed read alone (`runtime.clients.cluster_poll`)."""
        return self._call("read the cluster", lambda c: gather_reads(c, reads))

    def describe_min_insync_replicas(self, topics: Sequence[str]) -> dict[str, int | None]:
        """Effective min.insync.replicas per topic (None where the broker gave no value)."""
        if not topics:
            return {}
        answer = self._call("describe topic configs", lambda c: run_read(c, read_min_insync_replicas, topics))
        return compute_min_insync_replicas(topics, answer)  # type: ignore[arg-type]

    def observe(self, previous: ClusterObservation | None = None,
                log_dirs_due: bool = True, eligible_leaders: bool = False) -> ClusterObservation:
        """One poll (`runtime.clients.cluster_poll`). Log dirs are read when `log_dirs_due` or
        when the metadata hints a change, else carried over from `previous`; those of a broker
        that cannot answer are carried over too. With `eligible_leaders` (a cluster with ELR on)
        the partitions under min ISR get their eligible leader replicas."""
        return observe_cluster(self, previous, log_dirs_due, eligible_leaders)

    # --- traffic (the samples of `reassigner.edge.traffic`) --------------------------------------
    def read_log_offsets(self, keys: Iterable[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, int]]:
        """(log start, log end) of each partition named, from its leader (ListOffsets, one request
        per leader): the start of the log on the leader's own disk where the brokers tell it
        (Kafka 3.6+; with tiered storage the older records are elsewhere), else the log start.
        Raises for the whole read when one partition cannot answer (a leader moving): the caller
        skips this sample. Partitions the metadata does not show yet (a topic created moments
        ago, not yet known to the broker that answers the metadata) are left out of this sample
        rather than failing it for every other partition: they are read at the next one; so are
        the topics whose leader does not know them yet though the metadata shows them (each
        broker learns of a topic on its own: on Kafka 3.7 the watcher's own topics, created
        moments before, failed the last read of a test's traffic sample), found by halving the
        topics read (`read_skipping_unknown`)."""
        from kafka.structs import TopicPartition

        wanted = [TopicPartition(topic, partition) for topic, partition in keys]
        if not wanted:
            return {}
        try:
            return self._read_offsets(wanted)
        except UnknownTopicOrPartitionError:
            pass  # some partition the metadata does not show (yet): read the others
        topics = sorted({tp.topic for tp in wanted})
        found, _ids = compute_partitions(self._call(f"describe {len(topics)} topics",
                                                    lambda c: run_read(c, read_metadata, topics)))
        known = {(p.topic, p.partition) for p in found if p.leader is not None}
        shown = [tp for tp in wanted if (tp.topic, tp.partition) in known]
        log.debug("offsets: %d partitions not in the metadata yet, left out of this sample",
                  len(wanted) - len(shown))
        return read_skipping_unknown(self._read_offsets, shown)

    def _read_offsets(self, wanted: list) -> dict[tuple[str, int], tuple[int, int]]:
        from kafka.admin import OffsetSpec

        def read(spec):
            return lambda c: c.list_partition_offsets({tp: spec for tp in wanted})

        try:
            starts = self._call("list the partitions' local log start offsets", read(OffsetSpec.EARLIEST_LOCAL))
        except KafkaPermanentError as error:
            if error.code != "UNSUPPORTED_VERSION":
                raise
            starts = self._call("list the partitions' log start offsets", read(OffsetSpec.EARLIEST))
        ends = self._call("list the partitions' log end offsets", read(OffsetSpec.LATEST))
        return {(tp.topic, tp.partition): (starts[tp].offset, ends[tp].offset)
                for tp in wanted if tp in starts and tp in ends}

    def read_committed_offsets(self) -> dict[tuple[str, int], dict[str, int]]:
        """The offset every consumer group committed, per partition (ListGroups, then one
        OffsetFetch per coordinator). Groups of other kinds (share groups, Connect's workers)
        commit no offsets and are left out."""
        groups = self._call("list the consumer groups", lambda c: c.list_groups())
        ids = sorted({g["group_id"] for g in groups if g.get("protocol_type", "") in ("consumer", "")})
        if not ids:
            return {}
        answer = self._call(f"fetch the committed offsets of {len(ids)} consumer groups",
                            lambda c: c.list_group_offsets({group: None for group in ids}))
        committed: dict[tuple[str, int], dict[str, int]] = {}
        for group, offsets in answer.items():
            for tp, at in offsets.items():
                if at.offset >= 0:  # -1: no offset committed for this partition
                    committed.setdefault((tp.topic, tp.partition), {})[group] = at.offset
        return committed

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
            raise_for_error_class(error_class, doing)

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
            raise_for_error_class(error_class, doing)

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
                raise_for_result_string(result, doing)

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
            raise_for_result_string(result, f"alter configs of topic {topic}")

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

    def create_topic_with_assignment(self, topic: str, assignment: Mapping[int, Sequence[int]],
                                     configs: Mapping[str, str]) -> bool:
        """Create `topic` with each partition on the replicas given (partition → replicas, the first
        one its preferred leader) and these topic configs (CreateTopics with an explicit
        assignment: no replica is left to the broker's placement). False when the topic exists
        already: another instance was quicker, or a metadata read had not caught up with it."""
        doing = f"create topic {topic} ({len(assignment)} partitions, assignment {dict(sorted(assignment.items()))})"
        spec = {topic: {"assignments": {int(p): [int(b) for b in replicas] for p, replicas in sorted(assignment.items())},
                        "configs": {name: str(value) for name, value in configs.items()}}}
        try:
            self._call(doing, lambda c: c.create_topics(spec))
        except KafkaPermanentError as error:
            if error.code == "TOPIC_ALREADY_EXISTS":
                return False
            raise
        return True

    def create_partitions(self, topic: str, total: int, new_assignments: Sequence[Sequence[int]]) -> None:
        """Grow `topic` to `total` partitions, the new ones (in partition order, as many as
        `new_assignments`) on the replicas given (CreatePartitions with an assignment)."""
        doing = f"add partitions to {topic} up to {total} (new ones on {[list(r) for r in new_assignments]})"
        spec = {topic: {"count": int(total), "assignments": [[int(b) for b in replicas] for replicas in new_assignments]}}
        self._call(doing, lambda c: c.create_partitions(spec))

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


def read_skipping_unknown(read: Callable[[list], dict], wanted: list) -> dict:
    """`read(wanted)` less the topics it says are unknown (UNKNOWN_TOPIC_OR_PARTITION): the topics
    are halved until each part reads or is one topic, which is left out. A few unknown topics
    among n cost about 2 log2(n) reads each; none, one read."""
    if not wanted:
        return {}
    try:
        return read(wanted)
    except UnknownTopicOrPartitionError:
        topics = sorted({tp.topic for tp in wanted})
        if len(topics) == 1:
            log.debug("offsets: %s unknown to its leader yet, left out of this sample", topics[0])
            return {}
    first = set(topics[:len(topics) // 2])
    return {**read_skipping_unknown(read, [tp for tp in wanted if tp.topic in first]),
            **read_skipping_unknown(read, [tp for tp in wanted if tp.topic not in first])}
