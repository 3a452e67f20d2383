"""What a process may do on the cluster, checked once at its start: authentication first, then
the ACLs it needs, each gap named in one line with the `kafka-acls.sh` command that closes it.

Without this, a wrong password looked like an outage (kafka-python: "Unable to bootstrap" after
16-37 s, retried forever) and a missing Describe on topics looked like an empty cluster.

RULES
- **Authentication** is probed with librdkafka, which reports a SASL or TLS failure within a
  second through its error callback (kafka-python only times out). `_AUTHENTICATION` →
  `SASL_AUTHENTICATION_FAILED`, `_SSL` → `SSL_HANDSHAKE_FAILED`, a listener speaking another
  protocol → `INVALID_CONFIG`: permanent errors, so the process exits non-zero, once.
- **Authorization** is read from the cluster itself (KIP-430 authorized operations of the cluster
  resource and of topics), not from the ACL list: that answer holds whatever the authorizer
  decides (super users, wildcard principals, custom authorizers). A cluster with no authorizer
  answers every operation. A principal without Describe on the cluster gets no operations at
  all (librdkafka: None), and one without Describe on a topic gets TOPIC_AUTHORIZATION_FAILED:
  both count as "none granted".
- The needs per process are one table, `PROCESS_NEEDS`; `compute_access_gaps` is pure.
- A cluster that does not answer (timeout, transport) is not this check's business: the process
  starts and its own retries ride the outage out.
- Topics the process cannot see are invisible, not denied; when no topic besides Kafka's and the
  product's own is visible, a warning says Describe on topics may be missing (a new cluster may
  really have none).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from runtime.clients.client_config import ClientConfig
from schemas.errors import KafkaPermanentError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AccessNeeds:
    """What one process does on the cluster, as Kafka ACL operations."""

    cluster: frozenset[str]
    own_topics: frozenset[str]
    user_topics: frozenset[str]
    why: str


PROCESS_NEEDS: dict[str, AccessNeeds] = {
    "watch": AccessNeeds(
        cluster=frozenset({"DESCRIBE"}),  # DescribeCluster, ListPartitionReassignments, DescribeLogDirs
        own_topics=frozenset({"DESCRIBE", "WRITE"}),
        user_topics=frozenset({"DESCRIBE", "DESCRIBE_CONFIGS"}),  # metadata, min.insync.replicas
        why="the watcher reads the cluster and publishes its events"),
    "execute": AccessNeeds(
        cluster=frozenset({"DESCRIBE", "ALTER", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}),
        own_topics=frozenset({"DESCRIBE", "READ", "WRITE"}),
        user_topics=frozenset({"DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}),  # topic throttles
        why="the executor moves replicas and log dirs and sets throttles"),
    "run": AccessNeeds(
        cluster=frozenset({"DESCRIBE"}),
        own_topics=frozenset({"DESCRIBE", "READ", "WRITE"}),
        user_topics=frozenset(),
        why="the pipeline reads the events and publishes commands and alerts"),
    "snapshot": AccessNeeds(
        cluster=frozenset({"DESCRIBE"}),
        own_topics=frozenset(),
        user_topics=frozenset({"DESCRIBE", "DESCRIBE_CONFIGS"}),
        why="a snapshot reads the cluster"),
    "request": AccessNeeds(
        cluster=frozenset(),
        own_topics=frozenset({"DESCRIBE", "WRITE"}),
        user_topics=frozenset(),
        why="the operator CLI publishes requests"),
}

# Whatever checks a user topic's operations: a handful is enough to tell an ACL gap.
USER_TOPICS_SAMPLED = 5


@dataclass(frozen=True)
class AccessGap:
    resource: str  # "cluster", or a topic name (or prefix, for the product's own)
    operations: tuple[str, ...]

    def describe(self, own_prefix: str) -> str:
        where = ("the cluster" if self.resource == "cluster" else
                 f"topics {own_prefix}.*" if self.resource == own_prefix else "topics *")
        return f"{', '.join(_acl_name(op) for op in self.operations)} on {where}"

    def render_grant(self, principal: str, own_prefix: str) -> str:
        operations = " ".join(f"--operation {_acl_name(op)}" for op in self.operations)
        if self.resource == "cluster":
            target = "--cluster"
        elif self.resource == own_prefix:
            target = f"--topic {own_prefix}. --resource-pattern-type prefixed"
        else:
            target = "--topic '*'"
        return f"kafka-acls.sh --add --allow-principal {principal} {operations} {target}"


def _acl_name(operation: str) -> str:
    return "".join(part.capitalize() for part in operation.split("_"))


def compute_access_gaps(needs: AccessNeeds, cluster_operations: frozenset[str] | None,
                        own_topic_operations: Mapping[str, frozenset[str] | None],
                        user_topic_operations: Mapping[str, frozenset[str] | None],
                        own_prefix: str) -> list[AccessGap]:
    """The operations `needs` asks for that the cluster's answers do not grant (None: the
    cluster runs no authorizer for that resource, so nothing is missing)."""
    gaps: list[AccessGap] = []
    if cluster_operations is not None:
        missing = sorted(needs.cluster - cluster_operations)
        if missing:
            gaps.append(AccessGap("cluster", tuple(missing)))
    for resource, needed, answers in ((own_prefix, needs.own_topics, own_topic_operations),
                                      ("*", needs.user_topics, user_topic_operations)):
        missing_here: set[str] = set()
        for operations in answers.values():
            if operations is not None:
                missing_here |= needed - operations
        if missing_here:
            gaps.append(AccessGap(resource, tuple(sorted(missing_here))))
    return gaps


def principal_of(client: ClientConfig) -> str:
    user = client.librdkafka.get("sasl.username")
    return f"User:{user}" if user else "<the principal of --command-config>"


def check_kafka_access(bootstrap_servers: str, client: ClientConfig, process: str,
                       own_topics: Sequence[str], own_prefix: str,
                       timeout_seconds: float = 15.0) -> frozenset[str] | None:
    """Raise a one-line `KafkaPermanentError` if `process` cannot authenticate or lacks an ACL it
    needs on the cluster or on `own_topics` (the product's topics it uses; those not created yet
    are skipped) — see the module doc; return quietly when all is granted or the cluster is away.
    Returns the topics the cluster's metadata showed (None: it did not answer), so that a caller
    about to create missing topics needs no second client to learn that none is missing."""
    from confluent_kafka import KafkaException, TopicCollection
    from confluent_kafka.admin import AdminClient

    needs = PROCESS_NEEDS[process]
    errors: list = []
    admin = AdminClient({"bootstrap.servers": bootstrap_servers, "log_level": 0,
                         "socket.timeout.ms": int(timeout_seconds * 1000), **client.librdkafka,
                         "error_cb": errors.append})
    doing = f"checking what {process} may do on {bootstrap_servers}"
    try:
        cluster = _await(admin, admin.describe_cluster(include_authorized_operations=True,
                                                       request_timeout=timeout_seconds),
                         errors, timeout_seconds)
        if cluster is None:
            _raise_for_connection_errors(errors, client, doing)
            log.warning("%s: the cluster did not answer within %.0f s; starting anyway", doing,
                        timeout_seconds)
            return None
        metadata = admin.list_topics(timeout=timeout_seconds)
        own = sorted(set(own_topics))
        user = sorted(t for t in metadata.topics if not t.startswith((f"{own_prefix}.", "__")))
        if needs.user_topics and not user and client.librdkafka.get("sasl.username"):
            log.warning("%s: %s sees no topic besides Kafka's and its own; if the cluster has "
                        "some, it lacks Describe on them (%s)", doing, principal_of(client),
                        AccessGap("*", ("DESCRIBE",)).render_grant(principal_of(client), own_prefix))
        described = _describe_topic_operations(admin, TopicCollection, [*own, *user[:USER_TOPICS_SAMPLED]],
                                               errors, timeout_seconds)
    except KafkaException as error:
        _raise_for_connection_errors(errors, client, doing)
        log.warning("%s: %s; starting anyway", doing, error)
        return None
    gaps = compute_access_gaps(
        needs, _operations(cluster.authorized_operations) or frozenset(),
        {t: described.get(t) for t in own if t in described},
        {t: described.get(t) for t in user[:USER_TOPICS_SAMPLED] if t in described}, own_prefix)
    if gaps:
        principal = principal_of(client)
        lacks = "; ".join(gap.describe(own_prefix) for gap in gaps)
        grants = " && ".join(gap.render_grant(principal, own_prefix) for gap in gaps)
        raise KafkaPermanentError(
            f"{principal} lacks {lacks} ({needs.why}); grant it, e.g.: {grants}",
            "CLUSTER_AUTHORIZATION_FAILED" if gaps[0].resource == "cluster" else "TOPIC_AUTHORIZATION_FAILED")
    return frozenset(metadata.topics)


def _operations(answer: Iterable | None) -> frozenset[str] | None:
    if answer is None:
        return None
    return frozenset(operation.name for operation in answer)


def _describe_topic_operations(admin, topic_collection, topics: list[str], errors: list,
                               timeout_seconds: float) -> dict[str, frozenset[str] | None]:
    from confluent_kafka import KafkaException

    if not topics:
        return {}
    futures = admin.describe_topics(topic_collection(topics), include_authorized_operations=True,
                                    request_timeout=timeout_seconds)
    described: dict[str, frozenset[str] | None] = {}
    for topic, future in futures.items():
        try:
            answer = _await(admin, future, errors, timeout_seconds)
        except KafkaException as error:
            if error.args[0].name() == "TOPIC_AUTHORIZATION_FAILED":
                described[topic] = frozenset()  # not even Describe
            continue  # not created yet, or deleted meanwhile
        if answer is not None:
            described[topic] = _operations(answer.authorized_operations) or frozenset()
    return described


def _await(admin, future, errors: list, timeout_seconds: float):
    """The future's result, serving librdkafka's callbacks meanwhile (its error callback is how
    an authentication failure shows); None when an error or the deadline comes first."""
    deadline = time.monotonic() + timeout_seconds
    while not future.done():
        admin.poll(0.1)
        if _fatal_connection_errors(errors) or time.monotonic() > deadline:
            return None
    return future.result()


def _fatal_connection_errors(errors: list) -> list:
    return [e for e in errors if e.name() in ("_AUTHENTICATION", "_SSL")
            or "incorrect security.protocol" in e.str()]


def _raise_for_connection_errors(errors: list, client: ClientConfig, doing: str) -> None:
    fatal = _fatal_connection_errors(errors)
    if not fatal:
        return
    error = fatal[0]
    reason = error.str().split(": ", 1)[-1]
    if error.name() == "_AUTHENTICATION":
        mechanism = client.librdkafka.get("sasl.mechanisms", "?")
        user = client.librdkafka.get("sasl.username", "?")
        raise KafkaPermanentError(
            f"{doing}: authentication failed for user {user} with {mechanism} ({reason}); check the "
            "user and password in sasl.jaas.config of --command-config", "SASL_AUTHENTICATION_FAILED")
    if error.name() == "_SSL":
        raise KafkaPermanentError(
            f"{doing}: the TLS handshake failed ({reason}); check ssl.truststore.location / "
            "ssl.ca.location (the CA that signed the brokers' certificates) in --command-config",
            "SSL_HANDSHAKE_FAILED")
    raise KafkaPermanentError(
        f"{doing}: {reason}; check security.protocol in --command-config against the listener",
        "INVALID_CONFIG")
