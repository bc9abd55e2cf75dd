"""A bounds check of a request body, run before kio decodes it.

kio 0.6.5's native decoder reserves memory for a compact array from its length varint
before it reads one element: a Metadata v12 body starting `ff ff ff ff 0f` asks for 32 GiB
and the Rust runtime aborts the whole process (SIGABRT), which no `except` catches.
`check_body` walks the body with the request's schema first and raises
`OutOfBounds` unless every length in it (array counts, strings, bytes, tagged fields) is
backed by bytes actually present, and no null stands where the schema has no null. An
array of n elements passes only when n elements are there, so kio reserves at most 8 bytes
per element present. The rule for counts is Kafka's own ("Tried to allocate a collection
of size n, but there are only m bytes remaining"), tightened by each element's least size.

A walker is built once per request class from kio's dataclass fields (the `kafka_type` and
`tag` metadata, the `| None` of nullable fields, `__flexible__`) and cached. Runs of
fixed-size fields are one step; an array of fixed-size elements is one multiplication, so
the cost grows with the number of variable-size items, not with bytes (a Produce's records
are one length). Pure: no I/O, no kio decoding.
"""

from __future__ import annotations

import dataclasses
import struct
import types
import typing
from collections.abc import Callable
from functools import cache
from typing import Any

Buffer = bytes | bytearray | memoryview
Step = Callable[[Buffer, int, int], int]
"""(buffer, position, end) -> position after the item; raises OutOfBounds."""


class OutOfBounds(ValueError):
    """A length in the body is not backed by the bytes present, or a varint is too long,
    or a non-nullable field is null."""


_FIXED_SIZES = {
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "float64": 8,
    "uuid": 16,
}
_VARIABLE_TYPES = frozenset({"string", "bytes", "records"})
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


@dataclasses.dataclass(frozen=True, slots=True)
class _Node:
    """How to pass over one item: its least size in bytes, its size when fixed, a step."""

    min_size: int
    fixed: int | None
    step: Step | None  # None for fixed-size items
    compact: bool = False  # a non-nullable compact string or bytes


def check_body(entity_cls: type, buf: Buffer, pos: int) -> int:
    """Position after the encoded `entity_cls` (a kio request or response class) starting
    at `pos`; bytes after it are allowed (Kafka ignores them too). Raises OutOfBounds."""
    return walker(entity_cls)(buf, pos, len(buf))


@cache
def walker(entity_cls: type) -> Step:
    """The cached walker for a kio entity class (raises TypeError on a type kio lacks)."""
    return _as_step(_entity(entity_cls))


# --- varints -------------------------------------------------------------------------


