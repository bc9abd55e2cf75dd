"""Fetch responses encoded by hand as a list of buffers, so batch bytes are never copied.

Covers Fetch v4-v18 (v18 answers as v17): v12 is the first flexible version, v13 names
topics by id (KIP-516). v16's tagged fields (the current leader and node endpoints, sent
with NOT_LEADER errors) are never needed here: any broker serves any partition.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from uuid import UUID

from lakelog.log.protocol.varint import write_uvarint

Buffer = bytes | bytearray | memoryview

_PARTITION_HEAD = struct.Struct(">ihqq")  # index, error, high watermark, last stable offset
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")


@dataclass(slots=True)
class PartitionData:
    index: int
    error: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    aborted: Sequence[tuple[int, int]] | None = None
    """(producer id, first offset) of aborted transactions; None encodes null."""
    records: list[Buffer] = field(default_factory=list)
    records_size: int = 0


def _string(value: str, flexible: bool) -> bytes:
    data = value.encode()
    return (write_uvarint(len(data) + 1) if flexible else _INT16.pack(len(data))) + data


def _array_len(count: int, flexible: bool) -> bytes:
    return write_uvarint(count + 1) if flexible else _INT32.pack(count)


def encode_fetch_response(
    version: int,
    topics: Sequence[tuple[str | UUID, Sequence[PartitionData]]],
    *,
    error: int = 0,
    session_id: int = 0,
) -> list[Buffer]:
    """The response body (no size prefix or header) for Fetch `version` (4..18); topics
    are named by name before v13 and by id (a UUID) from v13."""
    flexible = version >= 12
    head = bytearray(_INT32.pack(0))  # throttle_time_ms
    if version >= 7:
        head += _INT16.pack(error) + _INT32.pack(session_id)
    head += _array_len(len(topics), flexible)
    parts: list[Buffer] = [head]
    for name, partitions in topics:
        out = bytearray(name.bytes if isinstance(name, UUID) else _string(name, flexible))
        out += _array_len(len(partitions), flexible)
        for p in partitions:
            out += _PARTITION_HEAD.pack(p.index, p.error, p.high_watermark, p.last_stable_offset)
            if version >= 5:
                out += _INT64.pack(p.log_start_offset)
            if p.aborted is None:
                out += b"\x00" if flexible else _INT32.pack(-1)
            else:
                out += _array_len(len(p.aborted), flexible)
                for producer_id, first_offset in p.aborted:
                    out += _INT64.pack(producer_id) + _INT64.pack(first_offset)
                    if flexible:
                        out += b"\x00"
            if version >= 11:
                out += _INT32.pack(-1)  # preferred read replica
            out += write_uvarint(p.records_size + 1) if flexible else _INT32.pack(p.records_size)
            parts.append(out)
            parts.extend(p.records)
            out = bytearray(b"\x00" if flexible else b"")  # partition tagged fields
        if flexible:
            out += b"\x00"  # topic tagged fields
        parts.append(out)
    if flexible:
        parts.append(b"\x00")
    return [p for p in parts if len(p)]
