"""Table topic configs (`lakelog.iceberg.*`): parsing, validation and schema evolution
checks. Pure and light (json, jsonschema, fastavro: no pyarrow, no pyiceberg), because the
broker validates them at CreateTopics, AlterConfigs and IncrementalAlterConfigs.

A schema becomes a flat list of `Column`s (the top-level properties of a JSON Schema
object, the fields of an Avro record). Scalars keep their type; nested values (objects,
arrays, maps, Avro records) become a `json` column holding the value as JSON text, so a
table stays queryable by any engine without a struct type per nesting.

Schema evolution is Iceberg's: a new field must be optional (older records lack it), a
type may only widen (int to long, float to double), a required field may become optional
but not the reverse, and a required field may not be removed (an optional one may: its
column stays, null from then on). Anything else is refused at config time, so the tables
job never meets a schema it cannot apply.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MODE = "lakelog.iceberg.mode"
VALUE_SCHEMA = "lakelog.iceberg.value.schema"
VALUE_SCHEMA_TYPE = "lakelog.iceberg.value.schema.type"
KEY_SCHEMA = "lakelog.iceberg.key.schema"
KEY_SCHEMA_TYPE = "lakelog.iceberg.key.schema.type"
PARTITION = "lakelog.iceberg.partition"

MODES = ("disabled", "key_value", "value_schema")
SCHEMA_TYPES = ("json", "avro")
PARTITIONS = ("day(timestamp)", "hour(timestamp)", "month(timestamp)", "none")
DEFAULTS = {
    MODE: "disabled",
    VALUE_SCHEMA: "",
    VALUE_SCHEMA_TYPE: "json",
    KEY_SCHEMA: "",
    KEY_SCHEMA_TYPE: "json",
    PARTITION: "day(timestamp)",
}
NAMES = frozenset(DEFAULTS)

TYPES = ("boolean", "int", "long", "float", "double", "string", "binary", "timestamp", "json")
"""Column types: Iceberg's primitives, plus `json` (a nested value kept as JSON text)."""
WIDENINGS = {("int", "long"), ("float", "double")}
META_COLUMNS = ("_partition", "_offset", "_timestamp")
"""value_schema mode's record columns; key schema fields are `_key_<name>`."""


class TableConfigError(ValueError):
    """A table topic config is refused; the message is one line, naming the config."""


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: str
    required: bool


@dataclass(frozen=True, slots=True)
class SchemaSpec:
    """A parsed key or value schema: its kind, its text, and its columns."""

    kind: str
    text: str
    columns: tuple[Column, ...]


@dataclass(frozen=True, slots=True)
class TableSpec:
    """A topic's table settings, parsed and checked."""

    mode: str
    partition: str
    value: SchemaSpec | None
    key: SchemaSpec | None

    @property
    def enabled(self) -> bool:
        return self.mode != "disabled"


# ------------------------------------------------------------------ parsing


def table_spec(configs: Mapping[str, str]) -> TableSpec:
    """The topic's table settings from its configs (defaults for unset ones); raises
    TableConfigError with one line on anything invalid."""
    merged = {**DEFAULTS, **{k: v for k, v in configs.items() if k in NAMES}}
    mode = merged[MODE].strip()
    if mode not in MODES:
        raise TableConfigError(f"{MODE}: must be one of {list(MODES)}")
    partition = merged[PARTITION].replace(" ", "")
    if partition not in PARTITIONS:
        raise TableConfigError(f"{PARTITION}: must be one of {list(PARTITIONS)}")
    for name in (VALUE_SCHEMA_TYPE, KEY_SCHEMA_TYPE):
        if merged[name].strip() not in SCHEMA_TYPES:
            raise TableConfigError(f"{name}: must be one of {list(SCHEMA_TYPES)}")
    value = _schema(VALUE_SCHEMA, merged[VALUE_SCHEMA], merged[VALUE_SCHEMA_TYPE].strip())
    key = _schema(KEY_SCHEMA, merged[KEY_SCHEMA], merged[KEY_SCHEMA_TYPE].strip())
    if mode == "value_schema" and value is None:
        raise TableConfigError(f"{MODE}: value_schema needs {VALUE_SCHEMA}")
    if mode == "value_schema":
        _check_names(value, key)
    return TableSpec(mode, partition, value, key)


def _schema(config: str, text: str, kind: str) -> SchemaSpec | None:
    if not text.strip():
        return None
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise TableConfigError(f"{config}: not JSON ({_line(exc)})") from None
    try:
        columns = _json_columns(doc) if kind == "json" else _avro_columns(doc)
    except TableConfigError as exc:
        raise TableConfigError(f"{config}: {exc}") from None
    if not columns:
        raise TableConfigError(f"{config}: the schema has no fields")
    return SchemaSpec(kind, text, tuple(columns))


