"""The PostgreSQL batch coordinator: brokers on many hosts share one database.

Each instance holds a bounded pool of connections for its transactions (one per method
call, see `transaction`) and one more connection that listens for other brokers' commits
(see `listener`). Schema migrations run at start, serialized by an advisory lock.

The tables live in the first schema of the connection's search_path (`public` unless the
URL says otherwise, e.g. `?options=-csearch_path%3Dlakelog`), so one database can hold
several independent clusters."""

from __future__ import annotations

import time
from typing import Any, TypeVar

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from lakelog.config import redacted
from lakelog.coordinator.engine import Op
from lakelog.coordinator.facade import SqlBatchCoordinator
from lakelog.coordinator.ops.rows import now_ms
from lakelog.coordinator.postgres import migrate
from lakelog.coordinator.postgres.engine import Conn, PostgresSession
from lakelog.coordinator.postgres.listener import ChangeListener, current_schema
from lakelog.coordinator.postgres.transaction import Transactions
from lakelog.util.errors import ErrorCode
from lakelog.util.metrics import coordinator_latency_seconds

T = TypeVar("T")

HEARTBEAT_SQL = (
    "WITH beat AS (UPDATE brokers SET last_heartbeat = %s"
    " WHERE broker_id = %s AND broker_epoch = %s RETURNING 1)"
    " SELECT EXISTS (SELECT 1 FROM beat), EXISTS (SELECT 1 FROM brokers WHERE broker_id = %s)"
)
"""A heartbeat in one statement: (beat recorded, broker id known)."""

POOL_MIN_SIZE = 1
POOL_MAX_SIZE = 8
POOL_TIMEOUT_S = 5.0
"""Longest wait for a pooled connection. During a database outage every request waits
this long before it fails (and is answered with a retriable error, see
`lakelog.server.api.outage`): well under clients' request timeout (30 s in librdkafka, Java and
kafka-python), and short enough for a request that needs two or three calls."""
POOL_OPEN_TIMEOUT_S = 30.0
"""Start-up: the first connections may take a while (a database still starting)."""


class PostgresBatchCoordinator(SqlBatchCoordinator):
    def __init__(
        self,
        url: str,
        min_size: int = POOL_MIN_SIZE,
        max_size: int = POOL_MAX_SIZE,
        pool_timeout_s: float = POOL_TIMEOUT_S,
    ) -> None:
        self.url = url
        self._pool_timeout_s = pool_timeout_s
        self._min_size = min_size
        self._max_size = max_size
        self._pool: AsyncConnectionPool[Any] | None = None
        self._listener: ChangeListener | None = None
        self._tx: Transactions | None = None
        self._local_commits = 0
        """Write transactions this instance committed: counted at once, where the
        notification of our own commit may still be on its way to our listener."""

    # -- plumbing

    def _run_tx(self) -> Transactions:
        if self._tx is None:
            raise RuntimeError("coordinator is not started")
        return self._tx

    async def _run(self, method: str, write: bool, op: Op[T], *args: Any) -> T:
        return await self._run_tx().run(method, write, _with_session, op, *args)

    def _count_commit(self) -> None:
        self._local_commits += 1

    # -- lifecycle

    async def start(self) -> None:
        if self._tx is not None:
            return
        async with await AsyncConnection.connect(self.url, autocommit=True) as conn:
            await migrate.apply_postgres(conn, where=redacted(self.url))
            schema = await current_schema(conn)
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            self.url,
            min_size=self._min_size,
            max_size=self._max_size,
            timeout=self._pool_timeout_s,
            kwargs={"autocommit": True},
            open=False,
            name="lakelog-coordinator",
        )
        listener = ChangeListener(self.url, schema)
        try:
            await pool.open(wait=True, timeout=POOL_OPEN_TIMEOUT_S)
            await listener.start()
        except BaseException:
            await listener.close()
            await pool.close()
            raise
        self._pool, self._listener = pool, listener
        self._tx = Transactions(pool, schema, self._count_commit)

    async def close(self) -> None:
        pool, listener = self._pool, self._listener
        self._pool = self._listener = self._tx = None
        if listener is not None:
            await listener.close()
        if pool is not None:
            await pool.close()

    # -- brokers: a heartbeat is one autocommit statement here (locking)

    async def heartbeat_broker(self, broker_id: int, broker_epoch: int) -> ErrorCode:
        # One autocommit statement, not a pipelined transaction: the server commits before
        # it answers, so a broker paused mid-heartbeat never holds its row lock, which its
        # own fencing by another broker would wait for.
        [(updated, known)] = await self._run_tx().run_statement(
            "heartbeat_broker",
            HEARTBEAT_SQL,
            (now_ms(), broker_id, broker_epoch, broker_id),
        )
        if updated:
            return ErrorCode.none
        return ErrorCode.stale_broker_epoch if known else ErrorCode.broker_id_not_registered

    # -- change notification

    async def change_token(self) -> int:
        """Notifications heard (every broker's commits, ours included) plus our own commits,
        each counter in its own half so neither can cancel the other out."""
        listener = self._listener
        if listener is None:
            raise RuntimeError("coordinator is not started")
        started = time.perf_counter()
        try:
            heard = await listener.sync()
        finally:
            latency = time.perf_counter() - started
            coordinator_latency_seconds.labels(method="change_token").observe(latency)
        return (heard << 32) + (self._local_commits & 0xFFFF_FFFF)

    async def wait_for_change(self, token: int, timeout: float) -> int:
        """Wait until a commit notification arrives after `token` was taken (or `timeout`
        seconds pass) and return the current token: a push alternative to polling
        `change_token`. Only notifications count here, so pass a token from this method
        or from `change_token`."""
        listener = self._listener
        if listener is None:
            raise RuntimeError("coordinator is not started")
        await listener.wait(token >> 32, timeout)
        return (listener.count << 32) + (self._local_commits & 0xFFFF_FFFF)


async def _with_session(conn: Conn, op: Op[T], *args: Any) -> T:
    return await op(PostgresSession(conn), *args)
