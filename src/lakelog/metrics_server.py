"""Serve `/metrics` in Prometheus text format on its own port, inside the broker's loop."""

from __future__ import annotations

import asyncio

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from lakelog.config import split_host_port
from lakelog.metrics import REGISTRY

MAX_REQUEST_HEAD = 8192


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
        writer.close()
        return
    path = head.split(b" ", 2)[1] if head.count(b" ") >= 2 else b""
    if path.split(b"?")[0] in (b"/metrics", b"/"):
        body = generate_latest(REGISTRY)
        status = b"200 OK"
        ctype = CONTENT_TYPE_LATEST.encode()
    else:
        body, status, ctype = b"not found\n", b"404 Not Found", b"text/plain"
    writer.write(
        b"HTTP/1.1 "
        + status
        + b"\r\nContent-Type: "
        + ctype
        + b"\r\nContent-Length: "
        + str(len(body)).encode()
        + b"\r\nConnection: close\r\n\r\n"
        + body
    )
    try:
        await writer.drain()
    finally:
        writer.close()


async def start_metrics_server(listen: str) -> asyncio.base_events.Server:
    host, port = split_host_port(listen, 9100)
    return await asyncio.start_server(_handle, host, port, limit=MAX_REQUEST_HEAD)
