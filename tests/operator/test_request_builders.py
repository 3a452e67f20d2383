"""Requests are built and checked locally: a good one encodes as a Request, a bad one fails at once."""

from __future__ import annotations

import pytest

from schemas.errors import InvalidConfigError, InvalidInputError, MalformedInputError
from handlers.policy import DYNAMIC_KEYS
from reassigner.operator.dynamic_config import compute_config_value, compute_effective_config
from reassigner.operator.requests import (
    build_approve_request,
    build_balance_dirs_request,
    build_cancel_request,
    build_decommission_request,
    build_reassign_request,
    build_rebalance_request,
    build_set_config_request,
    parse_json_document,
)
from runtime.settings import Settings
from tests.settings_defaults import default_policy, default_settings
from schemas.codec import decode, encode

ENVELOPE = {"request_id": "r-1", "now_ms": 1_700_000_000_000, "requested_by": "ops@host"}


def roundtrip(request: dict) -> dict:
    return decode("Request", encode("Request", request))


def test_reassign_keeps_the_tool_json_including_log_dirs():
    document = {"version": 1, "partitions": [
        {"topic": "orders", "partition": 0, "replicas": [4, 2, 3], "log_dirs": ["/d/a", "any", "any"]},
        {"topic": "orders", "partition": 1, "replicas": [1, 4, 2]},
    ]}
    request = build_reassign_request(document, "plan.json", additional=True, **ENVELOPE)
    decoded = roundtrip(request)
    kind, fields = decoded["payload"]
    assert kind == "Reassign" and fields["additional"] is True
    assert fields["partitions"][0] == {"topic": "orders", "partition": 0, "replicas": [4, 2, 3],
                                       "log_dirs": ["/d/a", "any", "any"]}
    assert fields["partitions"][1]["log_dirs"] is None
    assert decoded["key"] == "r-1" and decoded["requested_by"] == "ops@host"


def test_a_one_partition_request_is_keyed_by_topic_partition():
    document = {"version": 1, "partitions": [{"topic": "orders", "partition": 7, "replicas": [1, 2]}]}
    assert build_reassign_request(document, "f", additional=False, **ENVELOPE)["key"] == "orders-7"
    assert build_cancel_request("orders", 7, False, **ENVELOPE)["key"] == "orders-7"
    assert build_cancel_request("orders", None, False, **ENVELOPE)["key"] == "r-1"


