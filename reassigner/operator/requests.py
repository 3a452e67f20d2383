"""Operator requests (SPEC 7): pure builders of `Request` envelopes, and one publish function.

A request is checked locally before it is published, so that a typo fails at once with a
one-line error instead of a `RequestRejected` alert later:
- `reassign`: the Kafka tool's reassignment JSON must have its shape (`planning.snapshot.
  reassignment_from_json`: malformed → `MalformedInputError` naming the file and JSON path);
  whether the brokers exist is the pipeline's call (it knows the cluster);
- `cancel`: a partition needs its topic;
- `decommission`: at least one broker id, none negative;
- `approve`: a non-empty proposal id;
- `config set`: a known key and a value that parses (`dynamic_config`).

Envelope invariants: `id` is a fresh UUID (the caller passes it in; builders read no clock and
no randomness); `key` is `<topic>-<partition>` for a request about one partition, else the
request id; `requested_by` is `user@host`; `event_time` is epoch milliseconds.

`publish_request` is the only I/O here: one idempotent produce (acks=all), flushed and checked.
"""

from __future__ import annotations

import getpass
import json
import logging
import socket
from typing import Any, Iterable, Mapping

from planning.snapshot import reassignment_from_json
from reassigner.errors import InvalidInputError, MalformedInputError
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


def build_cancel_request(topic: str | None, partition: int | None, keep: bool, *, request_id: str,
                         now_ms: int, requested_by: str) -> Request:
    """Cancel everything (no topic), a topic, or one partition (topic and partition)."""
    if partition is not None and topic is None:
        raise InvalidInputError("cancel: --partition needs --topic (which topic's partition?)")
    if partition is not None and partition < 0:
        raise InvalidInputError(f"cancel: --partition must be 0 or more, got {partition}")
    key = partition_key(topic, partition) if topic is not None and partition is not None else None
    return build_request("Cancel", {"topic": topic, "partition": partition, "keep": keep},
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


def describe_request(request: Request) -> dict[str, Any]:
    """What to print after publishing: id, kind, key and the payload fields (JSON-friendly)."""
    kind, fields = request["payload"]
    return {"request_id": request["id"], "kind": kind, "key": request["key"],
            "requested_by": request["requested_by"], "payload": fields}


# --- the shell ----------------------------------------------------------------------------------


def current_requester() -> str:
    """`user@host` of this process, for the audit trail."""
    try:
        user = getpass.getuser()
    except Exception:  # no login name (some containers)
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def publish_request(producer, topic: str, request: Request, timeout_seconds: float = 30.0) -> None:
    """Encode and produce one request on the requests topic; wait until Kafka has it (acks=all).

    `producer` is the product's idempotent producer (`reassigner.clients.kafka_producer`).
    """
    from reassigner.clients.kafka_producer import publish_and_wait

    publish_and_wait(producer, topic, request["key"].encode(), encode("Request", request),
                     version_headers(), timeout_seconds)
    log.info("published %s request %s to %s", request["payload"][0], request["id"], topic)
