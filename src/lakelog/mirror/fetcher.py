"""A mirror fetcher: one task of the broker's bounded pool (`mirror.num.fetchers`), copying
its share of the leased partitions.

Each round groups its partitions by (mirror, source leader) and sends one Fetch per group
(READ_COMMITTED: everything below the source's last stable offset, markers and aborted
data included). Before sending, it reserves the response's buffer from the broker-wide
byte budget and keeps it until the batches are uploaded and committed, so memory stays
capped however many partitions have data. The batches of one response become one object
(producer ids rewritten, CRCs recomputed), committed with `commit_mirror` at the source's
offsets. A bad batch fails its partition only; the rest of the response is committed."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from uuid import UUID

from lakelog.admin.results import Node
from lakelog.coordinator.mirror_types import MirrorBatch
from lakelog.log.storage.keys import new_wal_key
from lakelog.log.storage.wal import build_wal
from lakelog.mirror.batches import SourceBatch, prepare_partition
from lakelog.mirror.connection import SourceConnection
from lakelog.mirror.source import SourceCluster, SourceUnavailable
from lakelog.mirror.wire import (
    FetchAsk,
    FetchDecodeError,
    FetchedPartition,
    decode_fetch,
    encode_fetch,
)
from lakelog.util import metrics
from lakelog.util.errors import ErrorCode

if TYPE_CHECKING:
    from lakelog.mirror.manager import MirrorManager

log = logging.getLogger(__name__)

LEADER_ERRORS = frozenset(
    {
        ErrorCode.not_leader_or_follower,
        ErrorCode.leader_not_available,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.fenced_leader_epoch,
        ErrorCode.unknown_leader_epoch,
        ErrorCode.replica_not_available,
        ErrorCode.kafka_storage_error,
    }
)
"""Fetch errors that mean "ask the source's metadata again and retry"."""
RESPONSE_OVERHEAD = 1024
PARTITION_OVERHEAD = 64
"""Bytes a Fetch response spends outside record data: its header and topic names, and
per partition its fixed fields (a few aborted-transaction entries included)."""
IDLE_WAIT_S = 0.5
ERROR_BACKOFF_S = 1.0


@dataclass(eq=False)
class MirrorTask:
    """One leased MIRRORING partition, as its fetcher tracks it."""

    mirror: str
    topic: str
    topic_id: UUID
    partition: int
    next_offset: int
    source_end_offset: int = -1
    source_high_watermark: int = -1
    last_timestamp: int = -1
    lag_ms: int = 0
    reported: tuple[int, int, int] = (-2, -2, -2)
    dropped: bool = False

    @property
    def key(self) -> tuple[UUID, int]:
        return (self.topic_id, self.partition)

    @property
    def lag_records(self) -> int:
        if self.source_end_offset < 0:
            return -1
        return max(0, self.source_end_offset - self.next_offset)


def fetcher_index(topic_id: UUID, partition: int, fetchers: int) -> int:
    """Which fetcher of the pool copies a partition (stable, spread evenly)."""
    return zlib.crc32(topic_id.bytes + partition.to_bytes(4, "big")) % fetchers


@dataclass
class _Round:
    """What one Fetch response turned into."""

    batches: list[tuple[MirrorTask, SourceBatch]] = field(default_factory=list)
    failures: list[tuple[MirrorTask, str, str]] = field(default_factory=list)
    """(task, cause, reason)."""
    refresh: bool = False


class Fetcher:
    def __init__(self, index: int, manager: MirrorManager) -> None:
        self.index = index
        self.manager = manager
        self.tasks: dict[tuple[UUID, int], MirrorTask] = {}
        self._wake = asyncio.Event()
        self._connections: dict[tuple[str, int], SourceConnection] = {}
        self._correlation = 0
        self._turn = 0

    # -- assignment (called by the manager)
    def assign(self, task: MirrorTask) -> None:
        self.tasks[task.key] = task
        self._wake.set()

    def remove(self, key: tuple[UUID, int]) -> MirrorTask | None:
        task = self.tasks.pop(key, None)
        if task is not None:
            task.dropped = True
        return task

    def close(self) -> None:
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()

    # -- loop
    async def run(self) -> None:
        while True:
            try:
                worked = await self._round()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("mirror fetcher %d: round failed", self.index)
                worked = False
                await asyncio.sleep(ERROR_BACKOFF_S)
            if not worked:
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), IDLE_WAIT_S)

    async def _round(self) -> bool:
        groups: dict[tuple[str, int], list[MirrorTask]] = {}
        nodes: dict[tuple[str, int], Node] = {}
        for task in list(self.tasks.values()):
            source = self.manager.sources.get(task.mirror)
            if source is None:
                continue
            node = await source.leader(task.topic, task.partition)
            if node is None:
                continue
            groups.setdefault((task.mirror, node.node_id), []).append(task)
            nodes[(task.mirror, node.node_id)] = node
        if not groups:
            return False
        settings = self.manager.settings
        wait_ms = max(10, settings.mirror_fetch_max_wait_ms // len(groups))
        per_request = max(1, settings.mirror_fetch_max_partitions)
        self._turn += 1
        for (mirror, node_id), tasks in groups.items():
            source = self.manager.sources.get(mirror)
            if source is None:
                continue
            # Rotate the order so partitions past the per-request limit get their turn.
            start = (self._turn * per_request) % len(tasks)
            tasks = tasks[start:] + tasks[:start]
            for first in range(0, len(tasks), per_request):
                chunk = [t for t in tasks[first : first + per_request] if not t.dropped]
                if chunk:
                    await self._fetch(source, mirror, nodes[(mirror, node_id)], chunk, wait_ms)
        return True

    async def _connection(self, mirror: str, node: Node, source: SourceCluster) -> SourceConnection:
        key = (mirror, node.node_id)
        conn = self._connections.get(key)
        if conn is None or conn.closed:
            conn = await SourceConnection.open(
                node.host, node.port, self.manager.source_timeout, security=source.security
            )
            self._connections[key] = conn
        return conn

    async def _fetch(
        self,
        source: SourceCluster,
        mirror: str,
        node: Node,
        tasks: Sequence[MirrorTask],
        wait_ms: int,
    ) -> None:
        budget = self.manager.budget
        frame_bytes = self.manager.request_bytes
        # The response buffer and the upload's copy of it: both counted before sending,
        # and given back before any backoff.
        held = [await budget.acquire(2 * frame_bytes)]
        try:
            backoff = await self._fetch_held(source, mirror, node, tasks, wait_ms, held)
        finally:
            budget.release(held[0])
        if backoff:
            await asyncio.sleep(ERROR_BACKOFF_S)

    async def _fetch_held(
        self,
        source: SourceCluster,
        mirror: str,
        node: Node,
        tasks: Sequence[MirrorTask],
        wait_ms: int,
        held: list[int],
    ) -> bool:
        """One Fetch and what follows, with the buffer reserved (`held[0]` bytes, grown
        if the answer is larger). True when the caller should back off."""
        budget = self.manager.budget
        frame_bytes = self.manager.request_bytes
        # Record bytes asked for: the frame less the response's own headers.
        ask_bytes = max(1, frame_bytes - RESPONSE_OVERHEAD - PARTITION_OVERHEAD * len(tasks))
        try:
            version = await source.fetch_version()
            conn = await self._connection(mirror, node, source)
        except (SourceUnavailable, OSError, TimeoutError) as exc:
            self.manager.source_down(mirror, exc)
            return True
        self._correlation += 1
        request = encode_fetch(
            version,
            self._correlation,
            source.client_id,
            [
                FetchAsk(
                    t.topic,
                    t.partition,
                    t.next_offset,
                    self.manager.settings.mirror_partition_fetch_max_bytes,
                )
                for t in tasks
            ],
            max_wait_ms=wait_ms,
            min_bytes=1,
            max_bytes=ask_bytes,
        )

        def allocate(size: int) -> bytearray:
            if size > frame_bytes:
                over = 2 * (size - frame_bytes)
                budget.force(over)  # already on the wire: counted past the cap
                held[0] += over
            return bytearray(size)

        try:
            frame = await conn.request(
                request, allocate, self.manager.source_timeout + wait_ms / 1000
            )
        except (OSError, TimeoutError, ConnectionError) as exc:
            self.manager.source_down(mirror, exc)
            source.want_refresh()
            return True
        self.manager.source_up(mirror)
        try:
            error, parts = decode_fetch(version, memoryview(frame))
        except FetchDecodeError as exc:
            log.warning("mirror %s: undecodable Fetch response: %s", mirror, exc)
            conn.close()
            return True
        if error != ErrorCode.none:
            log.warning("mirror %s: Fetch answered %s", mirror, error.name)
            return True
        outcome = self._sort(tasks, parts)
        if outcome.refresh:
            source.want_refresh()
        if outcome.batches:
            await self._store(mirror, outcome.batches)
        for task, cause, reason in outcome.failures:
            await self.manager.fail(task, cause, reason)
        return False

    def _sort(self, tasks: Sequence[MirrorTask], parts: Sequence[FetchedPartition]) -> _Round:
        by_key = {(t.topic, t.partition): t for t in tasks}
        out = _Round()
        for p in parts:
            task = by_key.get((p.topic, p.partition))
            if task is None or task.dropped:
                continue
            if p.error == ErrorCode.none:
                task.source_high_watermark = p.high_watermark
                task.source_end_offset = (
                    p.last_stable_offset if p.last_stable_offset >= 0 else p.high_watermark
                )
                prepared = prepare_partition(p.records, task.next_offset)
                end = task.source_end_offset
                good = [b for b in prepared.batches if end < 0 or b.last_offset < end]
                out.batches.extend((task, b) for b in good)
                if prepared.poison is not None:
                    out.failures.append(
                        (task, "corrupt_batch", f"corrupt batch from the source: {prepared.poison}")
                    )
            elif p.error == ErrorCode.offset_out_of_range:
                out.failures.append((task, "offset_out_of_range", _out_of_range(task, p)))
            elif p.error in LEADER_ERRORS:
                out.refresh = True
            else:
                log.warning(
                    "mirror %s: %s-%d answered %s", task.mirror, p.topic, p.partition, p.error.name
                )
        return out

    async def _store(self, mirror: str, batches: Sequence[tuple[MirrorTask, SourceBatch]]) -> None:
        manager = self.manager
        wal = build_wal(
            [
                (
                    task.topic_id,
                    task.partition,
                    b.data,
                    b.last_offset - b.base_offset + 1,
                    b.producer_id,
                    b.producer_epoch,
                    b.base_sequence,
                )
                for task, b in batches
            ]
        )
        key = new_wal_key()
        await manager.storage.put(key, wal.parts)
        commits = [
            MirrorBatch(
                topic_id=task.topic_id,
                partition=task.partition,
                byte_offset=offset,
                byte_size=size,
                base_offset=b.base_offset,
                last_offset=b.last_offset,
                base_timestamp=b.base_timestamp,
                max_timestamp=b.max_timestamp,
                producer_id=b.producer_id,
                producer_epoch=b.producer_epoch,
                base_sequence=b.base_sequence,
                is_transactional=b.is_transactional,
                control_type=b.control_type,
                leader_epoch=b.leader_epoch,
            )
            for (task, b), (offset, size) in zip(batches, wal.placements, strict=True)
        ]
        results = await manager.commit(key, wal.size, commits)
        size = 0
        lost: set[tuple[UUID, int]] = set()
        resync: set[tuple[UUID, int]] = set()
        for (task, b), result in zip(batches, results, strict=True):
            if result.error == ErrorCode.none:
                task.next_offset = max(task.next_offset, b.last_offset + 1)
                task.last_timestamp = max(task.last_timestamp, b.max_timestamp)
                if not result.is_duplicate:
                    size += b.size
            elif result.error in (ErrorCode.not_leader_or_follower, ErrorCode.stale_broker_epoch):
                lost.add(task.key)
            else:
                resync.add(task.key)
                log.warning(
                    "mirror %s: commit of %s-%d at %d refused: %s",
                    mirror,
                    task.topic,
                    task.partition,
                    b.base_offset,
                    result.error.name,
                )
        for key_ in lost:
            manager.lost_lease(key_)
        if resync:
            await manager.resync(resync)
        now = int(time.time() * 1000)
        for task, _ in batches:
            task.lag_ms = max(0, now - task.last_timestamp) if task.lag_records > 0 else 0
        metrics.mirror_bytes_total.labels(mirror=mirror).inc(size)
        await manager.throttle.consume(size)


def _out_of_range(task: MirrorTask, p: FetchedPartition) -> str:
    if p.log_start_offset > task.next_offset:
        return (
            f"the source deleted offsets {task.next_offset}..{p.log_start_offset - 1} before "
            "they were mirrored (source log start moved past the mirror)"
        )
    return (
        f"the source log ends at {p.high_watermark}, below the mirrored offset "
        f"{task.next_offset}: the source lost records (unclean election or truncation)"
    )
