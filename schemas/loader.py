"""Loads the packaged `.avsc` files and inlines the references between them.

Layout: the current schema set is `schemas/*.avsc`, one file per named type, file name = record
name, namespace `io.reassigner.v1`. Every released set is frozen, byte for byte, under
`schemas/history/v<N>/*.avsc`; the current set is always equal to the newest frozen one (a test
holds this, so a change to a schema forces a new version directory).

A file may refer to a type of another file by name (`"items": "ThrottledPartition"`,
`"type": ["Reassign", "Cancel", ...]`). Avro readers other than fastavro (Spark's `from_avro`,
the Apache `avro` package) need one **self-contained** schema, so `compute_self_contained_schema`
walks a schema in document order and replaces the first reference to each named type with that
type's full definition, later references staying plain names (Avro defines a name once, at its
first occurrence, and references may only follow the definition).

Invariants:
- names are resolved to full names with the namespace in force at the reference, as Avro does;
- a name defined by no file and not earlier in the walk raises `SchemaError` naming the file;
- the result is a fresh structure: callers may modify it without touching the cache.

Files are read lazily, on first use, and cached per version; nothing is read at import.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

from schemas.errors import SchemaError

NAMESPACE = "io.reassigner.v1"
CURRENT_SCHEMA_VERSION = 12
"""Version of the schema set in `schemas/*.avsc`; written in every message and in its header."""

PRIMITIVE_TYPES = frozenset(
    {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
)
NAMED_KINDS = frozenset({"record", "enum", "fixed", "error"})

_VERSION_DIRECTORY = re.compile(r"^v(\d+)$")


def package_directory() -> Path:
    return Path(str(resources.files("schemas")))


def schema_directory(version: int | None = None) -> Path:
    """Directory of one schema set: the current one (None) or a frozen `history/v<N>`."""
    if version is None:
        return package_directory()
    directory = package_directory() / "history" / f"v{version}"
    if not directory.is_dir():
        raise SchemaError(
            f"schema version {version} is unknown; known versions are {list(known_versions())}"
        )
    return directory


@functools.cache
def known_versions() -> tuple[int, ...]:
    """Released schema set versions, oldest first (the frozen `history/v<N>` directories)."""
    history = package_directory() / "history"
    found = []
    for entry in history.iterdir() if history.is_dir() else ():
        match = _VERSION_DIRECTORY.match(entry.name)
        if match and entry.is_dir():
            found.append(int(match.group(1)))
    return tuple(sorted(found))


@functools.cache
def _load_definitions(version: int | None) -> dict[str, dict[str, Any]]:
    directory = schema_directory(version)
    definitions: dict[str, dict[str, Any]] = {}
    for path in sorted(directory.glob("*.avsc")):
        try:
            schema = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as error:
            raise SchemaError(f"{path}: not valid JSON: {error}") from error
        if not isinstance(schema, dict) or schema.get("type") not in NAMED_KINDS:
            raise SchemaError(f"{path}: expected one named Avro type (record, enum or fixed)")
        name = schema.get("name")
        if name != path.stem:
            raise SchemaError(f"{path}: the file defines {name!r}; the file name must be the type name")
        definitions[full_name(name, schema.get("namespace"))] = schema
    if not definitions:
        raise SchemaError(f"{directory}: holds no .avsc file")
    return definitions


def load_definitions(version: int | None = None) -> dict[str, dict[str, Any]]:
    """Every top-level type of one schema set, by full name, as written in its file (a copy)."""
    return copy.deepcopy(_load_definitions(version))


def schema_names(version: int | None = None) -> tuple[str, ...]:
    """Short names of the top-level types of one schema set (one per `.avsc` file), sorted."""
    return tuple(sorted(name.rsplit(".", 1)[-1] for name in _load_definitions(version)))


def full_name(name: str, namespace: str | None) -> str:
    if "." in name:
        return name
    return f"{namespace or NAMESPACE}.{name}"


def compute_self_contained_schema(name: str, version: int | None = None) -> dict[str, Any]:
    """The schema of type `name` with every referenced type defined inline, once."""
    definitions = _load_definitions(version)
    root_name = full_name(name, NAMESPACE)
    if root_name not in definitions:
        raise SchemaError(
            f"no schema named {name!r} in schema set {_describe(version)}; "
            f"known: {', '.join(schema_names(version))}"
        )
    defined: set[str] = set()
    return _inline(copy.deepcopy(definitions[root_name]), NAMESPACE, definitions, defined, root_name)


@functools.cache
def schema_json(name: str, version: int | None = None) -> str:
    """The self-contained schema of `name` as one JSON string (what Spark's `from_avro` takes)."""
    return json.dumps(compute_self_contained_schema(name, version), separators=(",", ":"))


def _inline(
    schema: Any,
    namespace: str,
    definitions: dict[str, dict[str, Any]],
    defined: set[str],
    where: str,
) -> Any:
    if isinstance(schema, str):
        if schema in PRIMITIVE_TYPES:
            return schema
        name = full_name(schema, namespace)
        if name in defined:
            return name
        if name not in definitions:
            raise SchemaError(f"{where}: refers to {schema!r}, which no schema file defines")
        return _inline(copy.deepcopy(definitions[name]), namespace, definitions, defined, name)
    if isinstance(schema, list):
        return [_inline(branch, namespace, definitions, defined, where) for branch in schema]
    if not isinstance(schema, dict):
        raise SchemaError(f"{where}: unexpected schema element {schema!r}")
    kind = schema.get("type")
    if kind in NAMED_KINDS:
        own_namespace = schema.get("namespace") or (
            schema["name"].rsplit(".", 1)[0] if "." in schema["name"] else namespace
        )
        name = full_name(schema["name"], own_namespace)
        if name in defined:
            raise SchemaError(f"{where}: type {name} is defined twice")
        defined.add(name)
        schema["namespace"] = own_namespace
        if kind in ("record", "error"):
            for field in schema.get("fields", []):
                field["type"] = _inline(field["type"], own_namespace, definitions, defined, name)
        return schema
    if kind == "array":
        schema["items"] = _inline(schema["items"], namespace, definitions, defined, where)
        return schema
    if kind == "map":
        schema["values"] = _inline(schema["values"], namespace, definitions, defined, where)
        return schema
    if isinstance(kind, (str, list, dict)):
        # {"type": "long", "logicalType": ...} or a nested {"type": {...}} wrapper
        schema["type"] = _inline(kind, namespace, definitions, defined, where)
        return schema
    raise SchemaError(f"{where}: unexpected schema element {schema!r}")


def _describe(version: int | None) -> str:
    return "current" if version is None else f"v{version}"
