"""The broker's WAL writer: one active buffer shared by every partition and connection.

A buffer is sealed on size, on time, or early when no upload is in progress and the
buffer is worth a PUT at the current load (`seal_policy`); it is uploaded as one object
(uploads run in parallel), then committed to the batch coordinator strictly in seal order.
Each appended batch gets a future that completes only after both the upload and the
commit succeeded; a failure of either fails exactly the batches of that object with a
retriable error.

A failed upload deletes whatever it may have left (best effort, in the background), so no
orphan waits for GC. A commit that raised may still have happened (its answer was lost):
the writer asks the coordinator what became of the key and either repeats the commit or
answers with what the first one decided, for up to `commit_retry_s`, so a database outage
stalls produce instead of failing batches that were in fact stored.

With an `InlinePolicy` (issue 32), a small buffer sealed while the broker's append rate is
low is not uploaded: its bytes go to the coordinator with the commit (an inline file,
`inline/<uuid7>`), in the same transaction, so the acknowledgement means what it always
does. The broker's `InlineMover` later moves inline files into ordinary objects.

With `PlainClaims`, a plain producer's batch is accepted only under this broker's claim on
its partition and zone, and its commit is refused if another broker has claimed since
(`plain_claims`): the ordering a plain producer gets across a partition moving between
live brokers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from uuid import UUID

from lakelog.coordinator.interface import BatchCoordinator
from lakelog.coordinator.log_types import (
    NOT_PLAIN_OWNER,
    CommitBatch,
    CommitBatchResult,
    TimestampType,
)
from lakelog.log.produce.inline_policy import InlinePolicy
from lakelog.log.produce.plain_claims import PlainClaims
from lakelog.log.produce.seal_policy import PutBudget, SealPolicy
from lakelog.log.protocol.records import BatchHeader
from lakelog.log.storage.keys import new_inline_key, new_wal_key
from lakelog.log.storage.store import ObjectStorage
from lakelog.log.storage.wal import build_wal
from lakelog.util import metrics
from lakelog.util.errors import ErrorCode

log = logging.getLogger(__name__)

RETRIABLE_FAILURE = ErrorCode.kafka_storage_error
COMMIT_RETRY_FIRST_S = 0.1
COMMIT_RETRY_MAX_S = 1.0
ORPHAN_DELETE_ATTEMPTS = 8
_KEY_KNOWN = ErrorCode.invalid_request
"""commit_file's answer for every batch of an object key it already knows."""
MAX_PENDING_DELETES = 256
"""Background deletes of failed uploads at once; past that, GC finds the rest."""


@dataclass(frozen=True, slots=True)
class AppendRequest:
    topic_id: UUID
    partition: int
    data: memoryview | bytes
    header: BatchHeader
    timestamp_type: TimestampType
    owner_zone: str | None = None
    """Set for a plain producer's batch (no sequence to order it by): the client's zone, so
    the commit can check this broker still leads the partition for that zone."""
    check_owner: bool = False
    owner_epoch: int | None = None
    """The plain-write claim it was accepted under (`PlainClaims`); None: unchecked."""


@dataclass(frozen=True, slots=True)
class CommittedObject:
    """What listeners learn after a commit: the object's accepted batches and their bytes."""

    object_key: str
    batches: Sequence[tuple[AppendRequest, CommitBatchResult, int]]
    """(request, result, byte offset in the object) for every accepted batch."""


@dataclass
class _Buffer:
    entries: list[AppendRequest] = field(default_factory=list)
    futures: list[asyncio.Future[CommitBatchResult]] = field(default_factory=list)
    size: int = 0
    epoch: int = -1
    """The broker epoch its first batch was accepted under (-1: not registered yet)."""


