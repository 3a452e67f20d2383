"""The status server's write API (issue 19 item 8), without Kafka: the real HTTP server on
loopback, the CLI's builders and local checks (`validate_locally` against a hand-built cluster),
and a sink in place of the requests topic that answers with a verdict made by `compute_verdict`
from a RequestAccepted / RequestRejected alert, as the pipeline raises them. The publish and
the wait on the real topics are `test_write_api_stack.py`'s."""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request

import pytest
from hypothesis import given, strategies as st

from planning.model import Broker, Cluster, PartitionState, Topic
from schemas.errors import InvalidConfigError, InvalidInputError
from reassigner.operator.requests import (compute_verdict, needs_local_check, request_kind,
                                          validate_locally)
from reassigner.operator.status_server import StatusServer, compute_write_refusal, require_distinct_tokens
from reassigner.operator.status_sources import AlertBook, StateCache
from reassigner.operator.write_api import (CONFLICT_CODES, MAX_WAIT_SECONDS, WRITE_ROUTES, compute_api_request,
                                           compute_requester, compute_route_template, parse_wait)
from state.model import ControllerState

READ_TOKEN = "read-token-0123456789"
WRITE_TOKEN = "write-token-9876543210"
ENVELOPE = {"request_id": "r-1", "now_ms": 1_700_000_000_000, "requested_by": "api@127.0.0.1"}
CLUSTER = Cluster(tuple(Broker(b) for b in (1, 2, 3, 4)),
                  (Topic("orders", tuple(PartitionState("orders", p, (1, 2, 3), (1, 2, 3), 1, size_bytes=10)
                                         for p in range(2))),))


class VerdictSink:
    """The requests topic's stand-in: records what is published; the verdict comes from the alert
    the pipeline would raise (`alert_kind`, `error_code`), through `compute_verdict`."""

    def __init__(self) -> None:
        self.published: list[dict] = []
        self.alert_kind: str | None = "RequestAccepted"
        self.error_code: str | None = None

    def check(self, request: dict) -> None:
        if needs_local_check(request):
            validate_locally(request, CLUSTER)

    def submit(self, request: dict, wait_seconds: float | None):
        self.published.append(request)
        if not wait_seconds or self.alert_kind is None:
            return None
        details = {"error_code": self.error_code} if self.error_code else {}
        return compute_verdict({"kind": self.alert_kind, "subject": request["id"], "message": "verdict",
                                "details": details}, request["id"])


@pytest.fixture()
def api():
    sink = VerdictSink()
    server = StatusServer(host="127.0.0.1", port=0, cluster_name="c", cache=StateCache(lambda: ControllerState()),
                          book=AlertBook(), default_replica_movements=1, token=READ_TOKEN,
                          write_token=WRITE_TOKEN, requests=sink).start()
    yield f"http://127.0.0.1:{server.port}", sink
    server.stop()


def post(url: str, body: object = None, token: str | None = WRITE_TOKEN, scheme: str = "Bearer",
         headers: dict | None = None) -> tuple[int, dict]:
    data = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    request = urllib.request.Request(url, data=data, method="POST",
                                     headers={"Content-Type": "application/json", **(headers or {}),
                                              **({"Authorization": f"{scheme} {token}"} if token else {})})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


REASSIGN = {"version": 1, "partitions": [{"topic": "orders", "partition": 0, "replicas": [2, 3, 4]}]}


# --- access ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("route", ["/api/requests", "/api/proposals/p-1/approve", "/api/proposals/p-1/reject",
                                   "/api/cancel", "/api/pause", "/api/resume"])
def test_every_write_needs_the_write_token_as_bearer(api, route):
    url, sink = api
    assert post(url + route, {}, token=None)[0] == 401
    assert post(url + route, {}, token="wrong")[0] == 403
    assert post(url + route, {}, token=READ_TOKEN)[0] == 403  # the read token does not write
    import base64
    basic = base64.b64encode(f"me:{WRITE_TOKEN}".encode()).decode()
    assert post(url + route, {}, token=basic, scheme="Basic")[0] == 403  # a browser replays basic auth
    assert sink.published == []


def test_without_a_write_token_the_write_api_is_off_even_on_loopback():
    server = StatusServer(host="127.0.0.1", port=0, cluster_name="c", cache=StateCache(lambda: ControllerState()),
                          book=AlertBook(), default_replica_movements=1, requests=VerdictSink()).start()
    try:
        status, body = post(f"http://127.0.0.1:{server.port}/api/pause", token="anything")
        assert status == 403 and "write API is off" in body["error"]
    finally:
        server.stop()


