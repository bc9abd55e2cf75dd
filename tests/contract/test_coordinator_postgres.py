"""What only the PostgreSQL coordinator has: its URLs, migrations under concurrent starts,
retries on serialization failures and deadlocks, LISTEN/NOTIFY change tokens, schemas as
separate clusters, and several OS processes and racing writers sharing one database."""

from __future__ import annotations

import asyncio
import itertools
import random
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from contract_support import batch, commit, log_info, new_topic, read_all
from postgres_support import PostgresSchemas, schema_url
from psycopg import errors

from lakelog.coordinator import (
    BatchCoordinator,
    DeleteRecordsRequest,
    RetentionPolicy,
    open_coordinator,
)
from lakelog.coordinator.migrate import Migration, SchemaTooNewError
from lakelog.coordinator.postgres import PostgresBatchCoordinator
from lakelog.coordinator.postgres import transaction as pg_transaction
from lakelog.coordinator.postgres.migrate import apply_postgres, load_pg_migrations
from lakelog.util.errors import ErrorCode


@pytest.fixture
def pg_url(postgres_schemas: PostgresSchemas, request: pytest.FixtureRequest) -> str:
    """A fresh, empty schema as a coordinator URL."""
    name = postgres_schemas.create()
    request.addfinalizer(lambda: postgres_schemas.drop(name))
    return schema_url(postgres_schemas.server_url, name)


@pytest.fixture
async def opened(pg_url: str) -> Any:
    """Opens started instances on `pg_url`; closes them at the end."""
    instances: list[BatchCoordinator] = []

    async def open_(url: str = pg_url) -> PostgresBatchCoordinator:
        instance = open_coordinator(url)
        assert isinstance(instance, PostgresBatchCoordinator)
        await instance.start()
        instances.append(instance)
        return instance

    yield open_
    for instance in instances:
        await instance.close()


def test_url_dispatch() -> None:
    for url in ["postgresql://u@h:5432/db", "postgres://h/db?sslmode=disable"]:
        coordinator = open_coordinator(url)  # nothing connects before start()
        assert isinstance(coordinator, PostgresBatchCoordinator)
        assert coordinator.url == url


async def test_migrations_apply_once_in_order(pg_url: str) -> None:
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        base = load_pg_migrations()
        assert [m.version for m in base] == sorted(m.version for m in base)
        assert await apply_postgres(conn) == [m.version for m in base]
        assert await apply_postgres(conn) == []
        extra = [
            Migration(
                1000, "1000_a.sql", "-- a\nCREATE TABLE t (v INTEGER);\nINSERT INTO t VALUES (1);"
            ),
            Migration(1001, "1001_b.sql", "UPDATE t SET v = v * 10;"),
        ]
        assert await apply_postgres(conn, base + extra) == [1000, 1001]
        assert await apply_postgres(conn, base + extra) == []
        cursor = await conn.execute("SELECT v FROM t")
        assert await cursor.fetchall() == [(10,)]


async def test_a_newer_schema_is_refused(pg_url: str) -> None:
    """A database a newer build migrated (a version beyond our files) is refused as it is."""
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        base = load_pg_migrations()
        newer = Migration(1000, "1000_new.sql", "CREATE TABLE t (v INTEGER);")
        await apply_postgres(conn, [*base, newer])
        with pytest.raises(SchemaTooNewError, match="schema version 1000, newer"):
            await apply_postgres(conn, base)
        cursor = await conn.execute("SELECT max(version) FROM schema_version")
        assert await cursor.fetchone() == (1000,)


async def test_failed_migration_leaves_nothing_behind(pg_url: str) -> None:
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        broken = Migration(1, "0001_x.sql", "CREATE TABLE a (x INT);\nCREATE TABLE a (x INT);")
        with pytest.raises(errors.DuplicateTable):
            await apply_postgres(conn, [broken])
        cursor = await conn.execute("SELECT to_regclass('a'), to_regclass('schema_version')")
        assert await cursor.fetchone() == (None, None)


async def test_concurrent_starts_migrate_once(pg_url: str, opened: Any) -> None:
    instances = await asyncio.gather(*(opened() for _ in range(6)))
    t = await new_topic(instances[0])
    await commit(instances[-1], [batch(t)])
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        cursor = await conn.execute("SELECT version FROM schema_version ORDER BY version")
        assert [r[0] for r in await cursor.fetchall()] == [m.version for m in load_pg_migrations()]


