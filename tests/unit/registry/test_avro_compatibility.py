"""Avro compatibility by the specification's schema resolution rules: each pair is
(writer, reader, readable); BACKWARD registers the reader after the writer, FORWARD the
other way round, FULL needs both."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lakelog.registry.avro import AVRO
from lakelog.registry.compatibility import incompatibilities
from lakelog.registry.errors import InvalidSchema


def rec(*fields: dict[str, Any], name: str = "R", **extra: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": list(fields), **extra}


def f(name: str, kind: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": kind, **extra}


ENUM_AB = {"type": "enum", "name": "E", "symbols": ["A", "B"]}
ENUM_ABC = {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}
ENUM_AB_DEFAULT = {"type": "enum", "name": "E", "symbols": ["A", "B"], "default": "A"}
LINKED = rec(f("value", "int"), f("next", ["null", "Node"]), name="Node")

PAIRS: list[tuple[str, Any, Any, bool]] = [
    ("same primitive", "int", "int", True),
    ("int promoted to long", "int", "long", True),
    ("int promoted to float", "int", "float", True),
    ("int promoted to double", "int", "double", True),
    ("long promoted to double", "long", "double", True),
    ("float promoted to double", "float", "double", True),
    ("string read as bytes", "string", "bytes", True),
    ("bytes read as string", "bytes", "string", True),
    ("long not narrowed to int", "long", "int", False),
    ("double not narrowed to float", "double", "float", False),
    ("int not read as string", "int", "string", False),
    (
        "field added with a default",
        rec(f("a", "int")),
        rec(f("a", "int"), f("b", "string", default="")),
        True,
    ),
    (
        "field added without a default",
        rec(f("a", "int")),
        rec(f("a", "int"), f("b", "string")),
        False,
    ),
    ("field removed", rec(f("a", "int"), f("b", "string")), rec(f("a", "int")), True),
    ("field type promoted", rec(f("a", "int")), rec(f("a", "long")), True),
    ("field type changed", rec(f("a", "int")), rec(f("a", "string")), False),
    ("field renamed with an alias", rec(f("a", "int")), rec(f("b", "int", aliases=["a"])), True),
    ("field renamed without an alias", rec(f("a", "int")), rec(f("b", "int")), False),
    ("record renamed", rec(f("a", "int")), rec(f("a", "int"), name="S"), False),
    (
        "record renamed with an alias",
        rec(f("a", "int")),
        rec(f("a", "int"), name="S", aliases=["R"]),
        True,
    ),
    ("enum symbol added", ENUM_AB, ENUM_ABC, True),
    ("enum symbol removed", ENUM_ABC, ENUM_AB, False),
    ("enum symbol removed, reader default", ENUM_ABC, ENUM_AB_DEFAULT, True),
    ("union branch added", ["null", "int"], ["null", "int", "string"], True),
    ("union branch removed", ["null", "int", "string"], ["null", "int"], False),
    ("type widened into a union", "int", ["null", "int"], True),
    ("union narrowed to one type", ["null", "int"], "int", False),
    ("union read through promotion", ["null", "int"], ["null", "long"], True),
    (
        "array items promoted",
        {"type": "array", "items": "int"},
        {"type": "array", "items": "long"},
        True,
    ),
    (
        "array items changed",
        {"type": "array", "items": "int"},
        {"type": "array", "items": "string"},
        False,
    ),
    (
        "map values promoted",
        {"type": "map", "values": "float"},
        {"type": "map", "values": "double"},
        True,
    ),
    (
        "map values changed",
        {"type": "map", "values": "int"},
        {"type": "map", "values": "boolean"},
        False,
    ),
    (
        "array read as map",
        {"type": "array", "items": "int"},
        {"type": "map", "values": "int"},
        False,
    ),
    (
        "fixed same size",
        {"type": "fixed", "name": "F", "size": 4},
        {"type": "fixed", "name": "F", "size": 4},
        True,
    ),
    (
        "fixed resized",
        {"type": "fixed", "name": "F", "size": 4},
        {"type": "fixed", "name": "F", "size": 8},
        False,
    ),
    ("recursive record, same", LINKED, LINKED, True),
    ("logical type over the same base", {"type": "int", "logicalType": "date"}, "int", True),
    (
        "nested record field added with a default",
        rec(f("in", rec(f("x", "int"), name="In"))),
        rec(f("in", rec(f("x", "int"), f("y", "int", default=0), name="In"))),
        True,
    ),
]


def parse(schema: Any) -> Any:
    return AVRO.parse(json.dumps(schema), {})


@pytest.mark.parametrize(
    ("writer", "reader", "readable"), [p[1:] for p in PAIRS], ids=[p[0] for p in PAIRS]
)
def test_resolution(writer: Any, reader: Any, readable: bool) -> None:
    problems = AVRO.incompatibilities(parse(reader), parse(writer))
    assert (problems == []) is readable, problems


def test_levels() -> None:
    v1 = parse(rec(f("a", "int")))
    v2 = parse(rec(f("a", "int"), f("b", "string", default="")))
    v3 = parse(rec(f("a", "int"), f("b", "string")))  # b now has no default
    assert incompatibilities(AVRO, "BACKWARD", v2, [v1]) == []
    assert incompatibilities(AVRO, "FORWARD", v2, [v1]) == []
    assert incompatibilities(AVRO, "FULL", v2, [v1]) == []
    # Reading v2's data with v3 works (b is there), reading v1's does not.
    assert incompatibilities(AVRO, "BACKWARD", v3, [v1, v2]) == []
    assert incompatibilities(AVRO, "BACKWARD_TRANSITIVE", v3, [v1, v2]) != []
    assert incompatibilities(AVRO, "FORWARD", v3, [v2]) == []
    assert incompatibilities(AVRO, "FULL_TRANSITIVE", v3, [v1, v2]) != []
    assert incompatibilities(AVRO, "NONE", parse("string"), [v1]) == []
    widened = parse(rec(f("a", "long")))
    assert incompatibilities(AVRO, "BACKWARD", widened, [v1]) == []
    assert incompatibilities(AVRO, "FORWARD", widened, [v1]) != []


def test_normalized_as_avro_prints_it() -> None:
    loose = (
        '{ "fields": [ {"type": {"type": "int"}, "name": "a"} ], "name": "R", "type": "record" }'
    )
    assert AVRO.parse(loose, {}).canonical == (
        '{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}'
    )


@pytest.mark.parametrize(
    "text",
    [
        "{",
        '{"type": "record"}',
        '{"type": "nope"}',
        '"NotAType"',
        "[]x",
        '{"type":"enum","name":"E","symbols":[1]}',
    ],
)
def test_invalid_schemas(text: str) -> None:
    with pytest.raises(InvalidSchema):
        AVRO.parse(text, {})


def test_deep_nesting_is_refused() -> None:
    schema: Any = "int"
    for _ in range(200):
        schema = {"type": "array", "items": schema}
    with pytest.raises(InvalidSchema):
        parse(schema)