class WalWriter:
    def __init__(
        self,
        storage: ObjectStorage,
        coordinator: BatchCoordinator,
        *,
        broker_id: int,
        broker_epoch: Callable[[], int],
        max_buffer_bytes: int,
        commit_interval_ms: int,
        max_sealed_buffers: int,
        on_commit: Callable[[CommittedObject], None],
        on_fenced: Callable[[int], None] = lambda epoch: None,
        commit_delay_ms: int = 0,
        commit_retry_ms: int = 25_000,
        still_leads: Callable[[UUID, int, str | None], Awaitable[bool]] | None = None,
        put_budget: PutBudget | None = None,
        inline: InlinePolicy | None = None,
        fill_horizon_ms: int = 0,
        claims: PlainClaims | None = None,
    ) -> None:
        self._storage = storage
        self._coordinator = coordinator
        self._broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._max_bytes = max_buffer_bytes
        self._interval_s = commit_interval_ms / 1000
        self._max_sealed = max_sealed_buffers
        self._on_commit = on_commit
        self._on_fenced = on_fenced
        self._commit_delay_s = commit_delay_ms / 1000
        self._commit_retry_s = commit_retry_ms / 1000
        self._still_leads = still_leads
        self._claims = claims
        self._active = _Buffer()
        self._timer: asyncio.TimerHandle | None = None
        self._in_flight: set[asyncio.Task[None]] = set()
        self._sealed = 0
        self._space = asyncio.Event()
        self._queue: deque[object] = deque()
        """Appends waiting for room, first come first served."""
        self._deletes: set[asyncio.Task[None]] = set()
        self._previous_commit: asyncio.Future[None] | None = None
        self._closed = False
        self._policy = SealPolicy(
            put_budget or PutBudget(0.0),
            max_bytes=max_buffer_bytes,
            fill_horizon_s=fill_horizon_ms / 1000,
        )
        """No budget: no early sealing (size and interval only)."""
        self.inline = inline
        """None: every buffer is uploaded (the small-write path is off)."""
        self._uploading = 0
        """Sealed buffers whose upload has not ended."""
        self._early: asyncio.Handle | None = None

    # ------------------------------------------------------------------ appending
    async def append(
        self, requests: Sequence[AppendRequest], *, epoch: int | None = None
    ) -> list[asyncio.Future[CommitBatchResult]]:
        """Queue batches for the next object. Waits while the pipeline of sealed buffers is
        full (back-pressure): memory stays bounded by (buffer size + one batch) x (pipeline
        depth + 1) + one request.

        `epoch` is the broker epoch the request was read under: if the broker has taken
        another since (it was fenced meanwhile), the batches are refused at once with
        STALE_BROKER_EPOCH, as their commit would be. They may be older than records the
        same producers sent to other brokers during the fence.

        Only the wait can be cancelled; once it is over, everything happens without an
        await, so a cancelled request can never strand other requests' batches."""
        if self._closed:
            raise RuntimeError("WAL writer is closed")
        claimed: Sequence[AppendRequest | None] = requests
        if self._claims is not None and any(r.check_owner for r in requests):
            claimed = await self._claims.claim(requests)
        if self._queue or self._sealed >= self._max_sealed:
            await self._wait_for_room()
        loop = asyncio.get_running_loop()
        current = self._broker_epoch()
        if epoch is not None and epoch >= 0 and epoch != current:
            refused = []
            for _ in requests:
                future: asyncio.Future[CommitBatchResult] = loop.create_future()
                future.set_result(CommitBatchResult(ErrorCode.stale_broker_epoch))
                refused.append(future)
            metrics.wal_stale_epoch_batches_total.inc(len(requests))
            return refused
        epoch = current
        if self._active.entries and self._active.epoch != epoch:
            self._seal("epoch")
        # Batch by batch: an object is sealed as soon as it holds `max_bytes`, so at full
        # speed every object is full (it passes the size by at most one batch) and a
        # request's batches may span two objects, committed in order.
        futures = []
        for request in claimed:
            if request is None:
                # A plain producer's batch for a partition this broker does not lead (or
                # could not claim): refused as a counted retry, as at commit time.
                future = loop.create_future()
                future.set_result(CommitBatchResult(RETRIABLE_FAILURE))
                futures.append(future)
                metrics.wal_moved_batches_total.inc()
                continue
            buffer = self._active
            if not buffer.entries:
                buffer.epoch = epoch
                self._timer = loop.call_later(self._interval_s, self._seal_on_timer, buffer)
            future: asyncio.Future[CommitBatchResult] = loop.create_future()
            buffer.entries.append(request)
            buffer.futures.append(future)
            futures.append(future)
            size = len(request.data)
            buffer.size += size
            self._policy.appended(loop.time(), size)
            if buffer.size >= self._max_bytes:
                self._seal("size")
        metrics.wal_buffer_bytes.set(self._active.size)
        self._consider_early()
        return futures

    def append_rate(self) -> float:
        """Bytes appended per second over about the last second."""
        return self._policy.rate.per_second(asyncio.get_running_loop().time())

    def _consider_early(self) -> None:
        """Arrange an early seal of the active buffer when the PUT budget allows one (see
        `seal_policy`); never at once: requests read in the same turn of the event loop
        join the object. Called again whenever an upload or a commit ends."""
        if self._early is not None or not self._early_possible():
            return
        loop = asyncio.get_running_loop()
        at = self._policy.early_at(
            loop.time(), inline=self._inline_likely(), size=self._active.size
        )
        if at is None:
            return
        if at <= loop.time():
            self._early = loop.call_soon(self._seal_early)
        else:
            self._early = loop.call_at(at, self._seal_early)

    def _early_possible(self) -> bool:
        if not self._active.entries or self._uploading or self._sealed >= self._max_sealed:
            return False
        # Group commit: a buffer bound for the coordinator waits until the commit before it
        # has ended, and gathers what arrives meanwhile; then it goes at once.
        return not (self._sealed and self._inline_likely())

    def _seal_early(self) -> None:
        self._early = None
        if not self._early_possible():
            return
        now = asyncio.get_running_loop().time()
        at = self._policy.early_at(now, inline=self._inline_likely(), size=self._active.size)
        if at is not None and at <= now:
            self._seal("early")
        else:
            self._consider_early()

    async def _wait_for_room(self) -> None:
        """Wait in line: appends get room in the order they asked for it, so the requests
        of one connection (and every producer's batches) keep their order under
        back-pressure."""
        ticket = object()
        self._queue.append(ticket)
        try:
            while self._queue[0] is not ticket or self._sealed >= self._max_sealed:
                self._space.clear()
                await self._space.wait()
        finally:
            self._queue.remove(ticket)
            self._space.set()  # the next in line looks again

    def _seal_on_timer(self, buffer: _Buffer) -> None:
        if buffer is self._active:
            self._seal("interval")

    def _seal(self, reason: str) -> None:
        """Hand the active buffer to an upload task; seal order is commit order."""
        buffer = self._active
        if not buffer.entries:
            return
        metrics.wal_seals_total.labels(reason=reason).inc()
        self._uploading += 1
        self._policy.sealed(asyncio.get_running_loop().time())
        self._active = _Buffer()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        metrics.wal_buffer_bytes.set(0)
        loop = asyncio.get_running_loop()
        previous = self._previous_commit
        done: asyncio.Future[None] = loop.create_future()
        self._previous_commit = done
        self._sealed += 1
        metrics.wal_buffers_in_flight.inc()
        # The epoch the batches were accepted under: if this broker was fenced after that,
        # the commit must be refused even if a new epoch was taken meanwhile (a paused
        # broker that wakes and re-registers before its buffer's timer fires).
        epoch = buffer.epoch if buffer.epoch >= 0 else self._broker_epoch()
        task = loop.create_task(self._write(buffer, previous, done, epoch))
        self._in_flight.add(task)
        task.add_done_callback(self._in_flight.discard)

    # ------------------------------------------------------------------ upload + commit
    async def _write(
        self,
        buffer: _Buffer,
        previous: asyncio.Future[None] | None,
        done: asyncio.Future[None],
        epoch: int,
    ) -> None:
        try:
            # By producer: a producer's batches of a partition go back to back, so the
            # commit writes one row for them (`commit_plan`); a producer's (and so a
            # connection's) own order is kept.
            wal = build_wal(
                [
                    (
                        r.topic_id,
                        r.partition,
                        r.data,
                        r.header.record_count,
                        r.header.producer_id,
                        r.header.producer_epoch,
                        r.header.base_sequence,
                    )
                    for r in buffer.entries
                ],
                by_producer=True,
            )
            uploaded = True
            inline_data: bytes | None = None
            if self._goes_inline(wal.size):
                key = new_inline_key()
                inline_data = b"".join(wal.parts)
                assert self.inline is not None
                self.inline.added(wal.size)
                self._uploading -= 1
                self._consider_early()
            else:
                key = new_wal_key()
            try:
                if inline_data is None:
                    await self._storage.put(key, wal.parts)
            except Exception:
                log.exception(
                    "WAL upload of %s failed; failing %d batches", key, len(buffer.entries)
                )
                metrics.wal_commit_failures_total.labels(stage="upload").inc()
                uploaded = False
                self._delete_later(key)
            finally:
                if inline_data is None:
                    self._uploading -= 1
                    self._consider_early()
            if self._commit_delay_s:
                # Fault injection for tests: widen the upload-to-commit window.
                await asyncio.sleep(self._commit_delay_s)
            if previous is not None:
                await asyncio.shield(previous)
            if not uploaded:
                self._fail(buffer)
                return
            await self._commit(key, wal.size, wal.placements, buffer, epoch, inline_data)
        finally:
            if not done.done():
                done.set_result(None)
            self._sealed -= 1
            self._space.set()
            metrics.wal_buffers_in_flight.dec()
            if not self._closed:
                self._consider_early()

    async def _commit(
        self,
        key: str,
        size: int,
        placements: Sequence[tuple[int, int]],
        buffer: _Buffer,
        epoch: int,
        inline_data: bytes | None = None,
    ) -> None:
        if any(future.cancelled() for future in buffer.futures):
            kept = [i for i, future in enumerate(buffer.futures) if not future.cancelled()]
            # Their requests were abandoned (the client closed the connection, e.g. it
            # gave up on a paused broker and sent the records elsewhere): nobody can be
            # told of them, so they are not committed and cannot come back as duplicates.
            log.info(
                "%d batches of %s not committed: their clients left",
                len(buffer.futures) - len(kept),
                key,
            )
            metrics.wal_abandoned_batches_total.inc(len(buffer.futures) - len(kept))
            buffer, placements = _keep(buffer, placements, kept)
        moved = await self._moved_away(buffer)
        if moved:
            # A plain producer's batch whose partition another broker leads by now: the
            # client may already have sent later records there, and nothing (no sequence)
            # would keep this batch ahead of them. Refused as a counted retry.
            for i in moved:
                if self._claims is not None:
                    self._claims.forget(buffer.entries[i])
                if not buffer.futures[i].done():
                    buffer.futures[i].set_result(CommitBatchResult(ErrorCode.kafka_storage_error))
            metrics.wal_moved_batches_total.inc(len(moved))
            gone = set(moved)
            buffer, placements = _keep(
                buffer, placements, [i for i in range(len(buffer.entries)) if i not in gone]
            )
        if not buffer.entries:
            if inline_data is None:
                self._delete_later(key)
            return
        batches = [
            CommitBatch(
                topic_id=r.topic_id,
                partition=r.partition,
                byte_offset=offset,
                byte_size=length,
                record_count=r.header.record_count,
                base_timestamp=r.header.base_timestamp,
                max_timestamp=r.header.max_timestamp,
                timestamp_type=r.timestamp_type,
                producer_id=r.header.producer_id,
                producer_epoch=r.header.producer_epoch,
                base_sequence=r.header.base_sequence,
                is_transactional=r.header.is_transactional,
                owner_zone=r.owner_zone,
                owner_epoch=r.owner_epoch,
            )
            for r, (offset, length) in zip(buffer.entries, placements, strict=True)
        ]
        # In object order: a partition's batches in the order their bytes lie, so those of
        # one producer are neighbours in the list too and share a row.
        order = sorted(range(len(batches)), key=lambda i: batches[i].byte_offset)
        in_order = await self._commit_until_known(
            key, size, [batches[i] for i in order], epoch, inline_data
        )
        if in_order is None:
            self._fail(buffer)
            return
        results = [result for _, result in sorted(zip(order, in_order, strict=True))]
        results = self._taken_over(buffer, results)
        if inline_data is None:
            metrics.wal_objects_total.inc()
        else:
            metrics.wal_inline_files_total.inc()
            metrics.wal_inline_bytes_total.inc(size)
        if any(r.error == ErrorCode.stale_broker_epoch for r in results):
            log.warning("commit of %s refused: this broker was fenced", key)
            self._on_fenced(epoch)
        accepted = [
            (request, result, offset)
            for request, result, (offset, _) in zip(
                buffer.entries, results, placements, strict=True
            )
            if result.error == ErrorCode.none and not result.is_duplicate
        ]
        try:
            self._on_commit(CommittedObject(key, accepted))
        except Exception:
            log.exception("commit listener failed for %s", key)
        for future, result in zip(buffer.futures, results, strict=True):
            if not future.done():
                future.set_result(result)

    def _taken_over(
        self, buffer: _Buffer, results: list[CommitBatchResult]
    ) -> list[CommitBatchResult]:
        """Plain batches whose claim another broker took before this commit: refused as a
        counted retry (KAFKA_STORAGE_ERROR, never NOT_LEADER: see `NOT_PLAIN_OWNER`), and
        the claim forgotten so the next batch claims again."""
        if not any(r.error == NOT_PLAIN_OWNER for r in results):
            return results
        out = []
        for request, result in zip(buffer.entries, results, strict=True):
            if result.error == NOT_PLAIN_OWNER:
                if self._claims is not None:
                    self._claims.forget(request)
                metrics.wal_moved_batches_total.inc()
                result = CommitBatchResult(RETRIABLE_FAILURE)
            out.append(result)
        return out

    async def _moved_away(self, buffer: _Buffer) -> list[int]:
        """Indexes of plain producers' batches whose partition this broker no longer leads."""
        if self._still_leads is None:
            return []
        moved = []
        for i, r in enumerate(buffer.entries):
            if r.check_owner and not await self._still_leads(r.topic_id, r.partition, r.owner_zone):
                moved.append(i)
        return moved

    async def _commit_until_known(
        self,
        key: str,
        size: int,
        batches: list[CommitBatch],
        epoch: int,
        inline_data: bytes | None = None,
    ) -> Sequence[CommitBatchResult] | None:
        """commit_file, repeated through a coordinator outage until its outcome is known;
        None once `commit_retry_s` has passed (the batches then fail retriably)."""
        deadline = time.monotonic() + self._commit_retry_s
        delay = COMMIT_RETRY_FIRST_S
        retrying = False
        while True:
            try:
                if retrying:
                    # The last attempt raised: it may have committed all the same.
                    known = await self._coordinator.commit_outcome(key)
                    if known is not None:
                        log.info("commit of %s had happened; answering from its rows", key)
                        return [
                            r or CommitBatchResult(RETRIABLE_FAILURE)
                            for r in known.results(batches)
                        ]
                if inline_data is None:
                    results = await self._coordinator.commit_file(
                        key, self._broker_id, epoch, size, batches
                    )
                else:
                    results = await self._coordinator.commit_file(
                        key, self._broker_id, epoch, size, batches, inline=inline_data
                    )
                if not (retrying and all(r.error == _KEY_KNOWN for r in results)):
                    return results
                # The raised attempt landed after we looked: read what it decided.
            except Exception as exc:
                metrics.wal_commit_failures_total.labels(stage="commit").inc()
                if time.monotonic() + delay > deadline:
                    log.error(
                        "commit of %s failed for %.0f s; failing %d batches: %r",
                        key,
                        self._commit_retry_s,
                        len(batches),
                        exc,
                    )
                    return None
                log.warning("commit of %s failed, retrying in %.1f s: %r", key, delay, exc)
            retrying = True
            await asyncio.sleep(delay)
            delay = min(delay * 2, COMMIT_RETRY_MAX_S)

    def _inline_likely(self) -> bool:
        """Would the active buffer, sealed now, go inline? Then sealing it costs a commit,
        not a PUT, and it is sealed once no commit is pending (group commit)."""
        return self._goes_inline(self._active.size)

    def _goes_inline(self, size: int) -> bool:
        """Commit this buffer inline? (Small, at a low append rate, under the caps.)"""
        if self.inline is None:
            return False
        rate = self._policy.rate.per_second(asyncio.get_running_loop().time())
        return self.inline.allows(size, rate)

    def _delete_later(self, key: str) -> None:
        """A failed upload may have stored the object all the same: remove it, retrying
        through a store outage, so it never lingers as an orphan for GC to find."""
        if len(self._deletes) >= MAX_PENDING_DELETES:
            log.warning("%d deletes pending; leaving %s to GC", len(self._deletes), key)
            return
        task = asyncio.get_running_loop().create_task(self._delete(key))
        self._deletes.add(task)
        task.add_done_callback(self._deletes.discard)

    async def _delete(self, key: str) -> None:
        delay = COMMIT_RETRY_FIRST_S
        for _ in range(ORPHAN_DELETE_ATTEMPTS):
            try:
                await self._storage.delete(key)
                return
            except Exception as exc:
                log.warning("delete of failed upload %s failed, retrying: %r", key, exc)
            await asyncio.sleep(delay)
            delay = min(delay * 4, 30.0)
        log.error("could not delete failed upload %s; GC will", key)

    @staticmethod
    def _fail(buffer: _Buffer) -> None:
        for future in buffer.futures:
            if not future.done():
                future.set_result(CommitBatchResult(error=RETRIABLE_FAILURE))

    # ------------------------------------------------------------------ shutdown
    async def flush(self) -> None:
        """Seal the active buffer and wait until every sealed buffer is committed."""
        self._seal("flush")
        while self._in_flight:
            await asyncio.gather(*list(self._in_flight), return_exceptions=True)

    async def close(self) -> None:
        await self.flush()
        self._closed = True
        if self._deletes:
            await asyncio.wait(list(self._deletes), timeout=5)
        for handle in (self._timer, self._early):
            if handle is not None:
                with contextlib.suppress(Exception):
                    handle.cancel()


def _keep(
    buffer: _Buffer, placements: Sequence[tuple[int, int]], kept: Sequence[int]
) -> tuple[_Buffer, list[tuple[int, int]]]:
    """The buffer and placements with only the entries at `kept`."""
    return (
        _Buffer(
            [buffer.entries[i] for i in kept],
            [buffer.futures[i] for i in kept],
            buffer.size,
            buffer.epoch,
        ),
        [placements[i] for i in kept],
    )
