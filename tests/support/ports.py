"""Free loopback ports for the servers tests start, picked outside the kernel's ephemeral range.

A port from `bind(("127.0.0.1", 0))` comes from the ephemeral range, the same range the
kernel draws from for every outgoing connection. With two suites running side by side (the
embedded pass and the PostgreSQL + S3 pass), a client connection could take such a port in
the moment between the pick and the broker's bind, and `serve` then refused to start
("the port is in use"). Ports below the ephemeral range are never handed out that way, so
only another test's pick can collide, and a random pick over ~20,000 ports with a bind check
makes that vanishingly rare."""

from __future__ import annotations

import contextlib
import random
import socket
from pathlib import Path

HOST = "127.0.0.1"
LOWEST = 10_000
_rng = random.SystemRandom()


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def _candidate_first(count: int, also: int) -> int:
    low, high = _ephemeral_range()
    span = count + also
    if low - span > LOWEST + 1000:
        return _rng.randrange(LOWEST, low - span)
    return _rng.randrange(high + 1, 65535 - span)


def free_ports(count: int = 1, also: int = 0) -> int:
    """A first port P with P..P+count-1 free; with `also`, P+also.. P+also+count-1 too
    (`serve` puts the metrics listener at the listener port + 1000)."""
    for _ in range(500):
        first = _candidate_first(count, also)
        wanted = [*range(first, first + count)]
        if also:
            wanted += [p + also for p in wanted]
        try:
            with contextlib.ExitStack() as stack:
                for port in wanted:
                    sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
                    sock.bind((HOST, port))
            return first
        except OSError:
            continue
    raise RuntimeError(f"no {count} consecutive free ports on {HOST}")


def free_port() -> int:
    """One free port on 127.0.0.1 (see the module docstring for why not port 0)."""
    return free_ports(1)
