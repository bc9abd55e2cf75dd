"""Fetch's byte limits, as Kafka's broker applies them (KIP-74; ReplicaManager's
readFromLocalLog and LogSegment.read): per partition, whole batches while they fit within
the smaller of partition_max_bytes and what is left of the response's max_bytes; a batch
over that limit goes only when it is the first batch of the first partition that returns
data. Merged segment rows (several batches in one coordinate) are cut between batches."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, cast

import pytest

from lakelog.coordinator.log_types import (
    BatchCoordinate,
    FindBatchesRequest,
    FindBatchesResult,
    TimestampType,
)
from lakelog.coordinator.txn_types import AbortedTxn
from lakelog.log.protocol.fetch_response import PartitionData
from lakelog.log.protocol.records import base_offset_bytes, read_header
from lakelog.server.api.fetch import _read_once, plan_partition, take_within
from lakelog.util.errors import ErrorCode
from tests.support.batches import build_batch

TOPIC = "t"


# ---------------------------------------------------------------- pure rules


@pytest.mark.parametrize(
    ("sizes", "limit", "first", "expected"),
    [
        ([100, 100, 100], 250, False, 2),
        ([100, 100, 100], 300, False, 3),
        ([100, 100, 100], 99, False, 0),
        ([100, 100, 100], 99, True, 1),  # KIP-74: the first batch of the response goes
        ([300, 10], 100, True, 1),  # ...alone: nothing else fits after it
        ([100, 10], 0, True, 1),
        ([], 100, True, 0),
    ],
)
def test_take_within(sizes: list[int], limit: int, first: bool, expected: int) -> None:
    assert take_within(sizes, limit, first) == expected


def test_plan_reads_a_crossing_run_and_charges_the_whole_limit() -> None:
    # A WAL batch that crosses the limit is not read; a segment row that may hold a run
    # is, and later partitions are planned as if it filled the limit.
    assert plan_partition([100, 100, 100], [False] * 3, 250, False) == (2, 200)
    assert plan_partition([100, 100, 100], [False, False, True], 250, False) == (3, 250)
    assert plan_partition([500, 10], [False, False], 100, True) == (1, 500)
    assert plan_partition([500, 10], [False, False], 100, False) == (0, 0)


# ---------------------------------------------------------------- whole requests


def batch(base_offset: int, value_size: int, records: int = 1) -> bytes:
    return build_batch([(b"k", b"v" * value_size)] * records, base_offset=base_offset)


@dataclass
class Log:
    """One partition's stored batches: coordinates and the bytes each stands for."""

    coords: list[BatchCoordinate] = field(default_factory=list)
    data: dict[tuple[str, int], list[bytes]] = field(default_factory=dict)
    aborted: list[AbortedTxn] = field(default_factory=list)
    next_offset: int = 0

    def add(self, *batches: bytes, segment: bool = False, pieces: bool = False) -> BatchCoordinate:
        """One coordinate over `batches` back to back: in a segment row (batches carry their
        offsets), else in a WAL row (a producer's run: offsets follow the coordinate's);
        `pieces`: read back one piece per batch, as the fetch cache holds a WAL run."""
        blob = b"".join(batches)
        count = sum(int.from_bytes(b[57:61], "big") for b in batches)
        key = f"seg/{uuid.uuid4()}/0/0-x" if segment else f"wal/{uuid.uuid4()}"
        coord = BatchCoordinate(
            key,
            0,
            len(blob),
            self.next_offset,
            self.next_offset + count - 1,
            0,
            0,
            TimestampType.CREATE_TIME,
            -1,
            -1,
            -1,
            -1,
            False,
        )
        self.next_offset += count
        self.coords.append(coord)
        self.data[(key, 0)] = list(batches) if pieces else [blob]
        return coord


