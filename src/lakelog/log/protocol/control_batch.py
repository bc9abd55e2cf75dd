"""Transaction markers as Kafka control batches.

Markers exist only as coordinator rows (no object holds them), so the broker builds the
bytes a consumer expects at fetch time: a v2 record batch with the control and
transactional attribute bits, the transaction's producer id and epoch, and one control
record (key: version 0 + type; value: version 0 + coordinator epoch), as Kafka's
EndTransactionMarker writes it. Clients filter aborted data with it.
"""

from __future__ import annotations

import struct

import crc32c

from lakelog.log.protocol.records import (
    ATTRIBUTES_OFFSET,
    CONTROL_BIT,
    CRC_OFFSET,
    LOG_OVERHEAD,
    TRANSACTIONAL_BIT,
)

CONTROL_ABORT = 0
CONTROL_COMMIT = 1
CONTROL_RECORD_VERSION = 0
COORDINATOR_EPOCH = 0
"""Kafka fences stale transaction coordinators with it; here the database does that, and
clients do not read it."""
PARTITION_LEADER_EPOCH = 0
"""The leader epoch every Lakelog partition reports (OffsetForLeaderEpoch answers 0)."""

_HEADER = struct.Struct(">qiibIhiqqqhii")
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")

# One record: attributes 0, timestampDelta 0, offsetDelta 0, key, value, no headers. Every
# varint here is below 64, so it is one byte: zig-zag doubles the value.
_RECORD_BODY_SIZE = 1 + 1 + 1 + 1 + _KEY.size + 1 + _VALUE.size + 1
_RECORD_SIZE = 1 + _RECORD_BODY_SIZE
CONTROL_BATCH_SIZE = _HEADER.size + _RECORD_SIZE
"""Bytes of every control batch (78)."""


def _record(control_type: int) -> bytes:
    return (
        bytes((_RECORD_BODY_SIZE << 1, 0, 0, 0, _KEY.size << 1))
        + _KEY.pack(CONTROL_RECORD_VERSION, control_type)
        + bytes((_VALUE.size << 1,))
        + _VALUE.pack(CONTROL_RECORD_VERSION, COORDINATOR_EPOCH)
        + b"\x00"
    )


def control_batch(
    base_offset: int, producer_id: int, producer_epoch: int, control_type: int, timestamp: int
) -> bytes:
    """The control batch of one marker at `base_offset`, written at `timestamp` (ms)."""
    if control_type not in (CONTROL_ABORT, CONTROL_COMMIT):
        raise ValueError(f"unknown control type {control_type}")
    out = bytearray(
        _HEADER.pack(
            base_offset,
            CONTROL_BATCH_SIZE - LOG_OVERHEAD,
            PARTITION_LEADER_EPOCH,
            2,
            0,  # crc, set below
            CONTROL_BIT | TRANSACTIONAL_BIT,
            0,  # lastOffsetDelta
            timestamp,
            timestamp,
            producer_id,
            producer_epoch,
            -1,  # baseSequence
            1,
        )
    )
    out += _record(control_type)
    crc = crc32c.crc32c(memoryview(out)[ATTRIBUTES_OFFSET:])
    out[CRC_OFFSET : CRC_OFFSET + 4] = crc.to_bytes(4, "big")
    return bytes(out)
