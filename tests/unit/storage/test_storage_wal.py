"""WAL object format: layout, round trip, self-description, corruption detection."""

from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakelog.log.storage.store import ObjectStorage
from lakelog.log.storage.wal import (
    ENTRY_SIZE,
    TRAILER_SIZE,
    WalEntry,
    WalEntryInfo,
    WalFormatError,
    build_wal,
    read_footer,
    read_footer_from_store,
)
from lakelog.util import metrics

TOPICS = [uuid.UUID(int=n * 0x1_0000_0000_0000_0001) for n in (3, 1, 2)]

entries_strategy = st.lists(
    st.builds(
        WalEntry,
        topic_id=st.sampled_from(TOPICS),
        partition=st.integers(0, 3),
        batch=st.one_of(st.binary(max_size=300), st.binary(max_size=300).map(memoryview)),
        record_count=st.integers(0, 2**31 - 1),
        producer_id=st.integers(-1, 2**63 - 1),
        producer_epoch=st.integers(-1, 2**15 - 1),
        base_sequence=st.integers(-1, 2**31 - 1),
    ),
    max_size=40,
)


def _join(parts: list[bytes | bytearray | memoryview]) -> bytes:
    return b"".join(parts)


@settings(max_examples=200, deadline=None)
@given(entries_strategy)
def test_round_trip(entries: list[WalEntry]) -> None:
    wal = build_wal(entries)
    data = _join(wal.parts)
    assert wal.size == len(data)
    assert len(wal.placements) == len(entries)
    for entry, (offset, size) in zip(entries, wal.placements, strict=True):
        assert data[offset : offset + size] == bytes(entry.batch)

    footer = read_footer(data)
    assert len(footer) == len(entries)
    by_placement = {(info.offset, info.size): info for info in footer if info.size}
    for entry, placement in zip(entries, wal.placements, strict=True):
        if placement[1]:
            info = by_placement[placement]
            assert info == WalEntryInfo(
                entry.topic_id,
                entry.partition,
                placement[0],
                placement[1],
                entry.record_count,
                entry.producer_id,
                entry.producer_epoch,
                entry.base_sequence,
            )

    # Grouped by partition, sorted by (topic id, partition), arrival order kept inside.
    keys = [(info.topic_id.bytes, info.partition) for info in footer]
    assert keys == sorted(keys)
    for topic in TOPICS:
        for partition in range(4):
            arrived = [
                i for i, e in enumerate(entries) if (e.topic_id, e.partition) == (topic, partition)
            ]
            offsets = [wal.placements[i][0] for i in arrived]
            assert offsets == sorted(offsets)

    # Any suffix holding the footer is enough, given the object size.
    tail = data[-(len(entries) * ENTRY_SIZE + TRAILER_SIZE) :]
    assert read_footer(tail, object_size=len(data)) == footer


def test_parts_are_the_callers_buffers() -> None:
    batch_a = memoryview(bytearray(b"a" * 100))
    batch_b = b"b" * 50
    wal = build_wal(
        [
            (TOPICS[0], 1, batch_a, 1, -1, -1, -1),
            (TOPICS[0], 0, batch_b, 1, -1, -1, -1),
        ]
    )
    assert wal.parts[0] is batch_b  # partition 0 sorts first
    assert wal.parts[1] is batch_a
    assert len(wal.parts) == 3
    assert wal.placements == [(50, 100), (0, 50)]


def test_empty_object_is_valid() -> None:
    wal = build_wal([])
    data = _join(wal.parts)
    assert wal.size == len(data) == TRAILER_SIZE
    assert read_footer(data) == []


def test_rejects_fields_out_of_range() -> None:
    with pytest.raises(ValueError):
        build_wal([(TOPICS[0], 0, b"x", 1, 2**63, 0, 0)])
    with pytest.raises(ValueError):
        build_wal([(TOPICS[0], 0, b"x", 1, 0, 2**15, 0)])


def _sample() -> bytes:
    wal = build_wal([(TOPICS[i % 3], i % 2, bytes([i]) * (i + 1), 1, 7, 0, i) for i in range(5)])
    return _join(wal.parts)


@pytest.mark.parametrize(
    "corrupt",
    [
        pytest.param(lambda d: d[:-1] + b"X", id="magic"),
        pytest.param(lambda d: d[:-8] + struct.pack(">H", 9) + d[-6:], id="version"),
        pytest.param(
            lambda d: d[: -TRAILER_SIZE - 3] + b"\xff" + d[-TRAILER_SIZE - 2 :], id="footer-crc"
        ),
        pytest.param(lambda d: d[:10], id="truncated"),
        pytest.param(lambda d: d[-TRAILER_SIZE - ENTRY_SIZE :], id="suffix-too-short"),
        pytest.param(lambda d: b"", id="empty"),
        pytest.param(lambda d: b"extra" + d, id="wrong-size"),
    ],
)
def test_detects_corruption(corrupt: object) -> None:
    data = _sample()
    with pytest.raises(WalFormatError):
        read_footer(corrupt(data))  # type: ignore[operator]


async def _put(storage: ObjectStorage, key: str, entries: list[tuple]) -> bytes:
    wal = build_wal(entries)
    await storage.put(key, wal.parts)
    return _join(wal.parts)


def _requests(op: str) -> float:
    value = metrics.REGISTRY.get_sample_value("lakelog_object_requests_total", {"op": op})
    return value or 0.0


async def test_read_footer_from_store_uses_one_range_request() -> None:
    storage = ObjectStorage.from_url("memory://")
    entries = [(TOPICS[i % 3], i % 4, b"z" * 1000, 10, 1, 0, i) for i in range(50)]
    data = await _put(storage, "wal/a", entries)
    gets, ranges = _requests("get"), _requests("get_range")
    footer = await read_footer_from_store(storage, "wal/a")
    assert footer == read_footer(data)
    assert (_requests("get"), _requests("get_range")) == (gets, ranges + 1)


async def test_read_footer_from_store_large_footer_takes_two_reads() -> None:
    storage = ObjectStorage.from_url("memory://")
    entries = [(TOPICS[i % 3], i % 7, bytes([i % 256]) * 3, 1, 1, 0, i) for i in range(3000)]
    data = await _put(storage, "wal/big", entries)
    assert 3000 * ENTRY_SIZE > 64 * 1024
    ranges = _requests("get_range")
    footer = await read_footer_from_store(storage, "wal/big")
    assert footer == read_footer(data)
    assert len(footer) == 3000
    assert _requests("get_range") == ranges + 2


async def test_read_footer_from_store_rejects_foreign_object() -> None:
    storage = ObjectStorage.from_url("memory://")
    await storage.put("wal/x", [b"not a wal object at all"])
    with pytest.raises(WalFormatError):
        await read_footer_from_store(storage, "wal/x")
