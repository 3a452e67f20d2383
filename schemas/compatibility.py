"""The schema evolution rule, checked without data: can a reader schema read a writer's bytes?

RULE (Avro schema resolution, restricted to what the product relies on). A reader schema R can
read data written with a writer schema W when, walking both from the top:
- records match by full name (or a reader alias); every reader field missing from the writer
  has a default; writer fields missing from the reader are skipped (always fine);
- enums match by name; every writer symbol is a reader symbol, or the reader has a default symbol;
- arrays and maps resolve item/value schemas; fixed types have the same size;
- primitives are equal or promotable (int → long/float/double, long → float/double,
  float → double, string ↔ bytes);
- a writer union resolves when each of its branches resolves against the reader (a union or a
  single schema); a writer non-union resolves against some branch of a reader union.

Released versions are held to it both ways (`compute_evolution_problems`): the current schema
must read every older version's data (backward: new fields need defaults) and every older schema
must read the current version's data (forward: a removed field must have had a default, a new
enum symbol needs the old enum's default), so a pipeline and a watcher of different versions
can run side by side during an upgrade.

Schemas are the self-contained JSON structures of `schemas.loader` (named types inlined once).
These functions are pure: they return a list of problems, empty when compatible.
"""

from __future__ import annotations

from typing import Any

from schemas.loader import NAMESPACE, PRIMITIVE_TYPES, compute_self_contained_schema

PROMOTIONS: dict[str, frozenset[str]] = {
    "int": frozenset({"long", "float", "double"}),
    "long": frozenset({"float", "double"}),
    "float": frozenset({"double"}),
    "string": frozenset({"bytes"}),
    "bytes": frozenset({"string"}),
}


def compute_read_problems(writer: Any, reader: Any) -> list[str]:
    """Why `reader` cannot read data written with `writer` (empty list = it can)."""
    problems: list[str] = []
    _Resolver(writer, reader, problems).resolve(writer, reader, _root_name(reader))
    return problems


def compute_evolution_problems(old: Any, new: Any) -> list[str]:
    """Problems of replacing schema `old` by `new`, both ways (see the module rule)."""
    backward = [f"new cannot read old data: {problem}" for problem in compute_read_problems(old, new)]
    forward = [f"old cannot read new data: {problem}" for problem in compute_read_problems(new, old)]
    return backward + forward


def compute_version_problems(name: str, old_version: int, new_version: int | None = None) -> list[str]:
    """`compute_evolution_problems` for one type between two released (or the current) sets."""
    return compute_evolution_problems(
        compute_self_contained_schema(name, old_version),
        compute_self_contained_schema(name, new_version),
    )


def _root_name(schema: Any) -> str:
    if isinstance(schema, dict) and "name" in schema:
        return str(schema["name"])
    return "<root>"


