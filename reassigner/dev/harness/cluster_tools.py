"""What the demo and the scenario tests do to the cluster themselves, outside the product.

- `create_topics`: topics with RF 3 and a min ISR, optionally with an explicit replica assignment
  (to start from an unbalanced topic that a rebalance request then evens out);
- `write_bulk`: megabytes of filler per partition (acks=all), so that moving a replica takes time;
- `delete_topics`: what a benchmark run made, once done;
- `SlowReplication`: a slow network for one topic, made with Kafka's own replication quotas
  (`leader/follower.replication.throttled.replicas = *` on the topic, the throttled rates on every
  broker), set and removed by the test, not by the product. A step of a throttled partition then
  stays in flight long enough for an operator's request (a new target, a limit change) to land
  while it runs. Kafka never throttles a follower's first fetch (up to `replica.fetch.max.bytes`,
  1 MB), so a partition needs a few MB for the quota to bite. The product's own throttle
  (`throttle.bytes.per.sec`) sets the same broker rates and clears them once nothing moves
  (`throttled_brokers` tells when that is done), so a scene that uses it waits for the clearing
  before the next scene slows replication itself.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from runtime.clients.client_config import ClientConfig
from reassigner.dev.local.kafka_admin import PLAINTEXT, client_settings

RATE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
REPLICA_KEYS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


def create_topics(bootstrap_servers: str, topics: dict[str, int], min_insync_replicas: int,
                  assignments: Mapping[str, Sequence[Sequence[int]]] | None = None,
                  client: ClientConfig = PLAINTEXT) -> None:
    """Create `topics` (name → partition count) with RF 3; `assignments` gives some of them an
    explicit replica list per partition instead (the count is then its length)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(client_settings(bootstrap_servers, client))
    config = {"min.insync.replicas": str(min_insync_replicas)}
    assignments = assignments or {}
    futures = admin.create_topics([
        NewTopic(name, num_partitions=len(assignments[name]),  # (confluent-kafka wants both)
                 replica_assignment=[list(r) for r in assignments[name]], config=config)
        if name in assignments else
        NewTopic(name, num_partitions=count, replication_factor=3, config=config)
        for name, count in topics.items()])
    for future in futures.values():
        future.result(60)


def delete_topics(bootstrap_servers: str, topics: Iterable[str], client: ClientConfig = PLAINTEXT) -> None:
    """Delete `topics` (Kafka removes their files `file.delete.delay.ms` later, 60 s by default)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(client_settings(bootstrap_servers, client))
    for future in admin.delete_topics(list(topics), operation_timeout=60).values():
        future.result(60)


def write_bulk(bootstrap_servers: str, partitions: list[tuple[str, int]], megabytes: int,
               client: ClientConfig = PLAINTEXT) -> None:
    """Write `megabytes` of filler to each partition (acks=all)."""
    from confluent_kafka import Producer

    producer = Producer(client_settings(bootstrap_servers, client, acks="all", **{"linger.ms": 20}))
    chunk = b"x" * 100_000
    for topic, partition in partitions:
        for _ in range(megabytes * 10):
            while True:
                try:
                    producer.produce(topic, value=chunk, partition=partition)
                    break
                except BufferError:
                    producer.poll(0.2)
    producer.flush(120)


class SlowReplication:
    """Kafka's replication quotas on one topic, at `bytes_per_sec` per broker (see module doc)."""

    def __init__(self, bootstrap_servers: str, topic: str, broker_ids: Iterable[int],
                 bytes_per_sec: int, client: ClientConfig = PLAINTEXT) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.client = client
        self.topic = topic
        self.broker_ids = sorted(set(broker_ids))
        self.bytes_per_sec = bytes_per_sec

    def __enter__(self) -> "SlowReplication":
        self._alter({key: str(self.bytes_per_sec) for key in RATE_KEYS},
                    {key: "*" for key in REPLICA_KEYS})
        return self

    def __exit__(self, *exc_info) -> None:
        self.lift()

    def lift(self) -> None:
        """Remove the quotas (idempotent)."""
        self._alter({key: None for key in RATE_KEYS}, {key: None for key in REPLICA_KEYS})

    def _alter(self, broker_configs: dict[str, str | None], topic_configs: dict[str, str | None]) -> None:
        from confluent_kafka.admin import (
            AdminClient,
            AlterConfigOpType,
            ConfigEntry,
            ConfigResource,
            ResourceType,
        )

        def entries(configs: dict[str, str | None]) -> list:
            return [ConfigEntry(name, value or "", incremental_operation=(
                AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET))
                for name, value in configs.items()]

        admin = AdminClient(client_settings(self.bootstrap_servers, self.client))
        resources = [ConfigResource(ResourceType.BROKER, str(b), incremental_configs=entries(broker_configs))
                     for b in self.broker_ids]
        resources.append(ConfigResource(ResourceType.TOPIC, self.topic,
                                        incremental_configs=entries(topic_configs)))
        for resource in resources:  # one broker resource per call, as librdkafka demands
            for future in admin.incremental_alter_configs([resource]).values():
                future.result(30)


def throttle_rates(bootstrap_servers: str, broker_ids: Iterable[int],
                   client: ClientConfig = PLAINTEXT) -> dict[int, dict[str, int | None]]:
    """Each broker's replication throttle rates as Kafka holds them (RATE_KEYS; None: not set)."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    admin = AdminClient(client_settings(bootstrap_servers, client))
    rates = {}
    for broker in sorted(set(broker_ids)):
        resource = ConfigResource(ResourceType.BROKER, str(broker))
        configs = next(iter(admin.describe_configs([resource]).values())).result(30)
        rates[broker] = {key: int(configs[key].value) if key in configs and configs[key].value else None
                         for key in RATE_KEYS}
    return rates


def throttled_brokers(bootstrap_servers: str, broker_ids: Iterable[int],
                      client: ClientConfig = PLAINTEXT) -> list[int]:
    """The brokers that still have a replication throttle rate set (by anyone)."""
    return [b for b, rates in throttle_rates(bootstrap_servers, broker_ids, client).items()
            if any(rate is not None for rate in rates.values())]
