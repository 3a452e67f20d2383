"""Avro encoding and decoding of every message the product puts on Kafka.

WIRE FORMAT (the decision, and why):
    The Kafka message value is **plain schemaless Avro binary** of the topic's record — no magic
    byte, no fingerprint, no schema-registry id. The writer's schema set version travels in the
    Kafka message **header** `schema_version` (ASCII decimal, e.g. b"1"), and again inside the
    record as the `schema_version` field.

    Reason: the pipeline reads these topics with Spark's `from_avro`, which decodes plain Avro
    binary only; a header inside the value (Confluent's magic byte + id, or a fingerprint) would
    make every value unreadable to it without a byte-slicing step that Spark cannot do per
    writer. Kafka headers are exposed by Spark's Kafka source (`includeHeaders=true`), so the
    version stays available to both readers:
    - Python: `decode(name, value, writer_version_from_headers(headers))`;
    - Spark: `from_avro(value, schema_json(name, version=v), {"avroSchema": schema_json(name)})`
      on the rows whose header says `v` — the first schema is the writer's, the `avroSchema`
      option is the reader's (current) one, and Avro's schema resolution does the rest.
    A missing header means "current version" (our own writers always set it).

    Spark notes: pass `{"enableStableIdentifiersForUnionType": "true"}` so that a `payload` union
    reads as a struct with one field per kind, `member_<Kind>` (e.g. `member_ElectLeader`), only
    the written one non-null; with `{"mode": "PERMISSIVE"}` an undecodable value reads as a
    record whose fields are all null, so `record.id IS NULL` selects the dead letters (Spark does
    not notice trailing bytes; the Python decoder does).

TOPICS: each topic carries exactly one record type, so that one schema describes a topic for
`from_avro`. Topics that carry several kinds (requests, commands) use an envelope record whose
`payload` field is a union of the kinds; the topic-state and snapshot-marker events get their own
topics rather than an envelope on an existing topic, which keeps the event topics
single-typed:

    reassigner.broker-membership  BrokerMembership   key: broker id
    reassigner.isr-changes        PartitionState     key: <topic>-<partition>
    reassigner.disk-failures      LogDirState        key: broker id
    reassigner.topic-state        TopicState         key: topic
    reassigner.snapshots          SnapshotMarker     key: snapshot id
    reassigner.canary-samples     CanarySample       key: broker id (schema version 12)
    reassigner.requests           Request            key: request id (payload: Reassign | Cancel |
                                                      Decommission | Rebalance | Approve | SetConfig | Tick)
    reassigner.commands           Command            key: <topic>-<partition>, broker id for
                                                      throttles (payload: ReassignmentStep |
                                                      CancelReassignment | ElectLeader | LogDirMove |
                                                      SetThrottle | ClearThrottle)
    reassigner.command-results    CommandResult      key: the command's key
    reassigner.alerts             Alert              key: subject
    reassigner.dead-letter        DeadLetter         key: <source topic>-<partition>-<offset>

PYTHON REPRESENTATION: a record is a plain dict. Two deliberate departures from fastavro's
defaults, both handled here only:
- `timestamp-millis` fields are plain `int` milliseconds on both sides (the logical type stays
  in the schema JSON, so Spark still sees a TimestampType; the bytes are the same long);
- a union of record kinds (`payload`) is a tuple `(kind, fields)` with the short record name,
  e.g. `("ElectLeader", {"topic": "t", "partition": 0, "preferred_leader": 3})`. Matching a dict
  to a branch by its fields would be ambiguous (a CancelReassignment's fields are a subset of an
  ElectLeader's), so the kind is always explicit.

Encoding is strict: an unknown field, a missing field without default or a wrong type raises
`SchemaError` naming the schema. Decoding anything that is not exactly one record of the
writer's schema (bad union or enum index, truncated, trailing bytes, invalid UTF-8) raises
`DecodeError`, so that the pipeline can dead-letter it. Parsed schemas are cached per
(name, version); schema files are read on first use.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Iterable, Mapping
from typing import Any

import fastavro
from fastavro.validation import validate as fastavro_validate

from schemas.errors import DecodeError, SchemaError
from schemas.loader import (
    CURRENT_SCHEMA_VERSION,
    NAMED_KINDS,
    NAMESPACE,
    compute_self_contained_schema,
    known_versions,
    schema_json,
)

TOPICS: dict[str, str] = {
    "broker-membership": "BrokerMembership",
    "isr-changes": "PartitionState",
    "disk-failures": "LogDirState",
    "topic-state": "TopicState",
    "snapshots": "SnapshotMarker",
    "canary-samples": "CanarySample",
    "requests": "Request",
    "commands": "Command",
    "command-results": "CommandResult",
    "alerts": "Alert",
    "dead-letter": "DeadLetter",
}
"""Topic suffix → record name; the topic is `<prefix>.<suffix>` (prefix `reassigner` by default)."""

HEADER_SCHEMA_VERSION = "schema_version"
"""Kafka header holding the writer's schema set version as ASCII decimal."""

