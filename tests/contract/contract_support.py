"""Small builders the contract tests share: topics, batches, and committing a list of
batches as one object laid out back to back."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from uuid import UUID

from lakelog.coordinator import (
    BatchCoordinate,
    BatchCoordinator,
    CommitBatch,
    CommitBatchResult,
    CreateTopicRequest,
    FindBatchesRequest,
    LogInfo,
    PartitionKey,
    TimestampType,
)
from lakelog.util.errors import ErrorCode

BIG = 1 << 40

OpenInstance = Callable[[], Awaitable[BatchCoordinator]]
"""The `open_instance` fixture: another started instance on the test's database."""


async def new_topic(
    coordinator: BatchCoordinator,
    partitions: int = 1,
    configs: Mapping[str, str] | None = None,
    name: str | None = None,
) -> UUID:
    name = name or f"topic-{uuid.uuid4().hex[:12]}"
    [result] = await coordinator.create_topics(
        [CreateTopicRequest(name, partitions, 1, dict(configs or {}))]
    )
    assert result.error == ErrorCode.none, result
    assert result.topic_id is not None
    return result.topic_id


def batch(
    topic_id: UUID,
    partition: int = 0,
    *,
    records: int = 1,
    size: int = 100,
    base_ts: int = 1_000,
    max_ts: int | None = None,
    ts_type: TimestampType = TimestampType.CREATE_TIME,
    pid: int = -1,
    epoch: int = -1,
    seq: int = -1,
    transactional: bool = False,
) -> CommitBatch:
    return CommitBatch(
        topic_id=topic_id,
        partition=partition,
        byte_offset=0,
        byte_size=size,
        record_count=records,
        base_timestamp=base_ts,
        max_timestamp=base_ts if max_ts is None else max_ts,
        timestamp_type=ts_type,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=transactional,
    )


def new_key() -> str:
    return f"wal/{uuid.uuid4()}"


def placed(batches: Sequence[CommitBatch], spaced: bool = False) -> list[CommitBatch]:
    """The batches with byte offsets in list order, as `commit` places them: back to back,
    or `spaced` one byte apart (no two then share a row: each is its own coordinate)."""
    out: list[CommitBatch] = []
    position = 0
    for b in batches:
        out.append(dataclasses.replace(b, byte_offset=position))
        position += b.byte_size + int(spaced)
    return out


async def commit(
    coordinator: BatchCoordinator,
    batches: Sequence[CommitBatch],
    *,
    key: str | None = None,
    broker_id: int = 1,
    broker_epoch: int = -1,
    spaced: bool = False,
) -> list[CommitBatchResult]:
    """Commit the batches as one object, placed in list order (see `placed`): back to back,
    a producer's batches of one partition share a row; `spaced`, each has its own."""
    laid = placed(batches, spaced)
    size = laid[-1].byte_offset + laid[-1].byte_size if laid else 0
    results = await coordinator.commit_file(key or new_key(), broker_id, broker_epoch, size, laid)
    assert len(results) == len(batches)
    return results


async def read_all(
    coordinator: BatchCoordinator, topic_id: UUID, partition: int = 0
) -> list[BatchCoordinate]:
    """Every live batch of the partition, from the log start."""
    info = await log_info(coordinator, topic_id, partition)
    [found] = await coordinator.find_batches(
        [FindBatchesRequest(topic_id, partition, info.log_start_offset, BIG)]
    )
    assert found.error == ErrorCode.none, found
    return list(found.batches)


async def log_info(coordinator: BatchCoordinator, topic_id: UUID, partition: int = 0) -> LogInfo:
    [info] = await coordinator.log_info([PartitionKey(topic_id, partition)])
    return info
