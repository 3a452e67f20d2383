"""Operator requests: pure builders of `Request` envelopes, the checks before publishing, the
verdict, and `RequestChannel`, the one way both doors (the CLI's `request ...` and the status
server's write API) send a request.

CHECKS, so that a typo fails at once in one line instead of a `RequestRejected` alert later:
1. the builders refuse arguments that make no request (`build_dry_run` runs one before anything
   connects): a reassignment JSON of the wrong shape (`planning.snapshot.reassignment_from_json`:
   the file and JSON path named), a partition without its topic, no or negative broker ids, an
   empty proposal id, an unknown setting or a value that does not parse (`dynamic_config`);
2. `validate_locally`, against a poll of the cluster's metadata, refuses what the pipeline would
   refuse for sure, with the pipeline's own guards (`planning.validation`): unknown topics,
   partitions or brokers, empty, negative or duplicate replicas, fenced brokers, a replication
   factor above the brokers, a log-dir list of the wrong length. What only the pipeline knows
   (draining brokers, reassignments in progress, proposals) is its verdict.

VERDICT: after publishing, the sender may wait for the one alert the pipeline raises about the
request (subject = request id), `RequestAccepted` or `RequestRejected` (`compute_verdict`).

Envelope: `id` is a fresh UUID and `event_time` epoch milliseconds, both passed in (builders read
no clock and no randomness); `key` is `<topic>-<partition>` for a request about one partition,
else the id; `requested_by` is `user@host`. Reject and Recommission travel as `action` with a
Tick payload (`build_action_request`); pause and resume are SetConfig of `reassignment.paused`.

I/O: only `publish_request` (one idempotent produce, acks=all, flushed and checked) and
`await_verdict` (a read of the alerts topic from its end); `RequestChannel` runs check, publish
and wait in that order (only the kinds `validate_locally` judges poll the cluster).
"""

from __future__ import annotations

import getpass
import json
import logging
import socket
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from handlers.policy import PAUSED_KEY
from planning.model import Cluster, TopicPartition
from planning.snapshot import reassignment_from_json
from planning.validation import require_known_partition, validate_targets
from schemas.errors import (InvalidInputError, InvalidReplicaAssignmentError, MalformedInputError,
                               UnknownTopicOrPartitionError)
from reassigner.operator.dynamic_config import compute_config_value
from schemas.codec import encode, partition_key, version_headers
from schemas.loader import CURRENT_SCHEMA_VERSION

log = logging.getLogger(__name__)

Request = dict[str, Any]


def build_request(kind: str, fields: Mapping[str, Any], *, request_id: str, now_ms: int,
                  requested_by: str, key: str | None = None) -> Request:
    """The `Request` envelope around one payload `(kind, fields)`."""
    return {
        "schema_version": CURRENT_SCHEMA_VERSION,
        "event_time": int(now_ms),
        "id": request_id,
        "key": key or request_id,
        "requested_by": requested_by,
        "payload": (kind, dict(fields)),
    }


