"""The mirror fetcher's Fetch on the wire: the request built with kio, the response read by
hand from the frame buffer, so each partition's records stay a (writable) slice of the one
buffer the response was read into: no copy per partition, and the producer-id rewrite
happens in place.

Fetch v4..v11 (the non-flexible versions every supported Kafka and Lakelog serve); the
fetcher asks with isolation level READ_COMMITTED: the source then answers with every batch
below its last stable offset, aborted data and transaction markers included (filtering
them is the consumer's job, so they arrive byte for byte), and nothing past it."""

from __future__ import annotations

import datetime
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kio.index import load_payload_module
from kio.static.constants import EntityType

from lakelog.admin.wire import encode_request
from lakelog.log.protocol.kio_build import build
from lakelog.util.errors import ErrorCode

FETCH_KEY = 1
MIN_FETCH_VERSION = 4
MAX_FETCH_VERSION = 11
READ_COMMITTED = 1

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PARTITION_HEAD = struct.Struct(">ihqq")
_I64 = struct.Struct(">q")


class FetchDecodeError(ValueError):
    """The response does not parse as the Fetch version asked."""


@dataclass(frozen=True, slots=True)
class FetchAsk:
    topic: str
    partition: int
    offset: int
    max_bytes: int


@dataclass(slots=True)
class FetchedPartition:
    topic: str
    partition: int
    error: ErrorCode
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: memoryview


def encode_fetch(
    version: int,
    correlation_id: int,
    client_id: str,
    asks: Sequence[FetchAsk],
    *,
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    rack: str | None = None,
) -> bytes:
    """A whole request frame (size prefix included)."""
    m = load_payload_module(FETCH_KEY, version, EntityType.request)
    by_topic: dict[str, list[FetchAsk]] = {}
    for ask in asks:
        by_topic.setdefault(ask.topic, []).append(ask)
    topics = tuple(
        m.FetchTopic(
            topic=name,
            partitions=tuple(
                build(
                    m.FetchPartition,
                    partition=a.partition,
                    current_leader_epoch=-1,
                    fetch_offset=a.offset,
                    log_start_offset=-1,
                    partition_max_bytes=a.max_bytes,
                )
                for a in parts
            ),
        )
        for name, parts in by_topic.items()
    )
    request: Any = build(
        m.FetchRequest,
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=READ_COMMITTED,
        session_id=0,
        session_epoch=-1,
        topics=topics,
        forgotten_topics_data=(),
        rack_id=rack or "",
    )
    return encode_request(FETCH_KEY, version, correlation_id, client_id, request)


def error_code(value: int) -> ErrorCode:
    """A known error code, or UNKNOWN_SERVER_ERROR for one newer than kio knows."""
    try:
        return ErrorCode(value)
    except ValueError:
        return ErrorCode.unknown_server_error


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: memoryview, pos: int) -> None:
        self.buf = buf
        self.pos = pos

    def take(self, s: struct.Struct) -> tuple[Any, ...]:
        if self.pos + s.size > len(self.buf):
            raise FetchDecodeError("response ends early")
        values = s.unpack_from(self.buf, self.pos)
        self.pos += s.size
        return values

    def int16(self) -> int:
        return int(self.take(_I16)[0])

    def int32(self) -> int:
        return int(self.take(_I32)[0])

    def string(self) -> str:
        size = self.int16()
        if size < 0 or self.pos + size > len(self.buf):
            raise FetchDecodeError("bad string length")
        value = bytes(self.buf[self.pos : self.pos + size]).decode()
        self.pos += size
        return value

    def skip(self, size: int) -> None:
        if size < 0 or self.pos + size > len(self.buf):
            raise FetchDecodeError("bad length")
        self.pos += size


def decode_fetch(version: int, frame: memoryview) -> tuple[ErrorCode, list[FetchedPartition]]:
    """(top-level error, partitions) of a response frame that starts with the correlation
    id. Records are slices of `frame`."""
    if not MIN_FETCH_VERSION <= version <= MAX_FETCH_VERSION:
        raise ValueError(f"Fetch v{version} is not read here")
    r = _Reader(frame, 4)
    r.int32()  # throttle time
    error = ErrorCode.none
    if version >= 7:
        error = error_code(r.int16())
        r.int32()  # session id
    out: list[FetchedPartition] = []
    for _ in range(r.int32()):
        topic = r.string()
        for _ in range(r.int32()):
            index, code, high, lso = r.take(_PARTITION_HEAD)
            log_start = int(r.take(_I64)[0]) if version >= 5 else -1
            aborted = r.int32()
            if aborted > 0:
                r.skip(16 * aborted)
            if version >= 11:
                r.int32()  # preferred read replica
            size = r.int32()
            start = r.pos
            if size > 0:
                r.skip(size)
            out.append(
                FetchedPartition(
                    topic,
                    int(index),
                    error_code(code),
                    int(high),
                    int(lso),
                    log_start,
                    frame[start : start + max(size, 0)],
                )
            )
    return error, out