async def test_schemas_are_separate_clusters(
    postgres_schemas: PostgresSchemas, request: pytest.FixtureRequest, opened: Any
) -> None:
    names = [postgres_schemas.create() for _ in range(2)]
    for name in names:
        request.addfinalizer(lambda name=name: postgres_schemas.drop(name))
    a, b = [await opened(schema_url(postgres_schemas.server_url, n)) for n in names]
    t = await new_topic(a, name="only-in-a")
    token_b = await b.change_token()
    await commit(a, [batch(t)])
    assert await b.get_topics() == []
    assert await b.change_token() == token_b  # another cluster's commits do not wake us
    assert await a.allocate_producer_id() == await b.allocate_producer_id() == 0


async def test_retries_serialization_failures_and_deadlocks(
    opened: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pg_transaction, "FIRST_DELAY_S", 0.0001)
    coordinator = await opened()
    tx = coordinator._run_tx()
    calls = 0

    async def flaky(conn: Any, failures: list[type[Exception]]) -> int:
        nonlocal calls
        calls += 1
        await conn.execute("CREATE TEMP TABLE IF NOT EXISTS scratch (x INT)")
        if failures:
            raise failures.pop(0)("injected")
        return 42

    plan = [errors.SerializationFailure, errors.DeadlockDetected]
    assert await tx.run("test", True, flaky, plan) == 42
    assert (calls, tx.retries) == (3, 2)

    calls = 0
    hopeless = [errors.SerializationFailure] * pg_transaction.MAX_ATTEMPTS
    with pytest.raises(errors.SerializationFailure):
        await tx.run("test", True, flaky, hopeless)
    assert calls == pg_transaction.MAX_ATTEMPTS

    calls = 0
    with pytest.raises(errors.UniqueViolation):  # not retriable: raised at once
        await tx.run("test", True, flaky, [errors.UniqueViolation])
    assert calls == 1
    assert await coordinator.list_files() == []  # the pool's connections still work


async def test_real_serialization_failures_are_retried(opened: Any) -> None:
    """Two REPEATABLE READ transactions updating one row: PostgreSQL aborts one with
    40001, the retry succeeds, and both increments land."""
    a, b = await opened(), await opened()
    await a.register_broker(1, None, "h", 1)

    async def bump(conn: Any, started: asyncio.Event, go: asyncio.Event) -> None:
        await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        # Fetching forces the round trip (bodies run in pipeline mode): the snapshot is
        # taken before the other transaction updates.
        await (await conn.execute("SELECT port FROM brokers WHERE broker_id = 1")).fetchone()
        started.set()
        await go.wait()
        await conn.execute("UPDATE brokers SET port = port + 1 WHERE broker_id = 1")

    events = [asyncio.Event() for _ in range(3)]
    first = asyncio.create_task(a._run_tx().run("bump", True, bump, events[0], events[2]))
    second = asyncio.create_task(b._run_tx().run("bump", True, bump, events[1], events[2]))
    await events[0].wait()
    await events[1].wait()
    events[2].set()
    await asyncio.gather(first, second)
    assert a._run_tx().retries + b._run_tx().retries >= 1
    [broker] = await a.list_brokers(0)
    assert broker.port == 3


async def test_change_token_sees_every_commit_at_once(opened: Any) -> None:
    a, b = await opened(), await opened()
    t = await new_topic(a)
    for i in range(100):
        writer, reader = (a, b) if i % 2 else (b, a)
        before = await reader.change_token()
        await commit(writer, [batch(t)])
        assert await reader.change_token() != before, i


async def test_wait_for_change_wakes_on_another_instances_commit(opened: Any) -> None:
    a, b = await opened(), await opened()
    t = await new_topic(a)
    token = await b.change_token()
    started = time.monotonic()
    assert await b.wait_for_change(token, 0.05) == token  # nothing committed: times out
    assert time.monotonic() - started >= 0.04

    waiter = asyncio.create_task(b.wait_for_change(token, 10))
    await asyncio.sleep(0.05)
    assert not waiter.done()
    started = time.monotonic()
    await commit(a, [batch(t)])
    assert await asyncio.wait_for(waiter, 5) != token
    assert time.monotonic() - started < 1


async def test_listener_reconnects(pg_url: str, opened: Any) -> None:
    a, b = await opened(), await opened()
    t = await new_topic(a)
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as admin:
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE (query = 'LISTEN lakelog_commits' OR query = 'SELECT 1')"
            " AND pid <> pg_backend_pid() AND datname = current_database()"
        )
    deadline = time.monotonic() + 10
    while True:
        try:
            token = await b.change_token()
            break
        except psycopg.OperationalError:
            assert time.monotonic() < deadline, "listener did not reconnect"
            await asyncio.sleep(0.05)
    await commit(a, [batch(t)])
    assert await b.change_token() != token


