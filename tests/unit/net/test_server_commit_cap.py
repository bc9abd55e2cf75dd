"""A connection keeps at most `max_inflight_commits` offset commits (OffsetCommit,
TxnOffsetCommit) in the broker: a client committing every record pipelines thousands, and
the rest must wait in its socket (as Kafka reads a connection's next request only after
answering one)."""

from __future__ import annotations

import asyncio
import struct

import uvloop

from lakelog.server.connection import Buffers, Turn
from lakelog.server.listener import Server

CAP = 8
COMMITS = 100


def frame(api_key: int, n: int) -> bytes:
    body = struct.pack(">hhi", api_key, 0, n)
    return struct.pack(">i", len(body)) + body


def test_offset_commits_in_the_broker_are_capped_per_connection() -> None:
    uvloop.run(_pipelined_commits())


async def _pipelined_commits() -> None:
    running: set[int] = set()
    most = 0
    release = asyncio.Event()

    async def dispatch(
        data: memoryview, peer: str, turn: Turn, principal: str = ""
    ) -> Buffers | None:
        nonlocal most
        api_key, _, n = struct.unpack(">hhi", data[:8])
        await turn.wait()
        turn.release()
        if api_key == 8:
            running.add(n)
            most = max(most, len(running))
            await release.wait()
            running.discard(n)
        return [struct.pack(">i", 4) + struct.pack(">i", n)]

    server = Server(
        dispatch,
        max_request_bytes=1 << 20,
        max_inflight=1000,
        max_inflight_commits=CAP,
        max_connections=10,
    )
    await server.start("127.0.0.1", 0)
    assert server._server is not None
    port = server._server.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"".join(frame(8, i) for i in range(COMMITS)))
        await writer.drain()
        for _ in range(200):  # let the broker read all it will
            await asyncio.sleep(0.005)
        assert len(running) == CAP, f"{len(running)} commits in the broker, cap {CAP}"
        # Released, every commit is answered, in order.
        release.set()
        answers = await asyncio.wait_for(reader.readexactly(8 * COMMITS), 30)
        got = [struct.unpack(">ii", answers[i : i + 8])[1] for i in range(0, len(answers), 8)]
        assert got == list(range(COMMITS))
        assert most <= CAP
        writer.close()
    finally:
        server.stop_accepting()
        server.close_all()