__all__ = [
    "HEADER_SCHEMA_VERSION",
    "TOPICS",
    "decode",
    "encode",
    "partition_key",
    "schema_for_topic",
    "schema_json",
    "topic_name",
    "version_headers",
    "writer_version_from_headers",
]


def topic_name(suffix: str, prefix: str = "reassigner") -> str:
    if suffix not in TOPICS:
        raise SchemaError(f"unknown topic suffix {suffix!r}; expected one of {sorted(TOPICS)}")
    return f"{prefix}.{suffix}"


def schema_for_topic(topic: str) -> str:
    """Record name carried by a full topic name such as `reassigner.isr-changes` (any prefix)."""
    suffix = topic.rsplit(".", 1)[-1]
    if suffix not in TOPICS:
        raise SchemaError(f"topic {topic!r} carries no known record; known suffixes {sorted(TOPICS)}")
    return TOPICS[suffix]


def partition_key(topic: str, partition: int) -> str:
    """The key convention for partition-scoped messages: `<topic>-<partition>`."""
    return f"{topic}-{partition}"


def version_headers(version: int = CURRENT_SCHEMA_VERSION) -> list[tuple[str, bytes]]:
    """Kafka headers to send with a value encoded by this codec."""
    return [(HEADER_SCHEMA_VERSION, str(version).encode("ascii"))]


def writer_version_from_headers(
    headers: Iterable[tuple[str, bytes | str | None]] | Mapping[str, bytes | str | None] | None,
) -> int | None:
    """The writer version named by the `schema_version` header; None when absent."""
    if headers is None:
        return None
    items = headers.items() if isinstance(headers, Mapping) else headers
    found: int | None = None
    for name, value in items:
        if name != HEADER_SCHEMA_VERSION or value is None:
            continue
        text = value.decode("ascii", "replace") if isinstance(value, bytes) else str(value)
        if not text.isdigit():
            raise DecodeError(f"header {HEADER_SCHEMA_VERSION}={text!r} is not a version number")
        found = int(text)  # the last one wins, as Kafka clients read repeated headers
    return found


def encode(
    schema_name: str,
    record: Mapping[str, Any],
    *,
    validate: bool = True,
    version: int | None = None,
) -> bytes:
    """Plain schemaless Avro binary of `record` with the current schema of `schema_name`
    (or of the released schema set `version`, to produce old data in tests and tools).

    `validate=False` skips the type and range check (about half the cost) for a trusted hot
    path; fastavro alone would silently truncate 1.5 to 1 or write 2**40 as an Avro int, which
    Java readers then reject.
    """
    codec = _codec(schema_name, None if version == CURRENT_SCHEMA_VERSION else version)
    datum = _tag_unions(record, codec, schema_name) if codec.tagged_fields else record
    if validate and not fastavro_validate(datum, codec.fastavro_schema, raise_errors=False):
        raise SchemaError(_explain_encode_failure(schema_name, codec, datum, None))
    buffer = io.BytesIO()
    try:
        fastavro.schemaless_writer(
            buffer, codec.fastavro_schema, datum, strict_allow_default=True
        )
    except Exception as error:  # fastavro raises ValueError, TypeError, KeyError, ...
        raise SchemaError(_explain_encode_failure(schema_name, codec, datum, error)) from error
    return buffer.getvalue()


