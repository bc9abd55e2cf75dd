"""The SQLite batch coordinator: the embedded default, one file that several broker
processes on one host may share.

All database work of an instance runs on one dedicated thread (SQLite connections are not
thread-safe, and the event loop must never block on a lock wait or an fsync). Every method
is one transaction: `BEGIN IMMEDIATE` for writes, because a deferred BEGIN fails with
"database is locked" when its read lock must be upgraded while another process writes.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from lakelog.coordinator import migrate
from lakelog.coordinator.engine import Op, drive
from lakelog.coordinator.facade import SqlBatchCoordinator
from lakelog.coordinator.ops import cluster
from lakelog.coordinator.sqlite.checkpoint import BACKSTOP_PAGES, Checkpointer
from lakelog.coordinator.sqlite.engine import SqliteSession
from lakelog.util.errors import ErrorCode
from lakelog.util.metrics import coordinator_latency_seconds

T = TypeVar("T")

BUSY_TIMEOUT_MS = 10_000


def connect(path: Path) -> sqlite3.Connection:
    """Open the file with the settings every connection needs. Autocommit mode
    (isolation_level=None): transactions are begun explicitly."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        _enable_wal(conn)
        # FULL: the WAL is synced at every commit, so acknowledged data survives power loss.
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
    except BaseException:
        conn.close()
        raise
    return conn


def _enable_wal(conn: sqlite3.Connection) -> None:
    """WAL lets readers run beside the one writer. Switching needs an exclusive lock, which
    a process opening the same new file at the same moment may hold: retry briefly."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)
            continue
        if str(mode).lower() != "wal":
            raise RuntimeError(f"SQLite refused WAL journal mode (got {mode!r})")
        return


class SqliteBatchCoordinator(SqlBatchCoordinator):
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._executor: ThreadPoolExecutor | None = None
        self._conn: sqlite3.Connection | None = None
        self._checkpointer: Checkpointer | None = None
        self._local_commits = 0
        """Write transactions this instance committed (touched only on the DB thread):
        PRAGMA data_version only counts other connections' commits."""

    # -- plumbing

    def _open(self) -> None:
        conn = connect(self.path)
        try:
            migrate.apply_sqlite(conn, where=str(self.path))
            # Checkpoints run on their own thread, not inside a commit (checkpoint.py).
            conn.execute(f"PRAGMA wal_autocheckpoint = {BACKSTOP_PAGES}")
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        self._checkpointer = Checkpointer(self.path)
        self._checkpointer.start()

    def _transaction(
        self, write: bool, body: Callable[..., T], args: tuple[Any, ...], durable: bool = True
    ) -> T:
        conn = self._conn
        if conn is None:
            raise RuntimeError("coordinator is not started")
        if not durable:
            conn.execute("PRAGMA synchronous = NORMAL")
        try:
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                result = body(conn, *args)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        finally:
            if not durable:
                conn.execute("PRAGMA synchronous = FULL")
        if write:
            self._local_commits += 1
            if self._checkpointer is not None:
                self._checkpointer.wrote()
        return result

    async def _run(self, method: str, write: bool, op: Op[T], *args: Any) -> T:
        return await self._on_db_thread(method, write, self._drive, op, *args)

    @staticmethod
    def _drive(conn: sqlite3.Connection, op: Op[T], *args: Any) -> T:
        return drive(op(SqliteSession(conn), *args))  # type: ignore[arg-type]

    async def _on_db_thread(
        self, method: str, write: bool, body: Callable[..., T], *args: Any, durable: bool = True
    ) -> T:
        if self._executor is None:
            raise RuntimeError("coordinator is not started")
        started = time.perf_counter()
        try:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(
                self._executor, self._transaction, write, body, args, durable
            )
        finally:
            coordinator_latency_seconds.labels(method=method).observe(time.perf_counter() - started)

    # -- brokers: a heartbeat without an fsync (locking)

    async def heartbeat_broker(self, broker_id: int, broker_epoch: int) -> ErrorCode:
        # A heartbeat lost to a power failure costs nothing (the next one repeats it), so it
        # commits without an fsync: the file's one write lock is held for microseconds, not
        # for a disk flush, and a broker paused mid-heartbeat (which stalls every other
        # broker's writes until it wakes, fencing included) becomes a hundred times rarer.
        return await self._on_db_thread(
            "heartbeat_broker",
            True,
            self._drive,
            cluster.heartbeat_broker,
            broker_id,
            broker_epoch,
            durable=False,
        )

    # -- lifecycle

    async def start(self) -> None:
        if self._executor is not None:
            return
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lakelog-sqlite")
        try:
            await asyncio.get_running_loop().run_in_executor(self._executor, self._open)
        except BaseException:
            self._executor.shutdown(wait=False)
            self._executor = None
            raise

    async def close(self) -> None:
        executor, self._executor = self._executor, None
        if executor is None:
            return
        await asyncio.get_running_loop().run_in_executor(executor, self._close_connection)
        executor.shutdown(wait=True)

    def _close_connection(self) -> None:
        checkpointer, self._checkpointer = self._checkpointer, None
        if checkpointer is not None:
            checkpointer.stop()
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    # -- change notification

    async def change_token(self) -> int:
        return await self._on_db_thread("change_token", False, self._change_token)

    def _change_token(self, conn: sqlite3.Connection) -> int:
        other = int(conn.execute("PRAGMA data_version").fetchone()[0])
        return (other << 32) + (self._local_commits & 0xFFFF_FFFF)
