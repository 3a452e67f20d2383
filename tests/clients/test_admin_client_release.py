"""A Kafka admin client that cannot be made leaves nothing running (regression).

kafka-python 3.0.12's `KafkaAdminClient` starts its network thread and then bootstraps; a
bootstrap that fails raised with that thread and its connections left alive. Every reconnect
attempt of the watcher or the executor during an outage leaked one, and a test run reached
1,900 open descriptors, past what py4j's callback server can watch (Spark's foreachBatch then
hung). No server needed: the cluster is a closed port."""

from __future__ import annotations

import threading

import pytest

from runtime.clients.kafka_admin import ClusterAdmin
from runtime.clients.kafka_fast_reads import open_admin_client
from schemas.errors import KafkaTransientError
from tests.waiting import eventually


def kafka_network_threads() -> set[int]:
    return {t.ident for t in threading.enumerate() if t.name.startswith("kafka-io")}


def test_a_client_whose_bootstrap_fails_stops_its_network_thread(closed_port):
    before = kafka_network_threads()
    with pytest.raises(Exception):
        open_admin_client(bootstrap_servers=closed_port, request_timeout_ms=1000, bootstrap_timeout_ms=1000)
    eventually(lambda: not (kafka_network_threads() - before), 10, 0.05,
               what="the failed client's network thread stopped")


def test_reconnect_attempts_against_an_unreachable_cluster_leave_no_thread_behind(closed_port):
    before = kafka_network_threads()
    admin = ClusterAdmin(closed_port, request_timeout_ms=1000)
    for _ in range(3):
        admin._next_connect_at = 0.0  # each call a fresh attempt, as after the backoff
        with pytest.raises(KafkaTransientError):
            admin.describe_brokers()
    admin.close()
    eventually(lambda: not (kafka_network_threads() - before), 10, 0.05,
               what="every failed attempt's network thread stopped")