class FakeBroker:
    def __init__(self, logs: dict[int, Log]) -> None:
        self.logs = logs
        self.topic = SimpleNamespace(topic_id=uuid.uuid4(), num_partitions=max(logs) + 1)
        self.topics = self
        self.coordinator = self
        self.authorizer = SimpleNamespace(enabled=False)
        self.reader = self
        self.read_coords: list[BatchCoordinate] = []

    async def get(self, name: str) -> Any:
        return self.topic if name == TOPIC else None

    async def find_batches(self, finds: Sequence[FindBatchesRequest]) -> list[FindBatchesResult]:
        out = []
        for f in finds:
            log = self.logs[f.partition]
            batches = [c for c in log.coords if c.last_offset >= f.offset]
            out.append(
                FindBatchesResult(
                    ErrorCode.none, batches, 0, log.next_offset, log.next_offset, log.aborted
                )
            )
        return out

    async def read(self, coords: Sequence[BatchCoordinate]) -> list[list[bytes]]:
        """Each coordinate's bytes as the cache would give a WAL run (one piece per batch,
        when the test split them so) or as one read from the store."""
        self.read_coords.extend(coords)
        return [
            next(log.data[(c.object_key, 0)] for log in self.logs.values() if c in log.coords)
            for c in coords
        ]


def fetch(
    logs: dict[int, Log],
    partition_max_bytes: dict[int, int],
    max_bytes: int = 1 << 20,
    read_committed: bool = False,
    offsets: dict[int, int] | None = None,
) -> dict[int, PartitionData]:
    broker = FakeBroker(logs)
    request = SimpleNamespace(
        isolation_level=1 if read_committed else 0,
        topics=[
            SimpleNamespace(
                topic=TOPIC,
                partitions=[
                    SimpleNamespace(
                        partition=p,
                        fetch_offset=(offsets or {}).get(p, 0),
                        partition_max_bytes=limit,
                    )
                    for p, limit in partition_max_bytes.items()
                ],
            )
        ],
    )
    ctx = cast(Any, SimpleNamespace(broker=broker, api_version=12))
    topics, total, errored = asyncio.run(_read_once(ctx, request, max_bytes))
    assert not errored
    parts = {d.index: d for d in topics[0][1]}
    assert total == sum(d.records_size for d in parts.values())
    return parts


def sent(data: PartitionData) -> bytes:
    return b"".join(bytes(b) for b in data.records)


def test_partition_max_bytes_stops_before_the_crossing_batch() -> None:
    log = Log()
    a, b, c = batch(0, 200), batch(1, 200), batch(2, 200)
    for x in (a, b, c):
        log.add(x)
    got = fetch({0: log}, {0: len(a) + len(b) + len(c) - 1})
    assert got[0].records_size == len(a) + len(b)
    assert sent(got[0])[8:] == (a + b)[8:]


def test_first_batch_of_the_response_goes_even_when_too_big() -> None:
    log = Log()
    big, small = batch(0, 2000), batch(1, 10)
    log.add(big)
    log.add(small)
    got = fetch({0: log}, {0: 500}, max_bytes=400)
    assert got[0].records_size == len(big)  # alone: the small one after it does not go


def test_later_partition_with_a_too_big_first_batch_gets_nothing() -> None:
    first, second = Log(), Log()
    first.add(batch(0, 100))
    second.add(batch(0, 2000))
    second.add(batch(1, 10))
    got = fetch({0: first, 1: second}, {0: 1000, 1: 1000})
    assert got[0].records_size > 0
    assert got[1].records_size == 0
    assert got[1].records == []


def test_empty_partitions_before_do_not_use_up_the_first_batch_rule() -> None:
    empty, second = Log(), Log()
    big = batch(0, 2000)
    second.add(big)
    got = fetch({0: empty, 1: second}, {0: 1000, 1: 1000})
    assert got[0].records_size == 0
    assert got[1].records_size == len(big)


