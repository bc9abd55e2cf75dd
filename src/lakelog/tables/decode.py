"""Decoding keys and values into typed columns (value_schema mode), one record at a time.

JSON: the bytes must be UTF-8 JSON that the topic's JSON Schema validates (jsonschema,
with `format` checks off: a `date-time` string that does not parse fails conversion
instead, with its own reason). Avro: fastavro's schemaless reader with the topic's
schema; a value that starts with Confluent's wire-format header (magic byte 0, then a
4-byte schema id) is read after it, else as a bare datum, and the datum must use every
byte. Either way each field is then converted to its column's type, checked for range.

When the registry holds schemas for the topic's subject (`<topic>-value` / `<topic>-key`,
`tables/registry_writers.py`), a value in the wire format is checked against them: an id
the subject does not hold, or of another type, is a dead letter with that reason, and an
Avro value is read with the schema it was written with and resolved to the table's (Avro
schema resolution: new fields take their defaults, removed ones are skipped). A JSON value
in the wire format is read after its header.

A record that fails any step raises `DecodeFailure` with a one-line reason; the tables job
sends it to the dead-letter table. Nothing here may raise anything else for any input.
"""

from __future__ import annotations

import datetime
import io
import json
import math
import struct
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from lakelog.tables.table_config import Column, SchemaSpec, parse_avro

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
MAX_REASON = 500
MAGIC = 0
HEADER = 5
"""Confluent's wire format: magic byte 0, then the schema id as 4 bytes, big-endian."""