def decode(schema_name: str, data: bytes, writer_version: int | None = None) -> dict[str, Any]:
    """The record in `data`, written with schema set `writer_version` (None = current).

    The result always has the shape of the current schema: fields added since the writer's
    version take their defaults.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise DecodeError(f"{schema_name}: expected bytes, got {type(data).__name__}")
    reader = _codec(schema_name, None)
    if writer_version is None or writer_version == CURRENT_SCHEMA_VERSION:
        writer, reader_schema = reader, None
    else:
        if writer_version not in known_versions():
            raise DecodeError(
                f"{schema_name}: written with schema version {writer_version}, which this "
                f"reader (version {CURRENT_SCHEMA_VERSION}) does not know; known: {list(known_versions())}"
            )
        writer, reader_schema = _codec(schema_name, writer_version), reader.fastavro_schema
    stream = io.BytesIO(data)
    try:
        record = fastavro.schemaless_reader(
            stream,
            writer.fastavro_schema,
            reader_schema,
            return_record_name=True,
            return_record_name_override=True,
        )
    except Exception as error:  # struct.error, EOFError, IndexError, UnicodeDecodeError, ...
        raise DecodeError(
            f"{schema_name}: {len(data)} bytes are not a record of schema version "
            f"{writer_version or CURRENT_SCHEMA_VERSION}: {type(error).__name__}: {error}"
        ) from error
    leftover = len(data) - stream.tell()
    if leftover:
        raise DecodeError(
            f"{schema_name}: {leftover} trailing bytes after a complete record of "
            f"{stream.tell()} bytes; the message is not a single {schema_name}"
        )
    if not isinstance(record, dict):
        raise DecodeError(f"{schema_name}: decoded to {type(record).__name__}, not a record")
    for field in reader.tagged_fields:
        kind, fields = record[field]
        record[field] = (kind.rsplit(".", 1)[-1], fields)
    return record


# --- parsed schemas ------------------------------------------------------------------------------


class _Codec:
    """One parsed schema: the fastavro form and the top-level fields that are record unions."""

    __slots__ = ("fastavro_schema", "tagged_fields", "kinds")

    def __init__(self, schema: dict[str, Any]) -> None:
        self.tagged_fields: tuple[str, ...] = tuple(
            field["name"]
            for field in schema.get("fields", [])
            if isinstance(field["type"], list)
            and sum(_is_named(branch) for branch in field["type"]) > 1
        )
        self.kinds: dict[str, frozenset[str]] = {
            field["name"]: frozenset(
                branch["name"] for branch in field["type"] if _is_named(branch)
            )
            for field in schema.get("fields", [])
            if field["name"] in self.tagged_fields
        }
        self.fastavro_schema = fastavro.parse_schema(without_logical_types(schema))


@functools.cache
def _codec(schema_name: str, version: int | None) -> _Codec:
    return _Codec(compute_self_contained_schema(schema_name, version))


def _is_named(branch: Any) -> bool:
    return isinstance(branch, dict) and branch.get("type") in NAMED_KINDS


def without_logical_types(schema: Any) -> Any:
    """The same schema with `timestamp-millis` (and other logical types) read as plain numbers."""
    if isinstance(schema, list):
        return [without_logical_types(branch) for branch in schema]
    if not isinstance(schema, dict):
        return schema
    stripped = {key: without_logical_types(value) for key, value in schema.items()}
    if "logicalType" in stripped and isinstance(stripped.get("type"), str):
        return stripped["type"]
    return stripped


def _tag_unions(record: Mapping[str, Any], codec: _Codec, schema_name: str) -> dict[str, Any]:
    datum = dict(record)
    for field in codec.tagged_fields:
        value = datum.get(field)
        if not (isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str)):
            kinds = sorted(codec.kinds[field])
            raise SchemaError(
                f"{schema_name}.{field}: expected a (kind, fields) tuple with kind one of "
                f"{[kind.rsplit('.', 1)[-1] for kind in kinds]}, found {type(value).__name__}"
            )
        kind, fields_of_kind = value
        datum[field] = (kind if "." in kind else f"{NAMESPACE}.{kind}", fields_of_kind)
    return datum


def _explain_encode_failure(
    schema_name: str, codec: _Codec, datum: Mapping[str, Any], error: Exception | None
) -> str:
    """A short message naming the first field that does not fit (fastavro's quote whole schemas)."""
    problem = _find_problem(datum, codec.fastavro_schema, schema_name, {})
    if problem is None:
        problem = f"{type(error).__name__}: {str(error)[:200]}" if error else "fastavro rejects it"
    return f"{schema_name}: record does not fit the schema: {problem}"


_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "null": (type(None),),
    "boolean": (bool,),
    "int": (int,),
    "long": (int,),
    "float": (int, float),
    "double": (int, float),
    "bytes": (bytes, bytearray),
    "string": (str,),
}
_INT_RANGES = {"int": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}


