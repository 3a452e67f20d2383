"""Round trips of realistic records, and what the codec refuses to write or read."""

from __future__ import annotations

import copy

import pytest
from message_examples import REALISTIC_RECORDS

import schemas
from schemas.errors import DecodeError, InvalidInputError, ReassignerError, SchemaError


@pytest.mark.parametrize(
    ("name", "index"),
    [(name, index) for name, records in REALISTIC_RECORDS.items() for index in range(len(records))],
)
def test_realistic_record_round_trips(name: str, index: int) -> None:
    record = REALISTIC_RECORDS[name][index]
    assert schemas.decode(name, schemas.encode(name, record)) == record


def test_realistic_records_cover_every_message_type_and_kind() -> None:
    assert sorted(REALISTIC_RECORDS) == sorted(schemas.MESSAGE_TYPES)
    assert {r["payload"][0] for r in REALISTIC_RECORDS["Request"]} == set(schemas.REQUEST_KINDS)
    assert {r["payload"][0] for r in REALISTIC_RECORDS["Command"]} == set(schemas.COMMAND_KINDS)


def test_missing_fields_with_defaults_are_filled_in() -> None:
    record = {
        "schema_version": 1, "event_time": 1, "id": "a", "key": "orders-0",
        "topic": "orders", "partition": 0, "replicas": [1, 2], "isr": [1, 2],
    }
    decoded = schemas.decode("PartitionState", schemas.encode("PartitionState", record))
    assert decoded["leader"] is None and decoded["adding"] == [] and decoded["leader_epoch"] == -1


def test_event_time_stays_integer_milliseconds() -> None:
    record = REALISTIC_RECORDS["SnapshotMarker"][1]
    decoded = schemas.decode("SnapshotMarker", schemas.encode("SnapshotMarker", record))
    assert isinstance(decoded["event_time"], int) and isinstance(decoded["ended_at"], int)


def test_payload_kind_is_explicit_even_when_fields_would_fit_another_kind() -> None:
    command = copy.deepcopy(REALISTIC_RECORDS["Command"][2])  # ElectLeader: a superset of Cancel's fields
    decoded = schemas.decode("Command", schemas.encode("Command", command))
    assert decoded["payload"][0] == "ElectLeader"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"partition": "7"}, "PartitionState.partition: expected int, found str"),
        ({"partition": 2**40}, "does not fit in an Avro int"),
        ({"partition": 1.5}, "expected int, found float"),
        ({"leader": True}, "PartitionState.leader"),
        ({"replica": [1]}, "unknown field(s) ['replica']"),
        ({"isr": None}, "PartitionState.isr: expected a list"),
    ],
)
def test_a_record_that_does_not_fit_is_a_schema_error_naming_the_field(change: dict, message: str) -> None:
    record = {**REALISTIC_RECORDS["PartitionState"][0], **change}
    with pytest.raises(SchemaError) as raised:
        schemas.encode("PartitionState", record)
    assert message in str(raised.value)


def test_a_missing_required_field_is_a_schema_error() -> None:
    record = dict(REALISTIC_RECORDS["Command"][0])
    del record["reassignment_id"]  # nullable but without default: must be said explicitly
    with pytest.raises(SchemaError, match="Command.reassignment_id: missing"):
        schemas.encode("Command", record)


def test_a_payload_without_its_kind_is_a_schema_error() -> None:
    record = {**REALISTIC_RECORDS["Command"][1], "payload": {"topic": "orders", "partition": 7}}
    with pytest.raises(SchemaError, match=r"expected a \(kind, fields\) tuple"):
        schemas.encode("Command", record)
    record["payload"] = ("Reboot", {})
    with pytest.raises(SchemaError, match="not one of the union's kinds"):
        schemas.encode("Command", record)


GOOD = schemas.encode("PartitionState", REALISTIC_RECORDS["PartitionState"][0])


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00",
        b"garbage, not avro at all",
        b"\xff" * 64,
        GOOD[:-1],
        GOOD + b"\x00",
        b'{"topic": "orders", "partition": 7}',
        schemas.encode("Alert", REALISTIC_RECORDS["Alert"][0]),
    ],
    ids=["empty", "one-byte", "text", "ff", "truncated", "trailing", "json", "other-type"],
)
def test_garbage_is_a_decode_error(data: bytes) -> None:
    with pytest.raises(DecodeError) as raised:
        schemas.decode("PartitionState", data)
    assert raised.value.message.startswith("PartitionState:")
    assert isinstance(raised.value, InvalidInputError) and isinstance(raised.value, ReassignerError)


def test_an_out_of_range_union_branch_is_a_decode_error() -> None:
    data = bytearray(schemas.encode("Command", REALISTIC_RECORDS["Command"][1]))
    # The payload, CancelReassignment: branch index, then "orders" (len + 6 bytes), then 7; then
    # the action, null (branch 0: one byte)
    branch_index_at = len(data) - len(b"\x0corders\x0e") - 1 - 1
    assert data[branch_index_at] == 0x02  # zig-zag 1 = CancelReassignment
    data[branch_index_at] = 0x7E  # branch 63 of 6
    with pytest.raises(DecodeError):
        schemas.decode("Command", bytes(data))


def test_an_out_of_range_enum_symbol_is_a_decode_error() -> None:
    data = bytearray(schemas.encode("SnapshotMarker", REALISTIC_RECORDS["SnapshotMarker"][0]))
    # phase follows the snapshot id "snap-0007" (length byte 0x12 + 9 bytes)
    phase_at = data.index(b"\x12snap-0007", data.index(b"snap-0007") + 9) + 10
    assert data[phase_at] == 0x00  # START
    data[phase_at] = 0x40  # symbol 32 of 3
    with pytest.raises(DecodeError):
        schemas.decode("SnapshotMarker", bytes(data))


def test_unknown_writer_version_is_a_decode_error() -> None:
    with pytest.raises(DecodeError, match="schema version 99"):
        schemas.decode("PartitionState", GOOD, writer_version=99)


def test_version_header_round_trips() -> None:
    headers = schemas.version_headers()
    assert headers == [("schema_version", str(schemas.CURRENT_SCHEMA_VERSION).encode())]
    assert schemas.writer_version_from_headers(headers) == schemas.CURRENT_SCHEMA_VERSION
    assert schemas.writer_version_from_headers({"schema_version": "1"}) == 1
    assert schemas.writer_version_from_headers([("other", b"x")]) is None
    assert schemas.writer_version_from_headers(None) is None
    with pytest.raises(DecodeError):
        schemas.writer_version_from_headers([("schema_version", b"v1")])


def test_key_convention() -> None:
    assert schemas.partition_key("payments.v2", 0) == "payments.v2-0"


def test_the_apache_avro_package_writes_and_reads_the_same_bytes() -> None:
    import datetime
    import io

    import avro.io
    import avro.schema

    record = REALISTIC_RECORDS["PartitionState"][0]
    schema = avro.schema.parse(schemas.schema_json("PartitionState"))
    as_avro = {
        **record,
        "event_time": datetime.datetime.fromtimestamp(record["event_time"] / 1000, datetime.timezone.utc),
    }
    buffer = io.BytesIO()
    avro.io.DatumWriter(schema).write(as_avro, avro.io.BinaryEncoder(buffer))
    assert buffer.getvalue() == schemas.encode("PartitionState", record)
    read = avro.io.DatumReader(schema).read(avro.io.BinaryDecoder(io.BytesIO(buffer.getvalue())))
    assert read == as_avro
