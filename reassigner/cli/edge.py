"""`reassigner watch`, `reassigner execute` and `reassigner snapshot`: the cluster edge.

- `watch` polls the cluster and publishes state-carrying events (see `reassigner.edge.watcher`);
- `execute` applies the pipeline's commands and publishes their results
  (see `reassigner.edge.executor`);
- `snapshot --output FILE` writes a live cluster as the snapshot JSON `plan` and `simulate` read
  (`planning.snapshot`).

Connections (`connections.connect`): `--bootstrap-server` (and `--redis-url` for `execute`);
without them, the local stack's state file in `--stack-dir` names them. `--command-config` is a
Kafka client properties file, as for Kafka's own tools. The long-running commands stop cleanly
on SIGTERM or Ctrl-C.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Optional

import typer

from reassigner.cli.connections import connect, load, resolve
from reassigner.cli.options import (METRICS_FLAGS, SharedFlags, configure_logging, start_metrics_endpoint,
                                    stop_on_signals, takes_flags)
from reassigner.cli.printing import one_line_errors

log = logging.getLogger(__name__)


def register(app: typer.Typer) -> None:
    app.command("watch", help="Poll the cluster and publish what changes (and snapshots).")(
        one_line_errors(watch))
    app.command("execute", help="Apply commands from the commands topic; publish results.")(
        one_line_errors(execute))
    app.command("snapshot", help="Dump a live cluster to a snapshot file (the JSON `plan` and `simulate` read).")(
        one_line_errors(snapshot))


@takes_flags("bootstrap_server", "command_config", "stack_dir", "topic_prefix", *METRICS_FLAGS)
def watch(
    poll_interval: Optional[float] = typer.Option(None, "--poll-interval", min=0.05,
                                                  help="Seconds between polls (default 1)."),
    snapshot_interval: Optional[float] = typer.Option(None, "--snapshot-interval", min=1,
                                                      help="Seconds between full snapshots (default 60)."),
    verbose: bool = typer.Option(False, "--verbose", help="Log every partition change."),
    *, flags: SharedFlags,
) -> None:
    from runtime.clients.kafka_admin import ClusterAdmin
    from runtime.clients.kafka_producer import EventPublisher, producer_config
    from runtime.clients.kafka_access import check_kafka_access
    from reassigner.edge.canary import start_canary
    from reassigner.edge.watcher import WATCHER_TOPICS, Watcher

    configure_logging(verbose)
    connected = connect(flags, need_redis=False)
    updates = {k: v for k, v in (("poll_interval_seconds", poll_interval),
                                 ("snapshot_interval_seconds", snapshot_interval)) if v is not None}
    settings = connected.settings.model_copy(update=updates)
    client_config = connected.client_config
    check_kafka_access(settings.bootstrap_servers, client_config, "watch",
                       [settings.topic(suffix) for suffix in WATCHER_TOPICS], settings.topic_prefix)
    start_metrics_endpoint(settings, "watcher")
    admin = ClusterAdmin(settings.bootstrap_servers, client_config)
    publisher = EventPublisher(producer_config(settings.bootstrap_servers, client_config,
                                               "reassigner-watcher"), settings.topic_prefix)
    log.info("watching %s every %.1f s (snapshot every %.0f s)", settings.bootstrap_servers,
             settings.poll_interval_seconds, settings.snapshot_interval_seconds)
    with stop_on_signals() as stop:
        # The canary (adaptive throttle's latency probe) runs beside the polls, with clients of its own.
        canary = start_canary(settings, client_config, stop) if settings.canary_enabled else None
        try:
            Watcher(admin, publisher, settings).run(stop)
        finally:
            stop.set()  # the canary ends with the watcher, whatever ended the watcher
            if canary is not None:
                canary.join(10.0)
            publisher.close()
            admin.close()


@takes_flags("bootstrap_server", "command_config", "redis_url", "stack_dir", "topic_prefix", "cluster_name",
             "command_signing_key_file", *METRICS_FLAGS)
def execute(verbose: bool = typer.Option(False, "--verbose"), *, flags: SharedFlags) -> None:
    from runtime.clients.kafka_admin import ClusterAdmin
    from runtime.clients.kafka_producer import producer_config
    from runtime.clients.redis_io import check_redis, connect_redis
    from runtime.clients.kafka_access import check_kafka_access
    from reassigner.edge.executor import EXECUTOR_TOPICS, Executor
    from reassigner.edge.throttle_keeper import recent_commands_reader
    from reassigner.edge.ledger import CommandLedger
    from schemas.errors import TransientError

    configure_logging(verbose)
    connected = resolve(load(flags), need_redis=True)
    settings = connected.settings
    start_metrics_endpoint(settings, "executor")  # a port taken fails before the client settings are read
    client_config = connected.client_config
    redis_client = connect_redis(settings.redis_url, settings.redis_socket_timeout_seconds,
                                 settings.redis_connect_timeout_seconds)
    with stop_on_signals() as stop:
        # Redis is checked at start: a wrong password stops the executor here in one line, not
        # at its first command (a Redis that is away is waited for, as during the run).
        try:
            check_redis(redis_client, settings.redis_url, stop=stop)
        except TransientError:
            if stop.is_set():  # SIGTERM while waiting for Redis: a clean stop
                return
            raise
        check_kafka_access(settings.bootstrap_servers, client_config, "execute",
                           [settings.topic(suffix) for suffix in EXECUTOR_TOPICS], settings.topic_prefix)
        admin = ClusterAdmin(settings.bootstrap_servers, client_config)
        ledger = CommandLedger(redis_client, settings.cluster_name)
        consumer = {"bootstrap.servers": settings.bootstrap_servers, **client_config.librdkafka}
        executor = Executor(admin, ledger, consumer,
                            producer_config(settings.bootstrap_servers, client_config,
                                            "reassigner-executor"), settings,
                            recent_commands=recent_commands_reader(settings.bootstrap_servers, client_config,
                                                                   settings))
        log.info("executing commands from %s", settings.topic("commands"))
        try:
            executor.run(stop)
        finally:
            admin.close()


@takes_flags("bootstrap_server", "command_config", "stack_dir")
def snapshot(
    output: Path = typer.Option(..., "--output", help="Where to write the snapshot JSON."),
    *, flags: SharedFlags,
) -> None:
    from planning.snapshot import cluster_to_json
    from runtime.clients.kafka_access import check_kafka_access
    from runtime.clients.kafka_admin import ClusterAdmin
    from reassigner.edge.observation import compute_cluster

    connected = connect(flags, need_redis=False)
    settings, client_config = connected.settings, connected.client_config
    check_kafka_access(settings.bootstrap_servers, client_config, "snapshot", [], settings.topic_prefix)
    with ClusterAdmin(settings.bootstrap_servers, client_config) as admin:
        observation = admin.observe()
    document = cluster_to_json(compute_cluster(observation))
    output.write_text(json.dumps(document, indent=2) + "\n")
    partitions = sum(len(t["partitions"]) for t in document["topics"])
    typer.echo(f"wrote {output}: {len(document['brokers'])} brokers, {len(document['topics'])} "
               f"topics, {partitions} partitions", err=True)
