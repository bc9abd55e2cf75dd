"""The batch coordinator: the interface everyone codes against, and `open_coordinator`,
which picks the implementation from a URL so callers never name one."""

from __future__ import annotations

from pathlib import Path

from lakelog.coordinator.interface import BatchCoordinator
from lakelog.coordinator.log_types import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    BatchCoordinate,
    CommitBatch,
    CommitBatchResult,
    DeleteRecordsRequest,
    DeleteRecordsResult,
    FileToDelete,
    FindBatchesRequest,
    FindBatchesResult,
    ListOffsetsRequest,
    ListOffsetsResult,
    LogInfo,
    PartitionKey,
    RetentionPolicy,
    RetentionResult,
    TimestampType,
)
from lakelog.coordinator.topic_types import (
    AlterTopicConfigsRequest,
    BrokerInfo,
    CreatePartitionsRequest,
    CreateTopicRequest,
    CreateTopicResult,
    DeleteTopicResult,
    TopicInfo,
    TopicResult,
)

__all__ = [
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "AlterTopicConfigsRequest",
    "BatchCoordinate",
    "BatchCoordinator",
    "BrokerInfo",
    "CommitBatch",
    "CommitBatchResult",
    "CreatePartitionsRequest",
    "CreateTopicRequest",
    "CreateTopicResult",
    "DeleteRecordsRequest",
    "DeleteRecordsResult",
    "DeleteTopicResult",
    "FileToDelete",
    "FindBatchesRequest",
    "FindBatchesResult",
    "ListOffsetsRequest",
    "ListOffsetsResult",
    "LogInfo",
    "PartitionKey",
    "RetentionPolicy",
    "RetentionResult",
    "TimestampType",
    "TopicInfo",
    "TopicResult",
    "open_coordinator",
    "sqlite_path",
]

SQLITE_SCHEME = "sqlite://"
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def sqlite_path(url: str) -> Path:
    """The file of a `sqlite:///absolute/path.sqlite3` URL (extra leading slashes, as from
    f"sqlite:///{absolute_path}", collapse to one)."""
    rest = url[len(SQLITE_SCHEME) :]
    if not url.startswith(SQLITE_SCHEME) or not rest.startswith("/") or not rest.strip("/"):
        raise ValueError(f"unsupported coordinator URL: {url}")
    return Path("/" + rest.lstrip("/"))


def open_coordinator(url: str, *, pool_timeout_s: float | None = None) -> BatchCoordinator:
    """A coordinator for the URL, not yet started (call `start()`); creates the SQLite
    file's parent directories. `postgresql://` and `postgres://` URLs are libpq connection
    URIs, passed on as they are (nothing connects before `start()`); `pool_timeout_s`
    bounds their wait for a pooled connection (see `coordinator_pool_timeout_ms`)."""
    if url.startswith(SQLITE_SCHEME):
        from lakelog.coordinator.sqlite import SqliteBatchCoordinator

        path = sqlite_path(url)
        path.parent.mkdir(parents=True, exist_ok=True)
        return SqliteBatchCoordinator(path)
    if url.startswith(POSTGRES_SCHEMES):
        # Imported here so SQLite-only deployments never load psycopg.
        from lakelog.coordinator.postgres import PostgresBatchCoordinator

        if pool_timeout_s is None:
            return PostgresBatchCoordinator(url)
        return PostgresBatchCoordinator(url, pool_timeout_s=pool_timeout_s)
    raise ValueError(f"unsupported coordinator URL: {url}")
