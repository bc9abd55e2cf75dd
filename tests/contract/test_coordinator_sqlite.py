"""What only the SQLite coordinator has: its URL, its migrations, its pragmas, live bytes in
the files table, and several OS processes sharing one file."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from contract_support import batch, commit, new_key, new_topic, read_all

from lakelog.coordinator import DeleteRecordsRequest, open_coordinator, sqlite_path
from lakelog.coordinator.migrate import (
    Migration,
    SchemaTooNewError,
    apply_sqlite,
    load_migrations,
    split_statements,
)
from lakelog.coordinator.sqlite import SqliteBatchCoordinator
from lakelog.coordinator.sqlite.coordinator import connect
from lakelog.util.errors import ErrorCode


def test_url_parsing(tmp_path: Path) -> None:
    assert sqlite_path("sqlite:///var/lib/x.sqlite3") == Path("/var/lib/x.sqlite3")
    assert sqlite_path("sqlite:////var/lib/x.sqlite3") == Path("/var/lib/x.sqlite3")
    for bad in ["sqlite://relative.db", "sqlite:///", "mysql://x", ""]:
        with pytest.raises(ValueError, match="unsupported coordinator URL"):
            open_coordinator(bad)
    with pytest.raises(ValueError) as info:
        open_coordinator("mysql://localhost/lakelog")
    assert str(info.value) == "unsupported coordinator URL: mysql://localhost/lakelog"


async def test_open_creates_parent_directories(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "coordinator.sqlite3"
    coordinator = open_coordinator(f"sqlite://{path}")
    assert isinstance(coordinator, SqliteBatchCoordinator)
    await coordinator.start()
    await coordinator.close()
    assert path.exists()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        versions = [row[0] for row in conn.execute("SELECT version FROM schema_version")]
    assert versions == [m.version for m in load_migrations()]


def test_migrations_are_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite3"
    conn = connect(path)
    try:
        assert apply_sqlite(conn) == [m.version for m in load_migrations()]
        assert apply_sqlite(conn) == []
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert {"topics", "partitions", "files", "batches", "producer_state", "brokers"} <= tables
    finally:
        conn.close()


def test_new_migrations_apply_in_order_once(tmp_path: Path) -> None:
    conn = connect(tmp_path / "m.sqlite3")
    try:
        base = load_migrations()
        apply_sqlite(conn, base)
        extra = [
            Migration(1001, "1001_b.sql", "UPDATE t SET v = v * 10;"),
            Migration(
                1000,
                "1000_a.sql",
                "-- a table\nCREATE TABLE t (v INTEGER);\nINSERT INTO t VALUES (1);",
            ),
        ]
        assert apply_sqlite(conn, base + sorted(extra, key=lambda m: m.version)) == [1000, 1001]
        assert apply_sqlite(conn, base + extra) == []
        assert conn.execute("SELECT v FROM t").fetchall() == [(10,)]
    finally:
        conn.close()


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    """A file a newer build migrated (a version beyond our files) is refused as it is."""
    conn = connect(tmp_path / "m.sqlite3")
    try:
        base = load_migrations()
        apply_sqlite(conn, [*base, Migration(1000, "1000_new.sql", "CREATE TABLE t (v);")])
        with pytest.raises(SchemaTooNewError, match="schema version 1000, newer"):
            apply_sqlite(conn, base)
        assert not conn.in_transaction
        assert max(r[0] for r in conn.execute("SELECT version FROM schema_version")) == 1000
    finally:
        conn.close()


def test_failed_migration_leaves_nothing_behind(tmp_path: Path) -> None:
    conn = connect(tmp_path / "m.sqlite3")
    try:
        broken = Migration(1, "0001_x.sql", "CREATE TABLE a (x);\nCREATE TABLE a (x);")
        with pytest.raises(sqlite3.OperationalError):
            apply_sqlite(conn, [broken])
        assert not conn.in_transaction
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        assert "a" not in names
    finally:
        conn.close()


def test_split_statements() -> None:
    script = textwrap.dedent(
        """\
        -- comment; with a semicolon
        CREATE TABLE a (x TEXT DEFAULT 'a;b');
        CREATE TRIGGER tr AFTER INSERT ON a BEGIN
            UPDATE a SET x = 'y';
        END;
        -- trailing comment
        """
    )
    statements = split_statements(script)
    assert len(statements) == 2
    assert statements[1].startswith("CREATE TRIGGER") and statements[1].endswith("END;")
    with pytest.raises(ValueError, match="incomplete"):
        split_statements("CREATE TABLE a (x)")


def test_duplicate_migration_numbers_are_refused(tmp_path: Path) -> None:
    (tmp_path / "0001_a.sql").write_text("SELECT 1;")
    (tmp_path / "0001_b.sql").write_text("SELECT 1;")
    (tmp_path / "notes.txt").write_text("ignored")
    with pytest.raises(ValueError, match="two migrations numbered 1"):
        load_migrations(tmp_path)


async def test_live_bytes_follow_the_batches(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    coordinator = SqliteBatchCoordinator(path)
    await coordinator.start()
    try:
        t = await new_topic(coordinator)
        key = new_key()
        await commit(
            coordinator,
            [batch(t, size=100), batch(t, size=50), batch(t, size=25)],
            key=key,
            spaced=True,
        )

        def file_row() -> tuple[str, int, int, int | None]:
            with sqlite3.connect(path) as conn:
                return conn.execute(
                    "SELECT state, size, live_bytes, marked_at FROM files WHERE object_key = ?",
                    (key,),
                ).fetchone()

        assert file_row() == ("committed", 177, 175, None)
        await coordinator.delete_records([DeleteRecordsRequest(t, 0, 2)])
        assert file_row() == ("committed", 177, 25, None)
        await coordinator.delete_topics([(await coordinator.get_topics())[0].name])
        state, _, live, marked_at = file_row()
        assert (state, live) == ("deleting", 0)
        assert marked_at is not None
    finally:
        await coordinator.close()


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
        await c.start()  # both processes migrate the fresh file at once
        await c.create_topics([CreateTopicRequest("shared", 2, 1)])
        [topic] = await c.get_topics(["shared"])
        for i in range(40):
            results = await commit(c, [batch(topic.topic_id, i % 2, records=1 + i % 3)])
            assert results[0].error == 0, results
        await c.close()

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)


async def test_processes_share_one_file(tmp_path: Path) -> None:
    path = tmp_path / "shared" / "coordinator.sqlite3"
    url = f"sqlite://{path}"
    go = tmp_path / "go"
    here = str(Path(__file__).parent)
    workers = [
        subprocess.Popen([sys.executable, "-c", _WORKER, url, str(go), here]) for _ in range(3)
    ]
    time.sleep(0.3)  # let the interpreters import, then release them together
    go.touch()
    codes = await asyncio.gather(*(asyncio.to_thread(w.wait, 60) for w in workers))
    assert codes == [0, 0, 0]

    coordinator = open_coordinator(url)
    await coordinator.start()
    try:
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
        [result] = await coordinator.delete_topics(["shared"])
        assert result.error == ErrorCode.none
    finally:
        await coordinator.close()
