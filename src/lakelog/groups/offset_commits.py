"""Offset commits at Kafka's pace: the commits that arrive while one coordinator write is
in flight are written together in the next one.

A consumer committing after every message sends thousands of OffsetCommits a second; one
coordinator transaction each (an fsync on SQLite, a round trip and a WAL flush on
PostgreSQL) queued them behind each other for hundreds of milliseconds. Kafka appends
commits to its offsets log in batches; here the queue gathers OffsetCommit and
TxnOffsetCommit requests and hands each batch to `commit_offset_batch`, one transaction,
while the next batch gathers.

What stays exact:
- each request's answer: the coordinator checks a TxnOffsetCommit as if it ran alone, and
  the group coordinator's generation and member-epoch checks ran before `submit`;
- order: batches are written one at a time in arrival order and a partition committed
  twice keeps the later offset, so a connection that passes its turn once `submit`
  returns has its commits applied in the order it sent them;
- durability: a request's future resolves only after its batch's transaction committed.

The queue is bounded: at most four batches' worth of offsets wait; `submit` waits for
room beyond that (holding its connection's turn, so the client is slowed, not refused).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from lakelog.coordinator.group_types import GroupOffsetCommit
from lakelog.coordinator.interface import BatchCoordinator
from lakelog.coordinator.txn_types import TxnOffsetCommitRequest
from lakelog.server.cluster.outage import is_outage
from lakelog.util import metrics
from lakelog.util.errors import ErrorCode

log = logging.getLogger(__name__)

Item = GroupOffsetCommit | TxnOffsetCommitRequest
QUEUED_BATCHES = 4
"""How many batches' worth of offsets may wait for the writer."""


@dataclass(slots=True)
class _Entry:
    item: Item
    size: int
    answer: asyncio.Future[list[ErrorCode]] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class OffsetCommitQueue:
    def __init__(self, coordinator: BatchCoordinator, max_offsets: int) -> None:
        self._coordinator = coordinator
        self._max = max(1, max_offsets)
        self._limit = QUEUED_BATCHES * self._max
        self._waiting: deque[_Entry] = deque()
        self._queued = 0
        """Offsets in `_waiting`."""
        self._room = asyncio.Condition()
        self._writer: asyncio.Task[None] | None = None

    async def submit(self, item: Item) -> asyncio.Future[list[ErrorCode]]:
        """Queue `item` behind every request submitted before it; the future holds its
        answer (an error per offset) once written, or the write's exception."""
        size = max(1, len(item.offsets))
        if not self._fits(size):
            async with self._room:
                await self._room.wait_for(lambda: self._fits(size))
        entry = _Entry(item, size)
        entry.answer.add_done_callback(_retrieve)
        self._waiting.append(entry)
        self._queued += size
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(
                self._write_all(), name="offset-commits"
            )
        return entry.answer

    async def commit(self, item: Item) -> list[ErrorCode]:
        """`submit`, then wait for the answer."""
        return await asyncio.shield(await self.submit(item))

    async def flush(self) -> None:
        """Wait until everything submitted so far is written (or failed)."""
        while self._writer is not None and not self._writer.done():
            with contextlib.suppress(Exception):
                await asyncio.shield(self._writer)

    def _fits(self, size: int) -> bool:
        return not self._waiting or self._queued + size <= self._limit

    async def _write_all(self) -> None:
        while self._waiting:
            batch = self._take()
            async with self._room:
                self._room.notify_all()
            try:
                await self._write(batch)
            except BaseException as exc:  # cancelled at shutdown: nobody is left hanging
                for entry in batch:
                    _fail(entry, exc)
                raise

    def _take(self) -> list[_Entry]:
        """The oldest entries, up to the batch limit (a larger request goes alone)."""
        batch: list[_Entry] = []
        total = 0
        while self._waiting and (not batch or total + self._waiting[0].size <= self._max):
            entry = self._waiting.popleft()
            self._queued -= entry.size
            total += entry.size
            batch.append(entry)
        return batch

    async def _write(self, batch: Sequence[_Entry]) -> None:
        metrics.offset_commit_batch_requests.observe(len(batch))
        try:
            answers = await self._coordinator.commit_offset_batch(
                [entry.item for entry in batch], int(time.time() * 1000)
            )
        except Exception as exc:
            if len(batch) > 1 and not is_outage(exc):
                # Not the database's fault, so maybe one request's: the others must not
                # fail with it. Each alone, in order.
                log.warning(
                    "a batch of %d offset commits failed, retrying each alone: %s", len(batch), exc
                )
                for entry in batch:
                    await self._write([entry])
                return
            for entry in batch:
                _fail(entry, exc)
            return
        for entry, answer in zip(batch, answers, strict=True):
            if not entry.answer.done():
                entry.answer.set_result(answer)
        written = sum(
            answer.count(ErrorCode.none)
            for entry, answer in zip(batch, answers, strict=True)
            if isinstance(entry.item, GroupOffsetCommit)
        )
        metrics.offset_commits_total.inc(written)


def _fail(entry: _Entry, exc: BaseException) -> None:
    if entry.answer.done():
        return
    if isinstance(exc, asyncio.CancelledError):
        entry.answer.cancel()
    else:
        entry.answer.set_exception(exc)


def _retrieve(future: asyncio.Future[list[ErrorCode]]) -> None:
    if not future.cancelled():
        future.exception()  # a waiter that went away must not make asyncio log it
