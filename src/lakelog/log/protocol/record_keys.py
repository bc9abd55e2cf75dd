"""Which records of a batch have no key? Compacted topics refuse keyless records at
produce, as Kafka does (INVALID_RECORD, each keyless record named in record_errors). This
is the only per-record work on the produce path, and it runs only for topics whose
cleanup.policy holds `compact`: the batch is decompressed and each record's length, fixed
fields and key length are read, nothing more."""

from __future__ import annotations

from lakelog.log.protocol.record_reader import MAX_DECOMPRESSED_BYTES, decompress
from lakelog.log.protocol.records import HEADER_SIZE, InvalidBatch, read_header
from lakelog.log.protocol.varint import VarintError, read_varint


def keyless_record_indexes(batch: bytes | memoryview) -> list[int]:
    """Batch-relative indexes (0-based, in record order) of the records of a (CRC-checked)
    batch that have a null key: what a Produce response lists in record_errors (KIP-467).
    InvalidBatch if the records cannot be read (corrupt compression or record framing).
    An empty key is a key."""
    header = read_header(batch)
    try:
        body = decompress(
            header.compression, bytes(memoryview(batch)[HEADER_SIZE:]), MAX_DECOMPRESSED_BYTES
        )
    except Exception as exc:  # cramjam raises its own error types
        raise InvalidBatch(f"cannot decompress records: {exc}", corrupt=True) from exc
    pos, end = 0, len(body)
    keyless: list[int] = []
    try:
        for index in range(header.records_count):
            length, pos = read_varint(body, pos)
            record_end = pos + length
            if length < 0 or record_end > end:
                raise InvalidBatch("record length out of bounds", corrupt=True)
            pos += 1  # attributes
            _, pos = read_varint(body, pos)  # timestamp delta
            _, pos = read_varint(body, pos)  # offset delta
            key_length, _ = read_varint(body, pos)
            if key_length < 0:
                keyless.append(index)
            pos = record_end
    except VarintError as exc:
        raise InvalidBatch(f"malformed record: {exc}", corrupt=True) from exc
    return keyless


def all_records_keyed(batch: bytes | memoryview) -> bool:
    """True if no record of the (CRC-checked) batch has a null key. InvalidBatch if the
    records cannot be read (corrupt compression or record framing)."""
    return not keyless_record_indexes(batch)