def test_the_write_token_must_differ_from_the_read_token_and_opens_the_reads(api):
    with pytest.raises(InvalidConfigError, match="write token is its read token"):
        require_distinct_tokens("same-token", "same-token")
    require_distinct_tokens(None, "w-token")
    url, _ = api
    request = urllib.request.Request(url + "/api/status", headers={"Authorization": f"Bearer {WRITE_TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 200


@pytest.mark.parametrize("header, refusal", [
    (None, 401), ("", 401), (f"Bearer {WRITE_TOKEN}", None), (f"bearer  {WRITE_TOKEN} ", None),
    ("Bearer wrong", 403), (f"Bearer {WRITE_TOKEN}x", 403), (f"Token {WRITE_TOKEN}", 403)])
def test_compute_write_refusal(header, refusal):
    answer = compute_write_refusal(header, WRITE_TOKEN)
    assert (answer[0] if answer else None) == refusal
    assert compute_write_refusal(f"Bearer {WRITE_TOKEN}", None)[0] == 403  # off


# --- answers ----------------------------------------------------------------------------------------


def test_not_waited_for_is_202_with_the_request_id_and_the_cli_s_request(api):
    url, sink = api
    status, body = post(url + "/api/requests", {"kind": "reassign", "reassignment": REASSIGN},
                        headers={"X-Reassigner-Requested-By": "ci job 42"})
    assert status == 202 and body["verdict"] == "pending" and body["kind"] == "Reassign"
    assert [r["id"] for r in sink.published] == [body["request_id"]]
    published = sink.published[0]
    assert published["key"] == "orders-0" and published["requested_by"] == "ci job 42 via api@127.0.0.1"
    assert published["payload"][1]["partitions"][0]["replicas"] == [2, 3, 4]


def test_kafka_s_reassignment_json_as_the_body_is_a_reassign(api):
    url, sink = api
    status, body = post(url + "/api/requests", REASSIGN)
    assert status == 202 and body["kind"] == "Reassign" and len(sink.published) == 1


@pytest.mark.parametrize("alert_kind, code, status", [
    ("RequestAccepted", None, 200), ("RequestRejected", "REASSIGNMENT_IN_PROGRESS", 409),
    ("RequestRejected", "INVALID_REPLICA_ASSIGNMENT", 422), (None, None, 202)])
def test_waited_for_the_verdict_gives_its_status(api, alert_kind, code, status):
    url, sink = api
    sink.alert_kind, sink.error_code = alert_kind, code
    answer_status, body = post(url + "/api/cancel?wait=5", {"topic": "orders", "partition": 1})
    assert answer_status == status
    assert body["verdict"] == {200: "accepted", 409: "rejected", 422: "rejected", 202: "timed-out"}[status]
    if code:
        assert body["error_code"] == code


def test_the_local_check_refuses_before_publishing_with_the_pipeline_s_code(api):
    url, sink = api
    status, body = post(url + "/api/requests?wait=5", {"kind": "reassign", "reassignment": {
        "version": 1, "partitions": [{"topic": "orders", "partition": 0, "replicas": [2, 3, 9]}]}})
    assert status == 422 and body["error_code"] == "INVALID_REPLICA_ASSIGNMENT" and body["published"] is False
    status, body = post(url + "/api/cancel", {"topic": "nope"})
    assert status == 422 and body["error_code"] == "UNKNOWN_TOPIC_OR_PARTITION"
    assert sink.published == []


@pytest.mark.parametrize("route, body, fragment", [
    ("/api/requests", b"{not json", "not JSON"),
    ("/api/requests", [1, 2], "must be a JSON object"),
    ("/api/requests", {"kind": "explode"}, "kind must be one of"),
    ("/api/requests", {"kind": "decommission", "broker": [1]}, "unknown field(s) broker"),
    ("/api/requests", {"kind": "decommission", "brokers": ["1"]}, "list of integers"),
    ("/api/requests", {"kind": "decommission", "brokers": []}, "at least one"),
    ("/api/requests", {"kind": "reassign", "reassignment": {"version": 1, "partitions": []}}, "at least one partition"),
    ("/api/requests", {"kind": "approve"}, "proposal_id is required"),
    ("/api/requests", {"kind": "config-set", "key": "no.such.key", "value": "1"}, "no.such.key"),
    ("/api/cancel", {"partition": 1}, "needs --topic"),
    ("/api/cancel", {"topic": "orders", "partition": True}, "must be an integer"),
    ("/api/pause", {"x": 1}, "unknown field(s) x"),
    ("/api/pause?wait=soon", None, "wait must be a number"),
    ("/api/pause?wait=9999", None, "between 0 and"),
])
def test_bad_input_is_400_with_one_line(api, route, body, fragment):
    url, sink = api
    status, answer = post(url + route, body)
    assert status == 400 and fragment in answer["error"] and "\n" not in answer["error"], answer
    assert sink.published == []


def test_unknown_routes_and_huge_bodies(api):
    url, _ = api
    status, body = post(url + "/api/explode", {})
    assert status == 404 and body["post_routes"] == list(WRITE_ROUTES)
    status, _ = post(url + "/api/requests", b"x" * (1 << 20 + 1))
    assert status == 413


def test_a_refused_body_is_read_so_the_client_gets_the_answer_not_a_broken_pipe(api):
    """Regression (CI, 2026-11-24): the server answered 413 (or 401) and closed while the client
    was still sending a large body, which then saw `BrokenPipeError` instead of the answer."""
    url, sink = api
    for _ in range(3):
        assert post(url + "/api/requests", b"x" * (8 << 20))[0] == 413
        assert post(url + "/api/requests", b"x" * (4 << 20), token=None)[0] == 401
    assert sink.published == []


def test_no_token_reaches_an_answer_or_a_log_line(api, caplog):
    url, _ = api
    with caplog.at_level(logging.DEBUG):
        answers = [post(url + "/api/pause", token=WRITE_TOKEN), post(url + "/api/pause", token="Bearer-guess-123"),
                   post(url + "/api/cancel", {"topic": "nope"})]
    text = json.dumps(answers) + caplog.text
    assert WRITE_TOKEN not in text and READ_TOKEN not in text and "Bearer-guess-123" not in text


# --- the pure parts ---------------------------------------------------------------------------------


def test_proposal_routes_and_kinds():
    approve = compute_api_request("/api/proposals/p%2F7/approve", b"", ENVELOPE)
    reject = compute_api_request("/api/proposals/p-7/reject", b"", ENVELOPE)
    assert approve["payload"] == ("Approve", {"proposal_id": "p/7"})
    assert request_kind(reject) == "Reject" and reject["action"]["proposal_id"] == "p-7"
    assert compute_route_template("/api/proposals/x/approve") == "/api/proposals/{id}/approve"
    assert compute_route_template("/api/proposals/x/y/approve") is None
    assert compute_api_request("/api/resume", b"", ENVELOPE)["payload"] == (
        "SetConfig", {"key": "reassignment.paused", "value": "false"})
    everything = compute_api_request("/api/cancel", b"", ENVELOPE)
    assert everything["payload"][1] == {"topic": None, "partition": None, "keep": False, "keep_draining": False}
    kept = compute_api_request("/api/cancel", b'{"keep_draining": true}', ENVELOPE)
    assert kept["payload"][1]["keep_draining"] is True
    assert not needs_local_check(everything) and needs_local_check(
        compute_api_request("/api/cancel", b'{"topic": "orders"}', ENVELOPE))


def test_the_api_builds_exactly_the_cli_s_requests():
    from reassigner.operator.requests import (build_balance_dirs_request, build_decommission_request,
                                              build_rebalance_request, build_set_config_request)

    pairs = [
        ({"kind": "decommission", "brokers": [3, 1]}, build_decommission_request([3, 1], **ENVELOPE)),
        ({"kind": "balance-dirs"}, build_balance_dirs_request([], **ENVELOPE)),
        ({"kind": "rebalance", "topics": ["b", "a"]}, build_rebalance_request(["b", "a"], **ENVELOPE)),
        ({"kind": "config-set", "key": "reassignment.max.concurrent.partition.movements", "value": "7"},
         build_set_config_request("reassignment.max.concurrent.partition.movements=7", **ENVELOPE)),
    ]
    for body, expected in pairs:
        assert compute_api_request("/api/requests", json.dumps(body).encode(), ENVELOPE) == expected


@given(st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=8))
def test_parse_wait_accepts_only_seconds_in_range(value):
    text = str(value)
    try:
        seconds = parse_wait({"wait": [text]})
    except InvalidInputError:
        return
    assert seconds is None or 0 < seconds <= MAX_WAIT_SECONDS


@given(st.text(max_size=400))
def test_the_requester_s_name_is_printable_and_short(name):
    requester = compute_requester("10.0.0.1", name)
    assert requester.endswith("api@10.0.0.1") and requester.isprintable() and len(requester) <= 120 + 20


def test_conflict_codes_are_codes_of_the_product():
    from schemas import errors
    from handlers.requests import ReassignmentInProgressError

    known = {getattr(c, "code", None) for c in vars(errors).values() if isinstance(c, type)}
    assert CONFLICT_CODES <= known | {ReassignmentInProgressError.code}
