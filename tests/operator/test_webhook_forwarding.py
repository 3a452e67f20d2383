"""Steps 1–4 of the webhook rule for one consumed record (`forward_alert`), without Kafka: what
the runners publish on the dead-letter topic, and when they must stop without committing."""

from __future__ import annotations

import pytest

from runtime.clients.kafka_consumer import ConsumedRecord, StopWithoutCommit
from reassigner.operator.alerts_follow import DeliveredIds
from reassigner.operator.webhook import WebhookPolicy, WebhookRefused, forward_alert
from schemas.codec import decode, encode, version_headers

ALERT = {"schema_version": 1, "event_time": 1_700_000_000_000, "id": "a-1", "key": "orders-3",
         "severity": "WARNING", "kind": "UnderMinIsr", "subject": "orders-3", "message": "m", "details": {}}
POLICY = WebhookPolicy("http://hook", max_attempts=3, base_delay_seconds=0.1)


def record(value: bytes) -> ConsumedRecord:
    return ConsumedRecord(topic="p.alerts", partition=1, offset=42, key=b"orders-3", value=value,
                          headers=tuple(version_headers()))


def refused(_body: bytes) -> None:
    raise WebhookRefused("HTTP 500")


def test_a_delivered_or_skipped_alert_publishes_nothing():
    posted: list[bytes] = []
    assert forward_alert(record(encode("Alert", ALERT)), POLICY, posted.append, lambda _s: None) is None
    assert len(posted) == 1 and b'"id": "a-1"' in posted[0]
    quiet = WebhookPolicy("http://hook", min_severity="CRITICAL")
    assert forward_alert(record(encode("Alert", ALERT)), quiet, refused, lambda _s: None) is None


def test_an_alert_refused_every_time_becomes_a_dead_letter_naming_its_source():
    slept: list[float] = []
    letter = forward_alert(record(encode("Alert", ALERT)), POLICY, refused, slept.append)
    assert letter is not None and letter.key == b"p.alerts-1-42" and letter.headers == tuple(version_headers())
    decoded = decode("DeadLetter", letter.value)
    assert (decoded["source_partition"], decoded["source_offset"], decoded["source_key"]) == (1, 42, b"orders-3")
    assert decoded["reason"] == "webhook http://hook failed 3 times: HTTP 500" and len(slept) == 2


def test_garbage_is_dead_lettered_without_a_post():
    letter = forward_alert(record(b"\x00garbage"), POLICY, refused, lambda _s: None)
    assert letter is not None and "not an Alert" in decode("DeadLetter", letter.value)["reason"]


def test_a_stop_during_the_retries_leaves_the_alert_uncommitted():
    with pytest.raises(StopWithoutCommit):
        forward_alert(record(encode("Alert", ALERT)), POLICY, refused, lambda _s: None, stopping=lambda: True)


def test_an_alert_already_delivered_is_not_posted_again():
    """The pipeline publishes at least once: a re-published alert (same id) is skipped."""
    posted: list[bytes] = []
    delivered = DeliveredIds()
    for _ in range(2):
        assert forward_alert(record(encode("Alert", ALERT)), POLICY, posted.append, lambda _s: None,
                             delivered=delivered) is None
    assert len(posted) == 1 and "a-1" in delivered


def test_a_dead_lettered_alert_is_not_remembered_as_delivered():
    delivered = DeliveredIds()
    assert forward_alert(record(encode("Alert", ALERT)), POLICY, refused, lambda _s: None,
                         delivered=delivered) is not None
    assert "a-1" not in delivered


def test_delivered_ids_forget_the_oldest_beyond_their_capacity():
    delivered = DeliveredIds(capacity=3)
    for alert_id in ("a", "b", "c", "b", "d"):
        delivered.remember(alert_id)
    assert "a" not in delivered and all(i in delivered for i in ("b", "c", "d"))
