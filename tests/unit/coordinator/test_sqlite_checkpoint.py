"""SQLite WAL checkpoints run on the checkpointer's thread, not inside commits
(coordinator/sqlite/checkpoint.py), against a real database file."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from lakelog.coordinator import CommitBatch, CreateTopicRequest, TimestampType, open_coordinator
from lakelog.coordinator.sqlite.checkpoint import Checkpointer
from lakelog.util.errors import ErrorCode


def wait_until(condition: object, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_checkpointer_copies_the_wal_into_the_database_after_a_write(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite3"
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("PRAGMA journal_mode = WAL")
    writer.execute("PRAGMA wal_autocheckpoint = 0")  # only the checkpointer checkpoints
    writer.execute("CREATE TABLE t (v BLOB)")
    writer.executemany("INSERT INTO t VALUES (?)", [(b"x" * 4000,)] * 200)
    before = path.stat().st_size
    checkpointer = Checkpointer(path, interval_s=0.01)
    checkpointer.start()
    try:
        checkpointer.wrote()
        wait_until(lambda: checkpointer.checkpoints >= 1)
        assert path.stat().st_size > before + 200 * 4000
    finally:
        started = time.monotonic()
        checkpointer.stop()
        assert time.monotonic() - started < 1
        writer.close()


async def test_the_coordinator_checkpoints_off_the_commit_path(tmp_path: Path) -> None:
    path = tmp_path / "coordinator.sqlite3"
    coordinator = open_coordinator(f"sqlite://{path}")
    await coordinator.start()
    try:
        # The migrations are still in the WAL: nothing wrote since, so nothing checkpointed.
        empty = path.stat().st_size
        [created] = await coordinator.create_topics([CreateTopicRequest("t", 1, 1)])
        assert created.topic_id is not None
        batch = CommitBatch(created.topic_id, 0, 0, 1, 1, 0, 0, TimestampType.CREATE_TIME)
        for i in range(5):
            [result] = await coordinator.commit_file(f"wal/{i}", 1, -1, 1, [batch])
            assert result.error == ErrorCode.none
        # The commits' own threshold is far away (20,000 pages): only the checkpointer
        # thread can have moved their pages into the database file.
        wait_until(lambda: path.stat().st_size > empty)
    finally:
        await coordinator.close()
