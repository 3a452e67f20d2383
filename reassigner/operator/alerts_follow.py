"""`reassigner alerts --follow`: the alerts topic as readable, coloured lines (or JSON lines).

Pure part: `severity_at_least`, `alert_to_json`, `format_alert` (an Alert record → a rich Text),
`compute_pending_ends` (where reading "until the end" stops), and `DeliveredIds`, the memory of
alert ids already shown or delivered: the pipeline publishes at least once (a batch re-run after
a crash publishes its alerts again, with the same ids), so every consumer drops an alert whose id
it has already delivered. The memory holds the last `DELIVERED_IDS_KEPT` ids of this process; a
repeat older than that, or one arriving after the consumer restarted, is delivered again.
Shell: `follow_alerts`, a `runtime.clients.kafka_consumer.TopicReader` that `assign`s every
partition of the alerts topic (at the end, or at the beginning with `--from-beginning`) and
never commits: following is reading, it owns no offsets and joins no group, so many followers
never disturb each other or a webhook forwarder. librdkafka re-routes fetches to a partition's
new leader by itself, so a broker stopped and restarted under the follower costs a pause, not
the follower (tested: tests/operator/test_alert_consumers_outage.py).

Invariants: an undecodable message is shown as a one-line warning with its offset and skipped,
never fatal; lines are printed in each partition's offset order.
"""

from __future__ import annotations

import json
import logging
import threading
from datetime import datetime, timezone
from typing import Any, Callable, Mapping

from rich.text import Text

from runtime.clients.client_config import ClientConfig
from runtime.clients.kafka_consumer import Start, TopicReader
from schemas import ALERT_SEVERITIES

log = logging.getLogger(__name__)

SEVERITY_STYLES = {"INFO": "cyan", "WARNING": "yellow", "ERROR": "bold red", "CRITICAL": "bold white on red"}


def severity_rank(severity: str) -> int:
    """INFO 0 … CRITICAL 3; an unknown (newer) severity ranks as ERROR, as the schema default."""
    return ALERT_SEVERITIES.index(severity) if severity in ALERT_SEVERITIES else ALERT_SEVERITIES.index("ERROR")


def severity_at_least(severity: str, minimum: str) -> bool:
    return severity_rank(severity) >= severity_rank(minimum)


def parse_min_severity(text: str) -> str:
    from schemas.errors import InvalidInputError

    value = text.strip().upper()
    if value not in ALERT_SEVERITIES:
        raise InvalidInputError(f"--min-severity {text!r}: expected one of {', '.join(ALERT_SEVERITIES)}")
    return value


def alert_to_json(alert: Mapping[str, Any]) -> dict[str, Any]:
    """The alert as a JSON object (what `--json` prints and the webhook POSTs)."""
    return {
        "id": alert["id"], "time": _iso(alert["event_time"]), "event_time": alert["event_time"],
        "severity": alert["severity"], "kind": alert["kind"], "subject": alert["subject"],
        "message": alert["message"], "details": dict(alert.get("details") or {}),
    }


def format_alert(alert: Mapping[str, Any]) -> Text:
    """`2024-05-01 12:00:03Z  WARNING   UnderMinIsr  orders-3  message  {details}`."""
    severity = str(alert["severity"])
    line = Text()
    line.append(_iso(alert["event_time"]).replace("T", " ")[:19] + "Z  ", style="dim")
    line.append(f"{severity:<8}", style=SEVERITY_STYLES.get(severity, "bold red"))
    line.append(f"  {alert['kind']}", style="bold")
    line.append(f"  {alert['subject']}", style="magenta")
    line.append(f"  {alert['message']}")
    details = alert.get("details") or {}
    if details:
        line.append("  " + " ".join(f"{k}={v}" for k, v in sorted(details.items())), style="dim")
    return line


