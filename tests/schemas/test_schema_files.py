"""Every packaged schema parses with both Avro libraries and follows the message conventions."""

from __future__ import annotations

import json

import avro.schema
import fastavro
import pytest

import schemas
from schemas.loader import NAMESPACE, compute_self_contained_schema, load_definitions, schema_directory

ENVELOPE = ["schema_version", "event_time", "id", "key"]
ALL_TYPES = schemas.schema_names()


@pytest.mark.parametrize("name", ALL_TYPES)
def test_fastavro_parses_every_schema(name: str) -> None:
    fastavro.parse_schema(compute_self_contained_schema(name))


@pytest.mark.parametrize("name", ALL_TYPES)
def test_apache_avro_parses_every_self_contained_schema_json(name: str) -> None:
    parsed = avro.schema.parse(schemas.schema_json(name))
    assert parsed.fullname == f"{NAMESPACE}.{name}"


def test_every_file_defines_one_type_named_like_the_file_in_the_namespace() -> None:
    for path in sorted(schema_directory().glob("*.avsc")):
        schema = json.loads(path.read_text())
        assert schema["name"] == path.stem
        assert schema["namespace"] == NAMESPACE


@pytest.mark.parametrize("name", schemas.MESSAGE_TYPES)
def test_every_message_starts_with_the_envelope(name: str) -> None:
    fields = compute_self_contained_schema(name)["fields"]
    assert [field["name"] for field in fields[:4]] == ENVELOPE
    assert fields[1]["type"] == {"type": "long", "logicalType": "timestamp-millis"}


def test_every_field_is_documented() -> None:
    undocumented = [
        f"{name}.{field['name']}"
        for name, schema in load_definitions().items()
        for field in schema["fields"]
        if not field.get("doc")
    ]
    assert undocumented == []


def test_each_topic_carries_one_message_type_and_every_message_type_has_a_topic() -> None:
    assert sorted(schemas.TOPICS.values()) == sorted(schemas.MESSAGE_TYPES)
    for suffix in ("broker-membership", "isr-changes", "disk-failures", "requests", "commands",
                   "command-results", "alerts", "dead-letter"):
        assert suffix in schemas.TOPICS, f"SPEC 2 topic {suffix} has no schema"
    assert schemas.schema_for_topic("acme.isr-changes") == "PartitionState"
    assert schemas.topic_name("commands") == "reassigner.commands"


def test_payload_unions_list_the_kinds_in_order() -> None:
    request_fields = {f["name"]: f for f in compute_self_contained_schema("Request")["fields"]}
    request_payload = request_fields["payload"]["type"]
    command_fields = {f["name"]: f for f in compute_self_contained_schema("Command")["fields"]}
    command_payload = command_fields["payload"]["type"]
    assert [branch["name"] for branch in request_payload] == list(schemas.REQUEST_KINDS)
    assert [branch["name"] for branch in command_payload] == list(schemas.COMMAND_KINDS)


def test_command_kinds_added_later_are_an_open_string_beside_the_frozen_union() -> None:
    """Schema version 10: `Command.action` (null by default), as `Request.action`."""
    action = next(f for f in compute_self_contained_schema("Command")["fields"] if f["name"] == "action")
    assert action["default"] is None and action["type"][0] == "null"
    kind = next(f for f in action["type"][1]["fields"] if f["name"] == "kind")
    assert kind["type"] == "string"
    assert all("default" in f for f in action["type"][1]["fields"] if f["name"] != "kind")


def test_request_kinds_added_later_are_an_open_string_beside_the_frozen_union() -> None:
    """Schema version 4: `Request.action` (null by default) carries the kinds added after the
    payload union was frozen; its kind is a string, so the next kind needs no schema change."""
    action = next(f for f in compute_self_contained_schema("Request")["fields"] if f["name"] == "action")
    assert action["default"] is None and action["type"][0] == "null"
    kind = next(f for f in action["type"][1]["fields"] if f["name"] == "kind")
    assert kind["type"] == "string"
    assert all("default" in f for f in action["type"][1]["fields"] if f["name"] != "kind")


def test_alert_kind_is_an_open_string_and_all_spec_kinds_are_listed() -> None:
    kind = next(f for f in compute_self_contained_schema("Alert")["fields"] if f["name"] == "kind")
    assert kind["type"] == "string"
    spec_kinds = {"BrokerAdded", "BrokerFailed", "BrokerRecovered", "BrokerDrained", "DiskFailed",
                  "UnderMinIsr", "OfflinePartitions", "PlanCreated", "ProposalReady",
                  "ReassignmentCompleted", "ReassignmentStalled", "ReassignmentCancelled",
                  "PlanInfeasible", "RequestRejected", "CommandFailed", "SelfHealingSuppressed",
                  "BadEvent"}
    assert spec_kinds <= set(schemas.ALERT_KINDS)
    assert len(set(schemas.ALERT_KINDS)) == len(schemas.ALERT_KINDS)
    severity = next(f for f in compute_self_contained_schema("Alert")["fields"] if f["name"] == "severity")
    assert tuple(severity["type"]["symbols"]) == schemas.ALERT_SEVERITIES


def test_enums_have_a_default_symbol_so_new_symbols_do_not_break_old_readers() -> None:
    enums = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if node.get("type") == "enum":
                enums.append(node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(list(load_definitions().values()))
    assert enums
    assert [enum["name"] for enum in enums if "default" not in enum] == []


def test_self_contained_json_defines_each_named_type_once() -> None:
    text = schemas.schema_json("Command")
    assert text.count('"name":"ThrottledPartition"') == 1
    payload = next(f for f in json.loads(text)["fields"] if f["name"] == "payload")
    assert payload["type"][5]["fields"][1]["type"]["items"].endswith("ThrottledPartition")


def test_unknown_schema_name_is_a_schema_error() -> None:
    with pytest.raises(schemas.codec.SchemaError, match="no schema named 'Nope'"):
        schemas.schema_json("Nope")
