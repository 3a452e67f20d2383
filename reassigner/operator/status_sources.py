"""Where the status server's numbers come from, and how fresh they are:

- the ControllerState, loaded from Redis with `ControllerStore.load()` at most once a second
  (`StateCache`); a Redis outage serves the last state, with the error (redacted) to show;
- the alerts and command-results topics, read from the beginning by one background reader
  (`watch_alert_topics`, a `runtime.clients.kafka_consumer.TopicReader`: no group, no commits)
  into an `AlertBook`: the last alerts, counts by kind, executor errors by code.

The server follows nothing else itself: the progress of a movement is the state's (see
`views.status`), so a server started mid-movement shows it whole.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, deque
from typing import Any, Callable, Mapping

from runtime.clients.client_config import ClientConfig
from runtime.clients.kafka_consumer import Start, TopicReader
from reassigner.operator.alerts_follow import alert_to_json
from schemas.redaction import redact
from state.model import ControllerState

log = logging.getLogger(__name__)


class AlertBook:
    """Thread-safe: the last `capacity` alerts, alert counts by kind, executor errors by code."""

    def __init__(self, capacity: int = 200) -> None:
        self._lock = threading.Lock()
        self._recent: deque[dict[str, Any]] = deque(maxlen=capacity)
        self._by_kind: Counter[str] = Counter()
        self._errors_by_code: Counter[str] = Counter()
        self._results = 0
        self.capacity = capacity
        self.ready = threading.Event()  # set once both topics are assigned

    def add_alert(self, alert: Mapping[str, Any]) -> None:
        with self._lock:
            self._recent.append(alert_to_json(alert))
            self._by_kind[str(alert["kind"])] += 1

    def add_result(self, result: Mapping[str, Any]) -> None:
        with self._lock:
            self._results += 1
            if not result["ok"]:
                self._errors_by_code[result.get("error_code") or "UNKNOWN"] += 1

    def recent(self, limit: int | None = None) -> list[dict[str, Any]]:
        with self._lock:
            items = list(self._recent)
        return items[-limit:] if limit else items

    def counts(self) -> tuple[dict[str, int], dict[str, int], int]:
        with self._lock:
            return dict(self._by_kind), dict(self._errors_by_code), self._results


class StateCache:
    """`ControllerStore.load()` at most once per `ttl` seconds; keeps the last good state."""

    def __init__(self, load: Callable[[], ControllerState], ttl: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._load, self._ttl, self._clock = load, ttl, clock
        self._lock = threading.Lock()
        self._state: ControllerState | None = None
        self._loaded_at = float("-inf")
        self.error: str | None = None

    def get(self) -> ControllerState | None:
        with self._lock:
            if self._clock() - self._loaded_at >= self._ttl:
                self._loaded_at = self._clock()
                try:
                    self._state, self.error = self._load(), None
                except Exception as error:  # Redis away: serve the last state, say why
                    self.error = redact(f"{type(error).__name__}: {error}")
                    log.warning("loading the controller state failed (%s); will retry in %.0f s",
                                self.error, self._ttl)
            return self._state


def watch_alert_topics(bootstrap_servers: str, client_config: ClientConfig | None, alerts_topic: str,
                       results_topic: str, book: AlertBook, stop: threading.Event) -> None:
    """Read both topics from the beginning into `book` until `stop` (run it in a thread)."""
    from schemas.errors import DecodeError
    from schemas.codec import decode, writer_version_from_headers

    reader = TopicReader(bootstrap_servers, client_config, "status-server")
    try:
        starts: list[tuple[str, int, Start]] = []
        while not stop.is_set():
            starts = [(t, p, "beginning") for t in (alerts_topic, results_topic) for p in reader.partitions(t)]
            if starts:
                break
            stop.wait(1.0)
        reader.assign(starts, stop)
        book.ready.set()
        while not stop.is_set():
            record = reader.poll(0.5)
            if record is None:
                continue
            schema = "Alert" if record.topic == alerts_topic else "CommandResult"
            try:
                decoded = decode(schema, record.value, writer_version_from_headers(record.headers))
            except DecodeError as error:
                log.warning("skipped undecodable %s at %s[%d]@%d: %s", schema, record.topic,
                            record.partition, record.offset, error)
                continue
            (book.add_alert if schema == "Alert" else book.add_result)(decoded)
    except Exception:
        log.exception("the alerts consumer of the status server stopped")
        raise
    finally:
        reader.close()