class _Resolver:
    """Walks a writer and a reader schema together, collecting named types as they appear."""

    def __init__(self, writer: Any, reader: Any, problems: list[str]) -> None:
        self.writer_names: dict[str, dict[str, Any]] = {}
        self.reader_names: dict[str, dict[str, Any]] = {}
        _collect_names(writer, NAMESPACE, self.writer_names)
        _collect_names(reader, NAMESPACE, self.reader_names)
        self.problems = problems
        self.seen: set[tuple[str, str]] = set()

    def resolve(self, writer: Any, reader: Any, path: str) -> None:
        self._check(writer, reader, path, self.problems)

    def _tries(self, writer: Any, reader: Any, path: str) -> bool:
        """Whether `writer` resolves against `reader`, without recording anything."""
        seen = set(self.seen)
        problems: list[str] = []
        self._check(writer, reader, path, problems)
        self.seen = seen
        return not problems

    def _check(self, writer: Any, reader: Any, path: str, problems: list[str]) -> bool:
        writer = self._deref(writer, self.writer_names)
        reader = self._deref(reader, self.reader_names)
        if isinstance(writer, list):
            for branch in writer:
                self._check(branch, reader, f"{path}|{_describe(branch)}", problems)
            return not problems
        if isinstance(reader, list):
            for branch in reader:
                if self._tries(writer, branch, path):
                    return True
            problems.append(f"{path}: writer type {_describe(writer)} matches no reader union branch")
            return False
        writer_kind, reader_kind = _kind(writer), _kind(reader)
        if writer_kind in PRIMITIVE_TYPES or reader_kind in PRIMITIVE_TYPES:
            if writer_kind == reader_kind or reader_kind in PROMOTIONS.get(writer_kind, ()):
                return True
            problems.append(f"{path}: writer {writer_kind} cannot be read as {reader_kind}")
            return False
        if writer_kind != reader_kind:
            problems.append(f"{path}: writer {writer_kind} cannot be read as {reader_kind}")
            return False
        if writer_kind == "array":
            return self._check(writer["items"], reader["items"], f"{path}[]", problems)
        if writer_kind == "map":
            return self._check(writer["values"], reader["values"], f"{path}{{}}", problems)
        if not _same_name(writer, reader):
            problems.append(f"{path}: writer {writer['name']} cannot be read as {reader['name']}")
            return False
        if writer_kind == "fixed":
            if writer["size"] != reader["size"]:
                problems.append(f"{path}: fixed size {writer['size']} read as {reader['size']}")
            return not problems
        if writer_kind == "enum":
            missing = [symbol for symbol in writer["symbols"] if symbol not in reader["symbols"]]
            if missing and "default" not in reader:
                problems.append(
                    f"{path}: enum {reader['name']} lacks writer symbol(s) {missing} and has no default"
                )
            return not problems
        pair = (writer["name"], reader["name"])
        if pair in self.seen:  # recursive types: assume the pair resolves while checking it
            return True
        self.seen.add(pair)
        writer_fields = {field["name"]: field for field in writer["fields"]}
        for field in reader["fields"]:
            names = [field["name"], *field.get("aliases", [])]
            match = next((writer_fields[name] for name in names if name in writer_fields), None)
            field_path = f"{path}.{field['name']}"
            if match is None:
                if "default" not in field:
                    problems.append(f"{field_path}: field missing from the writer and has no default")
                continue
            self._check(match["type"], field["type"], field_path, problems)
        return not problems

    def _deref(self, schema: Any, names: dict[str, dict[str, Any]]) -> Any:
        if isinstance(schema, str) and schema not in PRIMITIVE_TYPES:
            full = schema if "." in schema else f"{NAMESPACE}.{schema}"
            return names.get(full, schema)
        if isinstance(schema, dict) and isinstance(schema.get("type"), (list, dict)):
            return self._deref(schema["type"], names)
        if isinstance(schema, dict) and schema.get("type") in PRIMITIVE_TYPES:
            return schema["type"]  # {"type": "long", "logicalType": ...} reads as its base type
        return schema


def _collect_names(schema: Any, namespace: str, names: dict[str, dict[str, Any]]) -> None:
    if isinstance(schema, list):
        for branch in schema:
            _collect_names(branch, namespace, names)
        return
    if not isinstance(schema, dict):
        return
    kind = schema.get("type")
    if kind in ("record", "error", "enum", "fixed"):
        own_namespace = schema.get("namespace", namespace)
        full = schema["name"] if "." in schema["name"] else f"{own_namespace}.{schema['name']}"
        names.setdefault(full, schema)
        for field in schema.get("fields", []):
            _collect_names(field["type"], own_namespace, names)
    elif kind == "array":
        _collect_names(schema["items"], namespace, names)
    elif kind == "map":
        _collect_names(schema["values"], namespace, names)
    elif isinstance(kind, (list, dict)):
        _collect_names(kind, namespace, names)


def _kind(schema: Any) -> str:
    if isinstance(schema, str):
        return schema
    return str(schema.get("type"))


def _same_name(writer: dict[str, Any], reader: dict[str, Any]) -> bool:
    def short(name: str) -> str:
        return name.rsplit(".", 1)[-1]

    return short(writer["name"]) == short(reader["name"]) or short(writer["name"]) in {
        short(alias) for alias in reader.get("aliases", [])
    }


def _describe(schema: Any) -> str:
    if isinstance(schema, dict):
        return str(schema.get("name") or schema.get("type"))
    return str(schema)
