"""`reassigner status-server`: the status page, a JSON API, a write API and Prometheus metrics,
standard library only (`http.server.ThreadingHTTPServer`: a few fixed routes need no framework,
no new dependency and no second event loop beside the Kafka reader; for TLS, a proxy in front).

Routes (`READ_ROUTES` and `write_api.WRITE_ROUTES`; docs/openapi.yaml describes each):
    GET /                   the page (`status_page`; it refreshes itself every 2 s from /api/status)
    GET /api/status         `views.compute_status_document`: health, reassignments, progress, alerts
    GET /api/reassignments  `views.list_to_json`: what `reassigner list --json` prints
    GET /api/alerts?limit=N the last N alerts (newest last), N at most the book's capacity
    GET /api/openapi.yaml   the OpenAPI 3 description
    GET /metrics            Prometheus text (`views.metrics`); the pipeline serves its own counters
    GET /healthz            "ok", never behind a token (liveness probes)
    POST /api/...           the write API (`write_api`)
The numbers come from `status_sources`: the state at most once a second, the alerts topics' reader.

ACCESS. A read token (setting `status_token`, `--token-file`) guards every route but /healthz, as
`Authorization: Bearer <token>` or as basic auth's password (any user name: a browser asks once),
compared in constant time (`is_authorized`); 401 otherwise. Without one the server listens on
loopback only (`require_token_off_loopback`; `--allow-unauthenticated` serves another address,
with a warning). Writes need the WRITE token (`status_write_token`, `--write-token-file`), always,
loopback too, as a Bearer header only: never basic auth, which a browser replays by itself on a
form another site posts (and no CORS preflight is granted, so no other origin sets the header).
Without a write token the write API is off (403). The write token must differ from the read token
(`require_distinct_tokens`): what scrapes /metrics must not cancel; it opens the reads too. No
header is logged; a refused write is 401 without the header, 403 with a wrong one
(`compute_write_refusal`).
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
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.resources import files
from typing import Any, Callable, Mapping, Protocol
from urllib.parse import parse_qs, urlparse

from handlers.policy import Policy
from runtime.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE, build_status_registry, render_registry
from schemas.errors import InvalidConfigError, InvalidInputError, ReassignerError
from schemas.redaction import redact
from reassigner.operator.requests import Request, Verdict, request_kind
from reassigner.operator.status_page import STATUS_PAGE_HTML
from reassigner.operator.status_sources import AlertBook, StateCache
from reassigner.operator.views import (StatusView, compute_list_view, compute_status, compute_status_document,
                                       list_to_json)
from reassigner.operator.views.metrics import Samples, compute_metric_samples
from reassigner.operator.write_api import (MAX_BODY_BYTES, WRITE_ROUTES, compute_answer, compute_api_request,
                                           compute_refusal_status, compute_requester, compute_route_template,
                                           parse_wait)

log = logging.getLogger(__name__)


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


def compute_write_refusal(authorization: str | None, write_token: str | None) -> tuple[int, str] | None:
    """Why a write is refused (status, one line), or None when `authorization` carries the write
    token as a Bearer token (constant-time compare). No write token configured: the API is off."""
    if not write_token:
        return 403, ("the write API is off: start the status server with a write token "
                     "(REASSIGNER_STATUS_WRITE_TOKEN or --write-token-file)")
    if not authorization or not authorization.strip():
        return 401, "a write needs the write token: Authorization: Bearer <write token>"
    scheme, _, _credentials = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not is_authorized(authorization, write_token):
        return 403, "the write token is wrong (writes take it as Authorization: Bearer <write token>)"
    return None


def require_distinct_tokens(token: str | None, write_token: str | None) -> None:
    """The write token must not be the read token (see the module docstring)."""
    if token and write_token and hmac.compare_digest(token.encode(), write_token.encode()):
        raise InvalidConfigError("the status server's write token is its read token: give writes a token "
                                 "of their own (REASSIGNER_STATUS_WRITE_TOKEN / --write-token-file), so that "
                                 "what reads the status or scrapes /metrics cannot cancel or approve")


class RequestSink(Protocol):
    """Where the write API's requests go: `reassigner.operator.requests.RequestChannel`."""

    def check(self, request: Request) -> None: ...

    def submit(self, request: Request, wait_seconds: float | None) -> Verdict | None: ...


