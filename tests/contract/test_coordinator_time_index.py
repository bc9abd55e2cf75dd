"""list_offsets by timestamp and MAX_TIMESTAMP through the sparse time index (one mark
per partition per commit), checked against a brute-force model of the log on random
histories: timestamps that go back, plateaus from one far-future record, the log start
moving, and marks missing (a database migrated from before the index, then backfilled)."""

from __future__ import annotations

import random
import sqlite3
from dataclasses import dataclass
from importlib.resources import files
from uuid import UUID

import psycopg
import pytest
from contract_support import batch, commit, new_topic

from lakelog.coordinator import (
    MAX_TIMESTAMP,
    BatchCoordinator,
    DeleteRecordsRequest,
    ListOffsetsRequest,
    TimestampType,
)
from lakelog.util.errors import ErrorCode


@dataclass
class Batch:
    base: int
    last: int
    ts: int


class Log:
    """What the coordinator answers, computed the slow way from every live row (Kafka's
    answer where every row is one batch)."""

    def __init__(self) -> None:
        self.batches: list[Batch] = []
        self.start = 0

    def live(self) -> list[Batch]:
        return [b for b in self.batches if b.last >= self.start]

    def by_timestamp(self, time: int) -> tuple[int, int]:
        for b in self.live():
            if b.ts >= time:
                return max(b.base, self.start), b.ts
        return -1, -1

    def max_timestamp(self) -> tuple[int, int]:
        live = self.live()
        if not live:
            return -1, -1
        top = max(b.ts for b in live)
        first = next(b for b in live if b.ts == top)
        return first.last, top


async def _answer(c: BatchCoordinator, t: UUID, time: int) -> tuple[int, int]:
    [r] = await c.list_offsets([ListOffsetsRequest(t, 0, time)])
    assert r.error == ErrorCode.none, r
    return r.offset, r.timestamp


async def _check(c: BatchCoordinator, t: UUID, log: Log, times: list[int]) -> None:
    for time in times:
        assert await _answer(c, t, time) == log.by_timestamp(time), time
    assert await _answer(c, t, MAX_TIMESTAMP) == log.max_timestamp()


async def _random_history(
    c: BatchCoordinator, t: UUID, rng: random.Random, log: Log, spaced: bool = True
) -> None:
    """Random commits of one partition. `spaced`: each batch its own row, so lookups
    search inside a commit's batches; else each commit's batches share one row (one
    producer, back to back), whose timestamp is their largest: the coordinator answers per
    row, and ListOffsets narrows to the record by reading it."""
    clock = 1_000
    for _ in range(rng.randint(5, 25)):
        batches = []
        for _ in range(rng.randint(1, 6)):
            clock += rng.randint(0, 50)
            ts = clock
            if rng.random() < 0.15:
                ts = clock - rng.randint(1, 400)  # an older timestamp
            if rng.random() < 0.03:
                ts = clock + 5_000  # one far-future record: a long plateau of the high mark
            batches.append((rng.randint(1, 4), ts))
        results = await commit(
            c, [batch(t, records=n, base_ts=ts) for n, ts in batches], spaced=spaced
        )
        rows = []
        for (n, ts), r in zip(batches, results, strict=True):
            assert r.error == ErrorCode.none
            rows.append(Batch(r.base_offset, r.base_offset + n - 1, ts))
        if not spaced:
            rows = [Batch(rows[0].base, rows[-1].last, max(b.ts for b in rows))]
        log.batches += rows
        if rng.random() < 0.2 and log.batches:
            end = log.batches[-1].last + 1
            start = rng.randint(log.start, end)
            [d] = await c.delete_records([DeleteRecordsRequest(t, 0, start)])
            assert d.error == ErrorCode.none
            log.start = max(log.start, start)


@pytest.mark.parametrize("spaced", [True, False], ids=["rows", "runs"])
@pytest.mark.parametrize("seed", range(6))
async def test_by_timestamp_matches_the_model(
    coordinator: BatchCoordinator, seed: int, spaced: bool
) -> None:
    rng = random.Random(seed)
    t = await new_topic(coordinator)
    log = Log()
    await _random_history(coordinator, t, rng, log, spaced)
    times = sorted({b.ts for b in log.batches} | {b.ts + 1 for b in log.batches} | {0, 10**12})
    await _check(coordinator, t, log, times)


async def test_log_append_time_batches(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator, configs={"message.timestamp.type": "LogAppendTime"})
    for _ in range(3):
        await commit(coordinator, [batch(t, ts_type=TimestampType.LOG_APPEND_TIME)] * 2)
    first = await _answer(coordinator, t, 0)
    assert first[0] == 0 and first[1] > 1_000
    top = await _answer(coordinator, t, MAX_TIMESTAMP)
    assert top[1] >= first[1] and await _answer(coordinator, t, top[1] + 1) == (-1, -1)


def _sql(url: str, statements: list[str]) -> None:
    """Run statements straight on the coordinator's database (SQLite file or PostgreSQL
    schema), as a migration would."""
    if url.startswith("sqlite://"):
        conn = sqlite3.connect(url.removeprefix("sqlite://"))
        try:
            for statement in statements:
                conn.execute(statement)
            conn.commit()
        finally:
            conn.close()
        return
    with psycopg.connect(url, autocommit=True) as pg:
        for statement in statements:
            pg.execute(statement)  # type: ignore[arg-type]


def _backfill() -> str:
    """The migration's backfill statement (the same text on both engines)."""
    text = (files("lakelog.coordinator") / "migrations" / "0007_time_index.sql").read_text()
    return "INSERT INTO time_index" + text.split("INSERT INTO time_index", 1)[1].rstrip("\n;")


async def test_missing_marks_then_the_migration_backfill(
    coordinator: BatchCoordinator, coordinator_url: str
) -> None:
    rng = random.Random(99)
    t = await new_topic(coordinator)
    log = Log()
    await _random_history(coordinator, t, rng, log)
    times = sorted({b.ts for b in log.batches} | {b.ts + 1 for b in log.batches})
    _sql(coordinator_url, ["DELETE FROM time_index"])  # as before the migration
    await _check(coordinator, t, log, times)
    _sql(coordinator_url, [_backfill()])
    await _check(coordinator, t, log, times)
