"""The WAL object format: record batches grouped by partition, then a footer that indexes them.

One sealed produce buffer becomes one object, so the object must describe itself: GC,
merge and recovery tools can read the footer and know every batch in it without the
coordinator. All integers are big-endian, like Kafka's wire format.

    object  := batch-bytes* footer trailer
    footer  := entry*                       (ENTRY_SIZE bytes each, in object order)
    entry   := topic_id:16s partition:i32 offset:u64 size:u32 record_count:i32
               producer_id:i64 producer_epoch:i16 base_sequence:i32
    trailer := footer_length:u32 entry_count:u32 footer_crc32c:u32 version:u16 magic:6s

Batches of one (topic id, partition) are contiguous and keep their arrival order (produce
objects group them by producer id first: each producer's batches keep their order, and
the order between producers of one object is no promise Kafka makes); the groups are
sorted by (topic id, partition), so the footer is sorted too. There is no
header: readers find the trailer at the end (one suffix range request) and batch offsets
stay plain object offsets.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import crc32c

if TYPE_CHECKING:
    from lakelog.log.storage.store import ObjectStorage

__all__ = [
    "ENTRY_SIZE",
    "FORMAT_VERSION",
    "MAGIC",
    "TRAILER_SIZE",
    "WalEntry",
    "WalEntryInfo",
    "WalFormatError",
    "WalObject",
    "build_wal",
    "read_footer",
    "read_footer_from_store",
]

MAGIC = b"LKLWAL"
FORMAT_VERSION = 1
_ENTRY = struct.Struct(">16siQIiqhi")
_TRAILER = struct.Struct(">IIIH6s")
ENTRY_SIZE = _ENTRY.size
TRAILER_SIZE = _TRAILER.size
_MAX_BATCH = 2**32 - 1
# One suffix read of this size covers the footer of any object up to ~1300 batches.
_TAIL_GUESS = 64 * 1024


class WalFormatError(ValueError):
    """The bytes are not a (complete, uncorrupted) WAL object of a known version."""


class WalEntry(NamedTuple):
    """One batch handed in by the produce path (a plain tuple works too)."""

    topic_id: uuid.UUID
    partition: int
    batch: bytes | bytearray | memoryview
    record_count: int
    producer_id: int
    producer_epoch: int
    base_sequence: int


class WalEntryInfo(NamedTuple):
    """One footer entry: where a batch lives in the object and its producer fields."""

    topic_id: uuid.UUID
    partition: int
    offset: int
    size: int
    record_count: int
    producer_id: int
    producer_epoch: int
    base_sequence: int


@dataclass(frozen=True, slots=True)
class WalObject:
    """An object ready for `ObjectStorage.put(key, parts)`, never joined in Python.

    `placements[i]` is `(byte_offset, byte_size)` of input entry i, so the caller can map
    commit results back to the waiting requests.
    """

    parts: list[bytes | bytearray | memoryview]
    size: int
    placements: list[tuple[int, int]]


def build_wal(entries: Sequence[WalEntry | tuple], *, by_producer: bool = False) -> WalObject:
    """Lay out entries as a WAL object: batch buffers as given, plus one footer buffer.
    `by_producer`: within a partition, each producer id's batches lie together (in their
    arrival order), so one producer's batches are back to back (one coordinator row)."""
    count = len(entries)
    typed = [WalEntry(*entry) for entry in entries]
    sizes = [_nbytes(entry.batch) for entry in typed]

    def place(i: int) -> tuple[bytes, int, int, int]:
        e = typed[i]
        return (e.topic_id.bytes, e.partition, e.producer_id if by_producer else 0, i)

    order = sorted(range(count), key=place)
    footer = bytearray(count * ENTRY_SIZE + TRAILER_SIZE)
    placements: list[tuple[int, int]] = [(0, 0)] * count
    parts: list[bytes | bytearray | memoryview] = []
    offset = 0
    for slot, i in enumerate(order):
        entry, size = typed[i], sizes[i]
        if size > _MAX_BATCH:
            raise ValueError(f"batch {i} is {size} bytes; the WAL format allows {_MAX_BATCH}")
        try:
            _ENTRY.pack_into(
                footer,
                slot * ENTRY_SIZE,
                entry.topic_id.bytes,
                entry.partition,
                offset,
                size,
                entry.record_count,
                entry.producer_id,
                entry.producer_epoch,
                entry.base_sequence,
            )
        except struct.error as exc:
            raise ValueError(f"entry {i} has a field out of range: {exc}") from None
        placements[i] = (offset, size)
        parts.append(entry.batch)
        offset += size
    footer_length = count * ENTRY_SIZE
    footer_crc = crc32c.crc32c(memoryview(footer)[:footer_length])
    _TRAILER.pack_into(
        footer, footer_length, footer_length, count, footer_crc, FORMAT_VERSION, MAGIC
    )
    parts.append(bytes(footer))
    return WalObject(parts, offset + len(footer), placements)


