"""Kafka's variable-length integers: unsigned (flexible-version lengths and tags) and
zig-zag signed (record fields)."""

from __future__ import annotations


class VarintError(ValueError):
    """The buffer ends inside a varint, or the varint is too long."""


def read_uvarint(
    buf: bytes | bytearray | memoryview, pos: int, max_bytes: int = 5
) -> tuple[int, int]:
    """(value, position after it)."""
    result = shift = 0
    for _ in range(max_bytes):
        if pos >= len(buf):
            raise VarintError("buffer ends inside a varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
    raise VarintError("varint too long")


def read_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """A zig-zag signed varint (up to 64 bits)."""
    raw, pos = read_uvarint(buf, pos, max_bytes=10)
    return (raw >> 1) ^ -(raw & 1), pos


def write_uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def write_varint(value: int) -> bytes:
    """A zig-zag signed varint (64-bit), as record fields carry them."""
    return write_uvarint(((value << 1) ^ (value >> 63)) & 0xFFFF_FFFF_FFFF_FFFF)


def skip_tagged_fields(buf: bytes | bytearray | memoryview, pos: int) -> int:
    """Position after a flexible version's tagged-field section."""
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
    if pos > len(buf):
        raise VarintError("tagged fields overrun the buffer")
    return pos
