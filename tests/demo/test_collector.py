"""The demo's topic collector on a real Kafka: a re-published alert (same id) is collected once."""

import uuid

import pytest
from confluent_kafka import Producer

from reassigner.dev.harness.product import TopicCollector
from schemas.codec import encode

pytestmark = pytest.mark.stack


def alert(alert_id: str, kind: str) -> dict:
    return {"schema_version": 1, "event_time": 1_700_000_000_000, "id": alert_id, "key": "broker-1",
            "severity": "ERROR", "kind": kind, "subject": "broker-1", "message": "m", "details": {}}


def test_a_republished_alert_is_collected_once(local_stack):
    topic = f"collector-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": local_stack.bootstrap_servers, "log_level": 0})
    # The pipeline publishing batch 7's outbox twice (a publish timed out), then a new alert.
    for record in (alert("alert-7-0", "DiskFailed"), alert("alert-7-0", "DiskFailed"),
                   alert("alert-8-0", "BrokerFailed")):
        producer.produce(topic, key=b"broker-1", value=encode("Alert", record))
    assert producer.flush(30) == 0
    collector = TopicCollector(local_stack.bootstrap_servers, topic)
    try:
        # One key, so one partition: alert-8-0 is collected after both copies of alert-7-0 were read.
        collector.wait_for("BrokerFailed", 0, 60)
        assert [a["id"] for a in collector.records()] == ["alert-7-0", "alert-8-0"]
        assert len(collector.of_kind("DiskFailed")) == 1
    finally:
        collector.close()
