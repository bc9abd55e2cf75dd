"""The Kafka wire format by hand, for tests that must send what no client would.

Requests are encoded with kio (request header v1, or v2 for flexible versions), record
batches and legacy message sets are built byte by byte, so a test can corrupt exactly one
field. Nothing here imports the broker.
"""

from __future__ import annotations

import datetime
import io
import socket
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import crc32c
from e2e_harness import HOST, recv_exact
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

# ------------------------------------------------------------------- framing


def encode_request(
    api_key: int, api_version: int, correlation_id: int, body: Any, client_id: str = "e2e-wire"
) -> bytes:
    """A whole frame (size prefix included) with request header v1 (v2 when flexible)."""
    cls = load_request_schema(api_key, api_version)
    out = io.BytesIO()
    cid = client_id.encode()
    out.write(struct.pack(">hhih", api_key, api_version, correlation_id, len(cid)) + cid)
    if cls.__flexible__:
        out.write(b"\x00")  # no tagged header fields
    entity_writer(cls)(out, body)
    payload = out.getvalue()
    return struct.pack(">i", len(payload)) + payload


def decode_response(api_key: int, api_version: int, frame: bytes) -> tuple[int, Any]:
    """(correlation id, kio response object) from a response frame without its size."""
    (correlation_id,) = struct.unpack_from(">i", frame)
    cls = load_response_schema(api_key, api_version)
    # Flexible responses carry header v1 (tagged fields), except ApiVersions.
    start = 5 if cls.__flexible__ and api_key != 18 else 4
    obj, size = entity_reader(cls)(memoryview(frame).toreadonly(), start)
    if start + size != len(frame):
        raise ValueError(f"{len(frame) - 4 - size} trailing bytes after the response")
    return correlation_id, obj


def request_class(api_key: int, api_version: int) -> Any:
    """The kio module of a request, to build bodies: `request_class(0, 7).ProduceRequest`."""
    import inspect

    return inspect.getmodule(load_request_schema(api_key, api_version))


