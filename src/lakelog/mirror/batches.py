"""Source batches made ready to store: split a fetched partition's records, check each
batch, rewrite its producer id in place and recompute its CRC.

Only headers are read and patched (plus a control batch's record key, to learn commit or
abort); batches stay slices of the fetch response buffer. The producer id becomes
`Long.MAX_VALUE - source_pid - 1`: positive, so the destination's producer and
transaction tracking apply, and disjoint from the ids the destination allocates itself.
The rewrite changes bytes the CRC covers, so each batch with a producer id costs one
CRC32C over its bytes (~38 us per MiB): the price of VK9 in the KIP-1279 review.

A batch that fails a check raises `PoisonBatch` with the reason; the caller fails only
that partition (the batches before it are still good)."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import crc32c

from lakelog.coordinator.mirror_types import mirrored_producer_id
from lakelog.log.protocol.records import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CONTROL_BIT,
    CRC_OFFSET,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
)
from lakelog.log.protocol.varint import VarintError, read_varint

PRODUCER_ID_OFFSET = 43
_HEADER = struct.Struct(">qiibIhiqqqhii")
_INT64 = struct.Struct(">q")
_CONTROL_KEY = struct.Struct(">hh")


class PoisonBatch(ValueError):
    """A batch the mirror must not store (corrupt or undecodable)."""


@dataclass(frozen=True, slots=True)
class SourceBatch:
    """One checked batch, producer id already rewritten in `data`."""

    data: memoryview
    base_offset: int
    last_offset: int
    leader_epoch: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    is_transactional: bool
    control_type: int
    """-1 for data, else the control record type (0 abort, 1 commit)."""
    log_append_time: bool

    @property
    def size(self) -> int:
        return len(self.data)


def split_fetched(records: memoryview) -> Iterator[memoryview]:
    """Whole batches of a fetched partition's records. A fetch may end inside a batch
    (the response ran out of bytes): that tail is dropped and fetched again next time. A
    size field pointing backwards or a non-v2 magic is poison."""
    pos, end = 0, len(records)
    while end - pos >= LOG_OVERHEAD:
        length = int.from_bytes(records[pos + 8 : pos + 12], "big", signed=True)
        if length < HEADER_SIZE - LOG_OVERHEAD:
            raise PoisonBatch(f"batch length {length} at byte {pos} is too small")
        size = length + LOG_OVERHEAD
        if pos + size > end:
            return
        if records[pos + MAGIC_OFFSET] != 2:
            raise PoisonBatch(f"magic {records[pos + MAGIC_OFFSET]} batch at byte {pos}")
        yield records[pos : pos + size]
        pos += size


def control_type(batch: memoryview) -> int:
    """The type of a control batch's (first) record: its key is version:int16, type:int16."""
    try:
        pos = HEADER_SIZE
        _length, pos = read_varint(batch, pos)
        pos += 1  # attributes
        _, pos = read_varint(batch, pos)  # timestamp delta
        _, pos = read_varint(batch, pos)  # offset delta
        key_length, pos = read_varint(batch, pos)
    except VarintError as exc:
        raise PoisonBatch(f"undecodable control record: {exc}") from None
    if key_length < _CONTROL_KEY.size or pos + key_length > len(batch):
        raise PoisonBatch("control record key too short")
    _version, kind = _CONTROL_KEY.unpack_from(batch, pos)
    if kind not in (0, 1):
        raise PoisonBatch(f"unknown control record type {kind}")
    return int(kind)


def prepare(batch: memoryview) -> SourceBatch:
    """Check one batch and rewrite its producer id in place (the buffer must be writable)."""
    (
        base_offset,
        _length,
        leader_epoch,
        _magic,
        crc,
        attributes,
        last_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        records_count,
    ) = _HEADER.unpack_from(batch, 0)
    if crc32c.crc32c(batch[ATTRIBUTES_OFFSET:]) != crc:
        raise PoisonBatch(f"CRC mismatch in the batch at offset {base_offset}")
    if base_offset < 0 or last_delta < 0 or records_count < 0:
        raise PoisonBatch(f"impossible header at offset {base_offset}")
    is_control = bool(attributes & CONTROL_BIT)
    kind = -1
    if is_control:
        if attributes & COMPRESSION_MASK:
            raise PoisonBatch(f"compressed control batch at offset {base_offset}")
        kind = control_type(batch)
    mirrored = mirrored_producer_id(producer_id)
    if mirrored != producer_id:
        _INT64.pack_into(batch, PRODUCER_ID_OFFSET, mirrored)
        batch[CRC_OFFSET : CRC_OFFSET + 4] = crc32c.crc32c(batch[ATTRIBUTES_OFFSET:]).to_bytes(
            4, "big"
        )
    return SourceBatch(
        data=batch,
        base_offset=base_offset,
        last_offset=base_offset + last_delta,
        leader_epoch=leader_epoch,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=mirrored,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        is_transactional=bool(attributes & TRANSACTIONAL_BIT),
        control_type=kind,
        log_append_time=bool(attributes & TIMESTAMP_TYPE_BIT),
    )


@dataclass(slots=True)
class PartitionBatches:
    """What one fetched partition yields: the good batches from `start`, in order, and
    the reason the partition must fail (None if all were good)."""

    batches: list[SourceBatch]
    poison: str | None = None


def prepare_partition(records: memoryview, start: int) -> PartitionBatches:
    """Prepare the batches that end at or after `start` (a fetch may begin with the batch
    holding `start`), stopping at the first bad one."""
    out = PartitionBatches([])
    try:
        for raw in split_fetched(records):
            last = int.from_bytes(raw[0:8], "big", signed=True) + int.from_bytes(
                raw[23:27], "big", signed=True
            )
            if last < start:
                continue
            out.batches.append(prepare(raw))
    except PoisonBatch as exc:
        out.poison = str(exc)
    return out
