"""The answers every coordinator gives to impossible topic changes, in Kafka's words, so
SQLite and PostgreSQL refuse the same requests the same way."""

from __future__ import annotations

from lakelog.coordinator.topic_types import CreateTopicRequest, CreateTopicResult, TopicResult
from lakelog.util.errors import ErrorCode


def invalid_create(req: CreateTopicRequest) -> CreateTopicResult | None:
    """The refusal for a request no database state can make valid, or None."""
    if req.num_partitions < 1:
        return CreateTopicResult(
            req.name, ErrorCode.invalid_partitions, message="partitions must be >= 1"
        )
    if req.replication_factor < 1:
        return CreateTopicResult(
            req.name,
            ErrorCode.invalid_replication_factor,
            message="replication factor must be >= 1",
        )
    return None


def already_exists(name: str) -> CreateTopicResult:
    return CreateTopicResult(
        name, ErrorCode.topic_already_exists, message=f"Topic '{name}' already exists."
    )


def not_more_partitions(name: str, current: int, requested: int) -> TopicResult:
    return TopicResult(
        name,
        ErrorCode.invalid_partitions,
        message=f"Topic currently has {current} partitions, which is higher than"
        f" or equal to the requested {requested}.",
    )