@dataclass(frozen=True, slots=True)
class SubjectWriters:
    """The registry's schemas of one subject, by id: ("AVRO", fastavro's parsed schema) or
    (its type, None), as `tables/registry_writers.py` reads them. Empty: no registry."""

    subject: str = ""
    by_id: Mapping[int, tuple[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RegistryWriters:
    """A table topic's value and key subjects (TopicNameStrategy)."""

    value: SubjectWriters = field(default_factory=SubjectWriters)
    key: SubjectWriters = field(default_factory=SubjectWriters)

    def __iter__(self) -> Iterator[SubjectWriters]:
        yield self.value
        yield self.key


class DecodeFailure(ValueError):
    """Why one record's key or value did not decode (one line)."""


def _reason(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= MAX_REASON else line[: MAX_REASON - 3] + "..."


class Decoder:
    """Decodes one schema's payloads to {column name: value} (a fresh one per task: the
    parsed schema and validator are built once)."""

    def __init__(
        self,
        spec: SchemaSpec,
        writers: Mapping[int, tuple[str, Any]] | None = None,
        subject: str = "",
    ) -> None:
        self.spec = spec
        self.writers = writers or {}
        """The registry's schemas of `subject` by id (empty: the registry is not used)."""
        self.subject = subject
        self.columns = spec.columns
        doc = json.loads(spec.text)
        self._read: Callable[[bytes], dict[str, Any]]
        if spec.kind == "json":
            from jsonschema.validators import validator_for

            self._validator = validator_for(doc)(doc)
            self._read = self._read_json
        else:
            self._avro = parse_avro(doc)
            self._read = self._read_avro

    def decode(self, payload: bytes | None) -> dict[str, Any]:
        if payload is None:
            raise DecodeFailure("null (no bytes to decode)")
        try:
            fields = self._read(payload)
        except DecodeFailure:
            raise
        except Exception as exc:  # any decoder error is the record's, never the job's
            raise DecodeFailure(_reason(f"does not decode: {exc}")) from None
        return {c.name: convert(c, fields.get(c.name)) for c in self.columns}

    def _writer(self, payload: bytes, kind: str) -> Any:
        """The registry's schema of a wire-format payload (checked to be of `kind`)."""
        (schema_id,) = struct.unpack_from(">I", payload, 1)
        found = self.writers.get(schema_id)
        if found is None:
            raise DecodeFailure(f"schema id {schema_id} is not registered under {self.subject}")
        if found[0] != kind:
            raise DecodeFailure(
                f"schema id {schema_id} is a {found[0]} schema; the table's is {kind}"
            )
        return found[1]

    def _read_json(self, payload: bytes) -> dict[str, Any]:
        if len(payload) >= HEADER and payload[0] == MAGIC:  # JSON text never starts with 0
            if self.writers:
                self._writer(payload, "JSON")
            payload = payload[HEADER:]
        try:
            doc = json.loads(payload.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise DecodeFailure(_reason(f"not UTF-8 JSON: {exc}")) from None
        error = next(iter(self._validator.iter_errors(doc)), None)
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "(root)"
            raise DecodeFailure(_reason(f"JSON Schema: {where}: {error.message}"))
        if not isinstance(doc, dict):
            raise DecodeFailure("JSON Schema: (root): not an object")
        return doc

    def _read_avro(self, payload: bytes) -> dict[str, Any]:
        if self.writers and len(payload) >= HEADER and payload[0] == MAGIC:
            return self._avro_datum(payload[HEADER:], self._writer(payload, "AVRO"))
        if len(payload) >= HEADER and payload[0] == MAGIC:
            try:
                return self._avro_datum(payload[5:])
            except Exception:  # a bare datum that happens to start with 0
                pass
        return self._avro_datum(payload)

    def _avro_datum(self, payload: bytes, writer: Any = None) -> dict[str, Any]:
        """The datum, read with `writer` and resolved to the table's schema (or read with
        the table's schema alone)."""
        from fastavro import schemaless_reader

        stream = io.BytesIO(payload)
        if writer is None:
            datum = schemaless_reader(stream, self._avro, None)
        else:
            datum = schemaless_reader(stream, writer, self._avro)
        if stream.tell() != len(payload):
            raise DecodeFailure(
                f"Avro: {len(payload) - stream.tell()} bytes left after the datum (not this schema)"
            )
        if not isinstance(datum, dict):
            raise DecodeFailure("Avro: not a record")
        return datum


def convert(column: Column, value: Any) -> Any:
    """`value` as `column`'s type (None stays None unless required)."""
    if value is None:
        if column.required:
            raise DecodeFailure(f"field {column.name!r}: required, but null or missing")
        return None
    try:
        return _CONVERT[column.type](value)
    except DecodeFailure as exc:
        raise DecodeFailure(f"field {column.name!r}: {exc}") from None
    except (TypeError, ValueError, OverflowError) as exc:
        raise DecodeFailure(_reason(f"field {column.name!r}: {exc}")) from None


def _int(bounds: tuple[int, int]) -> Callable[[Any], int]:
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise DecodeFailure(f"not an integer: {value!r:.40}")
        if not bounds[0] <= value <= bounds[1]:
            raise DecodeFailure(f"{value} is out of range")
        return value

    return check


def _float(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DecodeFailure(f"not a number: {value!r:.40}")
    number = float(value)
    if math.isinf(number) and not isinstance(value, float):
        raise DecodeFailure("out of range")
    return number


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise DecodeFailure(f"not a boolean: {value!r:.40}")
    return value


def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise DecodeFailure(f"not a string: {value!r:.40}")
    value.encode("utf-8")  # JSON's "\ud800" escapes decode to what Arrow cannot hold
    return value


def _binary(value: Any) -> bytes:
    if not isinstance(value, bytes | bytearray):
        raise DecodeFailure("not bytes")
    return bytes(value)


def _timestamp(value: Any) -> datetime.datetime:
    if isinstance(value, datetime.datetime):
        moment = value
    elif isinstance(value, str):
        try:
            moment = datetime.datetime.fromisoformat(value)
        except ValueError:
            raise DecodeFailure(f"not an ISO 8601 date-time: {value!r:.40}") from None
    else:
        raise DecodeFailure(f"not a date-time: {value!r:.40}")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.astimezone(datetime.UTC)


def _json(value: Any) -> str:
    return json.dumps(value, default=_json_default, separators=(",", ":"))


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("latin-1")
    if isinstance(value, datetime.datetime | datetime.date):
        return value.isoformat()
    return str(value)


_CONVERT: dict[str, Callable[[Any], Any]] = {
    "boolean": _bool,
    "int": _int(INT32),
    "long": _int(INT64),
    "float": _float,
    "double": _float,
    "string": _string,
    "binary": _binary,
    "timestamp": _timestamp,
    "json": _json,
}
