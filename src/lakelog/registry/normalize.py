"""Schema normalization, as Confluent's registry does it when asked (`normalize=true` on
register and lookup, or the `normalize` config): equivalent schemas written differently get
one id. On top of what every registration does (Avro and JSON compact, Avro's key order,
Protobuf compiled to its descriptor):

- AVRO: every named type by its full name (`{"name": "a.B"}`, not `"name": "B"` with
  `"namespace": "a"`), and every reference to a named type too, as the Avro specification's
  parsing canonical form writes names; defaults, aliases, docs and logical types are kept
  (they change what readers do).
- JSON: object keys sorted, at every level.
- PROTOBUF: fields in field-number order and imports sorted (the order of messages is kept:
  Confluent's wire format names a message by its index). The stored text is the text as
  first registered."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from lakelog.registry import protobuf
from lakelog.registry.avro import PRIMITIVES, _normalize
from lakelog.registry.errors import InvalidSchema
from lakelog.registry.formats import ParsedSchema

NAMED = {"record", "error", "enum", "fixed"}
COMPLEX = NAMED | {"array", "map"}
MAX_DEPTH = 64


def normalized(parsed: ParsedSchema) -> ParsedSchema:
    if parsed.schema_type == "AVRO":
        text = json.dumps(_avro_names(json.loads(parsed.canonical), parsed), separators=(",", ":"))
        return replace(parsed, canonical=text, identity=text)
    if parsed.schema_type == "JSON":
        text = json.dumps(json.loads(parsed.canonical), sort_keys=True, separators=(",", ":"))
        return replace(parsed, canonical=text, identity=text)
    if parsed.schema_type == "PROTOBUF":
        return replace(parsed, identity=protobuf.sorted_identity(parsed.model.file))
    return parsed


def _avro_names(document: Any, parsed: ParsedSchema) -> Any:
    known = set(parsed.model[1])  # the named types the references define
    _collect(document, "", known, 0)
    return _normalize(_rename(document, "", known, 0))


def _full(name: str, namespace: str) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


def _collect(node: Any, namespace: str, known: set[str], depth: int) -> None:
    if depth > MAX_DEPTH:
        raise InvalidSchema(f"nested deeper than {MAX_DEPTH}")
    if isinstance(node, list):
        for item in node:
            _collect(item, namespace, known, depth + 1)
    elif isinstance(node, dict):
        if node.get("type") in NAMED and isinstance(node.get("name"), str):
            space = node.get("namespace")
            full = _full(node["name"], space if isinstance(space, str) else namespace)
            known.add(full)
            namespace = full.rpartition(".")[0]
        for key in ("type", "items", "values"):
            if key in node:
                _collect(node[key], namespace, known, depth + 1)
        for field in node.get("fields") or []:
            if isinstance(field, dict):
                _collect(field.get("type"), namespace, known, depth + 1)


def _ref(name: str, namespace: str, known: set[str]) -> str:
    """A reference to a named type by its full name (a name it does not know stays)."""
    if name in PRIMITIVES or name in COMPLEX or "." in name:
        return name
    qualified = _full(name, namespace)
    return qualified if qualified in known else name


def _rename(node: Any, namespace: str, known: set[str], depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise InvalidSchema(f"nested deeper than {MAX_DEPTH}")
    if isinstance(node, str):
        return _ref(node, namespace, known)
    if isinstance(node, list):
        return [_rename(item, namespace, known, depth + 1) for item in node]
    if not isinstance(node, dict):
        return node
    out = dict(node)
    if node.get("type") in NAMED and isinstance(node.get("name"), str):
        space = node.get("namespace")
        full = _full(node["name"], space if isinstance(space, str) else namespace)
        out["name"] = full
        out.pop("namespace", None)
        namespace = full.rpartition(".")[0]
    elif isinstance(node.get("type"), str | list | dict):
        out["type"] = _rename(node["type"], namespace, known, depth + 1)
    for key in ("items", "values"):
        if key in node:
            out[key] = _rename(node[key], namespace, known, depth + 1)
    if isinstance(node.get("fields"), list):
        out["fields"] = [
            {**f, "type": _rename(f.get("type"), namespace, known, depth + 1)}
            if isinstance(f, dict) and "type" in f
            else f
            for f in node["fields"]
        ]
    return out
