"""The status server's write API: HTTP routes → the CLI's request builders. Pure.

Routes (POST; a JSON object as the body where one is taken; `?wait=SECONDS` optional):
    /api/requests                   {"kind": KIND, ...fields}: every `reassigner request KIND`
    /api/proposals/{id}/approve     the proposal's approve
    /api/proposals/{id}/reject      its reject
    /api/cancel                     {"topic"?, "partition"?, "keep"?, "keep_draining"?}; no body
                                    cancels everything
    /api/pause, /api/resume         no body

`/api/requests` kinds and their fields (the CLI's flags, by the same names, and nothing else: an
unknown field is refused, as an unknown flag is):
    reassign        reassignment (Kafka's reassignment JSON object), additional (bool); a body
                    without "kind" that has "partitions" is Kafka's reassignment JSON itself
    cancel          topic, partition, keep
    decommission    brokers (list of ids)           recommission   brokers
    rebalance       topics (list of names)          balance-dirs   brokers
    approve         proposal_id                     reject         proposal_id
    pause, resume   –                               config-set     key, value ("" resets)

The requests are made by `reassigner.operator.requests`' builders, the very ones the CLI calls,
and checked by the same `RequestChannel.check`; this module only reads the body into their arguments.

Answers (`compute_answer`): not waited for → 202 with the request id and `"verdict": "pending"`;
waited for (`?wait=N`, 0 < N ≤ `MAX_WAIT_SECONDS`) → 200 accepted, 409 rejected because of the
cluster's state (`CONFLICT_CODES`), 422 rejected as invalid (every other code), 202 with
`"verdict": "timed-out"` when no verdict came in time (the request may still be processed).
A local check's refusal answers as the pipeline's would (409/422 with its code); a body that
cannot be read into a request, 400 with one line.

Invariants: nothing here reads a clock or does I/O (the request id, the time and the requester are
arguments); no header value reaches an answer or a log line except the requester's name, which is
cut to `MAX_REQUESTER_LENGTH` printable characters.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Mapping
from urllib.parse import unquote

from schemas.errors import InvalidInputError
from reassigner.operator.requests import (Request, Verdict, build_approve_request, build_balance_dirs_request,
                                          build_cancel_request, build_decommission_request, build_pause_request,
                                          build_reassign_request, build_rebalance_request,
                                          build_recommission_request, build_reject_request,
                                          build_set_config_request, describe_request, verdict_to_json)

MAX_WAIT_SECONDS = 120.0
MAX_BODY_BYTES = 1 << 20  # a request is one Kafka message: Kafka's default limit is about this
MAX_REQUESTER_LENGTH = 120

CONFLICT_CODES = frozenset({"REASSIGNMENT_IN_PROGRESS", "NO_REASSIGNMENT_IN_PROGRESS", "PLAN_INFEASIBLE"})
"""Refusals because of what the cluster or the pipeline is doing now (409): the same request may
pass later. Every other refusal code says the request itself is wrong (422)."""

WRITE_ROUTES = ("/api/requests", "/api/proposals/{id}/approve", "/api/proposals/{id}/reject",
                "/api/cancel", "/api/pause", "/api/resume")
"""The POST routes, as the OpenAPI description (`docs/openapi.yaml`) names them."""

_PROPOSAL_ROUTE = re.compile(r"^/api/proposals/(?P<id>[^/]+)/(?P<verb>approve|reject)$")

Envelope = Mapping[str, Any]  # request_id, now_ms, requested_by: the builders' keyword arguments


def compute_route_template(path: str) -> str | None:
    """The `WRITE_ROUTES` entry `path` matches, or None."""
    if path in WRITE_ROUTES:
        return path
    match = _PROPOSAL_ROUTE.match(path)
    return f"/api/proposals/{{id}}/{match['verb']}" if match else None


def parse_body(body: bytes) -> dict[str, Any]:
    """The JSON object of a body; an empty body is an empty object."""
    if not body.strip():
        return {}
    try:
        value = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise InvalidInputError(f"the body is not JSON: {error}") from None
    if not isinstance(value, dict):
        raise InvalidInputError(f"the body must be a JSON object, got {type(value).__name__}")
    return value


def parse_wait(query: Mapping[str, list[str]]) -> float | None:
    """`?wait=SECONDS`: how long to wait for the verdict (None or 0: do not wait)."""
    values = query.get("wait")
    if not values:
        return None
    try:
        seconds = float(values[-1])
    except ValueError:
        raise InvalidInputError(f"wait must be a number of seconds, got {values[-1]!r}") from None
    if not 0 <= seconds <= MAX_WAIT_SECONDS:  # also refuses nan
        raise InvalidInputError(f"wait must be between 0 and {MAX_WAIT_SECONDS:g} seconds, got {values[-1]}")
    return seconds or None


def compute_requester(client_host: str, name: str | None) -> str:
    """`requested_by` of an API request: the name the caller gives (header
    `X-Reassigner-Requested-By`, e.g. "ci job 1234"), printable and cut short, and its address."""
    where = f"api@{client_host}"
    if not name:
        return where
    cleaned = "".join(c for c in name if c.isprintable()).strip()[:MAX_REQUESTER_LENGTH]
    return f"{cleaned} via {where}" if cleaned else where


def compute_api_request(path: str, body: bytes, envelope: Envelope) -> Request:
    """The request a POST to `path` with `body` asks for (InvalidInputError: a 400)."""
    route = compute_route_template(path)
    if route is None:
        raise InvalidInputError(f"no route POST {path}")
    fields = parse_body(body)
    if route == "/api/requests":
        if "kind" not in fields and "partitions" in fields:
            fields = {"kind": "reassign", "reassignment": fields}
        kind = fields.pop("kind", None)
        if not isinstance(kind, str) or kind not in _KINDS:
            raise InvalidInputError(f"kind must be one of {', '.join(sorted(_KINDS))}, got {kind!r}")
        return _KINDS[kind](fields, envelope)
    if route == "/api/cancel":
        return _cancel(fields, envelope)
    if route in ("/api/pause", "/api/resume"):
        _only(fields, (), route)
        return build_pause_request(route == "/api/pause", **envelope)
    match = _PROPOSAL_ROUTE.match(path)
    assert match is not None
    _only(fields, (), route)
    build = build_approve_request if match["verb"] == "approve" else build_reject_request
    return build(unquote(match["id"]), **envelope)


def compute_status_code(verdict: Verdict | None) -> int:
    """The HTTP status of a published request (see the module docstring)."""
    if verdict is None:
        return 202
    if verdict.accepted:
        return 200
    return compute_refusal_status(verdict.error_code)


def compute_refusal_status(error_code: str | None) -> int:
    return 409 if error_code in CONFLICT_CODES else 422


def compute_answer(request: Request, verdict: Verdict | None, wait_seconds: float | None) -> tuple[int, dict[str, Any]]:
    """Status and JSON body of a published request."""
    body = describe_request(request)
    if wait_seconds:
        body.update(verdict_to_json(verdict, request["id"], wait_seconds))
    else:
        body["verdict"] = "pending"
    return compute_status_code(verdict), body


# --- the kinds ---------------------------------------------------------------------------------------


def _only(fields: Mapping[str, Any], allowed: tuple[str, ...], what: str) -> None:
    unknown = sorted(set(fields) - set(allowed))
    if unknown:
        expected = ", ".join(allowed) if allowed else "none"
        raise InvalidInputError(f"{what}: unknown field(s) {', '.join(unknown)} (expected: {expected})")


def _int(fields: Mapping[str, Any], name: str, what: str) -> int | None:
    value = fields.get(name)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise InvalidInputError(f"{what}: {name} must be an integer, got {json.dumps(value)}")
    return value


def _bool(fields: Mapping[str, Any], name: str, what: str) -> bool:
    value = fields.get(name, False)
    if not isinstance(value, bool):
        raise InvalidInputError(f"{what}: {name} must be true or false, got {json.dumps(value)}")
    return value


def _str(fields: Mapping[str, Any], name: str, what: str, required: bool = False) -> str | None:
    value = fields.get(name)
    if value is None and required:
        raise InvalidInputError(f"{what}: {name} is required")
    if value is not None and not isinstance(value, str):
        raise InvalidInputError(f"{what}: {name} must be a string, got {json.dumps(value)}")
    return value


def _list(fields: Mapping[str, Any], name: str, item: type, what: str) -> list[Any]:
    value = fields.get(name, [])
    if not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, item) for v in value):
        noun = "integers" if item is int else "strings"
        raise InvalidInputError(f"{what}: {name} must be a list of {noun}, got {json.dumps(value)}")
    return value


def _reassign(fields: Mapping[str, Any], envelope: Envelope) -> Request:
    _only(fields, ("reassignment", "additional"), "reassign")
    if not isinstance(fields.get("reassignment"), dict):
        raise InvalidInputError("reassign: reassignment must be Kafka's reassignment JSON object "
                                '({"version": 1, "partitions": [...]})')
    return build_reassign_request(fields["reassignment"], "reassignment", additional=_bool(fields, "additional", "reassign"),
                                  **envelope)


def _cancel(fields: Mapping[str, Any], envelope: Envelope) -> Request:
    _only(fields, ("topic", "partition", "keep", "keep_draining"), "cancel")
    return build_cancel_request(_str(fields, "topic", "cancel"), _int(fields, "partition", "cancel"),
                                _bool(fields, "keep", "cancel"), _bool(fields, "keep_draining", "cancel"),
                                **envelope)


def _brokers(build: Callable[..., Request], what: str) -> Callable[[Mapping[str, Any], Envelope], Request]:
    def make(fields: Mapping[str, Any], envelope: Envelope) -> Request:
        _only(fields, ("brokers",), what)
        return build(_list(fields, "brokers", int, what), **envelope)
    return make


def _rebalance(fields: Mapping[str, Any], envelope: Envelope) -> Request:
    _only(fields, ("topics",), "rebalance")
    return build_rebalance_request(_list(fields, "topics", str, "rebalance"), **envelope)


def _proposal(build: Callable[..., Request], what: str) -> Callable[[Mapping[str, Any], Envelope], Request]:
    def make(fields: Mapping[str, Any], envelope: Envelope) -> Request:
        _only(fields, ("proposal_id",), what)
        return build(_str(fields, "proposal_id", what, required=True), **envelope)
    return make


def _pause(paused: bool) -> Callable[[Mapping[str, Any], Envelope], Request]:
    def make(fields: Mapping[str, Any], envelope: Envelope) -> Request:
        _only(fields, (), "pause" if paused else "resume")
        return build_pause_request(paused, **envelope)
    return make


def _config_set(fields: Mapping[str, Any], envelope: Envelope) -> Request:
    _only(fields, ("key", "value"), "config-set")
    key = _str(fields, "key", "config-set", required=True)
    value = _str(fields, "value", "config-set") or ""
    return build_set_config_request(f"{key}={value}", **envelope)


_KINDS: dict[str, Callable[[Mapping[str, Any], Envelope], Request]] = {
    "reassign": _reassign,
    "cancel": _cancel,
    "decommission": _brokers(build_decommission_request, "decommission"),
    "recommission": _brokers(build_recommission_request, "recommission"),
    "balance-dirs": _brokers(build_balance_dirs_request, "balance-dirs"),
    "rebalance": _rebalance,
    "approve": _proposal(build_approve_request, "approve"),
    "reject": _proposal(build_reject_request, "reject"),
    "pause": _pause(True),
    "resume": _pause(False),
    "config-set": _config_set,
}
API_REQUEST_KINDS = tuple(sorted(_KINDS))
