"""`lakelog serve --brokers N`: N broker processes on one host sharing one data dir (or one
coordinator and store), so a host uses all its cores. Broker i gets id base+i, ports base+i
and the i-th zone of a comma list of racks; the supervisor forwards SIGTERM/SIGINT and
exits when all children have."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence

from lakelog.config import split_host_port


def _shift(address: str | None, offset: int) -> str | None:
    if address is None:
        return None
    host, port = split_host_port(address)
    return f"{host}:{port + offset}"


def child_args(
    index: int, flags: Mapping[str, object], racks: Sequence[str | None] | None = None
) -> list[str]:
    """The `lakelog serve` arguments of broker `index` (0-based); `racks[index]` is its
    rack when given."""
    args = [sys.executable, "-m", "lakelog", "serve"]
    shifted = {
        "listen": _shift(str(flags["listen"]), index),
        "advertised": _shift(flags.get("advertised"), index),  # type: ignore[arg-type]
        "metrics_listen": _shift(flags.get("metrics_listen"), index),  # type: ignore[arg-type]
        "console_listen": _shift(flags.get("console_listen"), index),  # type: ignore[arg-type]
        "broker_id": int(flags.get("broker_id") or 0) + index,  # type: ignore[call-overload]
    }
    if racks is not None:
        shifted["rack"] = racks[index]
    merged = {**flags, **shifted}
    for name, value in merged.items():
        if value is None:
            continue
        args += [f"--{name.replace('_', '-')}", str(value)]
    return args


def run_brokers(
    count: int, flags: Mapping[str, object], racks: Sequence[str | None] | None = None
) -> int:
    children = [subprocess.Popen(child_args(i, flags, racks)) for i in range(count)]

    def forward(signum: int, _frame: object) -> None:
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    worst = 0
    try:
        while any(child.poll() is None for child in children):
            time.sleep(0.2)
    finally:
        for child in children:
            if child.poll() is None:
                child.terminate()
        for child in children:
            code = child.wait()
            worst = worst or code
    return worst if worst >= 0 else 128 - worst if os.name == "posix" else 1
