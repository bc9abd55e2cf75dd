"""What the `lakelog serve` mistake and supervisor tests share: free ports, a clean
environment, and a `serve` process in its own session that is always stopped."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from tests.support.ports import free_port, free_ports  # noqa: F401  (re-exported)

LAKELOG = str(Path(sys.executable).parent / "lakelog")
HOST = "127.0.0.1"
STOP_S = 60.0
"""Generous: a graceful stop of several brokers on a busy machine."""


def clean_env(**extra: str) -> dict[str, str]:
    """The test's environment without LAKELOG_* settings, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKELOG_")}
    return {**env, "PYTHONUNBUFFERED": "1", **extra}


@contextlib.contextmanager
def serving(
    args: list[str], cwd: Path, log: Path, lakelog: str = LAKELOG, **env: str
) -> Iterator[subprocess.Popen]:
    """`lakelog serve ...` in its own session, output to `log`; stopped with SIGTERM when
    the block ends (SIGKILL if stuck), and whatever a failed test left in its session too.
    `lakelog`: another install's command (the test of a broker installed without Spark)."""
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [lakelog, "serve", *args],
            cwd=cwd,
            env=clean_env(**env),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=STOP_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
