"""Avro: parsed by fastavro, normalized as Avro's `Schema.toString()` prints a schema
(compact JSON, a bare primitive for `{"type": "int"}`, keys in Avro's order), and checked
by the Avro specification's schema resolution rules (reader against writer)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import fastavro

from lakelog.registry.errors import InvalidSchema
from lakelog.registry.formats import ParsedSchema

PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
PROMOTIONS = {
    "int": {"long", "float", "double"},
    "long": {"float", "double"},
    "float": {"double"},
    "string": {"bytes"},
    "bytes": {"string"},
}
"""Writer type -> reader types it is promoted to."""
KEY_ORDER = ("type", "name", "namespace", "doc", "fields", "symbols", "items", "values", "size")
FIELD_KEY_ORDER = ("name", "type", "doc", "default")
MAX_DEPTH = 64


def _normalize(node: Any, depth: int = 0) -> Any:
    if depth > MAX_DEPTH:
        raise InvalidSchema(f"nested deeper than {MAX_DEPTH}")
    if isinstance(node, list):
        return [_normalize(n, depth + 1) for n in node]
    if not isinstance(node, dict):
        return node
    if set(node) == {"type"} and node["type"] in PRIMITIVES:
        return node["type"]
    ordered = {k: node[k] for k in KEY_ORDER if k in node}
    ordered.update({k: v for k, v in node.items() if k not in ordered})
    for key in ("type", "items", "values"):
        if key in ordered:
            ordered[key] = _normalize(ordered[key], depth + 1)
    if isinstance(ordered.get("fields"), list):
        ordered["fields"] = [_field(f, depth + 1) for f in ordered["fields"]]
    return ordered


def _field(node: Any, depth: int) -> Any:
    if not isinstance(node, dict):
        return node
    ordered = {k: node[k] for k in FIELD_KEY_ORDER if k in node}
    ordered.update({k: v for k, v in node.items() if k not in ordered})
    if "type" in ordered:
        ordered["type"] = _normalize(ordered["type"], depth + 1)
    return ordered


class AvroFormat:
    name = "AVRO"

    def parse(self, text: str, references: Mapping[str, ParsedSchema]) -> ParsedSchema:
        try:
            document = json.loads(text)
        except ValueError as exc:
            raise InvalidSchema(f"not JSON: {exc}") from exc
        except RecursionError as exc:  # json's parser recurses once per level
            raise InvalidSchema("not JSON: nested too deep") from exc
        named: dict[str, Any] = {}
        for ref in references.values():
            named.update(ref.model[1])
        try:
            parsed = fastavro.parse_schema(document, named_schemas=named, _write_hint=False)
        except InvalidSchema:
            raise
        except KeyError as exc:
            raise InvalidSchema(f"missing {exc}") from exc
        except Exception as exc:  # fastavro raises several kinds for a bad schema
            raise InvalidSchema(str(exc) or type(exc).__name__) from exc
        canonical = json.dumps(_normalize(document), separators=(",", ":"))
        return ParsedSchema(self.name, canonical, canonical, (parsed, named))

    def incompatibilities(self, reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
        checker = _Resolution(reader.model[1], writer.model[1])
        checker.check(reader.model[0], writer.model[0], "/")
        return checker.problems


def _kind(schema: Any) -> str:
    if isinstance(schema, list):
        return "union"
    if isinstance(schema, dict):
        kind = schema["type"]
        return kind if isinstance(kind, str) else _kind(kind)
    return str(schema)


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


class _Resolution:
    """The spec's "Schema Resolution": can a reader schema read what a writer wrote?"""

    def __init__(self, reader_named: dict[str, Any], writer_named: dict[str, Any]) -> None:
        self.reader_named = reader_named
        self.writer_named = writer_named
        self.problems: list[str] = []
        self._assumed: set[tuple[str, str]] = set()

    def _resolve(self, schema: Any, named: dict[str, Any]) -> Any:
        while isinstance(schema, str) and schema not in PRIMITIVES and schema in named:
            schema = named[schema]
        if isinstance(schema, dict) and not isinstance(schema["type"], str):
            return self._resolve(schema["type"], named)
        if isinstance(schema, dict) and schema["type"] in PRIMITIVES:
            return schema["type"]
        return schema

    def matches(self, reader: Any, writer: Any, path: str) -> bool:
        before = len(self.problems)
        self.check(reader, writer, path)
        if len(self.problems) > before:
            del self.problems[before:]
            return False
        return True

    def check(self, reader: Any, writer: Any, path: str) -> None:
        reader = self._resolve(reader, self.reader_named)
        writer = self._resolve(writer, self.writer_named)
        rk, wk = _kind(reader), _kind(writer)
        if wk == "union":
            for i, branch in enumerate(writer):
                self.check(reader, branch, f"{path}[{i}]")
            return
        if rk == "union":
            if not any(self.matches(branch, writer, path) for branch in reader):
                self.problems.append(f"{path}: reader union lacks writer type {wk}")
            return
        if rk != wk:
            if rk not in PROMOTIONS.get(wk, set()):
                self.problems.append(f"{path}: reader type {rk} not compatible with writer {wk}")
            return
        if rk in PRIMITIVES:
            return
        if rk in ("record", "enum", "fixed", "error"):
            rname, wname = reader["name"], writer["name"]
            aliases = {_short(a) for a in reader.get("aliases", [])}
            if _short(rname) != _short(wname) and _short(wname) not in aliases:
                self.problems.append(f"{path}: name {rname} does not match writer {wname}")
                return
            key = (rname, wname)
            if key in self._assumed:
                return
            self._assumed.add(key)
        if rk in ("record", "error"):
            self._record(reader, writer, path)
        elif rk == "enum":
            missing = set(writer["symbols"]) - set(reader["symbols"])
            if missing and "default" not in reader:
                self.problems.append(f"{path}: reader enum lacks symbols {sorted(missing)}")
        elif rk == "fixed":
            if reader["size"] != writer["size"]:
                self.problems.append(f"{path}: fixed size {reader['size']} != {writer['size']}")
        elif rk == "array":
            self.check(reader["items"], writer["items"], f"{path}items/")
        elif rk == "map":
            self.check(reader["values"], writer["values"], f"{path}values/")

    def _record(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> None:
        written = {f["name"]: f for f in writer["fields"]}
        for field in reader["fields"]:
            names = [field["name"], *field.get("aliases", [])]
            source = next((written[n] for n in names if n in written), None)
            where = f"{path}{field['name']}/"
            if source is None:
                if "default" not in field:
                    self.problems.append(f"{where}: reader field without a default is missing")
                continue
            self.check(field["type"], source["type"], where)


AVRO = AvroFormat()
