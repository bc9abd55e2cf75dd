"""Wake waiting fetches when new data is committed: at once for this broker's commits,
and for other brokers' commits through the coordinator (pushed by PostgreSQL's
LISTEN/NOTIFY, polled as SQLite's data_version)."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from lakelog.coordinator.interface import BatchCoordinator
from lakelog.server.cluster.outage import log_failure

log = logging.getLogger(__name__)


class CommitWaiter:
    def __init__(self, coordinator: BatchCoordinator, poll_interval_ms: int) -> None:
        self._coordinator = coordinator
        self._poll_s = poll_interval_ms / 1000
        self._event = asyncio.Event()
        self._waiters = 0
        self._poller: asyncio.Task[None] | None = None
        self._token: int | None = None

    def notify(self) -> None:
        """Something was committed: wake everyone waiting now."""
        self._event.set()
        self._event = asyncio.Event()

    def snapshot(self) -> asyncio.Event:
        """Take before reading, then pass to `wait`: a commit in between is not missed."""
        return self._event

    async def wait(self, timeout: float, since: asyncio.Event | None = None) -> None:
        """Return after the next commit (after `since` was taken) or after `timeout`."""
        event = since if since is not None else self._event
        self._waiters += 1
        if self._poller is None or self._poller.done():
            self._poller = asyncio.get_running_loop().create_task(self._poll())
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), timeout)
        finally:
            self._waiters -= 1

    async def _poll(self) -> None:
        # PostgreSQL pushes other brokers' commits (LISTEN/NOTIFY): wait on that directly;
        # SQLite offers only a token to poll.
        push = getattr(self._coordinator, "wait_for_change", None)
        while self._waiters > 0:
            try:
                if push is not None and self._token is not None:
                    token = await push(self._token, 1.0)
                else:
                    token = await self._coordinator.change_token()
            except Exception:
                log_failure(log, "change token poll failed")
                token = None
                await asyncio.sleep(self._poll_s)
            if token is not None and self._token is not None and token != self._token:
                self.notify()
            self._token = token
            if push is None:
                await asyncio.sleep(self._poll_s)
        self._token = None

    async def close(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._poller
