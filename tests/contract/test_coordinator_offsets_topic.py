"""`__consumer_offsets` records: written with the group changes they record, in offset
order per partition, in Kafka's formats (decoded here by a reader written from Kafka's
OffsetCommitKey/Value and GroupMetadataKey/Value specs, independent of the encoder),
tombstones on deletion, and bounded by compaction."""

from __future__ import annotations

import asyncio
import struct
import time

from contract_support import OpenInstance, new_topic
from test_coordinator_groups import stable

from lakelog.coordinator import BatchCoordinator
from lakelog.coordinator.group_types import OffsetCommit, OffsetsTopicRow
from lakelog.coordinator.ops.offsets_topic import COMPACTION_TAIL
from lakelog.util.errors import ErrorCode

BIG = 1 << 30


class Reader:
    """Kafka's non-flexible encoding: int16-length strings, int32-length bytes."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return int(value)

    def string(self) -> str | None:
        n = self.take(">h")
        if n < 0:
            return None
        out = self.data[self.pos : self.pos + n].decode()
        self.pos += n
        return out

    def blob(self) -> bytes:
        n = self.take(">i")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def done(self) -> bool:
        return self.pos == len(self.data)


def decode_key(key: bytes) -> tuple:
    r = Reader(key)
    version = r.take(">h")
    if version in (0, 1):
        decoded: tuple = ("offset", r.string(), r.string(), r.take(">i"))
    else:
        assert version == 2, version
        decoded = ("group", r.string())
    assert r.done()
    return decoded


def decode_offset_value(value: bytes) -> tuple[int, int, str | None, int]:
    r = Reader(value)
    assert r.take(">h") == 3
    decoded = (r.take(">q"), r.take(">i"), r.string(), r.take(">q"))
    assert r.done()
    return decoded


def java_partition(group_id: str, partitions: int = 50) -> int:
    """Utils.abs(String.hashCode()) % partitions, written out again for the test."""
    h = 0
    for ch in group_id:
        h = (31 * h + ord(ch)) % (1 << 32)
    if h >= 1 << 31:
        h -= 1 << 32
    return (0 if h == -(1 << 31) else abs(h)) % partitions


async def records(coordinator: BatchCoordinator, partition: int) -> list[OffsetsTopicRow]:
    [found] = await coordinator.read_offsets_topic([(partition, 0, BIG)])
    return list(found.rows)


def test_java_partition_matches_kafka_examples() -> None:
    # Known String.hashCode values: "" 0, "a" 97, "hello" 99162322,
    # "polygenelubricants" Integer.MIN_VALUE (Utils.abs makes it 0), "Aa" == "BB".
    assert java_partition("") == 0
    assert java_partition("a") == 97 % 50
    assert java_partition("hello") == 99162322 % 50
    assert java_partition("polygenelubricants") == 0
    assert java_partition("Aa") == java_partition("BB")


async def test_commits_are_records_in_order(coordinator: BatchCoordinator) -> None:
    group = "lag-readers"
    partition = java_partition(group)
    await coordinator.commit_offsets(
        group,
        [OffsetCommit("b", 1, 20, leader_epoch=3, metadata="meta"), OffsetCommit("a", 0, 5)],
        now_ms=1_000,
    )
    await coordinator.commit_offsets(group, [OffsetCommit("a", 0, 7)], now_ms=2_000)
    rows = await records(coordinator, partition)
    assert [r.offset for r in rows] == [0, 1, 2]
    assert [decode_key(r.key) for r in rows] == [
        ("offset", group, "b", 1),
        ("offset", group, "a", 0),
        ("offset", group, "a", 0),
    ]
    assert [decode_offset_value(r.value or b"") for r in rows] == [
        (20, 3, "meta", 1_000),
        (5, -1, "", 1_000),
        (7, -1, "", 2_000),
    ]
    assert [r.timestamp for r in rows] == [1_000, 1_000, 2_000]
    [read] = await coordinator.read_offsets_topic([(partition, 2, BIG)])
    assert read.high_watermark == 3 and [r.offset for r in read.rows] == [2]
    assert await coordinator.offsets_topic_offset(partition, -1) == (3, -1)
    assert await coordinator.offsets_topic_offset(partition, -2) == (0, -1)
    assert await coordinator.offsets_topic_offset(partition, 1_500) == (2, 2_000)
    assert await coordinator.offsets_topic_offset(partition, 3_000) == (-1, -1)
    other = (partition + 1) % 50
    [empty] = await coordinator.read_offsets_topic([(other, 0, BIG)])
    assert empty.high_watermark == 0 and not empty.rows


async def test_a_small_read_returns_one_record(coordinator: BatchCoordinator) -> None:
    await coordinator.commit_offsets("g", [OffsetCommit("t", p, p) for p in range(5)], 1)
    [read] = await coordinator.read_offsets_topic([(java_partition("g"), 0, 1)])
    assert [r.offset for r in read.rows] == [0]


async def test_concurrent_commits_get_distinct_dense_offsets(
    coordinator: BatchCoordinator, open_instance: OpenInstance
) -> None:
    """Groups on one partition ("Aa" and "BB" hash alike) committing at once from two
    instances: every record gets its own offset, none is lost or skipped."""
    other = await open_instance()
    assert java_partition("Aa") == java_partition("BB")

    async def commit(c: BatchCoordinator, group: str, n: int) -> None:
        await c.commit_offsets(group, [OffsetCommit("t", n % 3, n)], now_ms=n)

    await asyncio.gather(
        *(commit(coordinator, "Aa", n) for n in range(20)),
        *(commit(other, "BB", n) for n in range(20)),
    )
    rows = await records(coordinator, java_partition("Aa"))
    assert [r.offset for r in rows] == list(range(40))
    seen = sorted((decode_key(r.key)[1], decode_offset_value(r.value or b"")[0]) for r in rows)
    assert seen == sorted([("Aa", n) for n in range(20)] + [("BB", n) for n in range(20)])


async def test_deletions_write_tombstones(coordinator: BatchCoordinator) -> None:
    group = "doomed"
    partition = java_partition(group)
    await coordinator.save_group(stable(group))
    await coordinator.commit_offsets(group, [OffsetCommit("t", p, 10) for p in range(3)], 5)
    await coordinator.delete_offsets(group, [("t", 0), ("missing", 0)])
    await coordinator.delete_groups([group])
    rows = await records(coordinator, partition)
    kinds = [(decode_key(r.key), r.value is None) for r in rows]
    assert kinds == [
        (("group", group), False),
        (("offset", group, "t", 0), False),
        (("offset", group, "t", 1), False),
        (("offset", group, "t", 2), False),
        (("offset", group, "t", 0), True),  # delete_offsets: only what existed
        (("offset", group, "t", 1), True),  # delete_groups: the offsets left
        (("offset", group, "t", 2), True),
        (("group", group), True),  # and the classic group's metadata
    ]


async def test_group_metadata_value(coordinator: BatchCoordinator) -> None:
    record = stable("classic")
    await coordinator.save_group(record)
    [row] = await records(coordinator, java_partition("classic"))
    r = Reader(row.value or b"")
    assert r.take(">h") == 3
    assert (r.string(), r.take(">i"), r.string(), r.string(), r.take(">q")) == (
        "consumer",
        1,
        "cooperative-sticky",
        "m-1",
        record.updated_at,
    )
    assert r.take(">i") == 2
    members = []
    for _ in range(2):
        members.append(
            (
                r.string(),
                r.string(),
                r.string(),
                r.string(),
                r.take(">i"),
                r.take(">i"),
                r.blob(),
                r.blob(),
            )
        )
    assert r.done()
    first, second = record.members
    assert members == [
        ("m-1", None, first.client_id, first.client_host, 300_000, 45_000,
         first.protocols[0][1], first.assignment),
        ("m-2", "static-2", second.client_id, second.client_host, 300_000, 45_000, b"", b""),
    ]  # fmt: skip


async def test_expired_offsets_leave_tombstones(coordinator: BatchCoordinator) -> None:
    await coordinator.commit_offsets("idle", [OffsetCommit("t", 0, 1)], now_ms=1_000)
    assert await coordinator.expire_offsets(2_000) == 1
    rows = await records(coordinator, java_partition("idle"))
    assert [(decode_key(r.key), r.value is None) for r in rows] == [
        (("offset", "idle", "t", 0), False),
        (("offset", "idle", "t", 0), True),
    ]


async def test_compaction_keeps_latest_per_key_and_the_tail(
    coordinator: BatchCoordinator,
) -> None:
    group = "busy"
    partition = java_partition(group)
    count = COMPACTION_TAIL + 5
    await coordinator.commit_offsets(
        group, [OffsetCommit("t", 0, n) for n in range(count)] + [OffsetCommit("u", 0, 1)], 1
    )
    await coordinator.commit_offsets("busy", [OffsetCommit("t", 1, 9)], 1)
    head = count + 2
    removed = head - COMPACTION_TAIL  # every record behind the tail is an old t-0
    assert await coordinator.compact_offsets_topic(0) == removed
    rows = await records(coordinator, partition)
    assert rows[0].offset == removed and rows[-1].offset == head - 1
    assert len(rows) == COMPACTION_TAIL
    # Nothing more to do; reads from a compacted offset start at the next record.
    assert await coordinator.compact_offsets_topic(0) == 0
    [read] = await coordinator.read_offsets_topic([(partition, 2, BIG)])
    assert read.rows[0].offset == removed and read.high_watermark == head

    # A tombstone goes after delete.retention.ms only once it is its key's only record:
    # t-1's value is still in the tail, so the tombstone stays (the tail moved by one).
    await coordinator.delete_offsets(group, [("t", 1)])
    now = int(time.time() * 1000)
    assert await coordinator.compact_offsets_topic(now + 1_000) == 1
    latest = {decode_key(r.key): r for r in await records(coordinator, partition)}
    assert latest[("offset", group, "t", 1)].value is None
    assert latest[("offset", group, "t", 0)].value is not None


async def test_deleting_a_topic_tombstones_its_offsets(coordinator: BatchCoordinator) -> None:
    await new_topic(coordinator, partitions=2, name="going")
    await coordinator.commit_offsets("reader", [OffsetCommit("going", p, 4) for p in (0, 1)], 1)
    [result] = await coordinator.delete_topics(["going"])
    assert result.error == ErrorCode.none
    rows = await records(coordinator, java_partition("reader"))
    assert [(decode_key(r.key), r.value is None) for r in rows[-2:]] == [
        (("offset", "reader", "going", 0), True),
        (("offset", "reader", "going", 1), True),
    ]
