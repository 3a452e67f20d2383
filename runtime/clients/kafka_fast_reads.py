"""kafka-python's private internals, quarantined: the fast reads of one poll, and a client that
leaves nothing running when it cannot be made.

kafka-python 3.x has public methods for every read the watcher needs, but they cost more than
the answer is worth at 10,000+ partitions (a whole-cluster metadata fetch before DescribeLogDirs,
`to_dict` on every answer) and each waits for its own round trip. These reads send the protocol
requests themselves and run side by side on kafka-python's event loop. They use, and nothing
else in the product may use:
- `client._manager.send / run / _net.call_soon_with_future` (the client's event loop);
- `client._async_list_partition_reassignments`, `client._async_describe_configs`;
- the protocol classes `MetadataRequest`, `DescribeLogDirsRequest`, `ApiVersionsRequest`;
- `kafka.admin._configs.AlterConfigOp` (IncrementalAlterConfigs' operation, not exported);
- `client._metrics`, `client._client`, `client._net` of a client whose constructor failed
  (`open_admin_client`).
kafka-python is pinned to 3.x in pyproject.toml; an upgrade must re-check this list. A read that
fails is done again by the caller through `ClusterAdmin`'s public path (same answers, same error
translation), so the fast path never changes what an error looks like.
"""

from __future__ import annotations

from typing import Awaitable, Callable, Iterable, Mapping, Sequence

from runtime.clients.cluster_observation import MIN_INSYNC_REPLICAS


def open_admin_client(**options):
    """kafka-python's `KafkaAdminClient(**options)`, or its error with nothing of it left running.

    Its constructor starts the client's network thread and then bootstraps; a bootstrap that
    fails (cluster unreachable, wrong password) raises with that thread, its connections and
    their sockets left alive for the life of the process. A watcher or executor retrying through
    a Kafka outage would leak one thread and its sockets per attempt: past 1,024 open descriptors
    py4j's callback server, which waits with select(), can no longer serve Spark (see
    `streams.spark_session`). So the object is made first and its constructor run second:
    whatever it started is stopped before the error goes on."""
    from kafka.admin import KafkaAdminClient

    client = KafkaAdminClient.__new__(KafkaAdminClient)
    try:
        client.__init__(**options)
    except BaseException:
        release_half_made_client(client)
        raise
    return client


def release_half_made_client(client) -> None:
    """Stop what a failed `KafkaAdminClient.__init__` started, in its own `close` order (metrics,
    connections, network thread); each part only if the constructor got that far."""
    for part, stop in (("_metrics", "close"), ("_client", "close"), ("_net", "stop")):
        started = getattr(client, part, None)
        if started is not None:
            try:
                getattr(started, stop)()
            except Exception:  # a half-made part may fail to stop: the others still must
                pass

Read = Callable[..., Awaitable[object]]
"""A read for `read_together`: a coroutine function taking kafka-python's admin client first."""


async def read_metadata(client, topics: Sequence[str] | None = None) -> list:
    """The metadata of `topics` (every topic when None) as kafka-python's answer structs."""
    from kafka.protocol.metadata import MetadataRequest

    named = None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
    response = await client._manager.send(MetadataRequest(topics=named, allow_auto_topic_creation=False))
    return list(response.topics)


async def read_reassignments(client) -> dict:
    """Every ongoing reassignment (ListPartitionReassignments, sent to the controller)."""
    return await client._async_list_partition_reassignments(None, None)


async def read_log_dirs(client, broker_id: int) -> list:
    """DescribeLogDirs of every partition on one broker, as kafka-python's answer structs. Its
    public method, given no partitions, first fetches the whole cluster metadata and then lists
    every partition in the request (0.8 s instead of 0.2 s per broker at 10,000 partitions); the
    protocol's null topic list means "all" on its own, so that is what is sent."""
    from kafka.protocol.admin import DescribeLogDirsRequest

    response = await client._manager.send(DescribeLogDirsRequest(topics=None), node_id=broker_id)
    return list(response.results)


async def read_min_insync_replicas(client, topics: Sequence[str]) -> dict:
    """DescribeConfigs of min.insync.replicas of these topics (kafka-python's answer form)."""
    from kafka.admin import ConfigResource, ConfigResourceType

    resources = [ConfigResource(ConfigResourceType.TOPIC, t, {MIN_INSYNC_REPLICAS: None}) for t in topics]
    return await client._async_describe_configs(resources, False, "all")


async def read_cluster_features(client) -> tuple[dict[str, int], dict[int, int]]:
    """(finalized feature → level, API key → newest version) from one ApiVersions v3+ answer.
    kafka-python's public `api_versions()` maps every key to its ApiKey enum and fails on a key
    it does not know (Kafka 4.4 answers key 93): the raw numbers are what the product needs."""
    from kafka.protocol.metadata import ApiVersionsRequest

    config = client._manager.config
    response = await client._manager.send(ApiVersionsRequest(
        client_software_name=config["client_software_name"],
        client_software_version=config["client_software_version"], min_version=3))
    if response.error_code != 0:
        from kafka import errors

        raise errors.for_code(response.error_code)(f"ApiVersionsRequest failed: error {response.error_code}")
    finalized = {f.name: f.max_version_level for f in (response.finalized_features or [])}
    versions = {int(k.api_key): int(k.max_version) for k in (response.api_keys or [])}
    return finalized, versions


def log_dir_reads(broker_ids: Iterable[int]) -> dict[str, tuple[Read, tuple]]:
    return {f"log dirs {b}": (read_log_dirs, (b,)) for b in broker_ids}


def run_read(client, read: Read, *args: object) -> object:
    """One read on kafka-python's event loop, waiting for its answer."""
    return client._manager.run(read, client, *args)


def gather_reads(client, reads: Mapping[str, tuple[Read, tuple]]) -> dict[str, object]:
    """Run reads side by side on kafka-python's event loop (its `_manager.run` waits for one
    coroutine; this one schedules them all, then awaits each)."""
    network = client._manager._net

    async def gather() -> dict[str, object]:
        pending = {name: network.call_soon_with_future(read, client, *args)
                   for name, (read, args) in reads.items()}
        answers: dict[str, object] = {}
        for name, future in pending.items():
            try:
                answers[name] = await future
            except Exception as error:  # redone alone by the caller, with the usual translation
                answers[name] = error
        return answers

    return client._manager.run(gather)


def alter_config_op():
    """kafka-python's `AlterConfigOp` (SET / DELETE of IncrementalAlterConfigs)."""
    from kafka.admin._configs import AlterConfigOp

    return AlterConfigOp