OPENAPI_RESOURCE = "openapi.yaml"  # in this package; docs/openapi.yaml links to it


def read_openapi() -> bytes:
    return files("reassigner.operator").joinpath(OPENAPI_RESOURCE).read_bytes()


READ_ROUTES = ("/", "/api/status", "/api/reassignments", "/api/alerts", "/api/openapi.yaml", "/metrics",
               "/healthz")
"""The GET routes (the OpenAPI description names each of them, and `WRITE_ROUTES`)."""


class StatusServer:
    """The HTTP server and its background consumer; `start()` returns once it listens. With a
    `token`, every GET route but /healthz requires it (see `is_authorized`); with a
    `write_token` and `requests`, the write API is on (`compute_write_refusal`)."""

    def __init__(self, *, host: str, port: int, cluster_name: str, cache: StateCache, book: AlertBook,
                 default_replica_movements: int, watch: Callable[[threading.Event], None] | None = None,
                 clock: Callable[[], float] = time.time, policy: Policy | None = None,
                 token: str | None = None, write_token: str | None = None,
                 requests: RequestSink | None = None) -> None:
        require_distinct_tokens(token, write_token)
        self.token = token or None
        self.write_token = write_token or None
        self.requests = requests
        self.cluster_name, self.cache, self.book, self.clock = cluster_name, cache, book, clock
        self.default_replica_movements = default_replica_movements
        self.policy = policy  # the static settings: the page shows the topic selection in force
        self.metrics = build_status_registry(self.metric_samples, cluster_name)
        self._watch = watch
        self._stop = threading.Event()
        self.httpd = ThreadingHTTPServer((host, port), _handler_for(self))
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]

    def current_view(self) -> tuple[StatusView | None, float]:
        now = self.clock()
        state = self.cache.get()
        view = compute_status(state, self.default_replica_movements, now, self.policy) if state else None
        return view, now

    def metric_samples(self) -> Samples:
        counts, errors, _results = self.book.counts()
        return compute_metric_samples(self.current_view()[0], counts, errors)

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
            now, state = self.clock(), self.cache.get()
            listing = compute_list_view(state, self.default_replica_movements, now, self.policy) if state else None
            return _json(200, list_to_json(listing, self.cache.error, self.cluster_name))
        if path == "/api/alerts":
            try:
                limit = max(1, min(self.book.capacity, int(query.get("limit", ["50"])[0])))
            except ValueError:
                return _json(400, {"error": "limit must be an integer"})
            return _json(200, {"alerts": self.book.recent(limit)})
        if path == "/api/openapi.yaml":
            return 200, "application/yaml; charset=utf-8", read_openapi()
        if path == "/metrics":
            return 200, METRICS_CONTENT_TYPE, render_registry(self.metrics)
        return _json(404, {"error": f"no route GET {path}", "routes": list(READ_ROUTES),
                           "post_routes": list(WRITE_ROUTES)})

    def route_write(self, path: str, query: Mapping[str, list[str]], body: bytes,
                    requested_by: str) -> tuple[int, str, bytes]:
        """A POST (already authorized): build the request as the CLI does, check it, publish it,
        wait for its verdict if `?wait=` asks to (see `reassigner.operator.write_api`)."""
        if compute_route_template(path) is None:
            return _json(404, {"error": f"no route POST {path}", "post_routes": list(WRITE_ROUTES)})
        if self.requests is None:
            return _json(503, {"error": "this status server has no Kafka producer for requests"})
        try:
            wait = parse_wait(query)
            request = compute_api_request(path, body, {"request_id": str(uuid.uuid4()),
                                                       "now_ms": int(self.clock() * 1000),
                                                       "requested_by": requested_by})
        except InvalidInputError as error:
            return _json(400, {"error": _one_line(str(error)), "error_code": error.code})
        kind = request_kind(request)
        try:
            self.requests.check(request)
        except InvalidInputError as error:  # what the pipeline would refuse: answered as its verdict would be
            log.info("POST %s: %s request refused before publishing [%s]", path, kind, error.code)
            return _json(compute_refusal_status(error.code),
                         {"request_id": request["id"], "kind": kind, "verdict": "rejected",
                          "error_code": error.code, "message": _one_line(str(error)), "published": False})
        except ReassignerError as error:  # Kafka unreachable for the metadata poll
            return _json(503, {"error": _one_line(redact(str(error))), "error_code": error.code})
        try:
            verdict = self.requests.submit(request, wait)
        except ReassignerError as error:
            log.warning("POST %s: publishing %s request %s failed: %s", path, kind, request["id"], error)
            return _json(503, {"request_id": request["id"], "error": _one_line(redact(str(error))),
                               "error_code": error.code})
        status, answer = compute_answer(request, verdict, wait)
        log.info("POST %s by %s: %s request %s published; %s", path, requested_by, kind, request["id"],
                 answer["verdict"] if wait else "not waited for")
        return _json(status, answer)


