"""The listener's limits in process: frame buffers that grow with the bytes that arrive,
the request read timeout, the idle timeout and the per-address connection cap."""

from __future__ import annotations

import asyncio
import datetime
import logging
import ssl
import struct
from collections.abc import AsyncIterator

import pytest

from lakelog.security.listener import ListenerSecurity
from lakelog.server.connection import FIRST_CHUNK, Buffers, Connection, Turn
from lakelog.server.listener import Server

MiB = 1024 * 1024


async def echo_size(
    frame: memoryview, peer: str, turn: Turn, principal: str = ""
) -> Buffers | None:
    """Answers each frame with its size (4 bytes) and its last byte."""
    turn.release()
    return [struct.pack(">ii", 5, len(frame)) + bytes(frame[-1:])]


async def start(**limits: int) -> Server:
    settings = {
        "max_request_bytes": 200 * MiB,
        "max_inflight": 100,
        "max_connections": 100,
        **limits,
    }
    server = Server(echo_size, **settings)  # type: ignore[arg-type]
    await server.start("127.0.0.1", 0)
    return server


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    srv = await start(request_read_timeout_ms=400, connections_max_idle_ms=800)
    yield srv
    stop(srv)


def stop(server: Server) -> None:
    server.stop_accepting()
    server.close_all()


def port_of(server: Server) -> int:
    assert server._server is not None
    return int(server._server.sockets[0].getsockname()[1])


async def roundtrip(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, body: bytes
) -> tuple[int, bytes]:
    writer.write(struct.pack(">i", len(body)) + body)
    await writer.drain()
    size, length = struct.unpack(">ii", await reader.readexactly(8))
    assert size == 5
    return length, await reader.readexactly(1)


async def roundtrips(
    conns: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]], bodies: list[bytes]
) -> list[tuple[int, bytes]]:
    """One body round-tripped on each connection, all at once, within 30 s."""
    pending = (roundtrip(r, w, b) for (r, w), b in zip(conns, bodies, strict=True))
    return await asyncio.wait_for(asyncio.gather(*pending), 30)


async def closed(reader: asyncio.StreamReader, within: float) -> bool:
    try:
        return await asyncio.wait_for(reader.read(1), within) == b""
    except ConnectionResetError:
        return True


def only_connection(server: Server) -> Connection:
    (conn,) = server.connections
    return conn


async def test_buffer_grows_with_the_bytes_that_arrive(server: Server) -> None:
    _reader, writer = await asyncio.open_connection("127.0.0.1", port_of(server))
    announced = 100 * MiB
    writer.write(struct.pack(">i", announced) + b"x" * 1000)
    await writer.drain()
    await asyncio.sleep(0.05)
    conn = only_connection(server)
    assert conn._frame is not None and len(conn._frame) == FIRST_CHUNK
    sent = 1000
    chunk = b"y" * (1 * MiB)
    for _ in range(3):
        writer.write(chunk)
        await writer.drain()
        sent += len(chunk)
    await asyncio.sleep(0.1)
    assert conn._frame is not None
    assert conn._filled == sent
    assert len(conn._frame) <= 2 * sent, (len(conn._frame), sent)
    writer.close()


