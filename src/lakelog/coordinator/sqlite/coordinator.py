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
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from lakelog.coordinator import migrate
from lakelog.coordinator.engine import Op, drive
from lakelog.coordinator.facade import SqlBatchCoordinator
from lakelog.coordinator.interface import (
    CommitBatch,
    CommitBatchResult,
    FindBatchesRequest,
    FindBatchesResult,
    ListOffsetsRequest,
    ListOffsetsResult,
    LogInfo,
    PartitionKey,
)
from lakelog.coordinator.pipeline_types import (
    FileBatch,
    FileInfo,
    FileReference,
    MergeCommit,
    MergeCommitResult,
)
from lakelog.coordinator.sqlite import merge, produce, read, txn
from lakelog.coordinator.sqlite.checkpoint import BACKSTOP_PAGES, Checkpointer
from lakelog.coordinator.sqlite.engine import SqliteSession
from lakelog.coordinator.sqlite.mirror_methods import SqliteMirrorMethods
from lakelog.coordinator.txn_types import (
    DescribeProducersResult,
    InitTxnProducerRequest,
    InitTxnProducerResult,
    TransactionInfo,
    TxnOffsetCommitRequest,
    TxnRef,
)
from lakelog.errors import ErrorCode
from lakelog.metrics import coordinator_latency_seconds

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


class SqliteBatchCoordinator(SqliteMirrorMethods, SqlBatchCoordinator):
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
            migrate.apply_sqlite(conn)
            # Checkpoints run on their own thread, not inside a commit (checkpoint.py).
            conn.execute(f"PRAGMA wal_autocheckpoint = {BACKSTOP_PAGES}")
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        self._checkpointer = Checkpointer(self.path)
        self._checkpointer.start()

    def _transaction(self, write: bool, body: Callable[..., T], args: tuple[Any, ...]) -> T:
        conn = self._conn
        if conn is None:
            raise RuntimeError("coordinator is not started")
        conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        try:
            result = body(conn, *args)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        if write:
            self._local_commits += 1
            if self._checkpointer is not None:
                self._checkpointer.wrote()
        return result

    async def _run(self, method: str, write: bool, op: Op[T], *args: Any) -> T:
        return await self._run_conn(method, write, self._drive, op, *args)

    @staticmethod
    def _drive(conn: sqlite3.Connection, op: Op[T], *args: Any) -> T:
        return drive(op(SqliteSession(conn), *args))  # type: ignore[arg-type]

    async def _run_conn(self, method: str, write: bool, body: Callable[..., T], *args: Any) -> T:
        if self._executor is None:
            raise RuntimeError("coordinator is not started")
        started = time.perf_counter()
        try:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._executor, self._transaction, write, body, args)
        finally:
            coordinator_latency_seconds.labels(method=method).observe(time.perf_counter() - started)

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

    # -- produce

    async def commit_file(
        self,
        object_key: str,
        uploader_broker_id: int,
        broker_epoch: int,
        file_size: int,
        batches: Sequence[CommitBatch],
    ) -> list[CommitBatchResult]:
        return await self._run_conn(
            "commit_file",
            True,
            produce.commit_file,
            object_key,
            uploader_broker_id,
            broker_epoch,
            file_size,
            batches,
        )

    async def commit_outcome(self, object_key: str) -> dict[int, CommitBatchResult] | None:
        return await self._run_conn("commit_outcome", False, produce.committed_batches, object_key)

    # -- fetch

    async def find_batches(self, requests: Sequence[FindBatchesRequest]) -> list[FindBatchesResult]:
        return await self._run_conn("find_batches", False, read.find_batches, requests)

    async def log_info(self, partitions: Sequence[PartitionKey]) -> list[LogInfo]:
        return await self._run_conn("log_info", False, read.log_info, partitions)

    async def list_offsets(self, requests: Sequence[ListOffsetsRequest]) -> list[ListOffsetsResult]:
        return await self._run_conn("list_offsets", False, read.list_offsets, requests)

    # -- transactions

    async def init_transactional_producer(
        self, request: InitTxnProducerRequest, now_ms: int
    ) -> InitTxnProducerResult:
        return await self._run_conn(
            "init_transactional_producer", True, txn.init_transactional_producer, request, now_ms
        )

    async def add_partitions_to_txn(
        self, txn_ref: TxnRef, partitions: Sequence[PartitionKey], now_ms: int, verify_only: bool
    ) -> list[ErrorCode]:
        return await self._run_conn(
            "add_partitions_to_txn",
            not verify_only,
            txn.add_partitions_to_txn,
            txn_ref,
            partitions,
            now_ms,
            verify_only,
        )

    async def add_offsets_to_txn(self, txn_ref: TxnRef, group_id: str, now_ms: int) -> ErrorCode:
        return await self._run_conn(
            "add_offsets_to_txn", True, txn.add_offsets_to_txn, txn_ref, group_id, now_ms
        )

    async def txn_offset_commit(
        self, request: TxnOffsetCommitRequest, now_ms: int
    ) -> list[ErrorCode]:
        return await self._run_conn(
            "txn_offset_commit", True, txn.txn_offset_commit, request, now_ms
        )

    async def end_txn(self, txn_ref: TxnRef, commit: bool, now_ms: int) -> ErrorCode:
        return await self._run_conn("end_txn", True, txn.end_txn, txn_ref, commit, now_ms)

    async def abort_expired_transactions(self, now_ms: int) -> list[str]:
        return await self._run_conn(
            "abort_expired_transactions", True, txn.abort_expired_transactions, now_ms
        )

    async def describe_transactions(
        self, transactional_ids: Sequence[str]
    ) -> list[TransactionInfo | None]:
        return await self._run_conn(
            "describe_transactions", False, txn.describe_transactions, transactional_ids
        )

    async def list_transactions(self) -> list[TransactionInfo]:
        return await self._run_conn("list_transactions", False, txn.list_transactions)

    async def describe_producers(
        self, partitions: Sequence[PartitionKey]
    ) -> list[DescribeProducersResult]:
        return await self._run_conn("describe_producers", False, txn.describe_producers, partitions)

    async def pending_txn_offsets(self, group_id: str) -> set[tuple[str, int]]:
        return await self._run_conn("pending_txn_offsets", False, txn.pending_txn_offsets, group_id)

    # -- pipeline

    async def list_file_infos(
        self, key_prefix: str = "", after_key: str = "", limit: int = 1000
    ) -> list[FileInfo]:
        return await self._run_conn(
            "list_file_infos", False, merge.list_file_infos, key_prefix, after_key, limit
        )

    async def file_batches(self, object_keys: Sequence[str]) -> list[FileBatch]:
        return await self._run_conn("file_batches", False, merge.file_batches, object_keys)

    async def file_references(self, object_keys: Sequence[str]) -> list[FileReference]:
        return await self._run_conn("file_references", False, merge.file_references, object_keys)

    async def commit_merge(
        self, commits: Sequence[MergeCommit], all_or_nothing: bool = False
    ) -> list[MergeCommitResult]:
        return await self._run_conn(
            "commit_merge", True, merge.commit_merge, commits, all_or_nothing
        )

    # -- change notification

    async def change_token(self) -> int:
        return await self._run_conn("change_token", False, self._change_token)

    def _change_token(self, conn: sqlite3.Connection) -> int:
        other = int(conn.execute("PRAGMA data_version").fetchone()[0])
        return (other << 32) + (self._local_commits & 0xFFFF_FFFF)