def parse_json_document(text: str, source: str) -> object:
    """JSON text → value; a syntax error names the file, line and column."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise MalformedInputError(source, f"line {error.lineno} column {error.colno}",
                                  "valid JSON", error.msg) from None


def build_reassign_request(document: object, source: str, *, additional: bool, request_id: str,
                           now_ms: int, requested_by: str) -> Request:
    """A Reassign from the tool's reassignment JSON (already parsed); `log_dirs` kept, "any"
    included. An empty partition list is refused: it would request nothing."""
    targets = reassignment_from_json(document, source)
    if not targets:
        raise MalformedInputError(source, "$.partitions", "at least one partition", [])
    raw_dirs = {}
    for entry in document["partitions"]:  # type: ignore[index]  # shape checked above
        if entry.get("log_dirs") is not None:
            raw_dirs[(entry["topic"], entry["partition"])] = [str(d) for d in entry["log_dirs"]]
    partitions = [
        {"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas),
         "log_dirs": raw_dirs.get((tp.topic, tp.partition))}
        for tp, (replicas, _dirs) in targets.items()
    ]
    key = None
    if len(partitions) == 1:
        key = partition_key(partitions[0]["topic"], partitions[0]["partition"])
    return build_request("Reassign", {"version": 1, "partitions": partitions, "additional": additional},
                         request_id=request_id, now_ms=now_ms, requested_by=requested_by, key=key)


def build_cancel_request(topic: str | None, partition: int | None, keep: bool, keep_draining: bool = False, *,
                         request_id: str, now_ms: int, requested_by: str) -> Request:
    """Cancel everything (no topic), a topic, or one partition (topic and partition); a broker
    whose drain this stops entirely stops draining unless `keep_draining`."""
    if partition is not None and topic is None:
        raise InvalidInputError("cancel: --partition needs --topic (which topic's partition?)")
    if partition is not None and partition < 0:
        raise InvalidInputError(f"cancel: --partition must be 0 or more, got {partition}")
    key = partition_key(topic, partition) if topic is not None and partition is not None else None
    return build_request("Cancel", {"topic": topic, "partition": partition, "keep": keep,
                                    "keep_draining": keep_draining},
                         request_id=request_id, now_ms=now_ms, requested_by=requested_by, key=key)


def build_decommission_request(broker_ids: Iterable[int], *, request_id: str, now_ms: int,
                               requested_by: str) -> Request:
    brokers = sorted(set(broker_ids))
    if not brokers:
        raise InvalidInputError("decommission: give at least one --broker")
    if brokers[0] < 0:
        raise InvalidInputError(f"decommission: broker ids are 0 or more, got {brokers[0]}")
    return build_request("Decommission", {"broker_ids": brokers}, request_id=request_id,
                         now_ms=now_ms, requested_by=requested_by)


def build_rebalance_request(topics: Iterable[str], *, request_id: str, now_ms: int,
                            requested_by: str) -> Request:
    names = sorted({t.strip() for t in topics if t.strip()})
    return build_request("Rebalance", {"topics": names}, request_id=request_id, now_ms=now_ms,
                         requested_by=requested_by)


def build_balance_dirs_request(broker_ids: Iterable[int], *, request_id: str, now_ms: int,
                               requested_by: str) -> Request:
    """Balance the log dirs of the brokers named (every broker with two or more dirs if none)."""
    brokers = sorted(set(broker_ids))
    if brokers and brokers[0] < 0:
        raise InvalidInputError(f"balance-dirs: broker ids are 0 or more, got {brokers[0]}")
    return build_request("Rebalance", {"topics": [], "log_dirs": True, "broker_ids": brokers},
                         request_id=request_id, now_ms=now_ms, requested_by=requested_by)


def build_approve_request(proposal_id: str, *, request_id: str, now_ms: int,
                          requested_by: str) -> Request:
    if not proposal_id.strip():
        raise InvalidInputError("approve: give the proposal id from its ProposalReady alert")
    return build_request("Approve", {"proposal_id": proposal_id.strip()}, request_id=request_id,
                         now_ms=now_ms, requested_by=requested_by)


def build_set_config_request(assignment: str, *, request_id: str, now_ms: int,
                             requested_by: str) -> Request:
    """`KEY=VALUE` (checked and normalised, see `dynamic_config`); `KEY=` resets to the default."""
    key, value = compute_config_value(assignment)
    return build_request("SetConfig", {"key": key, "value": value}, request_id=request_id,
                         now_ms=now_ms, requested_by=requested_by)


def build_action_request(kind: str, *, proposal_id: str | None = None, broker_ids: Iterable[int] = (),
                         request_id: str, now_ms: int, requested_by: str) -> Request:
    """A request of a kind added in schema version 4: `action` set, payload a Tick."""
    request = build_request("Tick", {}, request_id=request_id, now_ms=now_ms, requested_by=requested_by)
    request["action"] = {"kind": kind, "proposal_id": proposal_id, "broker_ids": sorted(set(broker_ids))}
    return request


def build_reject_request(proposal_id: str, *, request_id: str, now_ms: int, requested_by: str) -> Request:
    if not proposal_id.strip():
        raise InvalidInputError("reject: give the proposal id from its ProposalReady alert")
    return build_action_request("Reject", proposal_id=proposal_id.strip(), request_id=request_id, now_ms=now_ms,
                                requested_by=requested_by)


def build_recommission_request(broker_ids: Iterable[int], *, request_id: str, now_ms: int,
                               requested_by: str) -> Request:
    brokers = sorted(set(broker_ids))
    if not brokers:
        raise InvalidInputError("recommission: give at least one --broker")
    if brokers[0] < 0:
        raise InvalidInputError(f"recommission: broker ids are 0 or more, got {brokers[0]}")
    return build_action_request("Recommission", broker_ids=brokers, request_id=request_id, now_ms=now_ms,
                                requested_by=requested_by)


def build_pause_request(paused: bool, *, request_id: str, now_ms: int, requested_by: str) -> Request:
    """`request pause` (True) / `request resume` (False): the `reassignment.paused` flag."""
    return build_request("SetConfig", {"key": PAUSED_KEY, "value": "true" if paused else "false"},
                         request_id=request_id, now_ms=now_ms, requested_by=requested_by)


DRY_RUN_ENVELOPE = {"request_id": "check", "now_ms": 0, "requested_by": "check"}


def build_dry_run(build: Callable[..., Request], *args: Any, **kwargs: Any) -> Request:
    """`build(*args, **kwargs)` with a placeholder envelope: raises what is wrong with the
    arguments (check 1 of the module docstring) before anything connects; nothing is sent."""
    return build(*args, **kwargs, **DRY_RUN_ENVELOPE)


def request_kind(request: Mapping[str, Any]) -> str:
    """The kind a request asks for: its action's, else its payload's."""
    action = request.get("action")
    return str(action["kind"]) if action else str(request["payload"][0])


def describe_request(request: Request) -> dict[str, Any]:
    """What to print after publishing: id, kind, key and the payload fields (JSON-friendly)."""
    action = request.get("action")
    fields = dict(action) if action else request["payload"][1]
    return {"request_id": request["id"], "kind": request_kind(request), "key": request["key"],
            "requested_by": request["requested_by"], "payload": fields}


# --- local validation -----------------------------------------------------------------------------


def validate_locally(request: Mapping[str, Any], cluster: Cluster) -> None:
    """Raise what the pipeline would refuse for sure, judged on `cluster` (a poll of Kafka's
    metadata: nobody draining, nothing the pipeline alone knows); see the module docstring."""
    kind = request_kind(request)
    fields = request["action"] if request.get("action") else request["payload"][1]
    if kind == "Reassign":
        targets = {TopicPartition(e["topic"], e["partition"]): tuple(e["replicas"]) for e in fields["partitions"]}
        dirs = {TopicPartition(e["topic"], e["partition"]): tuple(e["log_dirs"])
                for e in fields["partitions"] if e.get("log_dirs")}
        validate_targets(cluster, targets, dirs)
    elif kind in ("Decommission", "Recommission") or (kind == "Rebalance" and fields.get("log_dirs")):
        unknown = [b for b in fields.get("broker_ids") or () if cluster.broker(b) is None]
        if unknown:
            raise InvalidReplicaAssignmentError(f"{kind.lower()}: broker(s) {unknown} are not in the cluster "
                                                f"(known: {sorted(cluster.brokers_by_id)})")
    elif kind == "Rebalance":
        unknown = sorted(t for t in fields.get("topics") or () if t not in cluster.topics_by_name)
        if unknown:
            raise UnknownTopicOrPartitionError(f"rebalance: unknown topic(s) {unknown}")
    elif kind == "Cancel" and fields.get("topic") is not None:
        if fields.get("partition") is None:
            if fields["topic"] not in cluster.topics_by_name:
                raise UnknownTopicOrPartitionError(f"cancel: topic {fields['topic']!r} does not exist")
        else:
            require_known_partition(cluster, TopicPartition(fields["topic"], fields["partition"]))


LOCALLY_CHECKED_KINDS = frozenset({"Reassign", "Decommission", "Recommission", "Rebalance", "Cancel"})


def needs_local_check(request: Mapping[str, Any]) -> bool:
    """Whether `validate_locally` has anything to judge in `request` (else no cluster poll is
    worth making): a cancel of everything, an approve, a reject, a pause or a setting has not."""
    kind = request_kind(request)
    if kind == "Cancel":
        return request["payload"][1].get("topic") is not None
    return kind in LOCALLY_CHECKED_KINDS


# --- the verdict ----------------------------------------------------------------------------------

VERDICT_KINDS = ("RequestAccepted", "RequestRejected")


@dataclass(frozen=True)
class Verdict:
    """The pipeline's answer to one request: its alert, and the refusal's code if refused."""

    accepted: bool
    message: str
    error_code: str | None
    alert: Mapping[str, Any]


def compute_verdict(alert: Mapping[str, Any], request_id: str) -> Verdict | None:
    """The verdict `alert` gives on request `request_id`, or None if it is about something else."""
    if alert.get("kind") not in VERDICT_KINDS or alert.get("subject") != request_id:
        return None
    accepted = alert["kind"] == "RequestAccepted"
    details = alert.get("details") or {}
    return Verdict(accepted, str(alert.get("message", "")), None if accepted else details.get("error_code"),
                   alert)


def verdict_to_json(verdict: Verdict | None, request_id: str, timeout_seconds: float | None = None) -> dict[str, Any]:
    if verdict is None:
        return {"request_id": request_id, "verdict": "timed-out", "timeout_seconds": timeout_seconds}
    return {"request_id": request_id, "verdict": "accepted" if verdict.accepted else "rejected",
            "error_code": verdict.error_code, "message": verdict.message,
            "details": dict(verdict.alert.get("details") or {})}


# --- the shell ----------------------------------------------------------------------------------


def current_requester() -> str:
    """`user@host` of this process, for the audit trail."""
    try:
        user = getpass.getuser()
    except Exception:  # no login name (some containers)
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def await_verdict(bootstrap_servers: str, client_config, alerts_topic: str, request_id: str,
                  timeout_seconds: float, publish: Callable[[], None],
                  stop: threading.Event | None = None) -> Verdict | None:
    """Publish (through `publish`, called once the alerts consumer sits at the end of the topic,
    so no verdict can slip by) and wait up to `timeout_seconds` for the verdict; None on timeout."""
    from reassigner.operator.alerts_follow import follow_alerts

    done = stop or threading.Event()
    found: list[Verdict] = []

    def ready(_partitions: list[int]) -> None:
        publish()
        timer = threading.Timer(timeout_seconds, done.set)
        timer.daemon = True
        timer.start()

    def emit(alert: Mapping[str, Any]) -> None:
        verdict = compute_verdict(alert, request_id)
        if verdict is not None:
            found.append(verdict)
            done.set()

    follow_alerts(bootstrap_servers, client_config, alerts_topic, emit=emit, stop=done, on_ready=ready,
                  on_bad_message=log.warning)
    return found[0] if found else None


def publish_request(producer, topic: str, request: Request, timeout_seconds: float = 30.0) -> None:
    """Encode and produce one request on the requests topic; wait until Kafka has it (acks=all).

    `producer` is the product's idempotent producer (`runtime.clients.kafka_producer`).
    """
    from runtime.clients.kafka_producer import publish_and_wait

    publish_and_wait(producer, topic, request["key"].encode(), encode("Request", request),
                     version_headers(), timeout_seconds)
    log.info("published %s request %s to %s", request_kind(request), request["id"], topic)


class RequestChannel:
    """The requests and alerts topics of one deployment: check a request against the cluster's
    metadata, publish it, wait for the pipeline's verdict. `observe_cluster` polls Kafka's
    metadata (the planning model); `producer` is the product's idempotent producer, shared by
    the threads of a server (confluent-kafka's producer is thread-safe)."""

    def __init__(self, bootstrap_servers: str, client_config, requests_topic: str, alerts_topic: str,
                 producer, observe_cluster: Callable[[], Cluster]) -> None:
        self.bootstrap_servers, self.client_config = bootstrap_servers, client_config
        self.requests_topic, self.alerts_topic = requests_topic, alerts_topic
        self.producer, self.observe_cluster = producer, observe_cluster

    def check(self, request: Request) -> None:
        """`validate_locally` against a fresh poll of the cluster, when it has anything to judge."""
        if needs_local_check(request):
            validate_locally(request, self.observe_cluster())

    def submit(self, request: Request, wait_seconds: float | None,
               on_published: Callable[[], None] | None = None,
               stop: threading.Event | None = None) -> Verdict | None:
        """Publish `request`; with `wait_seconds`, wait that long for its verdict (None: timed
        out, or not waited for)."""

        def publish() -> None:
            publish_request(self.producer, self.requests_topic, request)
            if on_published is not None:
                on_published()

        if not wait_seconds:
            publish()
            return None
        return await_verdict(self.bootstrap_servers, self.client_config, self.alerts_topic, request["id"],
                             wait_seconds, publish, stop=stop)