def test_response_max_bytes_limits_later_partitions() -> None:
    logs = {p: Log() for p in range(3)}
    size = len(batch(0, 300))
    for log in logs.values():
        for i in range(3):
            log.add(batch(i, 300))
    got = fetch(logs, dict.fromkeys(range(3), 10 * size), max_bytes=4 * size + 10)
    assert [got[p].records_size // size for p in range(3)] == [3, 1, 0]


def test_a_merged_run_is_cut_between_its_batches() -> None:
    log = Log()
    inner = [batch(0, 200), batch(1, 200), batch(2, 200)]
    log.add(*inner, segment=True)
    got = fetch({0: log}, {0: len(inner[0]) + len(inner[1]) + 5})
    assert got[0].records_size == len(inner[0]) + len(inner[1])


def test_a_first_run_over_the_limit_sends_only_its_first_batch() -> None:
    log = Log()
    inner = [batch(0, 900), batch(1, 10)]
    log.add(*inner, segment=True)
    got = fetch({0: log}, {0: 300})
    assert got[0].records_size == len(inner[0])


def test_a_later_partition_gets_the_leading_batches_of_a_crossing_run() -> None:
    first, second = Log(), Log()
    first.add(batch(0, 100))
    second.add(batch(0, 100))
    inner = [batch(1, 100), batch(2, 100), batch(3, 100)]
    second.add(*inner, segment=True)
    limit = len(batch(0, 100)) * 3 + 5
    got = fetch({0: first, 1: second}, {0: limit, 1: limit})
    assert got[1].records_size == len(batch(0, 100)) + len(inner[0]) + len(inner[1])


def test_read_committed_lists_only_aborted_transactions_within_what_is_sent() -> None:
    log = Log()
    for i in range(4):
        log.add(batch(i, 200))
    log.aborted = [AbortedTxn(7, 1), AbortedTxn(8, 3)]
    size = len(batch(0, 200))
    got = fetch({0: log}, {0: 2 * size}, read_committed=True)
    assert got[0].records_size == 2 * size
    assert list(got[0].aborted or ()) == [(7, 1)]


def test_a_fetch_inside_a_run_starts_at_the_batch_holding_its_offset() -> None:
    log = Log()
    inner = [batch(0, 200, records=2), batch(2, 200), batch(3, 200)]
    log.add(*inner, segment=True)
    # Offset 2: the first batch (offsets 0-1) is not sent and does not count.
    got = fetch({0: log}, {0: len(inner[1]) + 5}, offsets={0: 2})
    assert sent(got[0]) == inner[1]  # with its own base offset, 2
    got = fetch({0: log}, {0: 1 << 20}, offsets={0: 1})
    assert sent(got[0])[8:] == b"".join(inner)[8:]
    got = fetch({0: log}, {0: 1 << 20}, offsets={0: 3})
    assert sent(got[0]) == inner[2]


def test_a_fetch_inside_a_run_too_big_for_the_limit_still_progresses() -> None:
    first, second = Log(), Log()
    first.add(batch(0, 100))
    inner = [batch(0, 100), batch(1, 900), batch(2, 100)]
    second.add(*inner, segment=True)
    # Partition 1 comes second: its batch at offset 1 is over the limit, nothing goes.
    got = fetch({0: first, 1: second}, {0: 500, 1: 500}, offsets={1: 1})
    assert got[1].records_size == 0
    # Alone (or first), that batch goes alone.
    got = fetch({1: second}, {1: 500}, offsets={1: 1})
    assert sent(got[1]) == inner[1]


def offsets_sent(data: PartitionData) -> list[tuple[int, int]]:
    """(base offset, record count) of each batch the partition's answer carries."""
    out = []
    blob = sent(data)
    pos = 0
    while pos < len(blob):
        header = read_header(blob, pos)
        out.append((header.base_offset, header.record_count))
        pos += header.size
    return out


@pytest.mark.parametrize("pieces", [False, True], ids=["read", "cached"])
def test_a_producers_run_gets_each_batch_its_offset(pieces: bool) -> None:
    """A WAL row holding a producer's run: the bytes carry the producer's base offsets
    (0 here), so each batch's offset follows the one before it; fetches inside the run
    start at the batch holding the offset, and a limit cuts between batches."""
    log = Log()
    log.add(batch(0, 50))  # offset 0
    inner = [batch(0, 200, records=2), batch(0, 200), batch(0, 200, records=3)]
    log.add(*inner, pieces=pieces)  # offsets 1-2, 3, 4-6
    got = fetch({0: log}, {0: 1 << 20})
    assert offsets_sent(got[0]) == [(0, 1), (1, 2), (3, 1), (4, 3)]
    got = fetch({0: log}, {0: 1 << 20}, offsets={0: 3})
    assert offsets_sent(got[0]) == [(3, 1), (4, 3)]
    got = fetch({0: log}, {0: len(inner[0]) + len(inner[1]) + 5}, offsets={0: 2})
    assert offsets_sent(got[0]) == [(1, 2), (3, 1)]
    assert sent(got[0])[8:] == (inner[0] + base_offset_bytes(3) + inner[1][8:])[8:]
