#!/usr/bin/env python3
"""The listener's cost of reading request frames: server CPU seconds per GiB received in
frames of a given size, for the buffer that grows with the bytes that arrive (the
listener's) and for one allocated whole when the size header arrives (how it was before
issue 12), on uvloop as the broker runs. The dispatch answers 8 bytes per frame, so the
figure is framing alone, not produce.

Run: `.venv/bin/python bench/frame_read.py [--sizes 1 4 16] [--gib 1]` (sizes in MiB;
each size and variant runs in its own process, ~20 s in all).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import resource
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Sequence

MiB = 1024 * 1024


def _client(port: int, size: int, count: int) -> None:
    sock = socket.create_connection(("127.0.0.1", port))
    frame = struct.pack(">i", size) + os.urandom(size)
    for _ in range(count):
        sock.sendall(frame)
        got = b""
        while len(got) < 8:
            got += sock.recv(8 - len(got))
    sock.close()


def measure(size: int, variant: str, gib: float) -> str:
    """One size and variant, in this process (a child of `main`)."""
    import uvloop

    import lakelog.server.listener as srv

    if variant == "whole":
        srv.FIRST_CHUNK = 1 << 31  # type: ignore[misc]
    count = max(8, int(gib * (1 << 30)) // size)

    async def answer(frame: memoryview, peer: str, turn: srv.Turn) -> srv.Buffers:
        turn.release()
        return [struct.pack(">ii", 4, len(frame))]

    async def run() -> str:
        server = srv.Server(answer, max_request_bytes=2**30, max_inflight=10, max_connections=10)
        _, port = await server.start("127.0.0.1", 0)
        child = mp.get_context("fork").Process(target=_client, args=(port, size, count))
        before = resource.getrusage(resource.RUSAGE_SELF)
        started = time.perf_counter()
        child.start()
        while child.is_alive():
            await asyncio.sleep(0.01)
        after = resource.getrusage(resource.RUSAGE_SELF)
        took = time.perf_counter() - started
        server.close_all()
        done = count * size / (1 << 30)
        user = (after.ru_utime - before.ru_utime) / done
        system = (after.ru_stime - before.ru_stime) / done
        return (
            f"{size / MiB:>8.2f}  {variant:>5}  {user + system:>9.3f}  {user:>6.3f}  "
            f"{system:>6.3f}  {done / took:>5.2f}"
        )

    return uvloop.run(run())


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=float, nargs="+", default=[1, 4, 16], help="MiB")
    ap.add_argument("--gib", type=float, default=1.0, help="GiB per measurement (1)")
    ap.add_argument("--one", nargs=2, help=argparse.SUPPRESS)  # size variant, in a child
    args = ap.parse_args(argv)
    if args.one:
        print(measure(int(args.one[0]), args.one[1], args.gib))
        return 0
    print("frame MiB  buffer  CPU s/GiB    user  system  GiB/s")
    for size_mib in args.sizes:
        for variant in ("whole", "grows"):
            size = int(size_mib * MiB)
            cmd = [sys.executable, __file__, "--gib", str(args.gib), "--one", str(size), variant]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            print(out.rstrip(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