# A refused POST's body is read (and dropped) up to this many bytes before the answer.
DISCARDED_BODY_BYTES = 16 * MAX_BODY_BYTES


def _json(status: int, body: Any) -> tuple[int, str, bytes]:
    return status, "application/json", json.dumps(body).encode()


def _one_line(text: str) -> str:
    return " ".join(redact(text).split())


def _handler_for(server: StatusServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server API
            url = urlparse(self.path)
            authorization = self.headers.get("Authorization")
            readable = is_authorized(authorization, server.token) or (
                server.write_token is not None and is_authorized(authorization, server.write_token))
            if url.path not in OPEN_PATHS and not readable:
                status, content_type, body = _json(401, {"error": "this status server needs its token: "
                                                         "Authorization: Bearer <token>"})
                self._answer(status, content_type, body,
                             {"WWW-Authenticate": 'Basic realm="reassigner status", charset="UTF-8"'})
                return
            try:
                status, content_type, body = server.route(url.path, parse_qs(url.query))
            except Exception as error:  # one bad request must not take the server down
                log.exception("GET %s failed", url.path)
                status, content_type, body = _json(500, {"error": redact(f"{type(error).__name__}: {error}")})
            self._answer(status, content_type, body)

        def do_POST(self) -> None:  # noqa: N802 - the http.server API
            url = urlparse(self.path)
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            refusal = compute_write_refusal(self.headers.get("Authorization"), server.write_token)
            if refusal is not None:
                log.info("POST %s from %s refused (%d)", url.path, self.client_address[0], refusal[0])
                self._discard_body(length)
                status, content_type, body = _json(refusal[0], {"error": refusal[1]})
                self._answer(status, content_type, body,
                             {"WWW-Authenticate": 'Bearer realm="reassigner writes"'} if refusal[0] == 401 else {})
                return
            if length < 0 or length > MAX_BODY_BYTES:
                self._discard_body(length)
                self._answer(*_json(413 if length > 0 else 400,
                                    {"error": f"the body must have a Content-Length of 0 to {MAX_BODY_BYTES} bytes"}))
                return
            body = self.rfile.read(length) if length else b""
            requester = compute_requester(self.client_address[0], self.headers.get("X-Reassigner-Requested-By"))
            try:
                status, content_type, answer = server.route_write(url.path, parse_qs(url.query), body, requester)
            except Exception as error:  # one bad request must not take the server down
                log.error("POST %s failed: %s", url.path, redact(f"{type(error).__name__}: {error}"))
                status, content_type, answer = _json(500, {"error": _one_line(f"{type(error).__name__}: {error}")})
            self._answer(status, content_type, answer)

        def _discard_body(self, length: int) -> None:
            """Read a refused request's body before answering, up to `DISCARDED_BODY_BYTES`: a
            client still sending when the server closes gets a broken pipe instead of the answer. A
            longer or unknown body is not read; the connection closes after."""
            self.close_connection = True
            left = length if 0 < length <= DISCARDED_BODY_BYTES else 0
            while left > 0:
                chunk = self.rfile.read(min(left, 1 << 16))
                if not chunk:
                    break
                left -= len(chunk)

        def _answer(self, status: int, content_type: str, body: bytes, headers: Mapping[str, str] = {}) -> None:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # quiet: debug level only
            log.debug("%s %s", self.address_string(), format % args)

    return Handler
