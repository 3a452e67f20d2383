"""`reassigner alerts webhook --url URL`: every alert POSTed as JSON; failures retried, then
dead-lettered.

DELIVERY RULE (per alert, in each partition's offset order):
1. decode the Alert; an undecodable message is dead-lettered at once (reason: the decoder's);
2. below `--min-severity`: skipped (its offset still moves on);
3. POST `alert_to_json(alert)`; a 2xx answer is delivery. Anything else (a non-2xx status,
   refused connection, timeout) is a failed attempt;
4. after attempt k fails, wait `base * 2**(k-1)` seconds (capped at `max_delay`), up to
   `max_attempts` attempts in all; then publish a `DeadLetter` record (the alert's bytes, key,
   headers, source offset and the last error as reason) on the dead-letter topic;
5. only then does the consumer's offset move past the alert (at-least-once: a crash mid-retry
   re-delivers it; receivers de-duplicate by the alert `id`);
6. an alert whose id this forwarder has already delivered (the pipeline re-published it, or
   two copies sit in the topic) is skipped, not POSTed again
   (`reassigner.operator.alerts_follow.DeliveredIds`: the last 100,000 ids of this process).

Consumers: the alerts topic is read in the consumer group `reassigner-webhook.<prefix>`, so a
restarted forwarder resumes where it stopped and two forwarders share the work.

The rule lives here, the client libraries behind their doors: `plan_message` and
`compute_backoff_delays` are pure (the DeadLetter record is `schemas.dead_letter`'s);
`deliver_with_retries` and `forward_alert` (steps 1–4 for one record → the DeadLetter message to
publish, or None) take their I/O as arguments. Two runners give it the alerts, publish the dead
letters and commit:
- `run_faust_forwarder`: a faust-streaming agent (`runtime.clients.faust_app`);
- `run_confluent_forwarder`: a confluent-kafka consumer loop
  (`runtime.clients.kafka_consumer.run_committing_consumer`).
Which one is the default, and why, is recorded in docs/dependencies.md and below `DEFAULT_RUNNER`.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from itertools import islice
from typing import Callable, Mapping

from runtime.backoff import Backoff
from runtime.clients.client_config import ClientConfig
from runtime.clients.faust_app import build_committing_agent, run_worker
from runtime.clients.kafka_consumer import (ConsumedRecord, OutgoingMessage, StopWithoutCommit,
                                               run_committing_consumer)
from reassigner.operator.alerts_follow import DeliveredIds, alert_to_json, severity_at_least
from schemas.dead_letter import build_dead_letter

log = logging.getLogger(__name__)

RUNNERS = ("faust", "confluent")
DEFAULT_RUNNER = "faust"
"""faust-streaming, since it rides out the outage test (a broker stopped, and one killed, then
restarted, under the running forwarder: every alert POSTed once, none lost;
tests/operator/test_alert_consumers_outage.py). `--runner confluent` is the fallback with the
same rule, for sites that cannot run faust's asyncio worker (it installs its own signal handlers
and logging, and takes ~5 s to join its group)."""


@dataclass(frozen=True)
class WebhookPolicy:
    url: str
    min_severity: str = "INFO"
    max_attempts: int = 5
    base_delay_seconds: float = 0.5
    max_delay_seconds: float = 30.0
    timeout_seconds: float = 10.0


@dataclass(frozen=True)
class DeliveryOutcome:
    delivered: bool
    attempts: int
    last_error: str | None = None


class WebhookRefused(Exception):
    """One failed POST (non-2xx status or transport error); the rule retries it."""


def compute_backoff_delays(max_attempts: int, base_seconds: float, cap_seconds: float) -> tuple[float, ...]:
    """Waits between attempts: base, 2·base, 4·base, … capped (the one retry policy's doubling,
    `runtime.backoff.Backoff`); one fewer than the attempts."""
    backoff = Backoff(first_seconds=min(base_seconds, cap_seconds), most_seconds=cap_seconds)
    return tuple(islice(backoff.delays(), max(0, max_attempts - 1)))


def deliver_with_retries(post: Callable[[bytes], None], body: bytes, policy: WebhookPolicy,
                         sleep: Callable[[float], None], stopping: Callable[[], bool] = lambda: False,
                         ) -> DeliveryOutcome:
    """Steps 3–4 of the rule; `post` raises `WebhookRefused` on a failed attempt."""
    delays = compute_backoff_delays(policy.max_attempts, policy.base_delay_seconds,
                                    policy.max_delay_seconds)
    last_error = None
    for attempt in range(1, policy.max_attempts + 1):
        try:
            post(body)
            return DeliveryOutcome(True, attempt)
        except WebhookRefused as error:
            last_error = str(error)
        if attempt < policy.max_attempts:
            delay = delays[attempt - 1]
            log.warning("webhook POST failed (%s), attempt %d of %d; will retry in %.1f s",
                        last_error, attempt, policy.max_attempts, delay)
            if stopping():
                break
            sleep(delay)
    log.warning("webhook POST failed %d times (%s); giving up: dead-lettering", attempt, last_error)
    return DeliveryOutcome(False, attempt, last_error)


def plan_message(value: bytes | None, headers: Mapping[str, bytes], policy: WebhookPolicy,
                 ) -> tuple[str, bytes | str | None]:
    """Steps 1–2: ("post", json body) | ("skip", None) | ("dead-letter", reason)."""
    from schemas.errors import DecodeError
    from schemas.codec import decode, writer_version_from_headers

    try:
        alert = decode("Alert", value or b"", writer_version_from_headers(headers))
    except DecodeError as error:
        return "dead-letter", f"not an Alert: {error}"
    if not severity_at_least(alert["severity"], policy.min_severity):
        return "skip", None
    return "post", json.dumps(alert_to_json(alert)).encode()


# --- the shell ----------------------------------------------------------------------------------


def post_json(url: str, timeout_seconds: float) -> Callable[[bytes], None]:
    """A `post` for `deliver_with_retries`: urllib, JSON content type, 2xx or WebhookRefused."""
    def post(body: bytes) -> None:
        request = urllib.request.Request(url, data=body, method="POST",
                                         headers={"Content-Type": "application/json",
                                                  "User-Agent": "kafka-reassigner-webhook"})
        try:
            with urllib.request.urlopen(request, timeout=timeout_seconds) as answer:
                if not 200 <= answer.status < 300:
                    raise WebhookRefused(f"HTTP {answer.status}")
        except urllib.error.HTTPError as error:
            raise WebhookRefused(f"HTTP {error.code}") from None
        except (urllib.error.URLError, OSError) as error:
            raise WebhookRefused(f"{type(error).__name__}: {getattr(error, 'reason', error)}") from None
    return post


def group_id(topic_prefix: str) -> str:
    return f"reassigner-webhook.{topic_prefix}"


def forward_alert(record: ConsumedRecord, policy: WebhookPolicy, post: Callable[[bytes], None],
                  sleep: Callable[[float], None], stopping: Callable[[], bool] = lambda: False,
                  delivered: DeliveredIds | None = None) -> OutgoingMessage | None:
    """Steps 1–4 and 6 for one alert: None once it is delivered or skipped; else the DeadLetter
    message to publish before the offset moves on. Raises `StopWithoutCommit` when `stopping()`
    cut the retries short: neither delivered nor dead-lettered, it is delivered again after a
    restart. `delivered`: the ids this forwarder has delivered (step 6), updated here."""
    from schemas.codec import encode, version_headers

    headers = dict(record.headers)
    action, detail = plan_message(record.value, headers, policy)
    reason = None
    if action == "dead-letter":
        reason = str(detail)
    elif action == "post":
        alert_id = json.loads(detail)["id"]  # type: ignore[arg-type]
        if delivered is not None and alert_id in delivered:
            log.info("alert %s at %s[%d]@%d was delivered already; skipped",
                     alert_id, record.topic, record.partition, record.offset)
            return None
        outcome = deliver_with_retries(post, detail, policy, sleep, stopping)  # type: ignore[arg-type]
        if outcome.delivered and delivered is not None:
            delivered.remember(alert_id)
        if not outcome.delivered:
            if stopping():
                raise StopWithoutCommit
            reason = f"webhook {policy.url} failed {outcome.attempts} times: {outcome.last_error}"
    if reason is None:
        return None
    letter = build_dead_letter(source_topic=record.topic, partition=record.partition, offset=record.offset,
                               key=record.key, value=record.value, headers=headers, reason=reason,
                               now_ms=int(time.time() * 1000), expected_schema="Alert")
    return OutgoingMessage(key=letter["key"].encode(), value=encode("DeadLetter", letter),
                           headers=tuple(version_headers()))


def run_confluent_forwarder(bootstrap_servers: str, client_config: ClientConfig | None,
                            alerts_topic: str, dead_letter_topic: str, policy: WebhookPolicy,
                            consumer_group: str, stop: threading.Event | None = None,
                            on_ready: Callable[[], None] | None = None) -> None:
    """The rule on confluent-kafka (`kafka_consumer.run_committing_consumer`): subscribe,
    deliver, dead-letter and wait for its ack, commit, in that order, until `stop`."""
    stop = stop or threading.Event()
    post = post_json(policy.url, policy.timeout_seconds)
    delivered = DeliveredIds()
    run_committing_consumer(
        bootstrap_servers, client_config, alerts_topic, consumer_group,
        lambda record: forward_alert(record, policy, post, stop.wait, stop.is_set, delivered),
        dead_letter_topic, stop, purpose="webhook", on_ready=on_ready)


def run_faust_forwarder(bootstrap_servers: str, alerts_topic: str, dead_letter_topic: str,
                        policy: WebhookPolicy, consumer_group: str, loglevel: str = "warning") -> None:
    """The rule as a faust-streaming agent (`runtime.clients.faust_app`), until SIGINT/SIGTERM.
    The POST and its retries run in the loop's executor, so heartbeats and commits go on while a
    webhook is slow; faust commits the alert's offset after the dead letter, if any, is sent."""
    post = post_json(policy.url, policy.timeout_seconds)
    delivered = DeliveredIds()
    app = build_committing_agent(bootstrap_servers, alerts_topic, consumer_group,
                                 lambda record: forward_alert(record, policy, post, time.sleep,
                                                              delivered=delivered),
                                 dead_letter_topic)
    run_worker(app, loglevel=loglevel)