async def test_a_big_frame_arrives_whole(server: Server) -> None:
    """A frame far above the first chunk, in uneven pieces, reaches dispatch byte for byte."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port_of(server))
    body = bytes(range(256)) * (5 * 4096 + 3)
    length, last = await roundtrip(reader, writer, body)
    assert (length, last) == (len(body), body[-1:])
    length, last = await roundtrip(reader, writer, b"small")
    assert (length, last) == (5, b"l")
    writer.close()


async def test_a_frame_not_completed_in_time_is_closed(
    server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port_of(server))
    writer.write(struct.pack(">i", 100 * MiB) + b"abc")
    await writer.drain()
    with caplog.at_level(logging.WARNING, logger="lakelog.server.listener"):
        assert await closed(reader, within=5)
    assert "request_read_timeout_ms" in caplog.text
    assert not server.connections


async def test_timeouts_hold_after_close_all_while_serving(server: Server) -> None:
    """A fenced broker closes its clients and serves on: the sweep must go on too."""
    server.close_all()
    reader, writer = await asyncio.open_connection("127.0.0.1", port_of(server))
    writer.write(struct.pack(">i", 1000) + b"abc")
    await writer.drain()
    assert await closed(reader, within=5)


async def test_half_a_size_header_counts_as_a_begun_frame(server: Server) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port_of(server))
    writer.write(b"\x00\x00")
    await writer.drain()
    assert await closed(reader, within=5)


async def test_idle_connection_is_closed_and_an_active_one_is_not(server: Server) -> None:
    idle_reader, idle_writer = await asyncio.open_connection("127.0.0.1", port_of(server))
    reader, writer = await asyncio.open_connection("127.0.0.1", port_of(server))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 2.0
    while loop.time() < deadline:
        await roundtrip(reader, writer, b"ping")
        await asyncio.sleep(0.1)
    assert await closed(idle_reader, within=3)
    assert await roundtrip(reader, writer, b"still") == (5, b"l")
    writer.close()
    idle_writer.close()


async def test_connections_per_ip_are_capped(caplog: pytest.LogCaptureFixture) -> None:
    server = await start(max_connections_per_ip=2)
    try:
        port = port_of(server)
        first = await asyncio.open_connection("127.0.0.1", port)
        second = await asyncio.open_connection("127.0.0.1", port)
        with caplog.at_level(logging.WARNING, logger="lakelog.server.listener"):
            third_reader, third_writer = await asyncio.open_connection("127.0.0.1", port)
            assert await closed(third_reader, within=5)
        assert "max_connections_per_ip 2" in caplog.text
        assert await roundtrip(*first, b"one") == (3, b"e")
        assert await roundtrip(*second, b"two") == (3, b"o")
        first[1].close()
        await asyncio.sleep(0.1)
        assert server.per_ip == {"127.0.0.1": 1}
        again = await asyncio.open_connection("127.0.0.1", port)
        assert await roundtrip(*again, b"three") == (5, b"e")
        again[1].close()
        second[1].close()
        third_writer.close()
    finally:
        stop(server)


async def test_per_ip_override(caplog: pytest.LogCaptureFixture) -> None:
    server = await start(
        max_connections_per_ip=1, max_connections_per_ip_overrides={"127.0.0.1": 3}
    )
    try:
        port = port_of(server)
        conns = [await asyncio.open_connection("127.0.0.1", port) for _ in range(3)]
        for r, w in conns:
            assert await roundtrip(r, w, b"ok") == (2, b"k")
        extra_reader, extra_writer = await asyncio.open_connection("127.0.0.1", port)
        assert await closed(extra_reader, within=5)
        for _, w in conns:
            w.close()
        extra_writer.close()
    finally:
        stop(server)


# ------------------------------------------------------------------- queued.max.request.bytes


async def test_bytes_in_partial_frames_are_bounded_and_nothing_deadlocks() -> None:
    """With a 1 MiB bound: a stalled client holds what it sent, a 4 MiB frame from another
    waits for the budget and then goes ahead past it (the sweep sees no frame completing),
    a small frame is never held up, and all the bytes are free again at the end."""
    server = await start(queued_max_request_bytes=1 * MiB, request_read_timeout_ms=3000)
    try:
        port = port_of(server)
        stalled_reader, stalled = await asyncio.open_connection("127.0.0.1", port)
        stalled.write(struct.pack(">i", 10 * MiB) + b"s" * (700 * 1024))
        await stalled.drain()
        await asyncio.sleep(0.2)
        assert 700 * 1024 <= server.partial_bytes <= 1 * MiB
        small = await asyncio.open_connection("127.0.0.1", port)
        assert await asyncio.wait_for(roundtrip(*small, b"tiny"), 1.0) == (4, b"y")
        big = await asyncio.open_connection("127.0.0.1", port)
        body = bytes(range(256)) * (4 * 4096)
        assert await asyncio.wait_for(roundtrip(*big, body), 10) == (len(body), body[-1:])
        assert server.partial_bytes <= 1 * MiB + 4 * MiB
        assert server.budget_waits > 0
        # The stalled frame is closed by the read timeout; its bytes are released.
        assert await closed(stalled_reader, within=10)
        await asyncio.sleep(0.1)
        assert server.partial_bytes == 0
        assert not server._budget_waiters
        for _, w in (small, big):
            w.close()
    finally:
        stop(server)


async def test_waiting_connections_go_in_turn_as_frames_complete() -> None:
    """Eight clients send 2 MiB frames at once against a 3 MiB bound: every one is
    answered whole, and the bound held while they were read (no overdraft was needed as
    frames kept completing, or at most one at a time)."""
    server = await start(queued_max_request_bytes=3 * MiB, request_read_timeout_ms=10_000)
    peak = 0

    async def watch() -> None:
        nonlocal peak
        while True:
            peak = max(peak, server.partial_bytes)
            await asyncio.sleep(0.001)

    watcher = asyncio.get_running_loop().create_task(watch())
    try:
        port = port_of(server)
        conns = [await asyncio.open_connection("127.0.0.1", port) for _ in range(8)]
        bodies = [bytes([i]) * (2 * MiB) for i in range(8)]
        answers = await roundtrips(conns, bodies)
        assert answers == [(2 * MiB, bytes([i])) for i in range(8)]
        assert peak <= 3 * MiB + 2 * MiB, peak
        assert server.budget_waits > 0, "the bound was never reached: the test tests nothing"
        assert server.partial_bytes == 0
        for _, w in conns:
            w.close()
    finally:
        watcher.cancel()
        stop(server)


# ------------------------------------------------------------------- over TLS


@pytest.fixture(scope="module")
def tls_contexts(tmp_path_factory: pytest.TempPathFactory) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """(server, client) contexts around a throwaway self-signed certificate."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .sign(key, hashes.SHA256())
    )
    directory = tmp_path_factory.mktemp("tls")
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert_path, key_path)
    client = ssl.create_default_context(cafile=str(cert_path))
    return server, client


async def test_big_frames_over_tls_with_a_bound(
    tls_contexts: tuple[ssl.SSLContext, ssl.SSLContext],
) -> None:
    """The TLS transport hands the buffer over differently (it reads into it in a loop):
    frames that grow, and one that waits for the budget, still arrive whole."""
    server_ctx, client_ctx = tls_contexts
    server = Server(
        echo_size,
        max_request_bytes=200 * MiB,
        max_inflight=100,
        max_connections=100,
        queued_max_request_bytes=1 * MiB,
        security=ListenerSecurity("SSL", server_ctx, None),
    )
    await server.start("127.0.0.1", 0)
    try:
        port = port_of(server)
        conns = [
            await asyncio.open_connection(
                "127.0.0.1", port, ssl=client_ctx, server_hostname="localhost"
            )
            for _ in range(3)
        ]
        bodies = [bytes(range(256)) * (3 * 4096 + i) for i in range(3)]
        answers = await roundtrips(conns, bodies)
        assert answers == [(len(b), b[-1:]) for b in bodies]
        assert await roundtrip(*conns[0], b"small") == (5, b"l")
        assert server.budget_waits > 0
        assert server.partial_bytes == 0
        for _, w in conns:
            w.close()
    finally:
        stop(server)
