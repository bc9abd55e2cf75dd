"""The first bytes of each record's key and value in a batch: what produce-time schema
validation reads (the wire format's magic byte and schema id). Only topics that turned the
validation on pay for it: the batch is decompressed and each record's framing walked."""

from __future__ import annotations

from lakelog.log.protocol.record_reader import MAX_DECOMPRESSED_BYTES, decompress
from lakelog.log.protocol.records import HEADER_SIZE, InvalidBatch, read_header
from lakelog.log.protocol.varint import VarintError, read_varint

Prefix = bytes | None
"""Up to `size` first bytes of a key or value; None for a null one."""


def record_prefixes(batch: bytes | memoryview, size: int = 5) -> list[tuple[Prefix, Prefix]]:
    """(key prefix, value prefix) of each record of a (CRC-checked) batch, in order.
    InvalidBatch if the records cannot be read."""
    header = read_header(batch)
    try:
        body = decompress(
            header.compression, bytes(memoryview(batch)[HEADER_SIZE:]), MAX_DECOMPRESSED_BYTES
        )
    except Exception as exc:  # cramjam raises its own error types
        raise InvalidBatch(f"cannot decompress records: {exc}", corrupt=True) from exc
    end = len(body)
    found: list[tuple[Prefix, Prefix]] = []
    pos = 0
    try:
        for _ in range(header.records_count):
            length, pos = read_varint(body, pos)
            record_end = pos + length
            if length < 0 or record_end > end:
                raise InvalidBatch("record length out of bounds", corrupt=True)
            pos += 1  # attributes
            _, pos = read_varint(body, pos)  # timestamp delta
            _, pos = read_varint(body, pos)  # offset delta
            key_length, pos = read_varint(body, pos)
            key = None if key_length < 0 else body[pos : pos + min(key_length, size)]
            pos += max(key_length, 0)
            value_length, pos = read_varint(body, pos)
            value = None if value_length < 0 else body[pos : pos + min(value_length, size)]
            if pos > record_end or pos + max(value_length, 0) > record_end:
                raise InvalidBatch("record fields out of bounds", corrupt=True)
            found.append(
                (
                    bytes(key) if key is not None else None,
                    bytes(value) if value is not None else None,
                )
            )
            pos = record_end
    except VarintError as exc:
        raise InvalidBatch(f"malformed record: {exc}", corrupt=True) from exc
    return found
