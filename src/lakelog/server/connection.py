"""One client connection: frames read into their own buffers, each handed to `dispatch` as
its own task, answers written in request order.

Knows nothing of any API's meaning: each frame goes to `dispatch`, which returns the
response buffers (or None when the client expects no answer), and takes its `Turn` to keep
a pipelining client's requests in order. On a SASL listener the connection keeps a gate
(`server/sasl.py`) until its client has authenticated; on a TLS listener it maps the client
certificate to a principal.

A frame's buffer grows with the bytes that actually arrive (a header announcing 100 MiB
costs nothing until 100 MiB come). The limits shared by all connections (the bytes of
partly read frames, timeouts, per-address counts) belong to the `listener.Server` that
accepted it.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections import deque
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any

from lakelog.security.principal import ANONYMOUS, NoMatchingRule, user_principal
from lakelog.security.x509_name import CertificateError, subject_rfc2253
from lakelog.server.sasl import (
    MAX_UNAUTHENTICATED_FRAME,
    SASL_HANDSHAKE,
    SaslRejected,
    SaslSession,
    api_key_of,
)
from lakelog.util import metrics

if TYPE_CHECKING:
    from lakelog.server.listener import Server

log = logging.getLogger(__name__)

Buffers = Sequence[bytes | bytearray | memoryview]

FIRST_CHUNK = 64 * 1024
"""A frame's buffer starts at this size (or the frame's, if smaller) and doubles as its
bytes arrive: memory follows what the client sent, not what its header announced."""
OFFSET_COMMITS = frozenset((8, 28))
"""OffsetCommit and TxnOffsetCommit: written in batches (`groups.offset_commits`). A client
committing every record pipelines thousands; Kafka reads a connection's next request only
once it answered one, so they wait in the socket. Here a connection may have
`max_inflight_offset_commits` in the broker at once, enough for a batch: more would only
wait in the broker's queue instead of the socket, for the same throughput."""
RETIRED_LINGER_S = 5.0
"""How long a retired connection waits for its client to close after our FIN: closing at
once with unread bytes makes the kernel send a reset, which can destroy answers the
client has not read yet."""


class CloseConnection(Exception):
    """Raised by dispatch when the connection must be dropped (malformed input)."""


class Turn:
    """A request's place in its connection's order.

    Kafka serves a connection's requests one at a time, and clients that pipeline rely on
    it: a producer's batches must reach the log in the order it sent them. Requests here
    run as concurrent tasks (so a Produce waiting for its WAL commit does not hold up the
    next one), but each takes effect only after the one before it has passed its point of
    order: `wait()` before acting, `release()` once this request's effect is fixed (a
    Produce when its batches are in the WAL buffer, a commit when it is written). Release
    is idempotent, and the dispatcher releases in any case when the request ends."""

    __slots__ = ("_before", "_passed")

    def __init__(self, before: asyncio.Future[None] | None, passed: asyncio.Future[None]):
        self._before = before
        self._passed = passed

    async def wait(self) -> None:
        before = self._before
        if before is not None and not before.done():
            # Shielded: a cancelled waiter must not cancel its predecessor's turn.
            await asyncio.shield(before)
        self._before = None

    def release(self) -> None:
        if not self._passed.done():
            self._passed.set_result(None)


Dispatch = Callable[[memoryview, str, Turn, str], Coroutine[Any, Any, Buffers | None]]


