"""JSON Schema: checked as a schema by jsonschema (its declared draft, else draft 7),
normalized to compact JSON (keys as written, as Confluent prints them), and checked by
Confluent's rules for the common cases: a reader must accept every document the writer
accepts (types, properties under open and closed content models, required, enum,
lengths and bounds, items, combined schemas)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import jsonschema
from jsonschema.exceptions import SchemaError
from jsonschema.validators import validator_for

from lakelog.registry.errors import InvalidSchema
from lakelog.registry.formats import ParsedSchema

MAX_DEPTH = 64


def _depth(node: Any, depth: int = 0) -> None:
    if depth > MAX_DEPTH:
        raise InvalidSchema(f"nested deeper than {MAX_DEPTH}")
    if isinstance(node, dict):
        for value in node.values():
            _depth(value, depth + 1)
    elif isinstance(node, list):
        for value in node:
            _depth(value, depth + 1)


class JsonSchemaFormat:
    name = "JSON"

    def parse(self, text: str, references: Mapping[str, ParsedSchema]) -> ParsedSchema:
        try:
            document = json.loads(text)
        except ValueError as exc:
            raise InvalidSchema(f"not JSON: {exc}") from exc
        except RecursionError as exc:  # json's parser recurses once per level
            raise InvalidSchema("not JSON: nested too deep") from exc
        if not isinstance(document, dict | bool):
            raise InvalidSchema("a JSON schema is an object or a boolean")
        _depth(document)
        try:
            cls = validator_for(document, default=jsonschema.Draft7Validator)
            cls.check_schema(document)
        except SchemaError as exc:
            raise InvalidSchema(exc.message) from exc
        except Exception as exc:  # an unknown $schema URI, a bad regex...
            raise InvalidSchema(str(exc)) from exc
        canonical = json.dumps(document, separators=(",", ":"))
        return ParsedSchema(self.name, canonical, canonical, document)

    def incompatibilities(self, reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
        check = _Check(reader.model, writer.model)
        check.schema(reader.model, writer.model, "#", 0)
        return check.problems


def _types(schema: dict[str, Any]) -> set[str] | None:
    kind = schema.get("type")
    if kind is None:
        return None
    kinds = {kind} if isinstance(kind, str) else set(kind)
    if "number" in kinds:
        kinds.add("integer")
    return kinds


class _Check:
    def __init__(self, reader_root: Any, writer_root: Any) -> None:
        self.roots = (reader_root, writer_root)
        self.problems: list[str] = []

    def _deref(self, schema: Any, root: Any) -> Any:
        for _ in range(MAX_DEPTH):
            if not (isinstance(schema, dict) and isinstance(schema.get("$ref"), str)):
                return schema
            ref = schema["$ref"]
            if not ref.startswith("#"):
                return schema  # another document's: compared by name only
            node = root
            for part in [p for p in ref[1:].split("/") if p]:
                part = part.replace("~1", "/").replace("~0", "~")
                if not isinstance(node, dict) or part not in node:
                    return schema
                node = node[part]
            schema = node
        return schema

    def schema(self, reader: Any, writer: Any, path: str, depth: int) -> None:
        if depth > MAX_DEPTH:
            return
        reader = self._deref(reader, self.roots[0])
        writer = self._deref(writer, self.roots[1])
        if reader is True or reader == {}:
            return
        if writer is False:
            return
        if reader is False:
            self.problems.append(f"{path}: reader accepts nothing")
            return
        if writer is True:
            writer = {}
        if reader.get("$ref") or writer.get("$ref"):
            if reader.get("$ref") != writer.get("$ref"):
                self.problems.append(f"{path}: reference changed")
            return
        for key in ("oneOf", "anyOf", "allOf"):
            if key in reader or key in writer:
                self._combined(key, reader, writer, path, depth)
        rtypes, wtypes = _types(reader), _types(writer)
        if rtypes is not None and (wtypes is None or not wtypes <= rtypes):
            self.problems.append(
                f"{path}: type narrowed ({sorted(wtypes or ['any'])} -> {sorted(rtypes)})"
            )
            return
        self._enum(reader, writer, path)
        self._bounds(reader, writer, path)
        if any(k in reader for k in ("properties", "required", "additionalProperties")) or (
            "properties" in writer
        ):
            self._object(reader, writer, path, depth)
        if "items" in reader and isinstance(reader["items"], dict | bool):
            witems = writer.get("items", True)
            if isinstance(witems, dict | bool):
                self.schema(reader["items"], witems, f"{path}/items", depth + 1)

    def _combined(self, key: str, reader: Any, writer: Any, path: str, depth: int) -> None:
        rs, ws = reader.get(key), writer.get(key)
        if rs is None:
            return
        if ws is None:
            ws = [writer]
        if key == "allOf":
            for i, r in enumerate(rs):
                for w in ws:
                    self.schema(r, w, f"{path}/{key}/{i}", depth + 1)
            return
        for i, w in enumerate(ws):
            if not any(self._fits(r, w, depth) for r in rs):
                self.problems.append(f"{path}/{key}/{i}: no reader branch accepts it")

    def _fits(self, reader: Any, writer: Any, depth: int) -> bool:
        before = len(self.problems)
        self.schema(reader, writer, "", depth + 1)
        if len(self.problems) > before:
            del self.problems[before:]
            return False
        return True

    def _enum(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> None:
        if "enum" not in reader:
            return
        if "enum" not in writer:
            self.problems.append(f"{path}: enum added")
        elif not all(v in reader["enum"] for v in writer["enum"]):
            self.problems.append(f"{path}: enum narrowed")
        if "const" in writer and writer["const"] not in reader["enum"]:
            self.problems.append(f"{path}: const not in enum")

    def _bounds(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> None:
        for key in ("maxLength", "maximum", "exclusiveMaximum", "maxItems", "maxProperties"):
            if key in reader and (key not in writer or writer[key] > reader[key]):
                self.problems.append(f"{path}: {key} decreased or added")
        for key in ("minLength", "minimum", "exclusiveMinimum", "minItems", "minProperties"):
            if key in reader and (key not in writer or writer[key] < reader[key]):
                self.problems.append(f"{path}: {key} increased or added")
        for key in ("pattern", "const", "multipleOf", "format"):
            if key in reader and reader.get(key) != writer.get(key):
                self.problems.append(f"{path}: {key} added or changed")

    def _object(
        self, reader: dict[str, Any], writer: dict[str, Any], path: str, depth: int
    ) -> None:
        rprops: dict[str, Any] = reader.get("properties", {})
        wprops: dict[str, Any] = writer.get("properties", {})
        radd = reader.get("additionalProperties", True)
        wadd = writer.get("additionalProperties", True)
        if radd is False and wadd is not False:
            self.problems.append(f"{path}: additionalProperties removed")
        elif isinstance(radd, dict) and wadd is not False:
            self.schema(radd, wadd, f"{path}/additionalProperties", depth + 1)
        for name, rprop in rprops.items():
            where = f"{path}/properties/{name}"
            if name in wprops:
                self.schema(rprop, wprops[name], where, depth + 1)
            elif wadd is not False:
                # The writer's open content model let any value through under this name.
                self.schema(rprop, wadd, where + " (added to an open content model)", depth + 1)
        for name, wprop in wprops.items():
            if name not in rprops and radd is False:
                self.problems.append(
                    f"{path}/properties/{name}: removed from a closed content model"
                )
            elif name not in rprops and isinstance(radd, dict):
                self.schema(radd, wprop, f"{path}/properties/{name}", depth + 1)
        required = set(reader.get("required", [])) - set(writer.get("required", []))
        for name in sorted(required):
            prop = rprops.get(name)
            if not (isinstance(prop, dict) and "default" in prop):
                self.problems.append(f"{path}: required property {name} added")


JSON_SCHEMA = JsonSchemaFormat()
