"""Eligible leader replicas (KIP-966) on a real cluster, through the product's decisions: a broker
lost under min ISR leaves its replica as an eligible leader; the pipeline alerts UnderMinIsr
naming it (no OfflinePartitions: the partition keeps its leader), heals it with a step that adds a
replica and sheds the dead one — a clean copy traded for an in-sync one — and that step completes
only once Kafka has the new replica in the ISR. The handlers decide, the real executor applies
(`HandlersLoop`); runs its own stack (it kills a broker)."""

from __future__ import annotations

import time
import uuid

import pytest

from planning.model import ELIGIBLE_LEADERS, TopicPartition
from reassigner.dev.harness.cluster_tools import create_topics
from reassigner.dev.harness.handlers_loop import HandlersLoop
from runtime.settings import compute_policy, load_settings
from schemas.errors import TransientError
from tests.waiting import eventually

pytestmark = [pytest.mark.stack, pytest.mark.slow, pytest.mark.long]  # a stack of its own: `make test-slow`

LOST = 3


def test_a_broker_lost_under_min_isr_is_healed_by_trading_its_eligible_leader_for_an_in_sync_replica(
        private_stack):
    local, state = private_stack
    local.add_broker(rack="/dc2/r2")  # broker 4: where broker 3's replica can go (same DC)
    topic = f"elr-{uuid.uuid4().hex[:6]}"
    tp = TopicPartition(topic, 0)
    create_topics(state.bootstrap_servers, {topic: 1}, min_insync_replicas=3, assignments={topic: [[1, 2, LOST]]})
    policy = compute_policy(load_settings(broker_failure_grace_seconds=0, throttle_bytes_per_sec=50_000_000))
    alerts: list[dict] = []

    def decide() -> None:
        try:
            decision = loop.decide()
        except TransientError:
            # A poll that met the broker just killed (ECONNREFUSED on the client's connection to
            # it): the product's watcher polls again at its next tick, and so does this loop.
            return
        alerts.extend(m.record for m in decision.outbox if m.topic_suffix == "alerts")

    with HandlersLoop(state.bootstrap_servers, state.redis_url, policy) as loop:
        decide()  # the first snapshot
        elr = loop.state.kafka is not None and loop.state.kafka.has(ELIGIBLE_LEADERS)
        local.stop_broker(LOST, kill=True)
        try:
            def lost_seen():
                decide()
                p = loop.state.cluster.partition(tp)
                return p is not None and LOST not in p.isr and p
            seen = eventually(lost_seen, 180, 0.5, "broker 3 out of the ISR, as the product sees it")
            assert seen.leader in (1, 2)
            if elr:  # the replica that left the ISR below min ISR is kept as an eligible leader
                eventually(lambda: (decide(), LOST in loop.state.cluster.partition(tp).eligible_leaders)[1],
                           120, 0.5, "broker 3 an eligible leader, as the product sees it")
            under = [a for a in alerts if a["kind"] == "UnderMinIsr" and a["subject"] == topic]
            assert under, [a["kind"] for a in alerts]
            if elr:
                assert "keep eligible leader replicas" in under[-1]["message"]
            assert not [a for a in alerts if a["kind"] == "OfflinePartitions" and a["subject"] == topic]

            def healing_step():
                decide()
                return next((c for c in loop.commands_of("ReassignmentStep") if c["payload"][1]["topic"] == topic),
                            None)
            step = eventually(healing_step, 180, 0.5, "the heal's step for the partition")["payload"][1]
            assert 4 in step["target_replicas"] and LOST not in step["target_replicas"]
            # Kafka keeps broker 3 in the replicas until 4 is in sync; the step is done only then.
            started = time.monotonic()

            def healed():
                decide()
                record = loop.state.reassignments.get(tp)
                return record is None or not record.active

            eventually(healed, 300, 0.5, "the heal of the partition completed")

            def read_back():
                try:
                    partitions, _ = loop.admin.describe_partitions()
                except TransientError:  # as in decide(): broker 3 is still down
                    return None
                return next(p for p in partitions if p.topic == topic)

            kafka_view = eventually(read_back, 60, 0.5, "Kafka's view of the healed partition")
            assert sorted(kafka_view.replicas) == [1, 2, 4] and 4 in kafka_view.isr, (kafka_view, time.monotonic() - started)
        finally:
            local.start_broker(LOST)
