"""The webhook delivery rule without Kafka: backoff, retries, giving up, dead-letter records."""

from __future__ import annotations

from schemas.dead_letter import build_dead_letter
from reassigner.operator.webhook import (
    WebhookPolicy,
    WebhookRefused,
    compute_backoff_delays,
    deliver_with_retries,
    plan_message,
)
from schemas.codec import decode, encode, version_headers

ALERT = {"schema_version": 1, "event_time": 1_700_000_000_000, "id": "a-1", "key": "orders-3",
         "severity": "WARNING", "kind": "UnderMinIsr", "subject": "orders-3", "message": "m", "details": {"isr": "1"}}


def test_backoff_doubles_and_is_capped():
    assert compute_backoff_delays(5, 0.5, 3.0) == (0.5, 1.0, 2.0, 3.0)
    assert compute_backoff_delays(1, 0.5, 3.0) == ()


def test_retries_until_success_then_stops():
    answers = iter([WebhookRefused("HTTP 500"), WebhookRefused("HTTP 503"), None])
    slept = []

    def post(_body: bytes) -> None:
        answer = next(answers)
        if answer:
            raise answer

    outcome = deliver_with_retries(post, b"{}", WebhookPolicy("http://x", max_attempts=5, base_delay_seconds=1), slept.append)
    assert (outcome.delivered, outcome.attempts, slept) == (True, 3, [1, 2])


def test_gives_up_after_max_attempts():
    def post(_body: bytes) -> None:
        raise WebhookRefused("HTTP 500")

    slept = []
    outcome = deliver_with_retries(post, b"{}", WebhookPolicy("http://x", max_attempts=3, base_delay_seconds=0.1), slept.append)
    assert (outcome.delivered, outcome.attempts, outcome.last_error, len(slept)) == (False, 3, "HTTP 500", 2)


def test_plan_filters_by_severity_and_dead_letters_garbage():
    value = encode("Alert", ALERT)
    headers = dict(version_headers())
    assert plan_message(value, headers, WebhookPolicy("http://x", min_severity="ERROR")) == ("skip", None)
    action, body = plan_message(value, headers, WebhookPolicy("http://x"))
    assert action == "post" and b'"kind": "UnderMinIsr"' in body
    action, reason = plan_message(b"\x00garbage", headers, WebhookPolicy("http://x"))
    assert action == "dead-letter" and "not an Alert" in reason


def test_dead_letter_record_encodes_and_keeps_the_bytes():
    letter = build_dead_letter(source_topic="p.alerts", partition=2, offset=17, key=b"k", value=b"v",
                               headers={"schema_version": b"1"}, reason="HTTP 500", now_ms=5,
                               expected_schema="Alert")
    decoded = decode("DeadLetter", encode("DeadLetter", letter))
    assert decoded["id"] == "p.alerts-2-17" and decoded["value"] == b"v" and decoded["expected_schema"] == "Alert"
