"""`reassigner status-server`: a status page, a JSON API and Prometheus metrics, standard library
only (`http.server.ThreadingHTTPServer`).

Why no web framework: four read-only GET routes, a single static page and a text format need
no routing, templating or async server; the standard library serves them with no new dependency
and no second event loop next to the Kafka consumer thread. (For TLS, put a reverse proxy in
front.)

Access: with a token (setting `status_token`, `REASSIGNER_STATUS_TOKEN`, or `--token-file`) every
route but /healthz asks for it, as `Authorization: Bearer <token>` (scripts, Prometheus'
`authorization` block) or as the password of HTTP basic auth, any user name (a browser asks for
it once and sends it with the page's own API calls); compared in constant time
(`is_authorized`), refused with 401. Without a token the server listens on loopback only:
`require_token_off_loopback` refuses another address unless `--allow-unauthenticated` says that
the network in front is trusted (then it warns).

Routes (every one but /healthz behind the token, when there is one):
    GET /                  the page (HTML + JS; refreshes itself every 2 s from /api/status)
    GET /api/status        cluster health, reassignments, batch in flight, recent alerts, progress
    GET /api/reassignments the rows of `reassigner list`, the batch in flight, the moves of other tools
    GET /api/alerts?limit=N  the last N alerts (newest last), N ≤ `alert_capacity`
    GET /metrics           Prometheus text format 0.0.4
    GET /healthz           "ok" (never asks for the token: liveness probes)

Sources, and how fresh they are:
- the ControllerState, loaded from Redis with `ControllerStore.load()` at most once a second
  (`StateCache`); a Redis outage serves the last state with `"state_error"` set in the JSON
  (redacted: `reassigner.redaction.redact`, like the log and the error bodies);
- the alerts and command-results topics, read from the beginning by one background reader
  (`watch_alert_topics`, a `reassigner.clients.kafka_consumer.TopicReader`: no group, no commits)
  into an `AlertBook`: the last alerts, counts by kind, executor errors.

Counters the state alone cannot give (finished reassignments leave the state) are estimated by
`ProgressTracker` from successive states and are monotone for the life of the server:
- steps completed: per reassignment, the highest `steps_done` seen; a reassignment that leaves
  the state with a step in flight is credited that step;
- bytes moved: per reassignment, replicas present that were not in its original replicas (and
  are not still being added), times the partition size — plus a last step's adding replicas
  when it leaves the state;
- pipeline lag: seconds since this server last saw `last_batch` advance (the pipeline writes a
  Tick every second, so a healthy pipeline stays near 1 s).
"""

from __future__ import annotations

import base64
import binascii
import hmac
import ipaddress
import json
import logging
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Mapping
from urllib.parse import parse_qs, urlparse

from reassigner.clients.client_config import ClientConfig
from reassigner.clients.kafka_consumer import Start, TopicReader
from reassigner.operator.alerts_follow import alert_to_json
from reassigner.errors import InvalidConfigError
from reassigner.operator.status_page import STATUS_PAGE_HTML
from reassigner.redaction import redact
from handlers.policy import Policy
from reassigner.operator.views import (
    ReassignmentRow,
    StatusView,
    compute_status,
    reassignment_row_to_json,
    status_to_json,
)
from schemas import ALERT_KINDS
from state.model import ControllerState

log = logging.getLogger(__name__)


# --- what the background consumer keeps --------------------------------------------------------


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


# --- estimates from successive states ----------------------------------------------------------