class Connection(asyncio.BufferedProtocol):
    def __init__(self, server: Server) -> None:
        self._server = server
        self._transport: asyncio.Transport | None = None
        self._peer = "?"
        self._ip = "?"
        self._size_buf = bytearray(4)
        self._frame: bytearray | None = None
        self._size = 0
        """The announced size of the frame being read (0: reading its size header)."""
        self._filled = 0
        self._started = 0.0
        """Loop time at which the last frame's first byte arrived."""
        self._answered = 0.0
        """Sweep time of the last answer handed to the transport."""
        self._admitted = False
        self._held = 0
        """Bytes of this connection's partly read frame counted against the server's
        `queued_max_request_bytes` (its buffer plus a granted growth)."""
        self._wanted = 0
        """A growth waiting for the budget (0: not waiting)."""
        self._waited_since = 0.0
        self._pending: deque[tuple[asyncio.Future[Buffers | None], int, bool]] = deque()
        self._unstarted: deque[tuple[Coroutine[Any, Any, Buffers | None], int, bool]] = deque()
        """Requests read but not yet started: `_pump` starts them one loop turn apart. The
        flag of each entry (here and in `_pending`): an offset commit (see `_commits`)."""
        self._commits = 0
        """Offset commits read and not yet answered: reading waits while a whole batch's
        worth is in the broker (`max_inflight_offset_commits`)."""
        self._pumping = False
        self._pending_bytes = 0
        self._wakeup = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self._paused = False
        self._closing = False
        self._retiring = False
        """Reads nothing more; closes once the requests already read are answered."""
        self._discarding: bytearray | None = None
        """Retired and answered: what still arrives is read into this and dropped."""
        self._can_write = asyncio.Event()
        self._can_write.set()
        self._sasl: SaslSession | None = None
        self._close_after: asyncio.Future[Buffers | None] | None = None
        """A SASL failure answer: the connection closes once it is written."""
        self._sasl_busy = False
        """A SASL answer is in the works: nothing more is read until it is done."""
        self._tls_principal: str | None = None
        """`User:<mapped certificate subject>` on a TLS listener with a client certificate."""
        self._last_turn: asyncio.Future[None] | None = None
        """Passed when the newest request so far has passed its point of order."""

    # -- asyncio callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self._peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self._ip = str(peer[0]) if peer else "?"
        if not self._server.admit(self._ip, self._peer):
            self._closing = True
            transport.close()
            return
        self._admitted = True
        self._started = self._server.loop_time()
        if self._server.principal_mapper is not None and not self._certificate_principal():
            self._closing = True
            transport.close()
            self._server.release(self._ip)
            self._admitted = False
            return
        credentials = self._server.login_credentials
        if credentials is not None:
            self._sasl = SaslSession(credentials, self._peer, self._server.reauth_ms)
        self._server.connections.add(self)
        metrics.connections.inc()
        self._writer = asyncio.get_running_loop().create_task(self._write_loop())
        if self._server.stopping:
            transport.pause_reading()
            self._paused = True

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        self._frame = None
        self._server.unhold(self)
        if not self._admitted:
            return
        self._admitted = False
        # Nobody will read the answers: stop the work (long polls above all), but only
        # after each request has had its first step, as if started when read: an acks=0
        # Produce sent just before the client closed must still be stored (and a request
        # cancelled before it starts never passes its turn to the next).
        loop = asyncio.get_running_loop()
        while self._unstarted:
            work, size, commit = self._unstarted.popleft()
            task = loop.create_task(work)
            self._server.track(task)
            self._pending.append((task, size, commit))
        for task, _, _ in self._pending:
            loop.call_soon(task.cancel)
        self._server.connections.discard(self)
        self._server.release(self._ip)
        metrics.connections.dec()
        self._wakeup.set()
        self._can_write.set()

    def pause_writing(self) -> None:
        self._can_write.clear()

    def resume_writing(self) -> None:
        self._can_write.set()

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._discarding is not None:
            return memoryview(self._discarding)
        frame = self._frame
        if frame is None:
            return memoryview(self._size_buf)[self._filled :]
        if self._filled == len(frame):
            frame = self._grow(frame)
        return memoryview(frame)[self._filled :]

    def _grow(self, frame: bytearray) -> bytearray:
        """Double the frame's buffer (up to its announced size): called only when the bytes
        so far fill it. The bytes move to a new buffer: growing in place (`extend`) made
        glibc remap and fault in fresh pages at every step, five times the CPU per GiB of
        4 MiB produce requests; a copy costs no more than the old up-front buffer did."""
        grown = bytearray(min(self._size, 2 * len(frame)))
        grown[: len(frame)] = frame
        self._frame = grown
        return grown

    def wait_for_budget(self, more: int) -> None:
        self._wanted = more
        self._waited_since = self._server.loop_time()
        self._transport.pause_reading()  # type: ignore[union-attr]

    def budget_granted(self) -> None:
        """The server granted the growth this connection waited for: read on. The wait
        does not count against the read timeout (it was not the client's doing)."""
        self._wanted = 0
        self._started += self._server.loop_time() - self._waited_since
        if not self._closing and not self._paused and self._transport is not None:
            self._transport.resume_reading()

    def buffer_updated(self, nbytes: int) -> None:
        if self._discarding is not None:
            return
        if self._filled == 0 and self._frame is None:
            self._started = self._server.loop_time()
        self._filled += nbytes
        if self._frame is None:
            if self._filled < 4:
                return
            (size,) = struct.unpack(">i", self._size_buf)
            limit = self._server.max_request_bytes
            if self._sasl is not None and not self._sasl.authenticated:
                limit = min(limit, MAX_UNAUTHENTICATED_FRAME)
            if size <= 0 or size > limit:
                log.warning("closing %s: request size %d outside 1..%d", self._peer, size, limit)
                metrics.request_errors_total.labels(api="frame").inc()
                self.close()
                return
            self._size = size
            self._frame = bytearray(min(size, FIRST_CHUNK))
            self._filled = 0
            self._server.hold(self, len(self._frame))
            return
        if self._filled < self._size:
            if self._filled == len(self._frame):
                # Full: the next read grows the buffer, if the budget allows.
                self._server.grant(self, min(self._size, 2 * len(self._frame)) - len(self._frame))
            return
        frame, self._frame, self._filled, self._size = self._frame, None, 0, 0
        self._server.unhold(self)
        if self._closing:
            return
        sasl = self._sasl
        if sasl is not None:
            view = memoryview(frame)
            if not sasl.authenticated:
                self._unauthenticated(view)
                return
            if api_key_of(view) == SASL_HANDSHAKE:
                if sasl.begin_reauthentication():
                    self._unauthenticated(view)
                else:
                    log.warning(
                        "closing %s: re-authentication within a second of the last", self._peer
                    )
                    self.close()
                return
            if sasl.expired():
                log.info(
                    "closing %s: SASL session of %s expired without re-authentication "
                    "(connections_max_reauth_ms)",
                    self._peer,
                    sasl.principal,
                )
                metrics.request_errors_total.labels(api="sasl_expired").inc()
                self.close()
                return
        # The request is bound now (its turn, the broker epoch), started by the pump.
        work = self._server.dispatch(
            memoryview(frame), self._peer, self._next_turn(), self.principal
        )
        commit = api_key_of(memoryview(frame)) in OFFSET_COMMITS
        self._commits += commit
        self._unstarted.append((work, len(frame), commit))
        self._pending_bytes += len(frame)
        if not self._pumping:
            self._pumping = True
            asyncio.get_running_loop().call_soon(self._pump)
        self._pause_if_full()

    def _pump(self) -> None:
        """Start this connection's next request, and come back for the one after only on
        a later turn of the loop.

        Fairness between connections, as Kafka gets it from handling one request per
        connection at a time: a client that pipelines many requests (or a flood of bad
        ones) gets one request started per turn of the loop, like every other connection,
        instead of putting all of them in the loop's queue ahead of everyone else's. The
        order of a connection's requests is kept by their turns, as before."""
        if self._closing or not self._unstarted:
            self._pumping = False
            return
        work, size, commit = self._unstarted.popleft()
        loop = asyncio.get_running_loop()
        task = loop.create_task(work)
        self._server.track(task)
        self._pending.append((task, size, commit))
        self._wakeup.set()
        if self._unstarted:
            loop.call_soon(self._pump)  # after the task's first step, in the loop's order
        else:
            self._pumping = False

    def _next_turn(self) -> Turn:
        passed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        turn = Turn(self._last_turn, passed)
        self._last_turn = passed
        return turn

    def _unauthenticated(self, frame: memoryview) -> None:
        """Before login (or while re-authenticating): ApiVersions is dispatched, SASL
        frames answered by the gate, anything else closes the connection. Both go in the
        connection's order like any request; while the gate works on an answer nothing
        more is read, so the next frame meets the gate's new state."""
        sasl = self._sasl
        assert sasl is not None
        if sasl.close_after_reply:
            return  # refused: nothing more is read
        if sasl.accepts_without_login(frame):
            work = self._server.dispatch(frame, self._peer, self._next_turn(), self.principal)
        else:
            self._sasl_busy = True
            if not self._paused and self._transport is not None:
                self._transport.pause_reading()
                self._paused = True
            work = self._sasl_answer(sasl, frame)
        self._unstarted.append((work, len(frame), False))
        self._pending_bytes += len(frame)
        if not self._pumping:
            self._pumping = True
            asyncio.get_running_loop().call_soon(self._pump)
        self._pause_if_full()

    async def _sasl_answer(self, sasl: SaslSession, frame: memoryview) -> Buffers | None:
        try:
            answer = await sasl.answer(frame)
        except SaslRejected as exc:
            metrics.request_errors_total.labels(api="sasl").inc()
            raise CloseConnection(str(exc)) from exc
        finally:
            self._sasl_busy = False
        if sasl.close_after_reply:
            self._close_after = asyncio.current_task()
        else:
            self._resume_if_room()
        return [answer]

    def _resume_if_room(self) -> None:
        """Read again if reading was paused and nothing holds it paused any more."""
        transport = self._transport
        if (
            self._paused
            and transport is not None
            and not self._closing
            and not self._sasl_busy
            and not self._server.stopping
            and not self._retiring
            and len(self._pending) + len(self._unstarted) <= self._server.max_inflight // 2
            and self._pending_bytes <= self._server.max_inflight_bytes // 2
            and self._commits <= self._server.max_inflight_commits // 2
        ):
            self._paused = False
            transport.resume_reading()

    def _pause_if_full(self) -> None:
        if not self._paused and (
            len(self._pending) + len(self._unstarted) >= self._server.max_inflight
            or self._pending_bytes >= self._server.max_inflight_bytes
            or self._commits >= self._server.max_inflight_commits
        ):
            self._transport.pause_reading()  # type: ignore[union-attr]
            self._paused = True

    def _drop_unstarted(self) -> None:
        while self._unstarted:
            work, _, _ = self._unstarted.popleft()
            work.close()

    def eof_received(self) -> bool | None:
        return None

    # -- writing in request order
    async def _write_loop(self) -> None:
        transport = self._transport
        assert transport is not None
        while True:
            while not self._pending:
                if self._closing:
                    return
                if self._retiring and not self._unstarted:
                    self._finish_retiring()
                    return
                self._wakeup.clear()
                await self._wakeup.wait()
            task, size, commit = self._pending[0]
            try:
                parts = await task
            except asyncio.CancelledError:
                if self._closing:
                    return
                raise
            except CloseConnection as exc:
                log.warning("closing %s: %s", self._peer, exc)
                self.close()
                return
            except Exception:
                log.exception("closing %s: request failed", self._peer)
                self.close()
                return
            finally:
                self._pending.popleft()
                self._pending_bytes -= size
                self._commits -= commit
            self._resume_if_room()
            if parts is None or self._closing:
                continue
            await self._can_write.wait()
            if self._closing:
                return
            transport.writelines(parts)
            self._answered = self._server.now
            if task is self._close_after:
                self.close()  # the transport sends what it holds, then closes
                return

    def _certificate_principal(self) -> bool:
        """Note the principal of the client's certificate (none: ANONYMOUS); False (with
        a log line) if its subject cannot be read or no mapping rule applies."""
        mapper = self._server.principal_mapper
        ssl_object = self._transport.get_extra_info("ssl_object") if self._transport else None
        if mapper is None or ssl_object is None:
            return True
        der = ssl_object.getpeercert(binary_form=True)
        if not der:
            return True
        try:
            dn = subject_rfc2253(der)
            self._tls_principal = user_principal(mapper.name(dn))
        except (CertificateError, NoMatchingRule) as exc:
            log.warning("closing %s: client certificate refused: %s", self._peer, exc)
            metrics.request_errors_total.labels(api="tls_principal").inc()
            return False
        log.debug("%s: TLS client %s is %s", self._peer, dn, self._tls_principal)
        return True

    @property
    def principal(self) -> str:
        """Who this connection is: the SASL user on a SASL listener (also over TLS, as in
        Kafka), else the client certificate's mapped subject, else User:ANONYMOUS."""
        if self._sasl is not None:
            return self._sasl.principal or ANONYMOUS
        return self._tls_principal or ANONYMOUS

    @property
    def peer(self) -> str:
        return self._peer

    @property
    def has_pending(self) -> bool:
        return bool(self._pending or self._unstarted) and not self._closing

    def stop_reading(self) -> None:
        if self._transport is not None and not self._paused and not self._closing:
            self._transport.pause_reading()
            self._paused = True

    def retire(self) -> None:
        """Read no more requests; close once those already read are answered."""
        self._retiring = True
        self.stop_reading()
        self._wakeup.set()

    def _finish_retiring(self) -> None:
        """Everything read is answered: send FIN after the answers, drop what still comes,
        and close when the client does (or after RETIRED_LINGER_S)."""
        transport = self._transport
        if transport is None or not transport.can_write_eof():
            self.close()  # TLS: no half-close
            return
        self._discarding = bytearray(FIRST_CHUNK)
        self._frame = None
        self._server.unhold(self)
        transport.write_eof()
        asyncio.get_running_loop().call_later(RETIRED_LINGER_S, self.close)
        self._paused = False
        transport.resume_reading()

    def close(self, *, abort: bool = False) -> None:
        """Close the connection; `abort` drops what is not yet sent (a client that stopped
        reading would otherwise hold the transport open)."""
        self._closing = True
        for task, _, _ in self._pending:
            task.cancel()
        self._drop_unstarted()
        self._wakeup.set()
        if self._transport is not None:
            if abort:
                self._transport.abort()
            else:
                self._transport.close()

    def expired(self, now: float) -> tuple[int, str] | None:
        """Why the sweep should close this connection now (with the log level to say it
        at), or None.

        A frame begun and not complete within the read timeout; or, with no frame begun,
        no request for the idle time while nothing is being worked on (an answer the
        client does not read counts as idle: it holds the connection for nothing)."""
        server = self._server
        if self._closing:
            return None
        begun = self._frame is not None or self._filled > 0
        if self._wanted:
            return None  # waiting for the server's budget, not for the client
        if begun:
            if now - self._started >= server.request_read_timeout_s:
                got = self._filled + (4 if self._frame is not None else 0)
                announced = f"{self._size} bytes" if self._frame is not None else "its size"
                return logging.WARNING, (
                    f"request of {announced} not complete after "
                    f"{server.request_read_timeout_s * 1000:.0f} ms "
                    f"({got} bytes received; request_read_timeout_ms)"
                )
            return None
        if now - max(self._started, self._answered) >= server.idle_timeout_s:
            if self._unstarted or any(not task.done() for task, _, _ in self._pending):
                return None
            # Normal for clients that went quiet (Kafka closes them too, quietly).
            return logging.INFO, (
                f"no request for {server.idle_timeout_s * 1000:.0f} ms (connections_max_idle_ms)"
            )
        return None
