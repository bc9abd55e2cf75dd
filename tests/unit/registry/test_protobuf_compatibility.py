"""Protobuf compatibility, Confluent's rules: each pair is (old, new, compatible) for a new
version registered after the old one (BACKWARD)."""

from __future__ import annotations

import pytest

from lakelog.registry.compatibility import incompatibilities
from lakelog.registry.errors import InvalidSchema
from lakelog.registry.protobuf import PROTOBUF, serialized


def proto(body: str, package: str = "p", syntax: str = "proto3") -> str:
    return f'syntax = "{syntax}";\npackage {package};\n{body}\n'


M = "message M { int32 a = 1; string s = 2; }"

PAIRS: list[tuple[str, str, str, bool]] = [
    ("same", proto(M), proto(M), True),
    ("field added", proto(M), proto("message M { int32 a = 1; string s = 2; bool b = 3; }"), True),
    ("field removed", proto(M), proto("message M { int32 a = 1; }"), True),
    ("field renamed", proto(M), proto("message M { int32 renamed = 1; string s = 2; }"), True),
    ("int32 to int64", proto(M), proto("message M { int64 a = 1; string s = 2; }"), True),
    ("int32 to uint32", proto(M), proto("message M { uint32 a = 1; string s = 2; }"), True),
    ("int32 to bool", proto(M), proto("message M { bool a = 1; string s = 2; }"), True),
    ("string to bytes", proto(M), proto("message M { int32 a = 1; bytes s = 2; }"), True),
    (
        "sint32 to sint64",
        proto("message M { sint32 a = 1; }"),
        proto("message M { sint64 a = 1; }"),
        True,
    ),
    (
        "fixed32 to sfixed32",
        proto("message M { fixed32 a = 1; }"),
        proto("message M { sfixed32 a = 1; }"),
        True,
    ),
    ("int32 to sint32", proto(M), proto("message M { sint32 a = 1; string s = 2; }"), False),
    ("int32 to string", proto(M), proto("message M { string a = 1; string s = 2; }"), False),
    ("int32 to double", proto(M), proto("message M { double a = 1; string s = 2; }"), False),
    (
        "scalar to message",
        proto("message N {}\n" + M),
        proto("message N {}\nmessage M { N a = 1; string s = 2; }"),
        False,
    ),
    (
        "named type changed",
        proto("message N {}\nmessage O {}\nmessage M { N a = 1; }"),
        proto("message N {}\nmessage O {}\nmessage M { O a = 1; }"),
        False,
    ),
    (
        "singular to repeated",
        proto(M),
        proto("message M { repeated int32 a = 1; string s = 2; }"),
        False,
    ),
    ("message removed", proto(M + "\nmessage N { int32 x = 1; }"), proto(M), False),
    ("message added", proto(M), proto(M + "\nmessage N { int32 x = 1; }"), True),
    (
        "nested message removed",
        proto("message M { message In { int32 x = 1; } In i = 1; }"),
        proto("message M { bytes i = 1; }"),
        False,
    ),
    ("package changed", proto(M), proto(M, package="q"), False),
    (
        "enum constant added",
        proto("enum E { A = 0; B = 1; }\nmessage M { E e = 1; }"),
        proto("enum E { A = 0; B = 1; C = 2; }\nmessage M { E e = 1; }"),
        True,
    ),
    (
        "enum constant removed",
        proto("enum E { A = 0; B = 1; }\nmessage M { E e = 1; }"),
        proto("enum E { A = 0; }\nmessage M { E e = 1; }"),
        True,
    ),
    (
        "enum removed",
        proto("enum E { A = 0; }\nmessage M { int32 a = 1; }"),
        proto("message M { int32 a = 1; }"),
        False,
    ),
    (
        "field moved into a new oneof",
        proto(M),
        proto("message M { oneof o { int32 a = 1; } string s = 2; }"),
        True,
    ),
    (
        "two fields moved into a new oneof",
        proto(M),
        proto("message M { oneof o { int32 a = 1; string s = 2; } }"),
        False,
    ),
    (
        "field moved into an existing oneof",
        proto("message M { oneof o { int32 a = 1; } string s = 2; }"),
        proto("message M { oneof o { int32 a = 1; string s = 2; } }"),
        False,
    ),
    (
        "oneof field removed",
        proto("message M { oneof o { int32 a = 1; string s = 2; } }"),
        proto("message M { oneof o { int32 a = 1; } }"),
        False,
    ),
    (
        "field left its oneof",
        proto("message M { oneof o { int32 a = 1; string s = 2; } }"),
        proto("message M { int32 a = 1; oneof o { string s = 2; } }"),
        False,
    ),
    (
        "proto2 required field added",
        proto("message M { optional int32 a = 1; }", syntax="proto2"),
        proto("message M { optional int32 a = 1; required int32 b = 2; }", syntax="proto2"),
        False,
    ),
    (
        "proto2 required field removed",
        proto("message M { required int32 a = 1; optional int32 b = 2; }", syntax="proto2"),
        proto("message M { optional int32 b = 2; }", syntax="proto2"),
        False,
    ),
]


@pytest.mark.parametrize(
    ("old", "new", "compatible"), [p[1:] for p in PAIRS], ids=[p[0] for p in PAIRS]
)
def test_rules(old: str, new: str, compatible: bool) -> None:
    problems = incompatibilities(
        PROTOBUF, "BACKWARD", PROTOBUF.parse(new, {}), [PROTOBUF.parse(old, {})]
    )
    assert (problems == []) is compatible, problems


def test_text_and_descriptor_are_one_schema() -> None:
    text = PROTOBUF.parse(
        proto(
            'import "google/protobuf/timestamp.proto";\n'
            "message M { google.protobuf.Timestamp t = 1; }"
        ),
        {},
    )
    from_descriptor = PROTOBUF.parse(serialized(text), {})
    assert from_descriptor.identity == text.identity
    assert PROTOBUF.parse("  " + text.canonical + "\n", {}).canonical == text.canonical


def test_references() -> None:
    base = PROTOBUF.parse(proto("message Base { int32 x = 1; }"), {})
    top = PROTOBUF.parse(
        proto('import "base.proto";\nmessage Top { Base b = 1; }'), {"base.proto": base}
    )
    assert [m.name for m in top.model.file.message_type] == ["Top"]
    with pytest.raises(InvalidSchema):
        PROTOBUF.parse(proto('import "base.proto";\nmessage Top { Base b = 1; }'), {})


@pytest.mark.parametrize(
    "text",
    [
        proto("message M { foo a = 1; }"),
        proto("message M { int32 a = 1; int32 b = 1; }"),
        "syntax = nonsense",
        "QUJD",
        proto('import "../../etc/passwd";'),
    ],
)
def test_invalid_schemas(text: str) -> None:
    with pytest.raises(InvalidSchema):
        PROTOBUF.parse(text, {})