@dataclass
class ProgressTracker:
    """Monotone counters from the states this server has seen (see the module docstring)."""

    steps: dict[str, int] = field(default_factory=dict)
    bytes_moved: dict[str, int] = field(default_factory=dict)
    last_seen: dict[str, ReassignmentRow] = field(default_factory=dict)
    last_batch: int | None = None
    last_batch_seen_at: float | None = None

    def observe(self, view: StatusView, now: float) -> None:
        current = {row.reassignment_id: row for row in view.reassignments}
        for rid, row in current.items():
            self.steps[rid] = max(self.steps.get(rid, 0), row.steps_done)
            self.bytes_moved[rid] = max(self.bytes_moved.get(rid, 0), _bytes_added(row))
        for rid, row in self.last_seen.items():
            if rid not in current and row.in_flight:  # it left the state: its last step finished
                self.steps[rid] = max(self.steps.get(rid, 0), row.steps_done + 1)
                self.bytes_moved[rid] = max(self.bytes_moved.get(rid, 0),
                                            _bytes_added(row) + len(row.adding) * (row.size_bytes or 0))
        self.last_seen = current
        if view.last_batch != self.last_batch:
            self.last_batch, self.last_batch_seen_at = view.last_batch, now


def _bytes_added(row: ReassignmentRow) -> int:
    if not row.current_replicas or not row.size_bytes:
        return 0
    added = set(row.current_replicas) - set(row.original_replicas) - set(row.adding)
    return len(added) * row.size_bytes


# --- pure renderings ---------------------------------------------------------------------------


def render_metrics(view: StatusView | None, tracker: ProgressTracker, alert_counts: Mapping[str, int],
                   errors_by_code: Mapping[str, int], now: float) -> str:
    """Prometheus text exposition format 0.0.4."""
    lines: list[str] = []

    def metric(name: str, kind: str, help_text: str, samples: list[tuple[str, float]]) -> None:
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} {kind}")
        for labels, value in samples:
            lines.append(f"{name}{labels} {_number(value)}")

    in_flight = len(view.in_flight) if view else 0
    metric("reassigner_steps_in_flight", "gauge", "Reassignment steps Kafka is executing now.",
           [("", in_flight)])
    metric("reassigner_reassignments_active", "gauge", "Partitions with an ongoing reassignment.",
           [("", len(view.reassignments) if view else 0)])
    metric("reassigner_steps_completed_total", "counter",
           "Reassignment steps completed, as observed by this server.", [("", sum(tracker.steps.values()))])
    metric("reassigner_bytes_moved_total", "counter",
           "Estimated bytes copied by completed steps (replicas added x partition size).",
           [("", sum(tracker.bytes_moved.values()))])
    metric("reassigner_progress_ratio", "gauge", "Steps done / steps estimated over all reassignments.",
           [("", (view.overall_progress or 0.0) if view else 0.0)])
    metric("reassigner_bytes_to_move", "gauge",
           "Bytes the ongoing reassignments copy in all (replicas their final targets add).",
           [("", view.bytes_to_move if view else 0)])
    metric("reassigner_bytes_left", "gauge", "Bytes the ongoing reassignments have still to copy.",
           [("", view.bytes_left if view else 0)])
    rate = view.replication_rate if view else None
    metric("reassigner_replication_rate_bytes_per_second", "gauge",
           "Bytes per second the completed steps copied since the current movement began (absent until one completes).",
           [("", rate)] if rate is not None else [])
    left = view.time_left_seconds if view else None
    metric("reassigner_time_left_seconds", "gauge",
           "Estimated seconds until every ongoing reassignment is done, at the observed rate.",
           [("", left)] if left is not None else [])
    metric("reassigner_pipeline_last_batch", "gauge", "Id of the last micro-batch the pipeline applied.",
           [("", view.last_batch if view else -1)])
    lag = now - tracker.last_batch_seen_at if tracker.last_batch_seen_at is not None else 0.0
    metric("reassigner_pipeline_lag_seconds", "gauge",
           "Seconds since the pipeline's last applied batch changed.", [("", lag)])
    kinds = sorted(set(ALERT_KINDS) | set(alert_counts))
    metric("reassigner_alerts_total", "counter", "Alerts on the alerts topic, by kind.",
           [(f'{{kind="{_label(k)}"}}', alert_counts.get(k, 0)) for k in kinds])
    metric("reassigner_executor_errors_total", "counter",
           "Command results with ok=false on the command-results topic.",
           [("", sum(errors_by_code.values()))])
    metric("reassigner_executor_errors_by_code_total", "counter", "Executor errors by Kafka error code.",
           [(f'{{error_code="{_label(c)}"}}', n) for c, n in sorted(errors_by_code.items())])
    if view:
        alive = sum(1 for b in view.brokers if b.alive)
        metric("reassigner_brokers", "gauge", "Brokers by state.",
               [('{state="alive"}', alive), ('{state="down"}', len(view.brokers) - alive),
                ('{state="draining"}', sum(1 for b in view.brokers if b.draining))])
        metric("reassigner_under_replicated_partitions", "gauge", "Partitions with ISR < replicas.",
               [("", len(view.under_replicated))])
        metric("reassigner_under_min_isr_partitions", "gauge", "Partitions with ISR < min.insync.replicas.",
               [("", len(view.under_min_isr))])
        metric("reassigner_offline_partitions", "gauge", "Partitions without a leader.",
               [("", len(view.offline))])
        metric("reassigner_log_dir_moves", "gauge", "Intra-broker log-dir moves the controller owns, by state.",
               [(f'{{state="{state}"}}', sum(1 for m in view.log_dir_moves if m.state == state))
                for state in ("waiting", "copying", "cancelling")])
        metric("reassigner_log_dir_move_bytes", "gauge", "Bytes of the log-dir moves not finished yet.",
               [("", sum(m.size_bytes for m in view.log_dir_moves))])
        metric("reassigner_log_dir_bytes", "gauge",
               "Bytes of the replicas in each online log dir, as describe-log-dirs last told.",
               [(f'{{broker="{b.id}",dir="{_label(path)}"}}', size) for b in view.brokers
                for path, _count, size in b.dirs if size is not None])
    return "\n".join(lines) + "\n"