def _line(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _check_names(value: SchemaSpec | None, key: SchemaSpec | None) -> None:
    names = [c.name for c in value.columns] if value else []
    names += [f"_key_{c.name}" for c in key.columns] if key else []
    seen: set[str] = set()
    for name in names:
        if name in META_COLUMNS or name in seen:
            raise TableConfigError(f"{VALUE_SCHEMA}: field {name!r} clashes with another column")
        seen.add(name)


# ------------------------------------------------------------------ JSON Schema

_JSON_TYPES = {
    "string": "string",
    "integer": "long",
    "number": "double",
    "boolean": "boolean",
    "object": "json",
    "array": "json",
}


def _json_columns(doc: Any) -> list[Column]:
    from jsonschema import SchemaError
    from jsonschema.validators import validator_for

    if not isinstance(doc, dict):
        raise TableConfigError("a JSON Schema must be an object")
    try:
        validator_for(doc).check_schema(doc)
    except SchemaError as exc:
        raise TableConfigError(f"not a valid JSON Schema ({exc.message})") from None
    if doc.get("type") != "object" or not isinstance(doc.get("properties"), dict):
        raise TableConfigError('must describe an object: {"type": "object", "properties": ...}')
    required = set(doc.get("required") or ())
    columns = []
    for name, prop in doc["properties"].items():
        columns.append(Column(name, _json_type(name, prop), name in required))
    return columns


def _json_type(name: str, prop: Any) -> str:
    if not isinstance(prop, dict):
        return "json"
    kind = prop.get("type")
    if isinstance(kind, list):  # ["string", "null"]: nullable, same column
        kinds = [k for k in kind if k != "null"]
        kind = kinds[0] if len(kinds) == 1 else None
    if kind is None:
        return "json"
    if kind == "string" and prop.get("format") == "date-time":
        return "timestamp"
    if kind not in _JSON_TYPES:
        raise TableConfigError(f"field {name!r}: unsupported type {kind!r}")
    return _JSON_TYPES[kind]


# ------------------------------------------------------------------ Avro

_AVRO_TYPES = {
    "boolean": "boolean",
    "int": "int",
    "long": "long",
    "float": "float",
    "double": "double",
    "string": "string",
    "bytes": "binary",
    "fixed": "binary",
    "enum": "string",
    "record": "json",
    "array": "json",
    "map": "json",
}


def parse_avro(doc: Any) -> Any:
    """fastavro's parsed schema (raises TableConfigError with one line)."""
    import fastavro

    try:
        return fastavro.parse_schema(doc)
    except Exception as exc:
        raise TableConfigError(f"not a valid Avro schema ({_line(exc)})") from None


def _avro_columns(doc: Any) -> list[Column]:
    parse_avro(doc)
    if not isinstance(doc, dict) or doc.get("type") != "record":
        raise TableConfigError('must be an Avro record: {"type": "record", "fields": ...}')
    columns = []
    for field in doc.get("fields", []):
        kind, required = _avro_type(field["type"])
        columns.append(Column(field["name"], kind, required))
    return columns


def _avro_type(kind: Any) -> tuple[str, bool]:
    if isinstance(kind, list):
        others = [k for k in kind if k != "null"]
        if len(others) == 1:
            return _avro_type(others[0])[0], "null" not in kind
        return "json", "null" not in kind
    if isinstance(kind, dict):
        logical = kind.get("logicalType")
        if logical in ("timestamp-millis", "timestamp-micros"):
            return "timestamp", True
        return _AVRO_TYPES.get(kind.get("type", ""), "json"), True
    return _AVRO_TYPES.get(kind, "json"), True


# ------------------------------------------------------------------ changes


def check_change(old: Mapping[str, str], new: Mapping[str, str]) -> str | None:
    """Why the topic's configs may not go from `old` to `new` (one line), or None. Both are
    the topic's whole configs (its own, not defaults)."""
    if not (NAMES & (set(old) | set(new))):
        return None
    try:
        after = table_spec(new)
    except TableConfigError as exc:
        return str(exc)
    try:
        before = table_spec(old)
    except TableConfigError:
        return None  # stored before validation existed: anything valid replaces it
    if before.enabled and after.enabled and before.mode != after.mode:
        return (
            f"{MODE}: cannot change from {before.mode} to {after.mode} "
            "(the table's columns differ): disable it first and drop the table"
        )
    if after.mode == "value_schema" and before.mode == "value_schema":
        pairs = ((VALUE_SCHEMA, before.value, after.value), (KEY_SCHEMA, before.key, after.key))
        for config, a, b in pairs:
            problem = evolution_problem(a, b)
            if problem:
                return f"{config}: {problem}"
    return None


def evolution_problem(before: SchemaSpec | None, after: SchemaSpec | None) -> str | None:
    """Why `after` cannot evolve the table `before` made (one line), or None."""
    if before is None or after is None:
        if before is not None or after is not None:
            return "cannot add or remove a key schema of a value_schema table"
        return None
    old = {c.name: c for c in before.columns}
    new = {c.name: c for c in after.columns}
    for name, col in old.items():
        if name not in new:
            if col.required:
                return f"cannot remove required field {name!r} (make it optional first)"
            continue
        now = new[name]
        if now.type != col.type and (col.type, now.type) not in WIDENINGS:
            return f"field {name!r} cannot change type from {col.type} to {now.type}"
        if now.required and not col.required:
            return f"field {name!r} cannot become required"
    for name, col in new.items():
        if name not in old and col.required:
            return f"new field {name!r} must be optional (older records do not have it)"
    return None
