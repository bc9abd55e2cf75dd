"""Move this broker's inline files into ordinary objects (issue 32): the loop that keeps
the coordinator small while the small-write path keeps PUTs rare.

Each pass lists the inline files still holding batches and moves them (one WAL object,
`pipeline.inline_move`) once they add up to `produce_inline_move_bytes` or the oldest is
`produce_inline_move_age_ms` old. A broker moves its own files, and another broker's once
they are twice that age (their broker is gone or behind); two brokers moving the same file
is harmless (the swap is all or nothing: the loser's object is marked for deletion). The
pass also refreshes the writer's view of inline bytes held, which its caps check against.
`lakelog pipeline merge` moves whatever is left when no broker runs.

A move's swap rewrites every batch row it moves in one transaction, and the broker's
commits queue behind it (SQLite has one writer; PostgreSQL locks the partitions): the ~4
MiB a broker gathers at 1 MiB/s is some 3,000 rows, a stall of 70-150 ms. While the
broker writes inline, that is rare (one move per 4 MiB). A broker that has become busy
(its append rate at or above `produce_inline_below_bytes_per_second`, so it writes objects
again) moves what is left in pieces of at most `BUSY_MOVE_BYTES`, one per pass: a few
more PUTs, negligible beside the dozens a second it makes at that rate, and no stall."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from lakelog.coordinator.log_types import InlineFile
from lakelog.pipeline.inline_move import move_inline_files
from lakelog.server.background.hosts import BrokerWorkHost
from lakelog.server.cluster.outage import log_failure
from lakelog.util import metrics

if TYPE_CHECKING:
    from lakelog.log.produce.inline_policy import InlinePolicy

log = logging.getLogger(__name__)

FILES_PER_PASS = 10_000
"""Inline files looked at per pass (the caps keep far fewer in the coordinator)."""
BUSY_MOVE_BYTES = 256 * 1024
"""The most inline bytes one move takes while the broker is busy (some 200 rows at 1 KiB
records: a swap of a few milliseconds)."""


class MoverHost(BrokerWorkHost, Protocol):
    """What the mover uses of the broker (the Broker is one)."""

    @property
    def inline_policy(self) -> InlinePolicy | None: ...


def due_files(
    files: Sequence[InlineFile],
    broker_id: int,
    now_ms: int,
    move_bytes: int,
    max_age_ms: int,
    max_object_bytes: int,
) -> list[str]:
    """The keys to move now, oldest first, up to `max_object_bytes` (at least one file);
    none while what may be moved is both smaller than `move_bytes` and younger than
    `max_age_ms`."""
    ours = [
        f
        for f in files
        if f.uploader_broker_id == broker_id or f.committed_at <= now_ms - 2 * max_age_ms
    ]
    if not ours:
        return []
    total = sum(f.size for f in ours)
    oldest = min(f.committed_at for f in ours)
    if total < move_bytes and oldest > now_ms - max_age_ms:
        return []
    keys, size = [], 0
    for f in ours:
        if keys and size + f.size > max_object_bytes:
            break
        keys.append(f.object_key)
        size += f.size
    return keys


class InlineMover:
    def __init__(self, broker: MoverHost, append_rate: Callable[[], float] = lambda: 0.0) -> None:
        self._broker = broker
        self._append_rate = append_rate
        """The broker's WAL append rate, bytes per second (whether it is busy)."""

    async def run_once(self) -> int:
        """One pass; the number of inline files moved."""
        broker = self._broker
        settings = broker.settings
        policy = broker.inline_policy
        if policy is not None:
            usage = await broker.coordinator.inline_usage(broker.broker_id)
            policy.set_usage(usage.broker_bytes, usage.total_bytes)
        moved = 0
        while True:
            busy = self._append_rate() >= settings.produce_inline_below_bytes_per_second
            files = await broker.coordinator.inline_files(FILES_PER_PASS)
            keys = due_files(
                files,
                broker.broker_id,
                int(time.time() * 1000),
                settings.produce_inline_move_bytes,
                settings.produce_inline_move_age_ms,
                BUSY_MOVE_BYTES if busy else settings.produce_buffer_max_bytes,
            )
            if not keys:
                break
            outcome = await move_inline_files(
                broker.coordinator,
                broker.storage,
                keys,
                fault_delay_s=settings.fault_inline_move_delay_ms / 1000,
            )
            if not outcome.moved:
                break  # rows changed meanwhile: next pass, with fresh rows
            moved += outcome.files
            metrics.inline_files_moved_total.inc(outcome.files)
            # At most one line per produce_inline_move_bytes or per move age.
            log.info(
                "moved %d inline files (%d batches) into %s",
                outcome.files,
                outcome.batches,
                outcome.object_key,
            )
            if busy:
                break  # the rest in later passes, a piece at a time
        return moved

    async def run(self) -> None:
        interval = max(min(self._broker.settings.produce_inline_move_age_ms / 10, 1000), 50)
        while True:
            await asyncio.sleep(interval / 1000)
            try:
                await self.run_once()
            except Exception:
                log_failure(log, "inline mover pass failed")
