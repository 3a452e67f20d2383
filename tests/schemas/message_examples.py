"""Realistic records of every message type, and a generator of example data for any schema."""

from __future__ import annotations

from typing import Any

from schemas import CURRENT_SCHEMA_VERSION

EVENT_TIME = 1_767_225_600_123  # 2026-01-01T00:00:00.123Z


def envelope(key: str, message_id: str = "6f1c2a9e-1b7d-4a53-9a39-0d6f2f0e8c11") -> dict[str, Any]:
    return {"schema_version": CURRENT_SCHEMA_VERSION, "event_time": EVENT_TIME, "id": message_id, "key": key}


def command(kind: str, fields: dict[str, Any], key: str = "orders-7", step: int = 2) -> dict[str, Any]:
    return {
        **envelope(key, f"rebalance-42:orders-7:{step}:{kind}"),
        "epoch": 3,
        "reassignment_id": "rebalance-42:orders-7",
        "step": step,
        "reason": "rebalance onto broker 5, step 2 of 4",
        "payload": (kind, fields),
        "action": None,
    }


def request(kind: str, fields: dict[str, Any], action: dict[str, Any] | None = None) -> dict[str, Any]:
    return {**envelope("req-0001", "req-0001"), "requested_by": "ops@bastion", "payload": (kind, fields),
            "action": action}


