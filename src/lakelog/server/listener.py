"""TCP listener: accepts connections (each a `connection.Connection`, which reads, hands
frames to `dispatch` and writes answers in order) and enforces what they share. Listener
security is opt-in: TLS wraps the transport, and on a SASL listener each connection has a
gate (`server/sasl.py`) until its client has authenticated.

Limits against hostile or broken clients: a frame's buffer grows with the bytes that
actually arrive (a header announcing 100 MiB costs nothing until 100 MiB come), a frame
must be complete within `request_read_timeout_ms`, a connection with no request for
`connections.max.idle.ms` is closed, and one address may hold at most
`max.connections.per.ip` connections. One periodic sweep per server enforces the
timeouts; the read path only notes the time a frame starts.

`queued.max.request.bytes` bounds the bytes held in partly read frames across all
connections: a connection whose frame must grow past it stops reading until others'
frames complete (first come, first served). Should every holder be waiting, the sweep lets
the oldest waiter finish its frame regardless, so the bound is exceeded by at most one
request and never deadlocks; the first chunk of a frame never waits (a small request is
never held up by big ones).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections import deque
from typing import Any

from lakelog.security.credentials import LoginCredentials
from lakelog.security.listener import ListenerSecurity, SaslUsers
from lakelog.server.connection import Buffers, Connection, Dispatch
from lakelog.util import metrics

log = logging.getLogger(__name__)

MAX_SWEEP_INTERVAL_S = 1.0
LOGGED_PER_SWEEP = 5
"""Connections closed by one sweep get a log line each up to this many, then one line
that counts the rest (a flood of stalled connections must not flood the log)."""


class _Refusals:
    """Refusal warnings at most once per second, counting the ones held back: a flood of
    connections from one address must not flood the log."""

    def __init__(self) -> None:
        self._last = -1.0
        self._held = 0

    def warning(self, msg: str, *args: object) -> None:
        now = time.monotonic()
        if now - self._last < 1.0:
            self._held += 1
            return
        held, self._held, self._last = self._held, 0, now
        if held:
            log.warning(msg + " (%d more refused before this one)", *args, held)
        else:
            log.warning(msg, *args)


class Server:
    def __init__(
        self,
        dispatch: Dispatch,
        *,
        max_request_bytes: int,
        max_inflight: int,
        max_connections: int,
        max_inflight_bytes: int = 64 * 1024 * 1024,
        max_inflight_commits: int = 32,
        max_connections_per_ip: int = 2**31 - 1,
        max_connections_per_ip_overrides: dict[str, int] | None = None,
        connections_max_idle_ms: int = 600_000,
        request_read_timeout_ms: int = 30_000,
        queued_max_request_bytes: int = -1,
        security: ListenerSecurity | None = None,
        reauth_ms: int = 0,
    ) -> None:
        self.dispatch = dispatch
        self.ssl: ssl.SSLContext | None = security.ssl_context if security else None
        self.sasl_users: SaslUsers | None = security.sasl if security else None
        self.login_credentials: LoginCredentials | None = (
            LoginCredentials(self.sasl_users) if self.sasl_users is not None else None
        )
        """Where SASL logins find users; the broker adds the coordinator's SCRAM users."""
        self.reauth_ms = reauth_ms
        self.principal_mapper = security.principal_mapper if security else None
        self.max_request_bytes = max_request_bytes
        self.max_inflight = max_inflight
        self.max_inflight_bytes = max_inflight_bytes
        self.max_inflight_commits = max_inflight_commits
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self.max_connections_per_ip_overrides = dict(max_connections_per_ip_overrides or {})
        self.idle_timeout_s = connections_max_idle_ms / 1000
        self.request_read_timeout_s = request_read_timeout_ms / 1000
        shortest = min(self.idle_timeout_s, self.request_read_timeout_s)
        self.sweep_interval_s = min(MAX_SWEEP_INTERVAL_S, max(0.05, shortest / 4))
        self.queued_max_request_bytes = queued_max_request_bytes
        """Bound on `partial_bytes`; <= 0: none."""
        self.partial_bytes = 0
        """Bytes held in partly read frames, all connections together."""
        self.budget_waits = 0
        """How many times a frame waited for the bound (for tests and curiosity)."""
        self._holders = 0
        self._budget_waiters: deque[Connection] = deque()
        self._overdraft: Connection | None = None
        self._released = 0
        self._released_at_sweep = 0
        self.connections: set[Connection] = set()
        self.per_ip: dict[str, int] = {}
        self.stopping = False
        self.now = 0.0
        """Loop time of the last sweep: a cheap clock for stamps that need no precision."""
        self._tasks: set[asyncio.Task[Buffers | None]] = set()
        self._server: asyncio.base_events.Server | None = None
        self._sweeper: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._refusals = _Refusals()

    def loop_time(self) -> float:
        loop = self._loop
        return loop.time() if loop is not None else 0.0

    def _new_connection(self) -> asyncio.BaseProtocol:
        if len(self.connections) >= self.max_connections:
            self._refusals.warning(
                "refusing connection: %d open (max_connections)", len(self.connections)
            )
            return _Refuse()
        return Connection(self)

    def admit(self, ip: str, peer: str) -> bool:
        """Count a new connection from `ip`; False (and a log line) if that address already
        holds `max.connections.per.ip` of them (or its override)."""
        limit = self.max_connections_per_ip_overrides.get(ip, self.max_connections_per_ip)
        held = self.per_ip.get(ip, 0)
        if held >= limit:
            self._refusals.warning(
                "refusing connection from %s: %d open from %s (max_connections_per_ip %d)",
                peer,
                held,
                ip,
                limit,
            )
            metrics.request_errors_total.labels(api="connection").inc()
            return False
        self.per_ip[ip] = held + 1
        return True

    def release(self, ip: str) -> None:
        held = self.per_ip.get(ip, 0) - 1
        if held > 0:
            self.per_ip[ip] = held
        else:
            self.per_ip.pop(ip, None)

    # -- bytes in partly read frames (queued.max.request.bytes)
    def hold(self, conn: Connection, size: int) -> None:
        """A frame's first chunk: counted, never refused."""
        if not conn._held:
            self._holders += 1
        conn._held += size
        self.partial_bytes += size

    def grant(self, conn: Connection, more: int) -> None:
        """Count `more` bytes for `conn`'s growing frame if the budget allows (and nobody
        waits before it); else `conn` stops reading until its turn comes. If every
        connection holding bytes now waits, none could ever free any: the oldest goes
        ahead at once."""
        limit = self.queued_max_request_bytes
        if (
            limit <= 0
            or conn is self._overdraft
            or (not self._budget_waiters and self.partial_bytes + more <= limit)
        ):
            conn._held += more
            self.partial_bytes += more
            return
        self.budget_waits += 1
        conn.wait_for_budget(more)
        self._budget_waiters.append(conn)
        if self._overdraft is None and len(self._budget_waiters) >= self._holders:
            self._grant_waiters(force=True)

    def unhold(self, conn: Connection) -> None:
        """`conn`'s frame is complete (or the connection gone): its bytes are free."""
        if conn._held:
            self.partial_bytes -= conn._held
            conn._held = 0
            self._holders -= 1
            self._released += 1
        if conn is self._overdraft:
            self._overdraft = None
        if conn._wanted:
            conn._wanted = 0
            with contextlib.suppress(ValueError):
                self._budget_waiters.remove(conn)
        if self._budget_waiters:
            self._grant_waiters(force=False)

    def _grant_waiters(self, *, force: bool) -> None:
        """Let waiters read on, oldest first, while the budget allows; with `force`, the
        oldest one regardless (it may then finish its frame past the bound)."""
        limit = self.queued_max_request_bytes
        while self._budget_waiters:
            conn = self._budget_waiters[0]
            if not force and self.partial_bytes + conn._wanted > limit:
                return
            self._budget_waiters.popleft()
            if force:
                self._overdraft = conn
                force = False
            conn._held += conn._wanted
            self.partial_bytes += conn._wanted
            conn.budget_granted()

    def _unstick(self) -> None:
        """Called by each sweep: if connections wait for the budget and no frame has
        completed since the last sweep, the oldest waiter goes ahead past the bound (the
        other holders may be stalled, until their read timeout)."""
        stuck = self._released == self._released_at_sweep
        if self._budget_waiters and self._overdraft is None and stuck:
            log.info(
                "queued_max_request_bytes: %d bytes in partly read frames, %d waiting; "
                "the oldest goes ahead",
                self.partial_bytes,
                len(self._budget_waiters),
            )
            self._grant_waiters(force=True)
        self._released_at_sweep = self._released

    async def _sweep_loop(self) -> None:
        loop = asyncio.get_running_loop()
        skipped = False
        while True:
            before = loop.time()
            await asyncio.sleep(self.sweep_interval_s)
            self.now = loop.time()
            if self.now - before > self.sweep_interval_s + 1.0 and not skipped:
                # The loop was held up (a slow disk, a paused process): the bytes that
                # arrived meanwhile are not read yet, so nobody is judged this round.
                skipped = True
                continue
            skipped = False
            try:
                self._unstick()
                self.sweep(self.now)
            except Exception:
                log.exception("connection sweep failed")

    def sweep(self, now: float) -> int:
        """Close connections past the read or idle timeout; how many were closed."""
        closed = 0
        for conn in list(self.connections):
            expired = conn.expired(now)
            if expired is None:
                continue
            level, why = expired
            closed += 1
            if closed <= LOGGED_PER_SWEEP:
                log.log(level, "closing %s: %s", conn.peer, why)
            if level >= logging.WARNING:
                metrics.request_errors_total.labels(api="read_timeout").inc()
            conn.close(abort=True)
        if closed > LOGGED_PER_SWEEP:
            log.warning("closed %d more connections past a timeout", closed - LOGGED_PER_SWEEP)
        return closed

    async def start(self, host: str, port: int) -> tuple[str, int]:
        loop = asyncio.get_running_loop()
        self._loop = loop
        self.now = loop.time()
        if self._sweeper is None:
            self._sweeper = loop.create_task(self._sweep_loop())
        self._server = await loop.create_server(
            self._new_connection, host, port, reuse_address=True, backlog=1024, ssl=self.ssl
        )
        sock = self._server.sockets[0].getsockname()
        return sock[0], sock[1]

    def stop_accepting(self) -> None:
        self.stopping = True
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            conn.stop_reading()

    def track(self, task: asyncio.Task[Buffers | None]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self, timeout: float) -> None:
        """Wait until every request read so far has been handled, from any connection."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=timeout)
        # Let the write loops hand the last answers to their transports.
        while any(c.has_pending for c in self.connections) and loop.time() < deadline:
            await asyncio.sleep(0.005)

    def retire_all(self) -> None:
        """Every connection reads no more requests and closes once it has answered those
        it read; new connections are served as usual."""
        for conn in list(self.connections):
            conn.retire()

    def close_all(self) -> None:
        """Close every connection; the server goes on accepting unless it is stopping (a
        fenced broker drops its clients and serves new ones)."""
        if self.stopping and self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        for conn in list(self.connections):
            conn.close()


class _Refuse(asyncio.Protocol):
    def connection_made(self, transport: Any) -> None:
        transport.close()
