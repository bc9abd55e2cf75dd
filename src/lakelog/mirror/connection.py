"""One connection to a source broker for the mirror's Fetch requests.

A BufferedProtocol reads each response straight into a buffer of exactly its size, which
the caller allocates once the size is known (so it can account for it first): the
response is never copied, and its records are patched in place. One request at a time.
TLS and SASL (PLAIN, SCRAM) are set up in `open` from the source's client settings."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, cast

from kio.index import load_response_schema
from kio.serial import entity_reader

from lakelog.admin.wire import encode_request
from lakelog.log.protocol.bounded import OutOfBounds, check_body
from lakelog.log.protocol.varint import skip_tagged_fields
from lakelog.security.client_config import ClientSecurity
from lakelog.security.sasl_client import SaslFailed, authenticate

FrameAllocator = Callable[[int], bytearray]
MAX_FRAME_BYTES = 1 << 30
SMALL_FRAME_BYTES = 1 << 20
"""Cap on a SASL answer: a few hundred bytes in practice."""


def _small_frame(size: int) -> bytearray:
    if size > SMALL_FRAME_BYTES:
        raise ConnectionError(f"a {size}-byte answer to a SASL request")
    return bytearray(size)


class SourceConnection(asyncio.BufferedProtocol):
    def __init__(self) -> None:
        self._transport: asyncio.Transport | None = None
        self._size = bytearray(4)
        self._size_view = memoryview(self._size)
        self._frame: bytearray | None = None
        self._view: memoryview | None = None
        self._filled = 0
        self._allocate: FrameAllocator | None = None
        self._waiter: asyncio.Future[bytearray] | None = None
        self._lost: BaseException | None = None
        self._correlation = 0
        self._login: Callable[[], Awaitable[int]] | None = None
        self._reauth_at: float | None = None
        """Loop time to log in again by (KIP-368: the source gave a session lifetime)."""
        self._reauthenticating = False

    @classmethod
    async def open(
        cls,
        host: str,
        port: int,
        timeout: float,
        tls: ssl.SSLContext | None = None,
        security: ClientSecurity | None = None,
    ) -> SourceConnection:
        """A connection ready for Fetch: TLS and SASL done when `security` asks for them.
        A refused login is a ConnectionError, like any other way of not getting in."""
        if security is not None and tls is None:
            tls = security.ssl_context
        loop = asyncio.get_running_loop()
        _, protocol = await asyncio.wait_for(
            loop.create_connection(cls, host, port, ssl=tls), timeout
        )
        if security is not None and security.uses_sasl:
            protocol._login = partial(authenticate, partial(protocol._roundtrip, timeout), security)
            try:
                await protocol._log_in()
            except SaslFailed as exc:
                protocol.close()
                raise ConnectionError(f"source {host}:{port}: {exc}") from exc
            except BaseException:
                protocol.close()
                raise
        return protocol

    async def _log_in(self) -> None:
        """Authenticate (again); plan the next login at 85% of the session's lifetime."""
        assert self._login is not None
        lifetime_ms = await self._login()
        loop = asyncio.get_running_loop()
        self._reauth_at = loop.time() + 0.85 * lifetime_ms / 1000 if lifetime_ms > 0 else None

    async def _roundtrip(self, timeout: float, api_key: int, version: int, request: Any) -> Any:
        """One small kio request and its parsed response (for the SASL exchange)."""
        self._correlation -= 1  # negative ids: never those of the caller's Fetches
        frame = encode_request(api_key, version, self._correlation, "lakelog-mirror", request)
        response = await self.request(frame, _small_frame, timeout)
        if int.from_bytes(response[:4], "big", signed=True) != self._correlation:
            raise ConnectionError("response correlation id does not match the request")
        cls = load_response_schema(api_key, version)
        pos = skip_tagged_fields(response, 4) if cls.__flexible__ else 4
        data = bytes(response)
        try:
            check_body(cls, data, pos)  # kio aborts the process on a huge length
        except OutOfBounds as exc:
            raise ConnectionError(f"malformed response: {exc}") from exc
        parsed, _ = entity_reader(cls)(data, pos)
        return parsed

    # -- protocol callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._view is None:
            return self._size_view[self._filled :]
        return self._view[self._filled :]

    def buffer_updated(self, nbytes: int) -> None:
        self._filled += nbytes
        if self._view is None:
            if self._filled < 4:
                return
            size = int.from_bytes(self._size, "big", signed=True)
            if not 4 <= size <= MAX_FRAME_BYTES or self._allocate is None:
                self._fail(ConnectionError(f"unexpected response frame of {size} bytes"))
                return
            try:
                self._frame = self._allocate(size)
            except BaseException as exc:
                self._fail(exc)
                return
            self._view = memoryview(self._frame)
            self._filled = 0
            return
        if self._filled == len(self._view):
            frame = self._frame
            self._reset()
            if self._waiter is not None and not self._waiter.done() and frame is not None:
                self._waiter.set_result(frame)

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(exc or ConnectionError("source broker closed the connection"))

    # -- use
    async def request(self, frame: bytes, allocate: FrameAllocator, timeout: float) -> bytearray:
        """Send one request frame; the response frame (correlation id first). A session
        near its end is re-authenticated first (KIP-368)."""
        if self._lost is not None or self._transport is None:
            raise ConnectionError("connection to the source broker is closed")
        reauth_at = self._reauth_at
        due = reauth_at is not None and asyncio.get_running_loop().time() >= reauth_at
        if due and not self._reauthenticating:
            self._reauthenticating = True
            try:
                await self._log_in()
            except SaslFailed as exc:
                self.close()
                raise ConnectionError(f"source re-authentication: {exc}") from exc
            finally:
                self._reauthenticating = False
        self._allocate = allocate
        self._waiter = asyncio.get_running_loop().create_future()
        self._transport.write(frame)
        try:
            return await asyncio.wait_for(self._waiter, timeout)
        except BaseException:
            self.close()
            raise
        finally:
            self._waiter = None
            self._allocate = None

    def close(self) -> None:
        if self._transport is not None:
            with contextlib.suppress(Exception):
                self._transport.close()
        self._fail(ConnectionError("connection closed"))

    @property
    def closed(self) -> bool:
        return self._lost is not None

    def _reset(self) -> None:
        self._frame = None
        self._view = None
        self._filled = 0

    def _fail(self, exc: BaseException) -> None:
        if self._lost is None:
            self._lost = exc
        self._reset()
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(exc)