REALISTIC_RECORDS: dict[str, list[dict[str, Any]]] = {
    "BrokerMembership": [
        {
            **envelope("3"),
            "snapshot_id": None,
            "broker_id": 3,
            "rack": "/dc2/r1",
            "host": "kafka-3.internal",
            "port": 9092,
            "state": "UNFENCED",
            "log_dirs": ["/var/lib/kafka/data-0", "/var/lib/kafka/data-1"],
        },
        {
            **envelope("4"),
            "snapshot_id": "snap-0007",
            "broker_id": 4,
            "rack": None,
            "host": None,
            "port": None,
            "state": "UNREGISTERED",
            "log_dirs": [],
        },
    ],
    "PartitionState": [
        {
            **envelope("orders-7"),
            "snapshot_id": None,
            "topic": "orders",
            "partition": 7,
            "replicas": [1, 4, 3, 2],
            "isr": [1, 3, 2],
            "leader": 1,
            "leader_epoch": 17,
            "adding": [4],
            "removing": [1],
            "offline_replicas": [],
            "size_bytes": 7_516_192_768,
            "log_dirs": ["/var/lib/kafka/data-0", None, "/var/lib/kafka/data-1", "/var/lib/kafka/data-0"],
            "bytes_in_per_sec": None,
            "bytes_out_per_sec": None,
            "traffic_window_ms": None,
            "eligible_leader_replicas": [],
            "last_known_elr": [],
        },
        {
            **envelope("orders-8"),
            "snapshot_id": "snap-0007",
            "topic": "orders",
            "partition": 8,
            "replicas": [2, 4, 3],
            "isr": [2, 4, 3],
            "leader": 2,
            "leader_epoch": 3,
            "adding": [],
            "removing": [],
            "offline_replicas": [],
            "size_bytes": 1_073_741_824,
            "log_dirs": ["/var/lib/kafka/data-0", "/var/lib/kafka/data-1", "/var/lib/kafka/data-0"],
            "bytes_in_per_sec": 1_250_000.5,
            "bytes_out_per_sec": 3_750_001.5,
            "traffic_window_ms": 60_000,
            "eligible_leader_replicas": [],
            "last_known_elr": [],
        },
        {
            **envelope("payments.v2-0"),
            "snapshot_id": "snap-0007",
            "topic": "payments.v2",
            "partition": 0,
            "replicas": [2, 3, 1],
            "isr": [],
            "leader": None,
            "leader_epoch": -1,
            "adding": [],
            "removing": [],
            "offline_replicas": [2, 3, 1],
            "size_bytes": None,
            "log_dirs": [],
            "bytes_in_per_sec": None,
            "bytes_out_per_sec": None,
            "traffic_window_ms": None,
            "eligible_leader_replicas": [],
            "last_known_elr": [2, 3],
        },
        {
            **envelope("payments.v2-1"),
            "snapshot_id": None,
            "topic": "payments.v2",
            "partition": 1,
            "replicas": [3, 1, 2],
            "isr": [3],
            "leader": 3,
            "leader_epoch": 9,
            "adding": [],
            "removing": [],
            "offline_replicas": [1],
            "size_bytes": 52_428_800,
            "log_dirs": ["/var/lib/kafka/data-1", None, "/var/lib/kafka/data-0"],
            "bytes_in_per_sec": None,
            "bytes_out_per_sec": None,
            "traffic_window_ms": None,
            "eligible_leader_replicas": [1, 2],
            "last_known_elr": [],
        },
    ],
    "LogDirState": [
        {
            **envelope("2"),
            "snapshot_id": None,
            "broker_id": 2,
            "path": "/var/lib/kafka/data-1",
            "online": True,
            "error": None,
            "total_bytes": 1_000_204_886_016,
            "usable_bytes": 412_316_860_416,
            "replicas": [
                {"topic": "orders", "partition": 7, "size_bytes": 7_516_192_768, "offset_lag": 0, "is_future": False},
                {"topic": "orders", "partition": 3, "size_bytes": 1_024, "offset_lag": 120, "is_future": True},
            ],
            "cordoned": True,
        },
        {
            **envelope("2"),
            "snapshot_id": None,
            "broker_id": 2,
            "path": "/var/lib/kafka/data-0",
            "online": False,
            "error": "KAFKA_STORAGE_ERROR",
            "total_bytes": None,
            "usable_bytes": None,
            "replicas": [],
            "cordoned": False,
        },
    ],
    "CanarySample": [
        {
            **envelope("3"),
            "broker_id": 3,
            "partition": 2,
            "window_ms": 30_000,
            "samples": 60,
            "errors": 0,
            "produce_p50_ms": 4.2,
            "produce_p99_ms": 17.5,
            "end_to_end_p50_ms": 6.1,
            "end_to_end_p99_ms": 25.0,
        },
        {
            **envelope("4"),
            "broker_id": 4,
            "partition": 0,
            "window_ms": 30_000,
            "samples": 3,
            "errors": 57,
            "produce_p50_ms": None,
            "produce_p99_ms": None,
            "end_to_end_p50_ms": None,
            "end_to_end_p99_ms": None,
        },
    ],
    "TopicState": [
        {
            **envelope("orders"),
            "snapshot_id": "snap-0007",
            "topic": "orders",
            "topic_id": "kQ1o2Yb9S6uPq3m8zX0w1A",
            "deleted": False,
            "partition_count": 12,
            "replication_factor": 3,
            "min_insync_replicas": 2,
        },
        {
            **envelope("tmp-events"),
            "snapshot_id": None,
            "topic": "tmp-events",
            "topic_id": None,
            "deleted": True,
            "partition_count": 1,
            "replication_factor": 1,
            "min_insync_replicas": None,
        },
    ],
    "SnapshotMarker": [
        {
            **envelope("snap-0007"),
            "snapshot_id": "snap-0007",
            "phase": "START",
            "started_at": EVENT_TIME - 250,
            "ended_at": None,
            "broker_count": 0,
            "topic_count": 0,
            "partition_count": 0,
            "log_dir_count": 0,
            "has_inventory": False,
            "topics": [],
            "broker_ids": [],
            "kafka_release": None,
            "kafka_metadata_level": None,
            "kafka_capabilities": [],
        },
        {
            **envelope("snap-0007"),
            "snapshot_id": "snap-0007",
            "phase": "END",
            "started_at": EVENT_TIME - 250,
            "ended_at": EVENT_TIME,
            "broker_count": 4,
            "topic_count": 2,
            "partition_count": 1_204,
            "log_dir_count": 8,
            "has_inventory": True,
            "topics": [{"name": "orders", "partition_count": 24}, {"name": "payments", "partition_count": 1_180}],
            "broker_ids": [1, 2, 3, 4],
            "kafka_release": "4.1",
            "kafka_metadata_level": 27,
            "kafka_capabilities": ["log-dir moves and dir failures", "fenced brokers in DescribeCluster",
                                   "eligible leader replicas"],
        },
    ],
    "Request": [
        request(
            "Reassign",
            {
                "version": 1,
                "partitions": [
                    {"topic": "orders", "partition": 7, "replicas": [5, 6, 2], "log_dirs": ["any", "/data/1", "any"]},
                    {"topic": "orders", "partition": 8, "replicas": [5, 3, 1], "log_dirs": None},
                ],
                "additional": True,
            },
        ),
        request("Cancel", {"topic": "orders", "partition": None, "keep": True, "keep_draining": False}),
        request("Cancel", {"topic": None, "partition": None, "keep": False, "keep_draining": True}),
        request("Decommission", {"broker_ids": [3, 4]}),
        request("Rebalance", {"topics": [], "log_dirs": False, "broker_ids": []}),
        request("Rebalance", {"topics": [], "log_dirs": True, "broker_ids": [3]}),
        request("Approve", {"proposal_id": "proposal-2026-01-01-0003"}),
        request("SetConfig", {"key": "reassignment.max.concurrent.partition.movements", "value": "10"}),
        request("SetConfig", {"key": "throttle.bytes.per.sec", "value": None}),
        request("Tick", {}),
        request("Tick", {}, {"kind": "Reject", "proposal_id": "b12-decommission-1", "broker_ids": []}),
        request("Tick", {}, {"kind": "Recommission", "proposal_id": None, "broker_ids": [3]}),
    ],
    "Command": [
        command(
            "ReassignmentStep",
            {
                "topic": "orders",
                "partition": 7,
                "target_replicas": [5, 0, 1, 2, 3, 4],
                "adding": [5],
                "removing": [],
                "elect_leader": True,
                "target_log_dirs": ["/data/0", "any", "any", "any", "any", "any"],
                "throttle_rate_bytes_per_sec": 100_000,
                "throttle_leader_broker_ids": [0, 1, 2, 3, 4],
                "throttle_follower_broker_ids": [5],
                "throttle_log_dir_rate_bytes_per_sec": None,
                "throttle_sequence": 41,
                "throttle_broker_rates": [{"broker_id": 0, "rate_bytes_per_sec": 150_000},
                                          {"broker_id": 5, "rate_bytes_per_sec": 100_000}],
                "final_target_replicas": [5, 0, 1],
            },
        ),
        command("CancelReassignment", {"topic": "orders", "partition": 7}),
        command("ElectLeader", {"topic": "orders", "partition": 7, "preferred_leader": 5}),
        command("LogDirMove", {"broker_id": 2, "topic": "orders", "partition": 7, "target_dir": "/data/1",
                               "throttle_bytes_per_sec": 1_000_000}, key="2"),
        {
            **command(
                "SetThrottle",
                {
                    "broker_ids": [0, 1, 5],
                    "rate_bytes_per_sec": 50_000_000,
                    "logdir_rate_bytes_per_sec": None,
                    "partitions": [
                        {"topic": "orders", "partition": 7, "leader_broker_ids": [0, 1], "follower_broker_ids": [5]}
                    ],
                    "broker_rates": [{"broker_id": 0, "rate_bytes_per_sec": 50_000_000},
                                     {"broker_id": 5, "rate_bytes_per_sec": 75_000_000}],
                    "throttle_sequence": 44,
                },
                key="0",
                step=0,
            ),
            "reassignment_id": None,
        },
        {
            **command("ClearThrottle", {"broker_ids": [0, 1, 5], "partitions": [], "log_dir_only": False,
                                        "throttle_sequence": 42},
                      key="0", step=0),
            "reassignment_id": None,
        },
        {
            **command("ClearThrottle", {"broker_ids": [], "partitions": [], "log_dir_only": False,
                                        "throttle_sequence": None},
                      key="cordon", step=0),
            "id": "cordon-43-3:0:Cordon",
            "reassignment_id": None,
            "reason": "decommission of broker 3",
            "action": {"kind": "Cordon", "broker_ids": [3], "log_dirs": []},
        },
    ],
    "CommandResult": [
        {
            **envelope("orders-7"),
            "command_id": "rebalance-42:orders-7:2:ReassignmentStep",
            "command_kind": "ReassignmentStep",
            "epoch": 3,
            "reassignment_id": "rebalance-42:orders-7",
            "step": 2,
            "ok": True,
            "error_code": None,
            "message": "",
        },
        {
            **envelope("orders-7"),
            "command_id": "rebalance-42:orders-7:2:CancelReassignment",
            "command_kind": "CancelReassignment",
            "epoch": 3,
            "reassignment_id": "rebalance-42:orders-7",
            "step": 2,
            "ok": False,
            "error_code": "NO_REASSIGNMENT_IN_PROGRESS",
            "message": "no reassignment in progress for orders-7",
        },
    ],
    "Alert": [
        {
            **envelope("broker-3"),
            "severity": "CRITICAL",
            "kind": "SelfHealingSuppressed",
            "subject": "broker-3",
            "message": "3 of 5 brokers down (60 %); self-healing suppressed above 2 brokers or 40 %",
            "details": {"failed_brokers": "1,2,3", "limit_brokers": "2", "limit_fraction": "0.4"},
        },
        {
            **envelope("req-0001"),
            "severity": "WARNING",
            "kind": "SomeKindAddedLater",
            "subject": "req-0001",
            "message": "kinds are strings: unknown ones still decode",
            "details": {},
        },
    ],
    "DeadLetter": [
        {
            **envelope("reassigner.isr-changes-0-1234", "reassigner.isr-changes-0-1234"),
            "source_topic": "reassigner.isr-changes",
            "source_partition": 0,
            "source_offset": 1234,
            "source_key": b"orders-7",
            "value": b"\x00\xff\xfegarbage",
            "headers": {"schema_version": b"1"},
            "expected_schema": "PartitionState",
            "reason": "PartitionState: 10 bytes are not a record of schema version 1",
        },
    ],
}