async def test_racing_writers_keep_the_books(opened: Any) -> None:
    """Commits over overlapping partition sets, DeleteRecords and retention from several
    instances at once: no errors, dense offsets, and live bytes that add up."""
    instances = [await opened() for _ in range(4)]
    t = await new_topic(instances[0], partitions=4)
    rng = random.Random(7)

    async def producer(c: BatchCoordinator, rounds: int) -> None:
        for _ in range(rounds):
            parts = rng.sample(range(4), rng.randint(1, 4))
            results = await commit(c, [batch(t, p, records=rng.randint(1, 3)) for p in parts])
            assert all(r.error == ErrorCode.none for r in results), results

    async def deleter(c: BatchCoordinator, rounds: int) -> None:
        for i in range(rounds):
            p = rng.randrange(4)
            info = await log_info(c, t, p)
            if i % 2:
                [r] = await c.delete_records([DeleteRecordsRequest(t, p, info.high_watermark)])
                assert r.error == ErrorCode.none
            else:
                [r] = await c.enforce_retention([RetentionPolicy(t, p, -1, 250)], 0)
                assert r.error == ErrorCode.none
            await asyncio.sleep(0)

    await asyncio.gather(*(producer(c, 25) for c in instances[:3]), deleter(instances[3], 30))
    total_live = 0
    for p in range(4):
        info = await log_info(instances[0], t, p)
        batches = await read_all(instances[0], t, p)
        if batches:
            assert batches[0].last_offset >= info.log_start_offset
            for before, after in itertools.pairwise(batches):
                assert after.base_offset == before.last_offset + 1
            assert batches[-1].last_offset + 1 == info.high_watermark
        assert info.byte_size == sum(b.byte_size for b in batches)
        total_live += info.byte_size
    async with await psycopg.AsyncConnection.connect(instances[0].url) as conn:
        cursor = await conn.execute("SELECT COALESCE(SUM(live_bytes), 0) FROM files")
        row = await cursor.fetchone()
    assert row is not None and row[0] == total_live


async def test_fencing_waits_for_in_flight_commits(opened: Any) -> None:
    """A commit that read the broker's epoch holds its row until it ends: a fencing (or
    re-registration) that starts meanwhile waits, so once it returns no commit under the
    old epoch can still land."""
    a, b = await opened(), await opened()
    t = await new_topic(a)
    epoch = await a.register_broker(3, None, "h", 1)
    async with await psycopg.AsyncConnection.connect(a.url, autocommit=True) as holder:
        await holder.execute("BEGIN")
        await holder.execute("SELECT 1 FROM brokers WHERE broker_id = 3 FOR KEY SHARE")
        fence = asyncio.create_task(b.fence_broker(3, epoch, time.time_ns() // 1_000_000 + 1000))
        heartbeat = await a.heartbeat_broker(3, epoch)  # heartbeats do not wait
        assert heartbeat == ErrorCode.none
        await asyncio.sleep(0.2)
        assert not fence.done()
        await holder.execute("COMMIT")
    assert await asyncio.wait_for(fence, 5)
    [result] = await commit(a, [batch(t)], broker_id=3, broker_epoch=epoch)
    assert result.error == ErrorCode.stale_broker_epoch


_WORKER = textwrap.dedent(
    """\
    import asyncio, sys, time
    from pathlib import Path
    from lakelog.coordinator import CreateTopicRequest, open_coordinator
    sys.path.insert(0, sys.argv[3])
    from contract_support import batch, commit

    async def main(url, go):
        while not Path(go).exists():
            time.sleep(0.001)
        c = open_coordinator(url)
        await c.start()  # every process migrates the fresh schema at once
        await c.create_topics([CreateTopicRequest("shared", 2, 1)])
        [topic] = await c.get_topics(["shared"])
        for i in range(40):
            results = await commit(c, [batch(topic.topic_id, i % 2, records=1 + i % 3)])
            assert results[0].error == 0, results
        await c.close()

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)


async def test_processes_share_one_database(pg_url: str, tmp_path: Path, opened: Any) -> None:
    go = tmp_path / "go"
    here = str(Path(__file__).parent)
    workers = [
        subprocess.Popen([sys.executable, "-c", _WORKER, pg_url, str(go), here]) for _ in range(3)
    ]
    time.sleep(0.3)  # let the interpreters import, then release them together
    go.touch()
    codes = await asyncio.gather(*(asyncio.to_thread(w.wait, 60) for w in workers))
    assert codes == [0, 0, 0]

    coordinator = await opened()
    [topic] = await coordinator.get_topics(["shared"])
    total = 0
    for partition in (0, 1):
        expected = 0
        for b in await read_all(coordinator, topic.topic_id, partition):
            assert b.base_offset == expected
            expected = b.last_offset + 1
        total += expected
    assert total == 3 * sum(1 + i % 3 for i in range(40))
    assert len(await coordinator.list_files()) == 120
