"""Released schema versions stay readable: frozen copies, data round trips, and the rule check."""

from __future__ import annotations

import copy
import hashlib
import io
import json

import fastavro
import pytest
from message_examples import compute_example_records

import schemas
from schemas.compatibility import compute_evolution_problems, compute_read_problems, compute_version_problems
from schemas.loader import compute_self_contained_schema, known_versions, schema_directory, schema_names

FROZEN_DIGESTS = {
    1: "a3629875edcc25cdd7fbd32f29b999fca231e4760f63f05f26dac40f2c70d85a",
    2: "11af5d9884d9e203e8bb08193971f277f095a8849d070a457e849f1819b2dce8",  # SnapshotMarker inventory
    3: "5d3b42bd0aa1804ff0f2d54c2e6691f45b3fd87aca577e559a2ead2f936519ba",  # Rebalance log_dirs/broker_ids, LogDirMove throttle, ClearThrottle log_dir_only
    4: "09f3271d56a586d52fe1b02cfef4bf14877d8dd7c17cd9da56e70b7c7bc73a3c",  # Request action (RequestAction: Reject, Recommission)
    5: "573beee2e83658eeed7e34582693c247530c001ac4daa50b628da816c8f89b78",  # ReassignmentStep throttle_*, ClearThrottle throttle_sequence
    6: "a3ba9e4dfea5a59bfd84a3da60289f85a4a86e7474cd81245b78fecf5185a9a8",  # ReassignmentStep final_target_replicas
    7: "adb417e96449e75a22b15e241d84e7ebee45333937eeee1633e2e841faf0310c",  # PartitionState bytes_in_per_sec, bytes_out_per_sec, traffic_window_ms
    8: "6f2265e6483914bca0a378d7f6fdbbe2ca681d7d56cc922d8ea88c180a066789",  # Cancel keep_draining
    9: "af722aac173578a4735be5953e270b451b402ce44258829a2e9b3490c4cfd05b",  # SnapshotMarker kafka_*, PartitionState eligible_leader_replicas, last_known_elr
    10: "0cbf93c1318894d7ca8cb598075ea012731016a3a151ac9ffa0991694b34f7ec",  # Command action (CommandAction: Cordon, Uncordon)
    11: "1645dd290dd5e86778c84281cc7fc6c5b12325dc3b56a445222b77b7b38f0af0",  # LogDirState cordoned
    12: "b45504ddca72a3d0f4ad0249d84c357c2fa65a7fc4efea365ca2547a890b60d6",  # ReassignmentStep throttle_broker_rates, SetThrottle broker_rates/throttle_sequence (BrokerRate), CanarySample
}
"""sha256 over (file name, content) of each released `history/v<N>`: released sets never change."""

VERSION_AND_TYPE = [
    (version, name) for version in known_versions() for name in schemas.MESSAGE_TYPES
    if name in schema_names(version)
]


def digest_of(version: int) -> str:
    digest = hashlib.sha256()
    for path in sorted(schema_directory(version).glob("*.avsc")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def test_released_versions_are_frozen() -> None:
    assert set(known_versions()) == set(FROZEN_DIGESTS), "freeze every released version here"
    for version, expected in FROZEN_DIGESTS.items():
        assert digest_of(version) == expected, (
            f"schemas/history/v{version} changed; released schemas are frozen: "
            "add a new version directory instead"
        )


def test_the_current_set_is_the_newest_released_version() -> None:
    newest = max(known_versions())
    assert schemas.CURRENT_SCHEMA_VERSION == newest
    assert schema_names() == schema_names(newest)
    for name in schema_names():
        current = json.loads((schema_directory() / f"{name}.avsc").read_text())
        frozen = json.loads((schema_directory(newest) / f"{name}.avsc").read_text())
        assert current == frozen, f"{name}.avsc differs from history/v{newest}: bump the version"


@pytest.mark.parametrize(("version", "name"), VERSION_AND_TYPE)
def test_current_schema_reads_data_written_with_every_released_version(version: int, name: str) -> None:
    old_schema = compute_self_contained_schema(name, version)
    current_fields = [field["name"] for field in compute_self_contained_schema(name)["fields"]]
    for record in compute_example_records(old_schema):
        data = schemas.encode(name, record, version=version)
        decoded = schemas.decode(name, data, writer_version=version)
        assert list(decoded) == current_fields
        for field, value in record.items():
            if field in decoded:
                assert_read_as_written(decoded[field], value)


def assert_read_as_written(decoded, written) -> None:
    """`decoded` equals `written`, but for fields a later version added to nested records (a
    union payload, say): those read as their defaults and are not compared."""
    if isinstance(written, dict) and isinstance(decoded, dict):
        assert set(written) <= set(decoded)
        for key, value in written.items():
            assert_read_as_written(decoded[key], value)
    elif isinstance(written, (tuple, list)) and isinstance(decoded, (tuple, list)):
        assert len(decoded) == len(written)
        for one, other in zip(decoded, written):
            assert_read_as_written(one, other)
    else:
        assert decoded == written


@pytest.mark.parametrize(("version", "name"), VERSION_AND_TYPE)
def test_every_released_version_obeys_the_evolution_rule_against_the_current_one(
    version: int, name: str
) -> None:
    assert compute_version_problems(name, version) == []


# --- the checker itself: it must catch what fastavro would fail on ------------------------------


def fastavro_can_read(writer: dict, reader: dict, record: dict) -> bool:
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, fastavro.parse_schema(copy.deepcopy(writer)), record)
    buffer.seek(0)
    try:
        fastavro.schemaless_reader(
            buffer, fastavro.parse_schema(copy.deepcopy(writer)), fastavro.parse_schema(copy.deepcopy(reader))
        )
    except Exception:
        return False
    return True