def _find_problem(datum: Any, schema: Any, path: str, named: dict[str, Any]) -> str | None:
    if isinstance(schema, str):
        if schema in named:
            return _find_problem(datum, named[schema], path, named)
        expected = _PYTHON_TYPES.get(schema)
        if expected is None:
            return None
        if not isinstance(datum, expected) or (schema not in ("boolean",) and isinstance(datum, bool)):
            return f"{path}: expected {schema}, found {type(datum).__name__} {datum!r:.60}"
        if schema in _INT_RANGES and not _INT_RANGES[schema][0] <= datum <= _INT_RANGES[schema][1]:
            return f"{path}: {datum} does not fit in an Avro {schema}"
        return None
    if isinstance(schema, list):
        if isinstance(datum, tuple) and len(datum) == 2:
            kind, datum = datum
            for branch in schema:
                if isinstance(branch, dict) and branch.get("name") == kind:
                    return _find_problem(datum, branch, f"{path}<{kind.rsplit('.', 1)[-1]}>", named)
            return f"{path}: {kind!r} is not one of the union's kinds"
        problems = [_find_problem(datum, branch, path, named) for branch in schema]
        if any(problem is None for problem in problems):
            return None
        return f"{path}: {datum!r:.60} fits no branch of the union ({'; '.join(problems)})"
    kind = schema.get("type")
    if kind in ("record", "error"):
        named[schema["name"]] = schema
        if not isinstance(datum, Mapping):
            return f"{path}: expected a record (dict), found {type(datum).__name__}"
        field_names = {field["name"] for field in schema["fields"]}
        unknown = sorted(set(datum) - field_names)
        if unknown:
            return f"{path}: unknown field(s) {unknown}; the record has {sorted(field_names)}"
        for field in schema["fields"]:
            if field["name"] not in datum:
                if "default" in field:
                    continue
                return f"{path}.{field['name']}: missing, and the field has no default"
            problem = _find_problem(datum[field["name"]], field["type"], f"{path}.{field['name']}", named)
            if problem:
                return problem
        return None
    if kind == "enum":
        named[schema["name"]] = schema
        if datum not in schema["symbols"]:
            return f"{path}: {datum!r} is not one of {schema['symbols']}"
        return None
    if kind == "array":
        if not isinstance(datum, (list, tuple)):
            return f"{path}: expected a list, found {type(datum).__name__}"
        for index, item in enumerate(datum):
            problem = _find_problem(item, schema["items"], f"{path}[{index}]", named)
            if problem:
                return problem
        return None
    if kind == "map":
        if not isinstance(datum, Mapping):
            return f"{path}: expected a dict, found {type(datum).__name__}"
        for key, value in datum.items():
            if not isinstance(key, str):
                return f"{path}: map keys must be str, found {key!r}"
            problem = _find_problem(value, schema["values"], f"{path}[{key!r}]", named)
            if problem:
                return problem
        return None
    if kind is not None:
        return _find_problem(datum, kind, path, named)
    return None
