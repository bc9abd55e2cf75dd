"""An interrupted test session stops what it started.

Brokers and servers run in sessions of their own (`start_new_session=True`), so a Ctrl-C
does not reach them and only the fixtures that started them stop them. pytest runs those
fixtures' finalizers on KeyboardInterrupt, not when it is killed by SIGTERM (which is how
`scripts/run-tests.sh` stops it), so:

- SIGTERM raises KeyboardInterrupt in the main thread, once: pytest ends the session the way
  Ctrl-C does and the finalizers run. Later signals are ignored so they cannot cut the
  teardown short (run-tests.sh SIGKILLs a pytest still alive 10 s later). Under run-tests.sh
  (`LLTEST_RUN` set) SIGINT counts the same, so its Ctrl-C and its SIGTERM do not interrupt
  each other's teardown; a bare pytest keeps pytest's own SIGINT handling.
- At exit, any child process still alive (with its process group when it leads one) gets
  SIGTERM, then SIGKILL 3 s later. After a normal session there is none.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import threading
import time
from types import FrameType

_OWNER = os.getpid()
_interrupted = False


def _on_signal(signum: int, frame: FrameType | None) -> None:
    global _interrupted
    if os.getpid() != _OWNER:  # a forked child: die of the signal as it would have
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    if _interrupted:
        return
    _interrupted = True
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def _children() -> list[tuple[int, int]]:
    """(pid, process group) of each live child of this process."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        # After the command: state, ppid, pgrp. A zombie is dead already.
        if int(fields[1]) == _OWNER and fields[0] != "Z":
            found.append((int(entry), int(fields[2])))
    return found


def _signal_children(signum: int) -> list[int]:
    pids = []
    for pid, group in _children():
        pids.append(pid)
        with contextlib.suppress(OSError):
            if group == pid:
                os.killpg(pid, signum)
            else:
                os.kill(pid, signum)
    return pids


def reap_children() -> None:
    """SIGTERM every child still alive (its group too when it leads one), SIGKILL after 3 s."""
    if os.getpid() != _OWNER or not os.path.isdir("/proc"):
        return
    if not _signal_children(signal.SIGTERM):
        return
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and _children():
        time.sleep(0.1)
    _signal_children(signal.SIGKILL)


def install() -> None:
    """Call once, from the top conftest, in the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return
    signal.signal(signal.SIGTERM, _on_signal)
    if os.environ.get("LLTEST_RUN"):
        signal.signal(signal.SIGINT, _on_signal)
    atexit.register(reap_children)
