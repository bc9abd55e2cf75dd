"""Serve `/metrics` in Prometheus text format on its own port, inside the broker's loop,
and `/pipeline-runs`: the newest pipeline job runs the coordinator recorded, as JSON (the
web console's job history; the pipeline runs in its own processes, so a broker answers
for it)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from lakelog.config import split_host_port
from lakelog.util.metrics import REGISTRY

if TYPE_CHECKING:
    from lakelog.coordinator.pipeline_types import PipelineRun

log = logging.getLogger(__name__)

MAX_REQUEST_HEAD = 8192
PIPELINE_RUNS_SHOWN = 100
PipelineRuns = Callable[[], Awaitable[Sequence["PipelineRun"]]]


async def _pipeline_runs(read: PipelineRuns | None) -> tuple[bytes, bytes]:
    if read is None:
        return b"not found\n", b"404 Not Found"
    try:
        runs = await read()
    except Exception as exc:
        log.warning("reading pipeline runs for /pipeline-runs failed: %s", exc)
        return b"the coordinator did not answer\n", b"503 Service Unavailable"
    body = json.dumps([dataclasses.asdict(r) for r in runs]).encode()
    return body, b"200 OK"


async def _handle(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, runs: PipelineRuns | None
) -> None:
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
    elif path.split(b"?")[0] == b"/pipeline-runs":
        body, status = await _pipeline_runs(runs)
        ctype = b"application/json" if status == b"200 OK" else b"text/plain"
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


async def start_metrics_server(
    listen: str, pipeline_runs: PipelineRuns | None = None
) -> asyncio.base_events.Server:
    host, port = split_host_port(listen, 9100)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _handle(reader, writer, pipeline_runs)

    return await asyncio.start_server(handle, host, port, limit=MAX_REQUEST_HEAD)


DEFAULT_METRICS_OFFSET = 1000
"""An unset `metrics_listen` serves on 127.0.0.1 at the listener's port + this (10092 for
9092): predictable for a Prometheus scrape config, next to the broker it belongs to."""


def default_metrics_listen(listen: str) -> str:
    """The /metrics address of a broker listening on `listen` that named none (port 0,
    any free one, when the listener's port is 0 or too high for the offset)."""
    _, port = split_host_port(listen)
    wanted = port + DEFAULT_METRICS_OFFSET if port else 0
    return f"127.0.0.1:{wanted if wanted <= 65535 else 0}"


def bound_address(server: asyncio.base_events.Server) -> str:
    """HOST:PORT the server really listens on (its first socket)."""
    host, port = server.sockets[0].getsockname()[:2]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


async def start_default_metrics_server(
    listen: str, pipeline_runs: PipelineRuns | None = None
) -> asyncio.base_events.Server:
    """The endpoint of a broker that named none: at `default_metrics_listen(listen)`, or on
    any free loopback port when that one is taken (another broker's, another program's).
    The broker was not asked for this port, so it never keeps the broker from starting."""
    wanted = default_metrics_listen(listen)
    try:
        return await start_metrics_server(wanted, pipeline_runs)
    except OSError as exc:
        server = await start_metrics_server("127.0.0.1:0", pipeline_runs)
        log.warning(
            "cannot serve /metrics on %s (%s): serving it on %s instead "
            "(--metrics-listen HOST:PORT chooses, --metrics-listen '' turns it off)",
            wanted,
            exc.strerror or exc,
            bound_address(server),
        )
        return server
