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


STR, INT, NUM = {"type": "string"}, {"type": "integer"}, {"type": "number"}

PAIRS: list[tuple[str, Any, Any, bool]] = [
    ("same", obj({"a": STR}), obj({"a": STR}), True),
    ("integer widened to number", INT, NUM, True),
    ("number narrowed to integer", NUM, INT, False),
    ("type changed", STR, INT, False),
    ("type widened to a list", STR, {"type": ["string", "null"]}, True),
    ("type list narrowed", {"type": ["string", "null"]}, STR, False),
    ("type constraint added", {}, STR, False),
    ("type constraint removed", STR, {}, True),
    (
        "property added to a closed model",
        obj({"a": STR}, True),
        obj({"a": STR, "b": INT}, True),
        True,
    ),
    ("property added to an open model", obj({"a": STR}), obj({"a": STR, "b": INT}), False),
    (
        "property with an empty schema added to an open model",
        obj({"a": STR}),
        obj({"a": STR, "b": {}}),
        True,
    ),
    ("property removed from an open model", obj({"a": STR, "b": INT}), obj({"a": STR}), True),
    (
        "property removed from a closed model",
        obj({"a": STR, "b": INT}, True),
        obj({"a": STR}, True),
        False,
    ),
    ("closed model opened", obj({"a": STR}, True), obj({"a": STR}), True),
    ("open model closed", obj({"a": STR}), obj({"a": STR}, True), False),
    ("property type changed", obj({"a": STR}), obj({"a": INT}), False),
    ("property type widened", obj({"a": INT}), obj({"a": NUM}), True),
    ("required added", obj({"a": STR}), obj({"a": STR}, required=["a"]), False),
    (
        "required added with a default",
        obj({"a": STR}),
        obj({"a": {**STR, "default": ""}}, required=["a"]),
        True,
    ),
    ("required removed", obj({"a": STR}, required=["a"]), obj({"a": STR}), True),
    ("enum value added", {"enum": ["x", "y"]}, {"enum": ["x", "y", "z"]}, True),
    ("enum value removed", {"enum": ["x", "y", "z"]}, {"enum": ["x", "y"]}, False),
    ("enum added", STR, {**STR, "enum": ["x"]}, False),
    ("enum removed", {**STR, "enum": ["x"]}, STR, True),
    ("maxLength increased", {**STR, "maxLength": 5}, {**STR, "maxLength": 10}, True),
    ("maxLength decreased", {**STR, "maxLength": 10}, {**STR, "maxLength": 5}, False),
    ("minimum decreased", {**INT, "minimum": 5}, {**INT, "minimum": 0}, True),
    ("minimum increased", {**INT, "minimum": 0}, {**INT, "minimum": 5}, False),
    ("pattern added", STR, {**STR, "pattern": "^a"}, False),
    ("pattern removed", {**STR, "pattern": "^a"}, STR, True),
    ("array items widened", {"type": "array", "items": INT}, {"type": "array", "items": NUM}, True),
    (
        "array items changed",
        {"type": "array", "items": INT},
        {"type": "array", "items": STR},
        False,
    ),
    ("oneOf branch added", {"oneOf": [STR, INT]}, {"oneOf": [STR, INT, {"type": "boolean"}]}, True),
    ("oneOf branch removed", {"oneOf": [STR, INT]}, {"oneOf": [STR]}, False),
    (
        "local reference, same target",
        {"$defs": {"x": STR}, "$ref": "#/$defs/x"},
        {"$defs": {"x": STR}, "$ref": "#/$defs/x"},
        True,
    ),
    (
        "local reference, target changed",
        {"$defs": {"x": STR}, "$ref": "#/$defs/x"},
        {"$defs": {"x": INT}, "$ref": "#/$defs/x"},
        False,
    ),
    (
        "additionalProperties schema widened",
        {"type": "object", "additionalProperties": INT},
        {"type": "object", "additionalProperties": NUM},
        True,
    ),
    (
        "additionalProperties schema narrowed",
        {"type": "object", "additionalProperties": NUM},
        {"type": "object", "additionalProperties": INT},
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
    v1, v2 = parse(obj({"a": STR}, True)), parse(obj({"a": STR, "b": INT}, True))
    assert incompatibilities(JSON_SCHEMA, "BACKWARD", v2, [v1]) == []
    assert incompatibilities(JSON_SCHEMA, "FORWARD", v2, [v1]) != []
    assert incompatibilities(JSON_SCHEMA, "FULL", v2, [v1]) != []
    assert incompatibilities(JSON_SCHEMA, "NONE", parse(INT), [v1]) == []


def test_normalized_whitespace() -> None:
    assert JSON_SCHEMA.parse('{ "type" :  "string" }', {}).canonical == '{"type":"string"}'


@pytest.mark.parametrize("text", ["{", "[1]", '{"type": 12}', '{"minimum": "x"}', '"x"'])
def test_invalid_schemas(text: str) -> None:
    with pytest.raises(InvalidSchema):
        JSON_SCHEMA.parse(text, {})