def _iso(event_time_ms: int) -> str:
    return datetime.fromtimestamp(event_time_ms / 1000, tz=timezone.utc).isoformat(timespec="seconds").replace("+00:00", "")


DELIVERED_IDS_KEPT = 100_000  # about 10 MB; pipeline repeats come within one batch's re-run


class DeliveredIds:
    """The last `capacity` alert ids delivered, oldest forgotten first (the one piece of state a
    consumer keeps; owned by one consumer loop)."""

    def __init__(self, capacity: int = DELIVERED_IDS_KEPT) -> None:
        self._capacity = capacity
        self._ids: dict[str, None] = {}  # insertion-ordered: the oldest first

    def __contains__(self, alert_id: str) -> bool:
        return alert_id in self._ids

    def remember(self, alert_id: str) -> None:
        if alert_id in self._ids:
            return
        self._ids[alert_id] = None
        if len(self._ids) > self._capacity:
            del self._ids[next(iter(self._ids))]


def compute_pending_ends(watermarks: Mapping[int, tuple[int, int]], from_beginning: bool) -> dict[int, int]:
    """Partitions with something to read before the end as it is now → their end offset."""
    return {p: high for p, (low, high) in watermarks.items() if from_beginning and high > low}


# --- the shell ----------------------------------------------------------------------------------


def follow_alerts(bootstrap_servers: str, client_config: ClientConfig | None, topic: str, *,
                  min_severity: str = "INFO", from_beginning: bool = False,
                  emit: Callable[[Mapping[str, Any]], None],
                  stop: threading.Event | None = None,
                  on_ready: Callable[[list[int]], None] | None = None,
                  on_bad_message: Callable[[str], None] | None = None,
                  until_end: bool = False) -> None:
    """Read alerts until `stop` is set (or forever), calling `emit(alert)` for each one at or
    above `min_severity`. `on_ready(partitions)` is called once the consumer is assigned.
    `until_end`: stop at the end of the topic as it was when reading started (no --follow)."""
    from schemas.errors import DecodeError
    from schemas.codec import decode, writer_version_from_headers

    stop = stop or threading.Event()
    delivered = DeliveredIds()
    reader = TopicReader(bootstrap_servers, client_config, "alerts-follow")
    try:
        partitions: list[int] = []
        while not partitions and not stop.is_set():
            partitions = reader.partitions(topic)
            if not partitions:
                log.info("topic %s does not exist yet; waiting", topic)
                stop.wait(1.0)
        start: Start = "beginning" if from_beginning else "end"
        reader.assign([(topic, p, start) for p in partitions], stop)
        # until_end: partition → offset still to reach; a partition is done once it is read to there
        pending = compute_pending_ends(reader.watermarks(topic, partitions), from_beginning) if until_end else {}
        if on_ready:
            on_ready(partitions)
        while not stop.is_set():
            if until_end and not pending:
                break
            record = reader.poll(0.5)
            if record is None:
                continue
            if until_end and record.offset + 1 >= pending.get(record.partition, 0):
                pending.pop(record.partition, None)
            try:
                alert = decode("Alert", record.value, writer_version_from_headers(record.headers))
            except DecodeError as error:
                text = f"skipped undecodable alert at {topic}[{record.partition}]@{record.offset}: {error}"
                (on_bad_message or log.warning)(text)
                continue
            if alert["id"] in delivered:
                log.info("alert %s at %s[%d]@%d repeats one already shown; skipped",
                         alert["id"], topic, record.partition, record.offset)
                continue
            if severity_at_least(alert["severity"], min_severity):
                emit(alert)
                delivered.remember(alert["id"])
    finally:
        reader.close()


def print_alert_line(console, as_json: bool) -> Callable[[Mapping[str, Any]], None]:
    def emit(alert: Mapping[str, Any]) -> None:
        if as_json:
            print(json.dumps(alert_to_json(alert)), flush=True)
        else:
            console.print(format_alert(alert), soft_wrap=True)
    return emit
