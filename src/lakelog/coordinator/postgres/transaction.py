"""One database transaction per coordinator method, on a pooled connection, retried whole
when PostgreSQL aborts it for a serialization failure (40001) or a deadlock (40P01): both
mean "nothing happened, try again", and the bodies decide only from what they read.

Writes run in READ COMMITTED and rely on row locks; reads run in REPEATABLE READ, READ
ONLY, so a multi-query read sees one snapshot. Every write ends with a NOTIFY, delivered
to listeners only if the transaction commits.

Transactions run in pipeline mode: statements are sent without waiting, and a round trip
happens only when a body needs a result (or at the end), so BEGIN travels with the first
query, and writes whose results nobody reads travel with the NOTIFY and the COMMIT."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg import errors, pq, sql
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from lakelog.coordinator.postgres.engine import Conn
from lakelog.coordinator.postgres.listener import notify
from lakelog.util.metrics import coordinator_latency_seconds

T = TypeVar("T")

Body = Callable[..., Awaitable[T]]

RETRYABLE = (errors.SerializationFailure, errors.DeadlockDetected)
MAX_ATTEMPTS = 8
FIRST_DELAY_S = 0.005
MAX_DELAY_S = 0.5

BEGIN_WRITE = sql.SQL("BEGIN ISOLATION LEVEL READ COMMITTED")
BEGIN_READ = sql.SQL("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
COMMIT = sql.SQL("COMMIT")


def backoff(attempt: int) -> float:
    """Seconds to wait before retry `attempt` (1-based): exponential, with full jitter so
    the transactions that collided do not collide again."""
    return random.uniform(0, min(MAX_DELAY_S, FIRST_DELAY_S * 2 ** (attempt - 1)))


class Transactions:
    def __init__(
        self, pool: AsyncConnectionPool[Any], schema: str, on_commit: Callable[[], None]
    ) -> None:
        self._pool = pool
        self._schema = schema
        self._on_commit = on_commit
        self._endings: dict[str, tuple[sql.Composable, ...]] = {}
        self.retries = 0
        """Transactions retried so far (for tests and debugging)."""

    async def run(self, method: str, write: bool, body: Body[T], *args: Any) -> T:
        started = time.perf_counter()
        begin, ending = (BEGIN_WRITE, self._ending(method)) if write else (BEGIN_READ, (COMMIT,))
        try:
            attempt = 1
            while True:
                try:
                    async with self._pool.connection() as conn:
                        result = await _once(conn, begin, ending, body, args)
                    break
                except RETRYABLE:
                    if attempt >= MAX_ATTEMPTS:
                        raise
                    self.retries += 1
                    await asyncio.sleep(backoff(attempt))
                    attempt += 1
                except psycopg.OperationalError as exc:
                    # Pooled connections that died with a server restart fail on first
                    # use: a read tries the next one (the pool drops the dead). Not a
                    # write, which may have committed: its caller decides (WalWriter).
                    # No connection at all (PoolTimeout) is the outage itself.
                    if write or isinstance(exc, PoolTimeout) or attempt >= MAX_ATTEMPTS:
                        raise
                    self.retries += 1
                    attempt += 1
            if write:
                self._on_commit()
            return result
        finally:
            coordinator_latency_seconds.labels(method=method).observe(time.perf_counter() - started)

    async def run_statement(
        self, method: str, query: str, params: Sequence[Any]
    ) -> list[tuple[Any, ...]]:
        """One write statement as its own implicit transaction (autocommit), announced
        like every write. The server commits before it answers, so no lock outlives the
        round trip even if this process is paused right after sending it."""
        started = time.perf_counter()
        announce = notify(self._schema, method)
        try:
            attempt = 1
            while True:
                try:
                    async with self._pool.connection() as conn:
                        cursor = await conn.execute(query, params)
                        rows = await cursor.fetchall()
                        await conn.execute(announce)
                    break
                except RETRYABLE:
                    if attempt >= MAX_ATTEMPTS:
                        raise
                    self.retries += 1
                    await asyncio.sleep(backoff(attempt))
                    attempt += 1
            self._on_commit()
            return rows
        finally:
            coordinator_latency_seconds.labels(method=method).observe(time.perf_counter() - started)

    def _ending(self, method: str) -> tuple[sql.Composable, ...]:
        ending = self._endings.get(method)
        if ending is None:
            ending = self._endings[method] = (notify(self._schema, method), COMMIT)
        return ending


async def _once(
    conn: Conn,
    begin: sql.Composable,
    ending: Sequence[sql.Composable],
    body: Body[T],
    args: tuple[Any, ...],
) -> T:
    try:
        async with conn.pipeline():
            await conn.execute(begin)
            result = await body(conn, *args)
            for statement in ending:
                await conn.execute(statement)
    except BaseException:
        await _rollback(conn)
        raise
    return result


async def _rollback(conn: Conn) -> None:
    """Leave the connection idle for the pool; a broken one is discarded by the pool."""
    if conn.closed or conn.info.transaction_status == pq.TransactionStatus.IDLE:
        return
    with contextlib.suppress(psycopg.Error):
        await conn.execute("ROLLBACK")
