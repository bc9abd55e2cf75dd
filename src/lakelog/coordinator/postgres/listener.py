"""Commit notifications: every committing transaction does NOTIFY on CHANNEL, and each
coordinator keeps one dedicated connection LISTENing, counting what arrives. The count is
the change token: it moves when any broker commits, without polling tables.

Channels are per database, but a database may hold several coordinators, each in its own
schema (chosen with the URL's search_path): the payload starts with the schema's name, and
a listener counts only its own schema's commits.

The connection is drained as soon as its socket is readable (a listener that stops reading
would hold back the server's notification queue for everyone). `sync` adds one round trip:
PostgreSQL delivers every notification committed before a query ahead of that query's
answer, so after `sync` the count includes every commit that finished before the call."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import psycopg
from psycopg import AsyncConnection, sql

log = logging.getLogger(__name__)

CHANNEL = "lakelog_commits"

RECONNECT_DELAYS = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0)


async def current_schema(conn: AsyncConnection[Any]) -> str:
    """The schema the coordinator's tables live in (the first of the search_path)."""
    cursor = await conn.execute("SELECT current_schema()")
    row = await cursor.fetchone()
    if row is None or row[0] is None:
        raise psycopg.ProgrammingError("no schema of the search_path exists")
    return str(row[0])


def notify(schema: str, method: str) -> sql.Composed:
    """The statement announcing a write transaction; delivered only if it commits."""
    return sql.SQL("NOTIFY {}, {}").format(
        sql.Identifier(CHANNEL), sql.Literal(f"{schema}:{method}")
    )


class ChangeListener:
    def __init__(self, url: str, schema: str) -> None:
        self._url = url
        self._prefix = f"{schema}:"
        self._conn: AsyncConnection[Any] | None = None
        self._lock = asyncio.Lock()
        """Held while anyone uses the connection; the socket watch is re-armed under it."""
        self._armed: asyncio.Future[None] | None = None
        self._watched_fd = -1
        self._task: asyncio.Task[None] | None = None
        self._count = 0
        self._event = asyncio.Event()
        self._closed = False

    @property
    def count(self) -> int:
        """Notifications received so far (plus one per reconnect, for those missed)."""
        return self._count

    async def start(self) -> None:
        self._conn = await self._connect()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="lakelog-listen")

    async def close(self) -> None:
        self._closed = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._disarm()
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    async def sync(self) -> int:
        """The count, including every commit that finished before this call."""
        async with self._lock:
            conn = self._conn
            if conn is None or conn.closed:
                raise psycopg.OperationalError("commit listener is not connected")
            self._disarm()
            await conn.execute("SELECT 1")
        return self._count

    async def wait(self, since: int, timeout: float) -> int:
        """Wait until the count differs from `since` (a notification arrived), or for
        `timeout` seconds; returns the count."""
        if self._count != since:
            return self._count
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._event.wait(), timeout)
        return self._count

    # -- internals

    def _heard(self, payload: str) -> None:
        if payload.startswith(self._prefix):
            self._bump()

    def _bump(self) -> None:
        self._count += 1
        self._event.set()
        self._event = asyncio.Event()

    async def _connect(self) -> AsyncConnection[Any]:
        conn = await AsyncConnection.connect(self._url, autocommit=True)
        try:
            conn.add_notify_handler(lambda notify: self._heard(notify.payload))
            await conn.execute(f"LISTEN {CHANNEL}")
        except BaseException:
            await conn.close()
            raise
        return conn

    async def _run(self) -> None:
        failures = 0
        while not self._closed:
            try:
                await self._watch_once()
                failures = 0
            except (psycopg.Error, OSError) as exc:
                delay = RECONNECT_DELAYS[min(failures, len(RECONNECT_DELAYS) - 1)]
                failures += 1
                log.warning("commit listener lost its connection (%s); reconnecting", exc)
                await self._reconnect(delay)

    async def _watch_once(self) -> None:
        """Drain what arrived, then wait for the socket to become readable (or for `sync`
        to take the connection over)."""
        async with self._lock:
            conn = self._conn
            if conn is None or conn.closed:
                raise psycopg.OperationalError("commit listener connection closed")
            pgconn, encoding = conn.pgconn, conn.info.encoding
            pgconn.consume_input()
            while (notify := pgconn.notifies()) is not None:
                self._heard(notify.extra.decode(encoding, "replace"))
            loop = asyncio.get_running_loop()
            armed: asyncio.Future[None] = loop.create_future()
            self._watched_fd = pgconn.socket
            loop.add_reader(self._watched_fd, self._disarm)
            self._armed = armed
        try:
            await armed
        finally:
            self._disarm()

    def _disarm(self) -> None:
        """Stop watching the socket (psycopg watches it itself while it runs a query) and
        let the watch loop go round."""
        armed, self._armed = self._armed, None
        if armed is None:
            return
        fd, self._watched_fd = self._watched_fd, -1
        with contextlib.suppress(Exception):  # the loop may be closing, the fd gone
            asyncio.get_running_loop().remove_reader(fd)
        if not armed.done():
            armed.set_result(None)

    async def _reconnect(self, delay: float) -> None:
        async with self._lock:
            self._disarm()
            old, self._conn = self._conn, None
            if old is not None:
                with contextlib.suppress(Exception):
                    await old.close()
        await asyncio.sleep(delay)
        if self._closed:
            return
        try:
            conn = await self._connect()
        except (psycopg.Error, OSError) as exc:
            log.warning("commit listener could not reconnect: %s", exc)
            return
        async with self._lock:
            self._conn = conn
        # Commits made while we were away were not announced to us: wake everyone.
        self._bump()
