"""The source's questions to the coordinator and object storage: which partitions exist and
how far they reach, and which offset a timestamp starts at.

Planning runs in Spark's Python planner process, reading in executors: each opens its own
`LogSession` (a started coordinator and an object store) and closes it when done, so
nothing unpicklable travels between them.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING
from uuid import UUID

from lakelog.coordinator import (
    BatchCoordinator,
    ListOffsetsRequest,
    PartitionKey,
    TimestampType,
    open_coordinator,
)
from lakelog.spark.offsets import PartitionBounds, TopicPartition
from lakelog.spark.options import Connection
from lakelog.util.errors import ErrorCode

if TYPE_CHECKING:
    from lakelog.log.storage.store import ObjectStorage

__all__ = ["LogSession", "offsets_for_timestamp", "partition_bounds"]


class LogSession:
    """`async with LogSession(conn) as log:` gives `log.coordinator` and `log.storage`.

    The object store is opened on first use: planning a read mostly needs only the
    coordinator, and Spark plans in a fresh process that would otherwise import it."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self._coordinator: BatchCoordinator | None = None
        self._storage: ObjectStorage | None = None

    @property
    def coordinator(self) -> BatchCoordinator:
        assert self._coordinator is not None, "LogSession used outside `async with`"
        return self._coordinator

    @property
    def storage(self) -> ObjectStorage:
        assert self._coordinator is not None, "LogSession used outside `async with`"
        if self._storage is None:
            from lakelog.log.storage.inline_store import InlineAwareStorage
            from lakelog.log.storage.store import ObjectStorage

            # Inline files (issue 32) are read from the coordinator this session holds.
            self._storage = InlineAwareStorage(
                ObjectStorage.from_url(self.connection.storage_url), self._coordinator
            )
        return self._storage

    async def __aenter__(self) -> LogSession:
        coordinator = open_coordinator(self.connection.coordinator_url)
        await coordinator.start()
        self._coordinator = coordinator
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._coordinator is not None:
            await self._coordinator.close()
            self._coordinator = None


async def partition_bounds(
    coordinator: BatchCoordinator, topics: Sequence[str], *, read_committed: bool
) -> list[PartitionBounds]:
    """Every partition of the topics that exist (missing topics have none, as with Kafka's
    subscribe), in topic order then partition order."""
    infos = {info.name: info for info in await coordinator.get_topics(list(topics))}
    keys: list[tuple[str, PartitionKey]] = []
    for name in topics:
        info = infos.get(name)
        if info is not None:
            keys += [(name, PartitionKey(info.topic_id, p)) for p in range(info.num_partitions)]
    logs = await coordinator.log_info([key for _, key in keys]) if keys else []
    out: list[PartitionBounds] = []
    for (name, key), log in zip(keys, logs, strict=True):
        if log.error != ErrorCode.none:
            continue  # deleted meanwhile: like a topic that does not exist
        end = log.high_watermark
        if read_committed and log.last_stable_offset >= 0:
            end = min(end, log.last_stable_offset)
        out.append(
            PartitionBounds(name, str(key.topic_id), key.partition, log.log_start_offset, end)
        )
    return out


async def offsets_for_timestamp(
    coordinator: BatchCoordinator,
    storage: ObjectStorage,
    bounds: Sequence[PartitionBounds],
    timestamp: int,
    *,
    read_committed: bool,
) -> dict[TopicPartition, int | None]:
    """Per partition, the first offset whose record timestamp is >= `timestamp` (Kafka's
    offsetsForTimes), capped at the partition's end; None where no record qualifies."""
    requests = [
        ListOffsetsRequest(UUID(b.topic_id), b.partition, timestamp, read_committed) for b in bounds
    ]
    results = await coordinator.list_offsets(requests) if requests else []
    out: dict[TopicPartition, int | None] = {}
    for b, result in zip(bounds, results, strict=True):
        if result.error != ErrorCode.none or result.offset < 0:
            out[b.key] = None
            continue
        offset = result.offset
        coord = result.batch
        if coord is not None and coord.timestamp_type != TimestampType.LOG_APPEND_TIME:
            from lakelog.log.protocol.record_reader import first_offset_at_or_after
            from lakelog.log.storage.keys import offsets_in_headers

            data = await storage.get_range(
                coord.object_key, coord.byte_offset, coord.byte_offset + coord.byte_size
            )
            found = first_offset_at_or_after(
                bytes(data),
                coord.base_offset,
                timestamp,
                offsets_in_headers=offsets_in_headers(coord.object_key),
            )
            if found is not None:
                offset = max(found[0], result.offset)
        out[b.key] = min(offset, b.end)
    return out
