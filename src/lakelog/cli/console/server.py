"""Run the console's app with uvicorn: on its own (`lakelog console`) or inside a broker's
event loop (`lakelog serve --console-listen`). The socket is bound here first, so a taken
port is one clear error instead of uvicorn's exit."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator

import uvicorn
from starlette.types import ASGIApp

from lakelog.config import split_host_port

DEFAULT_LISTEN = "127.0.0.1:8080"


def bind(listen: str) -> socket.socket:
    """A listening socket on HOST:PORT (OSError when it cannot be had)."""
    host, port = split_host_port(listen, 8080)
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


def _config(app: ASGIApp, **options: object) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="on",
        **options,  # type: ignore[arg-type]
    )


def run(app: ASGIApp, sock: socket.socket) -> None:
    """Serve until SIGINT or SIGTERM (uvicorn's own signal handling)."""
    server = uvicorn.Server(_config(app))
    asyncio.run(server.serve(sockets=[sock]))


class _Embedded(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # the broker owns SIGTERM and SIGINT


class EmbeddedConsole:
    """The console (or another ASGI app, such as the schema registry) as a task of the
    broker's loop; `stop()` ends it. `options` are uvicorn's (TLS files, for one)."""

    def __init__(self, app: ASGIApp, sock: socket.socket, **options: object) -> None:
        self._server = _Embedded(_config(app, **options))
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]), name="console")

    async def stop(self) -> None:
        self._server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError, SystemExit, TimeoutError):
            await asyncio.wait_for(self._task, 10)
