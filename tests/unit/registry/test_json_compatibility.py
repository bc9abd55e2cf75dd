"""JSON Schema compatibility, Confluent's rules for the common cases: each pair is
(writer, reader, readable), readable when the reader accepts every document the writer
does (BACKWARD registers the reader after the writer)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lakelog.registry.compatibility import incompatibilities
from lakelog.registry.errors import InvalidSchema
from lakelog.registry.json_schema import JSON_SCHEMA


def obj(props: dict[str, Any], closed: bool = False, **extra: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": props, **extra}
    if closed:
        schema["additionalProperties"] = False
    return schema


S, I, N = {"type": "string"}, {"type": "integer"}, {"type": "number"}

PAIRS: list[tuple[str, Any, Any, bool]] = [
    ("same", obj({"a": S}), obj({"a": S}), True),
    ("integer widened to number", I, N, True),
    ("number narrowed to integer", N, I, False),
    ("type changed", S, I, False),
    ("type widened to a list", S, {"type": ["string", "null"]}, True),
    ("type list narrowed", {"type": ["string", "null"]}, S, False),
    ("type constraint added", {}, S, False),
    ("type constraint removed", S, {}, True),
    ("property added to a closed model", obj({"a": S}, True), obj({"a": S, "b": I}, True), True),
    ("property added to an open model", obj({"a": S}), obj({"a": S, "b": I}), False),
    (
        "property with an empty schema added to an open model",
        obj({"a": S}),
        obj({"a": S, "b": {}}),
        True,
    ),
    ("property removed from an open model", obj({"a": S, "b": I}), obj({"a": S}), True),
    (
        "property removed from a closed model",
        obj({"a": S, "b": I}, True),
        obj({"a": S}, True),
        False,
    ),
    ("closed model opened", obj({"a": S}, True), obj({"a": S}), True),
    ("open model closed", obj({"a": S}), obj({"a": S}, True), False),
    ("property type changed", obj({"a": S}), obj({"a": I}), False),
    ("property type widened", obj({"a": I}), obj({"a": N}), True),
    ("required added", obj({"a": S}), obj({"a": S}, required=["a"]), False),
    (
        "required added with a default",
        obj({"a": S}),
        obj({"a": {**S, "default": ""}}, required=["a"]),
        True,
    ),
    ("required removed", obj({"a": S}, required=["a"]), obj({"a": S}), True),
    ("enum value added", {"enum": ["x", "y"]}, {"enum": ["x", "y", "z"]}, True),
    ("enum value removed", {"enum": ["x", "y", "z"]}, {"enum": ["x", "y"]}, False),
    ("enum added", S, {**S, "enum": ["x"]}, False),
    ("enum removed", {**S, "enum": ["x"]}, S, True),
    ("maxLength increased", {**S, "maxLength": 5}, {**S, "maxLength": 10}, True),
    ("maxLength decreased", {**S, "maxLength": 10}, {**S, "maxLength": 5}, False),
    ("minimum decreased", {**I, "minimum": 5}, {**I, "minimum": 0}, True),
    ("minimum increased", {**I, "minimum": 0}, {**I, "minimum": 5}, False),
    ("pattern added", S, {**S, "pattern": "^a"}, False),
    ("pattern removed", {**S, "pattern": "^a"}, S, True),
    ("array items widened", {"type": "array", "items": I}, {"type": "array", "items": N}, True),
    ("array items changed", {"type": "array", "items": I}, {"type": "array", "items": S}, False),
    ("oneOf branch added", {"oneOf": [S, I]}, {"oneOf": [S, I, {"type": "boolean"}]}, True),
    ("oneOf branch removed", {"oneOf": [S, I]}, {"oneOf": [S]}, False),
    (
        "local reference, same target",
        {"$defs": {"x": S}, "$ref": "#/$defs/x"},
        {"$defs": {"x": S}, "$ref": "#/$defs/x"},
        True,
    ),
    (
        "local reference, target changed",
        {"$defs": {"x": S}, "$ref": "#/$defs/x"},
        {"$defs": {"x": I}, "$ref": "#/$defs/x"},
        False,
    ),
    (
        "additionalProperties schema widened",
        {"type": "object", "additionalProperties": I},
        {"type": "object", "additionalProperties": N},
        True,
    ),
    (
        "additionalProperties schema narrowed",
        {"type": "object", "additionalProperties": N},
        {"type": "object", "additionalProperties": I},
        False,
    ),
]


def parse(schema: Any) -> Any:
    return JSON_SCHEMA.parse(json.dumps(schema), {})


@pytest.mark.parametrize(
    ("writer", "reader", "readable"), [p[1:] for p in PAIRS], ids=[p[0] for p in PAIRS]
)
def test_rules(writer: Any, reader: Any, readable: bool) -> None:
    problems = JSON_SCHEMA.incompatibilities(parse(reader), parse(writer))
    assert (problems == []) is readable, problems


def test_levels() -> None:
    v1, v2 = parse(obj({"a": S}, True)), parse(obj({"a": S, "b": I}, True))
    assert incompatibilities(JSON_SCHEMA, "BACKWARD", v2, [v1]) == []
    assert incompatibilities(JSON_SCHEMA, "FORWARD", v2, [v1]) != []
    assert incompatibilities(JSON_SCHEMA, "FULL", v2, [v1]) != []
    assert incompatibilities(JSON_SCHEMA, "NONE", parse(I), [v1]) == []


def test_normalized_whitespace() -> None:
    assert JSON_SCHEMA.parse('{ "type" :  "string" }', {}).canonical == '{"type":"string"}'


@pytest.mark.parametrize("text", ["{", "[1]", '{"type": 12}', '{"minimum": "x"}', '"x"'])
def test_invalid_schemas(text: str) -> None:
    with pytest.raises(InvalidSchema):
        JSON_SCHEMA.parse(text, {})