def compute_status_document(view: StatusView | None, recent_alerts: list[dict[str, Any]],
                            cluster_name: str, state_error: str | None, now: float) -> dict[str, Any]:
    """The body of /api/status."""
    return {"cluster_name": cluster_name, "generated_at": now, "state_error": state_error,
            "status": status_to_json(view) if view else None, "alerts": recent_alerts}


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.6g}"


def _label(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


# --- the shell ----------------------------------------------------------------------------------


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
    from reassigner.errors import DecodeError
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


# --- access --------------------------------------------------------------------------------------

OPEN_PATHS = frozenset({"/healthz"})


def is_loopback(host: str) -> bool:
    """Whether `host` names this machine only: `localhost` or a loopback address (a host name
    is not resolved: anything else counts as reachable from the network, "" and 0.0.0.0 too)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def require_token_off_loopback(host: str, token_given: bool, allow_unauthenticated: bool) -> str | None:
    """Refuse to serve the cluster's state without a token on an address other machines can
    reach; with `allow_unauthenticated`, the warning to show instead (None: nothing to say)."""
    if token_given or is_loopback(host):
        return None
    if not allow_unauthenticated:
        raise InvalidConfigError(
            f"--host {host!r} is reachable from the network and the status server has no token: "
            "set REASSIGNER_STATUS_TOKEN (or --token-file FILE) so that every request must carry "
            "it, or pass --allow-unauthenticated if the network in front is trusted")
    return (f"the status server listens on {host!r} without a token: anyone who can reach it reads "
            "the cluster's state and alerts (set REASSIGNER_STATUS_TOKEN or --token-file)")


def is_authorized(authorization: str | None, token: str | None) -> bool:
    """Whether an `Authorization` header carries `token` (Bearer, or basic auth's password with
    any user name), compared in constant time. No token configured: everything is."""
    if not token:
        return True
    if not authorization:
        return False
    scheme, _, credentials = authorization.strip().partition(" ")
    credentials = credentials.strip()
    if scheme.lower() == "basic":
        try:
            credentials = base64.b64decode(credentials, validate=True).decode("utf-8").partition(":")[2]
        except (binascii.Error, UnicodeDecodeError):
            return False
    elif scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(credentials.encode("utf-8"), token.encode("utf-8"))


class StatusServer:
    """The HTTP server and its background consumer; `start()` returns once it listens. With a
    `token`, every route but /healthz requires it (see `is_authorized`)."""

    def __init__(self, *, host: str, port: int, cluster_name: str, cache: StateCache, book: AlertBook,
                 default_replica_movements: int, watch: Callable[[threading.Event], None] | None = None,
                 clock: Callable[[], float] = time.time, policy: Policy | None = None,
                 token: str | None = None) -> None:
        self.token = token or None
        self.cluster_name, self.cache, self.book, self.clock = cluster_name, cache, book, clock
        self.default_replica_movements = default_replica_movements
        self.policy = policy  # the static settings: the page shows the topic selection in force
        self.tracker = ProgressTracker()
        self._tracker_lock = threading.Lock()
        self._watch = watch
        self._stop = threading.Event()
        self.httpd = ThreadingHTTPServer((host, port), _handler_for(self))
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]

    def current_view(self) -> tuple[StatusView | None, float]:
        now = self.clock()
        state = self.cache.get()
        view = compute_status(state, self.default_replica_movements, now, self.policy) if state else None
        if view:
            with self._tracker_lock:
                self.tracker.observe(view, time.monotonic())
        return view, now

    def start(self) -> "StatusServer":
        if self._watch:
            threading.Thread(target=self._watch, args=(self._stop,), name="status-alerts", daemon=True).start()
        threading.Thread(target=self.httpd.serve_forever, name="status-http", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    # routes -------------------------------------------------------------------------------------
    def route(self, path: str, query: Mapping[str, list[str]]) -> tuple[int, str, bytes]:
        if path == "/":
            return 200, "text/html; charset=utf-8", STATUS_PAGE_HTML.encode()
        if path == "/healthz":
            return 200, "text/plain; charset=utf-8", b"ok\n"
        if path == "/api/status":
            view, now = self.current_view()
            body = compute_status_document(view, self.book.recent(20), self.cluster_name, self.cache.error, now)
            return _json(200, body)
        if path == "/api/reassignments":
            view, now = self.current_view()
            return _json(200, {
                "reassignments": [reassignment_row_to_json(r) for r in view.reassignments] if view else [],
                "in_flight": status_to_json(view)["in_flight"] if view else [],
                "external": status_to_json(view)["external"] if view else [],
                "state_error": self.cache.error})
        if path == "/api/alerts":
            try:
                limit = max(1, min(self.book.capacity, int(query.get("limit", ["50"])[0])))
            except ValueError:
                return _json(400, {"error": "limit must be an integer"})
            return _json(200, {"alerts": self.book.recent(limit)})
        if path == "/metrics":
            view, now = self.current_view()
            counts, errors, _results = self.book.counts()
            with self._tracker_lock:
                text = render_metrics(view, self.tracker, counts, errors, time.monotonic())
            return 200, "text/plain; version=0.0.4; charset=utf-8", text.encode()
        return _json(404, {"error": f"no route {path}",
                           "routes": ["/", "/api/status", "/api/reassignments", "/api/alerts", "/metrics"]})


def _json(status: int, body: Any) -> tuple[int, str, bytes]:
    return status, "application/json", json.dumps(body).encode()


def _handler_for(server: StatusServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server API
            url = urlparse(self.path)
            if url.path not in OPEN_PATHS and not is_authorized(self.headers.get("Authorization"), server.token):
                status, content_type, body = _json(401, {"error": "this status server needs its token: "
                                                         "Authorization: Bearer <token>"})
                self.send_response(status)
                self.send_header("WWW-Authenticate", 'Basic realm="reassigner status", charset="UTF-8"')
            else:
                try:
                    status, content_type, body = server.route(url.path, parse_qs(url.query))
                except Exception as error:  # one bad request must not take the server down
                    log.exception("GET %s failed", url.path)
                    status, content_type, body = _json(500, {"error": redact(f"{type(error).__name__}: {error}")})
                self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # quiet: debug level only
            log.debug("%s %s", self.address_string(), format % args)

    return Handler