def read_footer(data: bytes | memoryview, object_size: int | None = None) -> list[WalEntryInfo]:
    """Parse the footer from the object, or from any suffix of it that holds the footer.

    Pass `object_size` when `data` is only a suffix, so batch bounds can be checked.
    Entries come in object order. `WalFormatError` on anything malformed.
    """
    view = memoryview(data).cast("B")
    size = len(view) if object_size is None else object_size
    if size < len(view):
        raise ValueError("object_size is smaller than the data given")
    footer_length, count = _parse_trailer(view, size)
    if footer_length + TRAILER_SIZE > len(view):
        raise WalFormatError("the data given does not hold the whole footer")
    footer = view[len(view) - TRAILER_SIZE - footer_length : len(view) - TRAILER_SIZE]
    _check_crc(view, footer)
    data_end = size - TRAILER_SIZE - footer_length
    entries: list[WalEntryInfo] = []
    expected_offset = 0
    for fields in _ENTRY.iter_unpack(footer):
        topic_bytes, partition, offset, length, *rest = fields
        if offset != expected_offset or offset + length > data_end:
            raise WalFormatError(f"footer entry {len(entries)} points outside the batch area")
        expected_offset = offset + length
        entries.append(WalEntryInfo(uuid.UUID(bytes=topic_bytes), partition, offset, length, *rest))
    if expected_offset != data_end or len(entries) != count:
        raise WalFormatError("footer entries do not cover the batch area")
    return entries


async def read_footer_from_store(storage: ObjectStorage, key: str) -> list[WalEntryInfo]:
    """Read an object's footer with range requests only: usually one, at most two."""
    tail, size = await storage.get_tail(key, _TAIL_GUESS)
    view = memoryview(tail)
    footer_length, _ = _parse_trailer(view, size)
    needed = footer_length + TRAILER_SIZE
    if needed > len(view):
        start = size - needed
        head = await storage.get_range(key, start, size - len(view))
        if len(head) != needed - len(view):
            raise WalFormatError(f"object {key} changed size while reading its footer")
        return read_footer(bytes(head) + bytes(view), size)
    return read_footer(view, size)


def _parse_trailer(view: memoryview, object_size: int) -> tuple[int, int]:
    """Validate the trailer at the end of `view`; return (footer length, entry count)."""
    if len(view) < TRAILER_SIZE:
        raise WalFormatError("too short for a WAL trailer")
    footer_length, count, _, version, magic = _TRAILER.unpack(view[-TRAILER_SIZE:])
    if magic != MAGIC:
        raise WalFormatError("no WAL magic at the end of the object")
    if version != FORMAT_VERSION:
        raise WalFormatError(f"unsupported WAL format version {version}")
    if footer_length != count * ENTRY_SIZE or footer_length + TRAILER_SIZE > object_size:
        raise WalFormatError("inconsistent WAL footer length")
    return footer_length, count


def _check_crc(view: memoryview, footer: memoryview) -> None:
    (stored,) = struct.unpack_from(">I", view, len(view) - TRAILER_SIZE + 8)
    if crc32c.crc32c(footer) != stored:
        raise WalFormatError("WAL footer checksum mismatch")


def _nbytes(buffer: bytes | bytearray | memoryview) -> int:
    return buffer.nbytes if isinstance(buffer, memoryview) else len(buffer)