@pytest.fixture
def partition_state() -> dict:
    return compute_self_contained_schema("PartitionState")


def field_index(schema: dict, name: str) -> int:
    return next(index for index, field in enumerate(schema["fields"]) if field["name"] == name)


def test_a_new_field_without_default_is_refused(partition_state: dict) -> None:
    changed = copy.deepcopy(partition_state)
    changed["fields"].append({"name": "preferred_rack", "type": "string"})
    assert compute_evolution_problems(partition_state, changed) == [
        "new cannot read old data: PartitionState.preferred_rack: "
        "field missing from the writer and has no default"
    ]
    old_record = compute_example_records(partition_state)[0]
    assert not fastavro_can_read(partition_state, changed, old_record)


def test_a_new_field_with_default_is_accepted_and_old_data_gets_the_default(partition_state: dict) -> None:
    changed = copy.deepcopy(partition_state)
    changed["fields"].append({"name": "preferred_rack", "type": ["null", "string"], "default": None})
    assert compute_evolution_problems(partition_state, changed) == []
    old_record = compute_example_records(partition_state)[0]
    assert fastavro_can_read(partition_state, changed, old_record)


def test_removing_a_field_that_had_no_default_is_refused(partition_state: dict) -> None:
    changed = copy.deepcopy(partition_state)
    del changed["fields"][field_index(changed, "isr")]
    problems = compute_evolution_problems(partition_state, changed)
    assert problems == [
        "old cannot read new data: PartitionState.isr: field missing from the writer and has no default"
    ]
    new_record = compute_example_records(changed)[0]
    assert not fastavro_can_read(changed, partition_state, new_record)


def test_narrowing_a_type_is_refused_and_widening_only_one_way(partition_state: dict) -> None:
    changed = copy.deepcopy(partition_state)
    changed["fields"][field_index(changed, "partition")]["type"] = "long"
    assert compute_read_problems(partition_state, changed) == []  # int widens to long
    assert compute_read_problems(changed, partition_state) == [
        "PartitionState.partition: writer long cannot be read as int"
    ]


def test_a_new_enum_symbol_needs_a_default_in_the_old_enum() -> None:
    alert = compute_self_contained_schema("Alert")
    with_page = copy.deepcopy(alert)
    with_page["fields"][field_index(alert, "severity")]["type"]["symbols"].append("PAGE")
    assert compute_evolution_problems(alert, with_page) == []  # AlertSeverity has a default
    without_default = copy.deepcopy(alert)
    del without_default["fields"][field_index(alert, "severity")]["type"]["default"]
    assert compute_read_problems(with_page, without_default) == [
        "Alert.severity: enum AlertSeverity lacks writer symbol(s) ['PAGE'] and has no default"
    ]


def test_a_new_command_kind_breaks_old_readers() -> None:
    command = compute_self_contained_schema("Command")
    changed = copy.deepcopy(command)
    changed["fields"][field_index(changed, "payload")]["type"].append(
        {"type": "record", "name": "Pause", "fields": [{"name": "seconds", "type": "int"}]}
    )
    assert compute_read_problems(command, changed) == []
    assert compute_read_problems(changed, command) == [
        "Command.payload|Pause: writer type Pause matches no reader union branch"
    ]


def test_a_nested_record_change_is_found(partition_state: dict) -> None:
    log_dir = compute_self_contained_schema("LogDirState")
    changed = copy.deepcopy(log_dir)
    replica = changed["fields"][field_index(changed, "replicas")]["type"]["items"]
    replica["fields"].append({"name": "leader_epoch", "type": "int"})
    assert compute_read_problems(log_dir, changed) == [
        "LogDirState.replicas[].leader_epoch: field missing from the writer and has no default"
    ]