class WireClient:
    """One TCP connection speaking raw frames."""

    def __init__(self, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection((HOST, port), timeout=timeout)
        self._next_id = 1

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes:
        (size,) = struct.unpack(">i", recv_exact(self.sock, 4))
        return recv_exact(self.sock, size)

    def request(self, api_key: int, api_version: int, body: Any) -> Any:
        correlation_id = self._next_id
        self._next_id += 1
        self.send_raw(encode_request(api_key, api_version, correlation_id, body))
        got, response = decode_response(api_key, api_version, self.read_frame())
        assert got == correlation_id, f"correlation id {got}, expected {correlation_id}"
        return response

    def closed_by_peer(self, timeout: float = 10.0) -> bool:
        """True if the broker closes the connection (EOF or reset) within `timeout` without
        sending anything; False if it sends bytes; TimeoutError if neither."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(1 << 16)
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError as exc:
            raise TimeoutError(f"connection still open after {timeout}s") from exc
        return data == b""


# ------------------------------------------------------------------- requests


def produce_v7(
    topic_parts: dict[str, dict[int, bytes | None]], acks: int = -1, timeout_ms: int = 10000
) -> Any:
    m = request_class(0, 7)
    return m.ProduceRequest(
        transactional_id=None,
        acks=m.i16(acks),
        timeout=datetime.timedelta(milliseconds=timeout_ms),
        topic_data=tuple(
            m.TopicProduceData(
                name=m.TopicName(topic),
                partition_data=tuple(
                    m.PartitionProduceData(index=m.i32(p), records=records)
                    for p, records in parts.items()
                ),
            )
            for topic, parts in topic_parts.items()
        ),
    )


def metadata_v1(topics: Sequence[str] | None) -> Any:
    m = request_class(3, 1)
    return m.MetadataRequest(
        topics=None
        if topics is None
        else tuple(m.MetadataRequestTopic(name=m.TopicName(t)) for t in topics)
    )


def api_versions_v0() -> Any:
    return request_class(18, 0).ApiVersionsRequest()


def fetch_v4(
    topic: str, partition: int, offset: int, max_bytes: int = 1 << 20, max_wait_ms: int = 100
) -> Any:
    m = request_class(1, 4)
    return m.FetchRequest(
        replica_id=m.BrokerId(-1),
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=m.i32(1),
        max_bytes=m.i32(max_bytes),
        isolation_level=m.i8(0),
        topics=(
            m.FetchTopic(
                topic=m.TopicName(topic),
                partitions=(
                    m.FetchPartition(
                        partition=m.i32(partition),
                        fetch_offset=m.i64(offset),
                        partition_max_bytes=m.i32(max_bytes),
                    ),
                ),
            ),
        ),
    )


def list_offsets_v1(topic: str, partition: int, timestamp: int) -> Any:
    m = request_class(2, 1)
    return m.ListOffsetsRequest(
        replica_id=m.BrokerId(-1),
        topics=(
            m.ListOffsetsTopic(
                name=m.TopicName(topic),
                partitions=(
                    m.ListOffsetsPartition(
                        partition_index=m.i32(partition), timestamp=m.i64(timestamp)
                    ),
                ),
            ),
        ),
    )


def produce_errors(response: Any) -> dict[tuple[str, int], tuple[int, int]]:
    """{(topic, partition): (error code, base offset)} of a Produce response."""
    return {
        (str(t.name), int(p.index)): (int(p.error_code), int(p.base_offset))
        for t in response.responses
        for p in t.partition_responses
    }


# ------------------------------------------------------------------- record batches v2


def zigzag_varint(value: int) -> bytes:
    n = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


@dataclass(frozen=True, slots=True)
class RawRecord:
    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[bytes, bytes | None], ...] = ()


def _bytes_field(data: bytes | None) -> bytes:
    if data is None:
        return zigzag_varint(-1)
    return zigzag_varint(len(data)) + data


def encode_record(rec: RawRecord) -> bytes:
    body = b"".join(
        [
            b"\x00",
            zigzag_varint(rec.timestamp_delta),
            zigzag_varint(rec.offset_delta),
            _bytes_field(rec.key),
            _bytes_field(rec.value),
            zigzag_varint(len(rec.headers)),
            *(_bytes_field(k) + _bytes_field(v) for k, v in rec.headers),
        ]
    )
    return zigzag_varint(len(body)) + body


BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
"""baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordsCount."""


def record_batch(
    values: Sequence[bytes | None],
    base_timestamp: int,
    *,
    keys: Sequence[bytes | None] | None = None,
    base_offset: int = 0,
    magic: int = 2,
) -> bytes:
    """An uncompressed v2 batch, CreateTime, no producer id, with a correct CRC32C."""
    records = b"".join(
        encode_record(RawRecord(i, i, keys[i] if keys else None, value, ((b"h", b"x"),)))
        for i, value in enumerate(values)
    )
    count = len(values)
    after_crc = (
        struct.pack(
            ">hiqqqhii", 0, count - 1, base_timestamp, base_timestamp + count - 1, -1, -1, -1, count
        )
        + records
    )
    crc = crc32c.crc32c(after_crc)
    batch_length = 4 + 1 + 4 + len(after_crc)
    return struct.pack(">qiibI", base_offset, batch_length, -1, magic, crc) + after_crc


def corrupt_payload(batch: bytes) -> bytes:
    """The batch with one record byte flipped: the CRC no longer matches."""
    data = bytearray(batch)
    data[-1] ^= 0xFF
    return bytes(data)


@dataclass(frozen=True, slots=True)
class ParsedBatch:
    base_offset: int
    batch_length: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    records_count: int
    crc_ok: bool

    @property
    def size(self) -> int:
        return self.batch_length + 12

    @property
    def compression(self) -> int:
        return self.attributes & 0x07


def parse_batch_header(data: bytes | memoryview) -> ParsedBatch:
    (
        base_offset,
        batch_length,
        _leader_epoch,
        magic,
        crc,
        attributes,
        last_delta,
        base_ts,
        max_ts,
        producer_id,
        _epoch,
        _seq,
        count,
    ) = BATCH_HEADER.unpack_from(data, 0)
    body = bytes(data[21 : 12 + batch_length])
    return ParsedBatch(
        base_offset,
        batch_length,
        magic,
        crc,
        attributes,
        last_delta,
        base_ts,
        max_ts,
        producer_id,
        count,
        crc32c.crc32c(body) == crc,
    )


def parse_records(data: bytes | memoryview) -> list[RawRecord]:
    """Records of one uncompressed v2 batch."""
    header = parse_batch_header(data)
    if header.compression:
        raise ValueError(f"batch is compressed (codec {header.compression})")
    pos, end = 61, header.size
    out: list[RawRecord] = []
    for _ in range(header.records_count):
        length, pos = _read_varint(data, pos)
        stop = pos + length
        pos += 1  # attributes
        ts_delta, pos = _read_varint(data, pos)
        off_delta, pos = _read_varint(data, pos)
        key, pos = _read_bytes(data, pos)
        value, pos = _read_bytes(data, pos)
        n_headers, pos = _read_varint(data, pos)
        headers = []
        for _ in range(n_headers):
            hk, pos = _read_bytes(data, pos)
            hv, pos = _read_bytes(data, pos)
            headers.append((hk or b"", hv))
        if pos != stop:
            raise ValueError(f"record length mismatch at {pos} (expected {stop})")
        out.append(RawRecord(off_delta, ts_delta, key, value, tuple(headers)))
    if pos != end:
        raise ValueError(f"{end - pos} bytes left after the records")
    return out


def _read_bytes(data: bytes | memoryview, pos: int) -> tuple[bytes | None, int]:
    length, pos = _read_varint(data, pos)
    if length < 0:
        return None, pos
    return bytes(data[pos : pos + length]), pos + length


# ------------------------------------------------------------------- legacy message sets


def legacy_message_set(values: Sequence[bytes], magic: int, timestamp: int = 0) -> bytes:
    """A magic 0 or 1 MessageSet (what pre-0.11 clients send), with valid CRC32s."""
    out = bytearray()
    for offset, value in enumerate(values):
        body = struct.pack(">bb", magic, 0)
        if magic == 1:
            body += struct.pack(">q", timestamp)
        body += struct.pack(">i", -1) + struct.pack(">i", len(value)) + value
        message = struct.pack(">I", zlib.crc32(body)) + body
        out += struct.pack(">qi", offset, len(message)) + message
    return bytes(out)