def _uvarint(buf: Buffer, pos: int, end: int) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes (Kafka's limit), within `end`."""
    if pos >= end:
        raise OutOfBounds("body ends inside a varint")
    byte = buf[pos]
    if byte < 0x80:
        return byte, pos + 1
    value = byte & 0x7F
    shift = 7
    pos += 1
    while True:
        if pos >= end:
            raise OutOfBounds("body ends inside a varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift >= 35:
            raise OutOfBounds("varint longer than 5 bytes")


def _int16(buf: Buffer, pos: int, end: int) -> int:
    if pos + 2 > end:
        raise OutOfBounds("body ends inside a length")
    return _INT16.unpack_from(buf, pos)[0]


def _int32(buf: Buffer, pos: int, end: int) -> int:
    if pos + 4 > end:
        raise OutOfBounds("body ends inside a length")
    return _INT32.unpack_from(buf, pos)[0]


# --- steps -----------------------------------------------------------------------------


def _fixed_step(size: int) -> Step:
    def fixed(buf: Buffer, pos: int, end: int) -> int:
        pos += size
        if pos > end:
            raise OutOfBounds(f"body ends inside a {size}-byte field")
        return pos

    return fixed


def _as_step(node: _Node) -> Step:
    return node.step if node.step is not None else _fixed_step(node.fixed or 0)


def _compact_bytes(nullable: bool) -> Step:
    """Compact string or bytes: uvarint length + 1, 0 for null."""

    def compact(buf: Buffer, pos: int, end: int) -> int:
        if pos < end and buf[pos] < 0x80:  # a length below 127: one byte
            n = buf[pos]
            pos += 1
        else:
            n, pos = _uvarint(buf, pos, end)
        if n == 0:
            if nullable:
                return pos
            raise OutOfBounds("null in a non-nullable string or bytes field")
        pos += n - 1
        if pos > end:
            raise OutOfBounds(f"a string or bytes of {n - 1} bytes overruns the body")
        return pos

    return compact


def _legacy_bytes(nullable: bool, width: int) -> Step:
    """Legacy string (int16 length) or bytes (int32 length), -1 for null."""
    read_length = _int16 if width == 2 else _int32

    def legacy(buf: Buffer, pos: int, end: int) -> int:
        n = read_length(buf, pos, end)
        pos += width
        if n < 0:
            if n == -1 and nullable:
                return pos
            raise OutOfBounds(f"length {n} in a non-nullable string or bytes field")
        pos += n
        if pos > end:
            raise OutOfBounds(f"a string or bytes of {n} bytes overruns the body")
        return pos

    return legacy


def _array(elem: _Node, flexible: bool, nullable: bool) -> _Node:
    # Every element takes a byte at least (Kafka's rule), more where the schema says so.
    least = max(elem.min_size, 1)
    fixed = elem.fixed
    walk = elem.step

    def count(buf: Buffer, pos: int, end: int) -> tuple[int, int]:
        if flexible:
            n, pos = _uvarint(buf, pos, end)
            n -= 1  # compact: length + 1, 0 for null
        else:
            n = _int32(buf, pos, end)
            pos += 4
        if n < 0:
            if n == -1 and nullable:
                return 0, pos
            raise OutOfBounds(f"array length {n} in a non-nullable array")
        if n * least > end - pos:
            raise OutOfBounds(
                f"array of {n} elements of at least {least} bytes, {end - pos} bytes left"
            )
        return n, pos

    if fixed is not None:

        def fixed_array(buf: Buffer, pos: int, end: int) -> int:
            n, pos = count(buf, pos, end)
            return pos + n * fixed  # within end: least == fixed (or 1 for empty elements)

        step: Step = fixed_array
    elif elem.compact:
        assert walk is not None

        def compact_array(buf: Buffer, pos: int, end: int) -> int:
            """Strings of a flexible array, with the one-byte length read inline: the cost
            of a body of many tiny strings is this loop."""
            n, pos = count(buf, pos, end)
            for _ in range(n):
                if pos >= end:
                    raise OutOfBounds("body ends inside an array")
                length = buf[pos]
                if 0 < length < 0x80:
                    pos += length  # the length byte and length - 1 bytes
                else:
                    pos = walk(buf, pos, end)  # longer lengths; null, which it refuses
            if pos > end:
                raise OutOfBounds("the last string of an array overruns the body")
            return pos

        step = compact_array
    else:
        assert walk is not None

        def array(buf: Buffer, pos: int, end: int) -> int:
            n, pos = count(buf, pos, end)
            for _ in range(n):
                pos = walk(buf, pos, end)
            return pos

        step = array
    return _Node(4 if not flexible else 1, None, step)


def _tagged_fields(known: dict[int, Step]) -> Step:
    """A flexible entity's tagged fields: count, then (tag, size, bytes) each; known tags
    are walked within their size, since kio decodes them, and must fill it exactly."""

    def tagged(buf: Buffer, pos: int, end: int) -> int:
        count, pos = _uvarint(buf, pos, end)
        if count == 0:
            return pos
        if count * 2 > end - pos:  # a tag and a size take a byte each at least
            raise OutOfBounds(f"{count} tagged fields, {end - pos} bytes left")
        for _ in range(count):
            tag, pos = _uvarint(buf, pos, end)
            size, pos = _uvarint(buf, pos, end)
            stop = pos + size
            if stop > end:
                raise OutOfBounds(f"tagged field {tag} of {size} bytes overruns the body")
            walk = known.get(tag)
            if walk is not None and walk(buf, pos, stop) != stop:
                # kio reads on from where the value ends, not from its size: the bytes it
                # would read next must be the ones checked here.
                raise OutOfBounds(f"tagged field {tag} is not {size} bytes long")
            pos = stop
        return pos

    return tagged


# --- building from kio's dataclasses -------------------------------------------------------


def _unwrap_optional(tp: Any) -> tuple[Any, bool]:
    """(the type without `| None`, whether None was allowed)."""
    if typing.get_origin(tp) in (types.UnionType, typing.Union):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"unsupported union {tp!r}")
        return args[0], True
    return tp, False


def _field_node(field: dataclasses.Field[Any], flexible: bool, tagged: bool) -> _Node:
    tp, nullable = _unwrap_optional(field.type)
    if tagged:
        # A tagged field is null by its absence: a struct has no null marker then;
        # strings and arrays are let through null and kio decides what that means.
        nullable = not dataclasses.is_dataclass(tp)
    kafka_type = field.metadata.get("kafka_type")
    if typing.get_origin(tp) is tuple:
        args = typing.get_args(tp)
        if len(args) != 2 or args[1] is not Ellipsis:
            raise TypeError(f"unsupported tuple type {tp!r} of {field.name}")
        inner, _ = _unwrap_optional(args[0])
        if dataclasses.is_dataclass(inner):
            elem = _entity(inner)
        else:
            elem = _primitive(kafka_type, flexible, nullable=False, name=field.name)
        return _array(elem, flexible, nullable)
    if dataclasses.is_dataclass(tp):
        entity = _entity(tp)
        return _nullable_entity(entity) if nullable else entity
    return _primitive(kafka_type, flexible, nullable, field.name)


def _primitive(kafka_type: Any, flexible: bool, nullable: bool, name: str) -> _Node:
    if kafka_type in _FIXED_SIZES:
        size = _FIXED_SIZES[kafka_type]
        return _Node(size, size, None)
    if kafka_type not in _VARIABLE_TYPES:
        raise TypeError(f"unsupported kafka_type {kafka_type!r} of {name}")
    if flexible:
        return _Node(1, None, _compact_bytes(nullable), compact=not nullable)
    width = 2 if kafka_type == "string" else 4
    return _Node(width, None, _legacy_bytes(nullable, width))


def _nullable_entity(entity: _Node) -> _Node:
    """A nullable struct (KIP-893): an int8 marker, negative for null, then the struct."""
    walk = _as_step(entity)

    def nullable_struct(buf: Buffer, pos: int, end: int) -> int:
        if pos >= end:
            raise OutOfBounds("body ends before a struct marker")
        if buf[pos] >= 0x80:
            return pos + 1
        return walk(buf, pos + 1, end)

    return _Node(1, None, nullable_struct)


@cache
def _entity(cls: type) -> _Node:
    flexible = bool(getattr(cls, "__flexible__", False))
    steps: list[Step] = []
    min_size = 0
    run = 0  # bytes of the fixed-size fields not yet emitted as a step
    known_tags: dict[int, Step] = {}
    for field in dataclasses.fields(cls):
        tag = field.metadata.get("tag")
        if tag is not None:
            known_tags[int(tag)] = _as_step(_field_node(field, flexible, tagged=True))
            continue
        node = _field_node(field, flexible, tagged=False)
        min_size += node.min_size
        if node.fixed is not None:
            run += node.fixed
            continue
        if run:
            steps.append(_fixed_step(run))
            run = 0
        assert node.step is not None
        steps.append(node.step)
    if flexible:
        return _Node(min_size + 1, None, _flexible_entity(steps, run, known_tags))
    if not steps:
        return _Node(run, run, None)  # every field has a fixed size
    if run:
        steps.append(_fixed_step(run))
    if len(steps) == 1:
        return _Node(min_size, None, steps[0])
    walk_steps = tuple(steps)

    def entity(buf: Buffer, pos: int, end: int) -> int:
        for step in walk_steps:
            pos = step(buf, pos, end)
        return pos

    return _Node(min_size, None, entity)


def _flexible_entity(steps: list[Step], run: int, known_tags: dict[int, Step]) -> Step:
    """The fields' steps, `run` fixed bytes, then the tagged fields (mostly none: one zero
    byte, checked inline since it ends every element of a flexible array)."""
    tagged = _tagged_fields(known_tags)
    if not steps:

        def fixed_then_tags(buf: Buffer, pos: int, end: int) -> int:
            pos += run
            if pos < end and buf[pos] == 0:
                return pos + 1
            return tagged(buf, pos, end)  # raises when pos >= end

        return fixed_then_tags
    walk_steps = tuple(steps)

    def entity(buf: Buffer, pos: int, end: int) -> int:
        for step in walk_steps:
            pos = step(buf, pos, end)
        pos += run
        if pos < end and buf[pos] == 0:
            return pos + 1
        return tagged(buf, pos, end)

    return entity
