"""The broker's small HTTP side: /metrics, /pipeline-runs (JSON, or 503 when the
coordinator does not answer), 404 for anything else, and no crash on junk."""

from __future__ import annotations

import asyncio
import json

from lakelog.coordinator.pipeline_types import PipelineRun
from lakelog.server.metrics_server import start_metrics_server

RUN = PipelineRun("r1", "gc", 1_700_000_000_000, 1.5, "ok", '{"objects deleted": "3"}')


async def _get(port: int, raw: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return answer


async def test_routes() -> None:
    async def runs() -> list[PipelineRun]:
        return [RUN]

    server = await start_metrics_server("127.0.0.1:0", runs)
    port = server.sockets[0].getsockname()[1]
    try:
        metrics = await _get(port, b"GET /metrics HTTP/1.1\r\n\r\n")
        assert metrics.startswith(b"HTTP/1.1 200 OK") and b"# HELP" in metrics
        listed = await _get(port, b"GET /pipeline-runs HTTP/1.1\r\n\r\n")
        head, _, body = listed.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 OK") and b"application/json" in head
        assert json.loads(body) == [
            {
                "run_id": "r1",
                "job": "gc",
                "started_at": 1_700_000_000_000,
                "seconds": 1.5,
                "outcome": "ok",
                "figures": '{"objects deleted": "3"}',
            }
        ]
        assert (await _get(port, b"GET /nope HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 404")
        assert await _get(port, b"\x00\xff junk") == b""  # no head: closed, nothing said
    finally:
        server.close()
        await server.wait_closed()


async def test_pipeline_runs_when_the_coordinator_fails_or_is_absent() -> None:
    async def broken() -> list[PipelineRun]:
        raise OSError("database down")

    for read, status in ((broken, b"503"), (None, b"404")):
        server = await start_metrics_server("127.0.0.1:0", read)
        port = server.sockets[0].getsockname()[1]
        try:
            answer = await _get(port, b"GET /pipeline-runs HTTP/1.1\r\n\r\n")
            assert answer.startswith(b"HTTP/1.1 " + status), answer
        finally:
            server.close()
            await server.wait_closed()
