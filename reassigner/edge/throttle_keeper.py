"""The executor's hand on replication throttles: it reads what Kafka holds, asks the pure rules
(`reassigner.edge.throttles`) what to write, and writes it, its own records first.

ORDER of one throttle command: read the configs of the command's brokers and topics
(DescribeConfigs, dynamic values only); read the executor's records (`reassigner.edge.ledger`,
verified against its own copy); compute the changes; record ours in Redis; write the configs
(IncrementalAlterConfigs); forget the records of what was cleared. A crash in between leaves
a record of a value that may not be there: a later clear finds another value or none and
leaves it.

ADOPTION: when the first read of the records found nothing at all in Redis, the product's
recent commands are read back once (`recent_commands_reader`, `schemas.published`) and what
their throttled steps put in force on a command's brokers and topics is recorded as ours before
that command is computed (`compute_adopted`; the rule and its one risk are in
`reassigner.edge.throttles`). Redis and Kafka errors reach the caller under the one retry policy
(`runtime.backoff`); the executor retries the command as a whole.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, Iterable, Mapping

from runtime.backoff import UNTIL_STOPPED
from runtime.clients.cluster_observation import FOLLOWER_THROTTLED_RATE, LEADER_THROTTLED_RATE, LOG_DIR_THROTTLED_RATE
from runtime.clients.kafka_admin import ClusterAdmin
from runtime.clients.kafka_consumer import TopicReader
from runtime.clients.redis_io import retry_redis
from reassigner.edge.ledger import CommandLedger
from reassigner.edge.throttles import (
    REPLICA_LISTS,
    ThrottleChanges,
    ThrottleWanted,
    compute_adopted,
    compute_set_throttle,
    compute_step_throttle,
    compute_throttle_clear,
    compute_throttle_set,
)
from runtime.settings import Settings, read_command_signing_key
from schemas.published import read_published

log = logging.getLogger(__name__)


def recent_commands_reader(bootstrap_servers: str, client_config, settings: Settings) -> Callable[[], list[Mapping]]:
    """ADOPTION's evidence: the product's newest commands read back from the commands topic,
    signed where commands are signed (`schemas.published`)."""
    def read() -> list[Mapping]:
        topic = settings.topic("commands")
        with TopicReader(bootstrap_servers, client_config, "reassigner-executor-adoption") as reader:
            return read_published(reader, [topic], topic, read_command_signing_key(settings))[topic]
    return read


class ThrottleKeeper:
    """Sets and clears the executor's throttles (see the module rule)."""

    def __init__(self, admin: ClusterAdmin, ledger: CommandLedger, stop: threading.Event,
                 recent_commands: Callable[[], Iterable[Mapping]] | None = None) -> None:
        self.admin = admin
        self.ledger = ledger
        self.stop = stop
        self._recent_commands = recent_commands
        self._recent_throttles: list[ThrottleWanted] | None = None  # read back once, when needed

    def apply(self, wanted: ThrottleWanted) -> None:
        """Put `wanted` in force, merged with what others set; our part recorded first."""
        current = self._read(wanted.brokers, wanted.topics)
        changes = compute_throttle_set(wanted, *current, self._owned(current))
        for kept in changes.kept:
            log.info("throttle left as someone else set it: %s", kept)
        self._write(changes)

    def clear(self, brokers: list[int], topics: list[str], sequence: int | None) -> None:
        """Remove what the executor set on `brokers` and `topics` for steps issued before
        `sequence` (None: all), nothing else."""
        current = self._read(brokers, topics)
        self._write(compute_throttle_clear(brokers, topics, sequence, *current, self._owned(current)))

    def _owned(self, current) -> dict[str, dict]:
        """The executor's records; where Redis held none at all when first read, with what the
        product's recent steps set among the `current` configs adopted first (ADOPTION)."""
        owned = retry_redis(self.ledger.read_throttles, "reading the executor's throttles", UNTIL_STOPPED, self.stop)
        if self._recent_commands is None or not self.ledger.found_nothing:
            return owned
        if self._recent_throttles is None:
            commands = self._recent_commands()
            self._recent_throttles = [
                wanted for kind, fields in (c["payload"] for c in commands)
                if (wanted := compute_step_throttle(fields) if kind == "ReassignmentStep"
                    else compute_set_throttle(fields) if kind == "SetThrottle" else None)]
            log.info("the executor's throttle records were not in Redis when it started (emptied or replaced, or "
                     "never written): %d throttled steps of the product read back to adopt their throttles",
                     len(self._recent_throttles))
        adopted = {key: record for key, record in compute_adopted(self._recent_throttles, *current).items()
                   if key not in owned}
        if not adopted:
            return owned
        log.warning("adopting %d throttles the product's recent steps set, as Kafka shows them, as the executor's "
                    "own (its records of them were gone from Redis; a rate someone else set to the same value on "
                    "these brokers is taken too): %s", len(adopted), ", ".join(sorted(adopted)))
        retry_redis(lambda: self.ledger.store_throttles(adopted), "recording the adopted throttles", UNTIL_STOPPED,
                    self.stop)
        return {**owned, **adopted}

    def _read(self, brokers: list[int], topics: list[str]):
        """(broker, rate name) → value and (topic, list name) → value, as Kafka holds them."""
        names = (LEADER_THROTTLED_RATE, FOLLOWER_THROTTLED_RATE, LOG_DIR_THROTTLED_RATE, *REPLICA_LISTS)
        found = self.admin.describe_dynamic_configs(brokers, topics, names)
        rates = {(b, n): found.get((b, n)) for b in brokers for n in names[:3]}
        lists = {(t, n): found.get((t, n)) for t in topics for n in REPLICA_LISTS}
        return rates, lists

    def _write(self, changes: ThrottleChanges) -> None:
        retry_redis(lambda: self.ledger.store_throttles(changes.record), "recording the executor's throttles",
                    UNTIL_STOPPED, self.stop)
        for broker_id, configs in sorted(changes.broker_configs.items()):
            self.admin.alter_broker_configs([broker_id], configs)
        self.admin.alter_topic_configs(changes.topic_configs)
        retry_redis(lambda: self.ledger.forget_throttles(changes.forget), "forgetting cleared throttles",
                    UNTIL_STOPPED, self.stop)
