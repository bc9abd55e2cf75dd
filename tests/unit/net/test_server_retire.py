"""Retiring connections (a broker that learns it was fenced): what was read is answered,
nothing more is read, the connection closes, and new connections are served."""

from __future__ import annotations

import asyncio
import struct

from lakelog.server.connection import Buffers, Turn
from lakelog.server.listener import Server


async def test_retired_connection_answers_what_it_read_then_closes() -> None:
    held = asyncio.Event()
    seen: list[bytes] = []

    async def dispatch(
        frame: memoryview, peer: str, turn: Turn, principal: str = ""
    ) -> Buffers | None:
        turn.release()
        seen.append(bytes(frame))
        if bytes(frame) == b"held":
            await held.wait()
        return [struct.pack(">i", len(frame)) + bytes(frame)]

    server = Server(dispatch, max_request_bytes=1 << 20, max_inflight=100, max_connections=10)
    await server.start("127.0.0.1", 0)
    assert server._server is not None
    port = server._server.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(struct.pack(">i", 4) + b"held")
        await writer.drain()
        for _ in range(100):
            if seen:
                break
            await asyncio.sleep(0.01)
        assert seen == [b"held"]
        server.retire_all()
        writer.write(struct.pack(">i", 5) + b"later")  # sent after the fence: never read
        await writer.drain()
        await asyncio.sleep(0.1)
        held.set()
        assert await asyncio.wait_for(reader.readexactly(8), 5) == struct.pack(">i", 4) + b"held"
        assert await asyncio.wait_for(reader.read(1), 5) == b""  # then closed
        assert seen == [b"held"]
        writer.close()
        # A new connection is served as usual.
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(struct.pack(">i", 3) + b"new")
        assert await asyncio.wait_for(reader.readexactly(7), 5) == struct.pack(">i", 3) + b"new"
        writer.close()
    finally:
        server.stop_accepting()
        server.close_all()