# --- example data generated from a schema --------------------------------------------------------


def compute_example_records(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """Records that fill every field of `schema` (a self-contained schema) with a non-default
    value, one per branch of its largest union of records, so every payload kind is exercised."""
    variants = max(1, _largest_record_union(schema))
    named: dict[str, Any] = {}
    _collect_named_types(schema, named)
    return [_example(schema, named, variant) for variant in range(variants)]


def _collect_named_types(schema: Any, named: dict[str, Any]) -> None:
    if isinstance(schema, list):
        for item in schema:
            _collect_named_types(item, named)
    elif isinstance(schema, dict):
        if schema.get("type") in ("record", "enum", "fixed") and "name" in schema:
            _register(schema, named)
        for value in schema.values():
            _collect_named_types(value, named)


def _largest_record_union(schema: Any) -> int:
    if isinstance(schema, list):
        records = sum(1 for branch in schema if isinstance(branch, dict) and branch.get("type") == "record")
        return max([records] + [_largest_record_union(branch) for branch in schema])
    if isinstance(schema, dict):
        return max([0] + [_largest_record_union(value) for value in schema.values()])
    return 0


def _resolve(schema: Any, named: dict[str, Any]) -> Any:
    if isinstance(schema, str) and schema in named:
        return named[schema]
    return schema


PRIMITIVE_EXAMPLES = {
    "null": None,
    "boolean": True,
    "int": 7,
    "long": 1_767_225_600_123,
    "float": 1.5,
    "double": 2.25,
    "bytes": b"\x00\x01raw",
    "string": "example",
}


def _example(schema: Any, named: dict[str, Any], variant: int) -> Any:
    if isinstance(schema, list):
        branches = [_resolve(branch, named) for branch in schema]
        records = [branch for branch in branches if isinstance(branch, dict) and branch.get("type") == "record"]
        if len(records) > 1:
            chosen = records[variant % len(records)]
            return (chosen["name"].rsplit(".", 1)[-1], _example(chosen, named, variant))
        non_null = [branch for branch in schema if branch != "null"]
        return _example(non_null[0] if non_null else "null", named, variant)
    schema = _resolve(schema, named)
    if isinstance(schema, str):
        return PRIMITIVE_EXAMPLES[schema]
    kind = schema.get("type")
    if kind in ("record", "enum", "fixed"):
        _register(schema, named)
    if kind == "record":
        return {field["name"]: _example(field["type"], named, variant) for field in schema["fields"]}
    if kind == "enum":
        return schema["symbols"][variant % len(schema["symbols"])]
    if kind == "fixed":
        return b"\x00" * schema["size"]
    if kind == "array":
        return [_example(schema["items"], named, variant), _example(schema["items"], named, variant)]
    if kind == "map":
        return {"a": _example(schema["values"], named, variant)}
    return _example(kind, named, variant)


def _register(schema: dict[str, Any], named: dict[str, Any]) -> None:
    name = schema["name"]
    full = name if "." in name else f"{schema.get('namespace', 'io.reassigner.v1')}.{name}"
    named[full] = schema
    named[name.rsplit(".", 1)[-1]] = schema
