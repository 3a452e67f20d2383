"""The executor rides out a Redis outage (regression: it exited on the first Redis error).

Real Kafka (the shared session stack) and a Redis of this test's own, stopped and started again
on the same port and AOF dir while the executor runs: commands sent during the outage are applied
once Redis is back, each exactly once, and nothing sent before is applied again.
"""

from __future__ import annotations

import logging
import threading
import uuid

import pytest

from runtime.clients.kafka_admin import ClusterAdmin
from runtime.clients.kafka_producer import producer_config
from runtime.clients.redis_io import connect_redis
from reassigner.dev.local.processes import free_port, port_open, stop
from reassigner.dev.local.redis_server import start_redis
from reassigner.edge.executor import Executor
from reassigner.edge.ledger import CommandLedger
from state.controller_store import ControllerStore
from runtime.settings import load_settings
from schemas.codec import topic_name
from tests.edge.test_executor_applies_commands import Commands, create_topic, partition
from tests.waiting import eventually

pytestmark = [pytest.mark.stack, pytest.mark.slow]


def test_commands_sent_while_redis_is_down_are_applied_once_when_it_is_back(local_stack, tmp_path, caplog):
    prefix = f"redisout{uuid.uuid4().hex[:6]}"
    port, data_dir = free_port(), tmp_path / "redis"
    redis_pid = start_redis(port, data_dir)
    settings = load_settings(topic_prefix=prefix, cluster_name=f"outage-{uuid.uuid4().hex[:6]}",
                             executor_retry_seconds=20)
    # The planner epoch a pipeline would hold; the commands below carry it (Commands.send: 100).
    connect_redis(f"redis://127.0.0.1:{port}/0").hset(ControllerStore.meta_key(settings.cluster_name), "epoch", 100)
    bootstrap = local_stack.bootstrap_servers
    admin = ClusterAdmin(bootstrap)
    executor = Executor(ClusterAdmin(bootstrap), CommandLedger(connect_redis(f"redis://127.0.0.1:{port}/0"),
                                                               settings.cluster_name),
                        {"bootstrap.servers": bootstrap}, producer_config(bootstrap), settings)
    stopping = threading.Event()
    thread = threading.Thread(target=executor.run, args=(stopping,), daemon=True)
    caplog.set_level(logging.WARNING, logger="runtime.clients.redis_io")
    thread.start()
    try:
        names = {topic_name(s, prefix) for s in ("commands", "command-results", "dead-letter")}
        eventually(lambda: names <= set(admin.describe_partitions()[1]), 30, what="executor topics")
        commands = Commands(bootstrap, prefix)
        topics = [f"{prefix}-t{n}" for n in range(3)]
        for topic in topics:
            create_topic(local_stack, topic, [1])

        def move(topic: str) -> str:
            return commands.send("ReassignmentStep", {"topic": topic, "partition": 0, "target_replicas": [2],
                                                      "adding": [2], "removing": [1]})

        before = move(topics[0])
        assert commands.result_of(before)["ok"]

        stop(redis_pid)
        eventually(lambda: not port_open(port), 20, what="Redis stopped")
        during = [move(topics[1]), move(topics[2])]
        eventually(lambda: any("will retry" in r.getMessage() for r in caplog.records), 60,
                   what="the executor waiting for Redis")
        assert thread.is_alive(), "the executor died on a Redis outage"

        redis_pid = start_redis(port, data_dir)  # the same AOF: the ledger of `before` is kept
        sentinel = move(topics[0])  # already on [2]: a no-op step, read last (same key, same partition)
        commands.result_of(sentinel, timeout=120)
        by_id = {command_id: [r for r in commands.results if r["command_id"] == command_id]
                 for command_id in (before, *during)}
        assert {command_id: [(r["ok"], r["error_code"]) for r in results] for command_id, results in by_id.items()} \
            == {command_id: [(True, None)] for command_id in by_id}, "each command once, applied"
        for topic in topics:
            eventually(lambda t=topic: partition(admin, t).replicas == (2,), 60, what=f"{topic} on [2]")
        assert thread.is_alive()
    finally:
        stopping.set()
        thread.join(30)
        admin.close()
        executor.admin.close()
        stop(redis_pid)
    assert not thread.is_alive(), "the executor did not stop on request"