@pytest.mark.parametrize("document, path", [
    ({"version": 1}, "$"),
    ({"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, "x"]}]}, "$.partitions[0].replicas[1]"),
    ({"version": 1, "partitions": [{"topic": "t", "partition": -1, "replicas": [1]}]}, "$.partitions[0].partition"),
    ({"version": 2, "partitions": []}, "$.version"),
    ({"version": 1, "partitions": []}, "$.partitions"),
])
def test_malformed_reassignment_names_file_and_json_path(document, path):
    with pytest.raises(MalformedInputError) as error:
        build_reassign_request(document, "plan.json", additional=False, **ENVELOPE)
    assert str(error.value).startswith(f"plan.json: at {path}")
    assert error.value.code == "INVALID_REQUEST"


def test_json_syntax_error_names_line_and_column():
    with pytest.raises(MalformedInputError, match=r"plan.json: at line 2 column \d+: expected valid JSON"):
        parse_json_document('{"version": 1,\n "partitions": [}', "plan.json")


def test_cancel_partition_needs_topic():
    with pytest.raises(InvalidInputError, match="--partition needs --topic"):
        build_cancel_request(None, 3, False, **ENVELOPE)
    kind, fields = roundtrip(build_cancel_request(None, None, True, **ENVELOPE))["payload"]
    assert (kind, fields) == ("Cancel", {"topic": None, "partition": None, "keep": True, "keep_draining": False})
    _, fields = roundtrip(build_cancel_request("orders", None, False, True, **ENVELOPE))["payload"]
    assert fields["keep_draining"] is True


def test_decommission_rebalance_approve():
    assert roundtrip(build_decommission_request([3, 1, 3], **ENVELOPE))["payload"] == ("Decommission", {"broker_ids": [1, 3]})
    with pytest.raises(InvalidInputError):
        build_decommission_request([], **ENVELOPE)
    with pytest.raises(InvalidInputError):
        build_decommission_request([-1], **ENVELOPE)
    assert roundtrip(build_rebalance_request([], **ENVELOPE))["payload"] == (
        "Rebalance", {"topics": [], "log_dirs": False, "broker_ids": []})
    assert roundtrip(build_balance_dirs_request([3, 1, 3], **ENVELOPE))["payload"] == (
        "Rebalance", {"topics": [], "log_dirs": True, "broker_ids": [1, 3]})
    with pytest.raises(InvalidInputError, match="balance-dirs"):
        build_balance_dirs_request([-2], **ENVELOPE)
    assert roundtrip(build_approve_request(" p-1 ", **ENVELOPE))["payload"] == ("Approve", {"proposal_id": "p-1"})
    with pytest.raises(InvalidInputError):
        build_approve_request("  ", **ENVELOPE)


@pytest.mark.parametrize("assignment, expected", [
    ("reassignment.max.concurrent.partition.movements=10", "10"),
    ("step.stall.timeout=10m", "600"),
    ("step.stall.timeout=1500ms", "1.5"),
    ("throttle.bytes.per.sec=10MB", "10000000"),
    ("stall.action=Cancel", "cancel"),
    ("mode=approve", "approve"),
    ("throttle.bytes.per.sec=", None),
])
def test_set_config_normalises_known_keys(assignment, expected):
    kind, fields = roundtrip(build_set_config_request(assignment, **ENVELOPE))["payload"]
    assert kind == "SetConfig" and fields["value"] == expected


@pytest.mark.parametrize("assignment, message", [
    ("reassignment.max.concurrent.partition.movement=3", "unknown setting"),
    ("reassignment.max.concurrent.leader.movements=0", "from 1 to 1000000"),
    ("reassignment.max.concurrent.leader.movements=many", "from 1 to 1000000"),
    ("mode=yolo", "expected one of auto, approve, observe"),
    ("step.stall.timeout=soon", "duration"),
    ("no-equals-sign", "KEY=VALUE"),
    ("reassignment.max.concurrent.logdir.movements.per.broker=0", "from 1 to 1000000"),
    ("logdir.imbalance.threshold=1.5", "fraction"),
])
def test_set_config_refuses_locally(assignment, message):
    with pytest.raises(InvalidConfigError, match=message) as error:
        build_set_config_request(assignment, **ENVELOPE)
    assert error.value.code == "INVALID_CONFIG"


def test_every_dynamic_key_maps_to_a_setting_and_config_get_merges_overrides():
    for key in DYNAMIC_KEYS.values():
        assert key.field in Settings.model_fields, key.name
    effective = compute_effective_config({"stall.action": "cancel"}, default_settings())
    assert effective["stall.action"] == {"value": "cancel", "source": "override", "doc": DYNAMIC_KEYS["stall.action"].doc}
    assert effective["reassignment.max.concurrent.replica.movements"]["source"] == "default"
    assert compute_config_value("mode=") == ("mode", None)


def test_the_pipeline_reads_the_canonical_value_the_cli_sends_as_the_same_value():
    from handlers.policy import Policy, compute_config_text, effective_policy

    samples = {"mode": "Observe", "stall.action": "cancel", "step.stall.timeout": "10m",
               "broker.add.grace": "0", "broker.failure.grace": "1500ms", "throttle.bytes.per.sec": "1MB",
               "self.healing.max.failed.brokers": "0", "self.healing.max.failed.fraction": "0.50",
               "topics.include": "orders-.*", "topics.exclude": "__.*|orders-eu",
               "replica.alter.log.dirs.io.max.bytes.per.second": "5MiB", "logdir.imbalance.threshold": "0.20",
               "reassignment.paused": "True", "proposal.expiry": "2h", "balance.mode": "Bytes",
               "balance.disk.tolerance": "0.05", "balance.replica.tolerance": "0.1",
               "balance.leader.tolerance": "0.20", "balance.topic.spread": "1", "balance.bytes.in.tolerance": "0.15",
               "balance.network.out.tolerance": "0.3", "balance.disk.budget.bytes": "2TiB",
               "throttle.mode": "Adaptive", "throttle.min": "1MB", "throttle.max": "2MiB",
               "throttle.schedule": "8-18=20MB, 19=50MB"}
    for key in DYNAMIC_KEYS.values():
        assert key.field in Policy.__dataclass_fields__, key.name
        _name, canonical = compute_config_value(f"{key.name}={samples.get(key.name, '+3')}")
        assert compute_config_text(key.name, canonical) == compute_config_text(key.name, samples.get(key.name, "+3"))
        assert compute_config_text(key.name, canonical)[0] == canonical  # a fixed point
    effective = effective_policy(default_policy(), {"step.stall.timeout": "600", "throttle.bytes.per.sec": "1000000",
                                            "broker.failure.grace": "1.5", "mode": "observe"})
    assert (effective.step_stall_timeout_seconds, effective.throttle_bytes_per_sec) == (600.0, 1_000_000)
    assert (effective.broker_failure_grace_seconds, effective.mode) == (1.5, "observe")
