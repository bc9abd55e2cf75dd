"""One process per broker id. Two processes registered as one id fence each other in turn
(each registration makes the other's epoch stale, each re-registration does it back), so
every producer of both is disconnected every heartbeat. A broker therefore refuses to start
when its id is taken:

- on this host: another process holds the id's lock file beside the embedded (SQLite)
  coordinator, `<data-dir>/.lock-broker-<id>` by default, held with `flock` for the
  process's lifetime as Kafka locks its log dirs. The kernel releases it when the holder
  dies, even by SIGKILL, so a crashed broker's restart is never refused by it. One file
  per id, not one per data dir: `serve --brokers N` runs N ids on one data dir.
- anywhere (also on PostgreSQL): the id's registration is heartbeating. A registration
  whose heartbeat is older than the session timeout, fenced, or left, is free; one whose
  advertised address refuses connections belongs to a process that is gone (a restart
  after `kill -9`). Otherwise the broker watches the heartbeat: if it moves, the id is in
  use; if it stops, the id is free once the session timeout has passed.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from lakelog.config import Settings
from lakelog.coordinator.interface import BatchCoordinator
from lakelog.coordinator.topic_types import BrokerInfo

log = logging.getLogger(__name__)

ANY_HEARTBEAT = -(1 << 62)
"""`list_brokers` bound that lists fenced brokers too (their heartbeat is negative)."""

QUIET_LOOK_HEARTBEATS = 2.5
"""A live broker heartbeats every interval: watched this many intervals without saying
anything, the common refusal (a second process started by mistake) stays one line."""


class BrokerIdInUseError(RuntimeError):
    """Another live process is this broker id."""


def _pick_another(broker_id: int) -> str:
    return f"stop it, or give this broker another --broker-id (not {broker_id})"


def lock_path(settings: Settings) -> Path | None:
    """The id's lock file: beside the SQLite coordinator (the data dir by default), which
    every broker of an embedded cluster shares; None on PostgreSQL (no local namespace of
    ids: the heartbeat check covers it)."""
    url = settings.resolved_coordinator_url
    if not url.startswith("sqlite://"):
        return None
    from lakelog.coordinator import sqlite_path

    return sqlite_path(url).absolute().parent / f".lock-broker-{settings.broker_id}"


def _holder(fd: int) -> str:
    with contextlib.suppress(OSError, ValueError):
        pid = int(os.pread(fd, 32, 0).decode().strip())
        return f"pid {pid}"
    return "another process"


def _in_use(path: Path, broker_id: int, fd: int) -> BrokerIdInUseError:
    return BrokerIdInUseError(
        f"broker {broker_id} already runs on {path.parent} ({_holder(fd)} holds {path.name}): "
        + _pick_another(broker_id)
    )


def hold_lock(path: Path, broker_id: int) -> int:
    """Take the id's lock for this process's lifetime (the fd is returned; closing it
    releases the lock) and write our pid into it, or BrokerIdInUseError naming the holder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        error = _in_use(path, broker_id, fd)
        os.close(fd)
        raise error from None
    except BaseException:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def check_lock_free(path: Path, broker_id: int) -> None:
    """BrokerIdInUseError if a process holds the id's lock now; creates nothing (a missing
    file is held by nobody). For `serve --brokers N` before it starts its children."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        raise _in_use(path, broker_id, fd) from None
    except OSError:
        return
    finally:
        os.close(fd)


async def _registration(coordinator: BatchCoordinator, broker_id: int) -> BrokerInfo | None:
    for info in await coordinator.list_brokers(ANY_HEARTBEAT):
        if info.broker_id == broker_id:
            return info
    return None


def _live(info: BrokerInfo | None, session_ms: int) -> bool:
    return info is not None and info.last_heartbeat >= int(time.time() * 1000) - session_ms


def _taken(info: BrokerInfo) -> BrokerIdInUseError:
    age_s = max(0.0, time.time() - info.last_heartbeat / 1000)
    return BrokerIdInUseError(
        f"broker {info.broker_id} is already running, advertised at {info.host}:{info.port}"
        f" (last heartbeat {age_s:.1f}s ago): " + _pick_another(info.broker_id)
    )


async def wait_until_id_free(
    coordinator: BatchCoordinator,
    settings: Settings,
    refused: Callable[[str, int], Awaitable[bool]],
) -> None:
    """Return once no other process is this broker id; BrokerIdInUseError if one is.
    `refused(host, port)`: whether nothing listens at a registered address."""
    session_ms = settings.broker_session_timeout_ms
    seen = await _registration(coordinator, settings.broker_id)
    if seen is None or not _live(seen, session_ms) or await refused(seen.host, seen.port):
        return
    step_s = settings.broker_heartbeat_interval_ms / 2000
    quiet_until = time.monotonic() + QUIET_LOOK_HEARTBEATS * step_s * 2
    said = False
    while True:
        await asyncio.sleep(step_s)
        now = await _registration(coordinator, settings.broker_id)
        if now is None or not _live(now, session_ms) or now.last_heartbeat < 0:
            if said:
                log.info("broker %d's earlier registration went silent", settings.broker_id)
            return
        if (now.broker_epoch, now.last_heartbeat) != (seen.broker_epoch, seen.last_heartbeat):
            raise _taken(now)
        if not said and time.monotonic() >= quiet_until:
            said = True
            log.warning(
                "broker %d is registered at %s:%d with a recent heartbeat and may still run:"
                " waiting up to %.0fs (broker_session_timeout_ms) for it to go silent",
                settings.broker_id,
                seen.host,
                seen.port,
                session_ms / 1000,
            )
