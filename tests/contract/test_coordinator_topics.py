"""Topic administration: create, delete, grow, configure, look up."""

from __future__ import annotations

import uuid

from contract_support import batch, commit, log_info, new_topic

from lakelog.coordinator import (
    AlterTopicConfigsRequest,
    BatchCoordinator,
    CreatePartitionsRequest,
    CreateTopicRequest,
)
from lakelog.util.errors import ErrorCode


async def test_create_and_get_topics(coordinator: BatchCoordinator) -> None:
    results = await coordinator.create_topics(
        [
            CreateTopicRequest("orders", 3, 3, {"retention.ms": "1000"}),
            CreateTopicRequest("events", 1, 1),
        ]
    )
    assert [r.error for r in results] == [ErrorCode.none, ErrorCode.none]
    assert results[0].topic_id and results[1].topic_id
    assert results[0].topic_id != results[1].topic_id

    everything = await coordinator.get_topics()
    assert [t.name for t in everything] == ["events", "orders"]
    [orders] = await coordinator.get_topics(["orders", "missing"])
    assert orders.topic_id == results[0].topic_id
    assert orders.num_partitions == 3
    assert orders.replication_factor == 3
    assert dict(orders.configs) == {"retention.ms": "1000"}
    by_id = await coordinator.get_topics_by_id([results[1].topic_id, uuid.uuid4()])
    assert [t.name for t in by_id] == ["events"]
    for partition in range(3):
        info = await log_info(coordinator, orders.topic_id, partition)
        assert (info.error, info.log_start_offset, info.high_watermark, info.byte_size) == (
            ErrorCode.none,
            0,
            0,
            0,
        )


async def test_create_topic_errors(coordinator: BatchCoordinator) -> None:
    await new_topic(coordinator, name="taken")
    results = await coordinator.create_topics(
        [
            CreateTopicRequest("taken", 1, 1),
            CreateTopicRequest("zero", 0, 1),
            CreateTopicRequest("no-replicas", 1, 0),
            CreateTopicRequest("twice", 1, 1),
            CreateTopicRequest("twice", 1, 1),
        ]
    )
    assert [r.error for r in results] == [
        ErrorCode.topic_already_exists,
        ErrorCode.invalid_partitions,
        ErrorCode.invalid_replication_factor,
        ErrorCode.none,
        ErrorCode.topic_already_exists,
    ]
    assert [t.name for t in await coordinator.get_topics()] == ["taken", "twice"]


async def test_validate_only_creates_nothing(coordinator: BatchCoordinator) -> None:
    [result] = await coordinator.create_topics([CreateTopicRequest("t", 2, 1)], validate_only=True)
    assert result.error == ErrorCode.none
    assert await coordinator.get_topics() == []


async def test_delete_topics(coordinator: BatchCoordinator) -> None:
    topic_id = await new_topic(coordinator, name="doomed")
    await commit(coordinator, [batch(topic_id)])
    results = await coordinator.delete_topics(["doomed", "missing"])
    assert [(r.error, r.topic_id) for r in results] == [
        (ErrorCode.none, topic_id),
        (ErrorCode.unknown_topic_or_partition, None),
    ]
    assert await coordinator.get_topics() == []
    assert (await log_info(coordinator, topic_id)).error == ErrorCode.unknown_topic_or_partition
    [late] = await commit(coordinator, [batch(topic_id)])
    assert late.error == ErrorCode.unknown_topic_or_partition

    # The name is free again, with a new id and an empty log.
    again = await new_topic(coordinator, name="doomed")
    assert again != topic_id
    assert (await log_info(coordinator, again)).high_watermark == 0


async def test_create_partitions(coordinator: BatchCoordinator) -> None:
    topic_id = await new_topic(coordinator, partitions=2, name="grow")
    results = await coordinator.create_partitions(
        [
            CreatePartitionsRequest("grow", 2),
            CreatePartitionsRequest("grow", 1),
            CreatePartitionsRequest("missing", 5),
        ]
    )
    assert [r.error for r in results] == [
        ErrorCode.invalid_partitions,
        ErrorCode.invalid_partitions,
        ErrorCode.unknown_topic_or_partition,
    ]
    [checked] = await coordinator.create_partitions(
        [CreatePartitionsRequest("grow", 4)], validate_only=True
    )
    assert checked.error == ErrorCode.none
    assert (await coordinator.get_topics(["grow"]))[0].num_partitions == 2
    assert (await log_info(coordinator, topic_id, 2)).error == ErrorCode.unknown_topic_or_partition

    [grown] = await coordinator.create_partitions([CreatePartitionsRequest("grow", 4)])
    assert grown.error == ErrorCode.none
    assert (await coordinator.get_topics(["grow"]))[0].num_partitions == 4
    [result] = await commit(coordinator, [batch(topic_id, 3, records=2)])
    assert (result.error, result.base_offset) == (ErrorCode.none, 0)
    assert (await log_info(coordinator, topic_id, 3)).high_watermark == 2


async def test_alter_topic_configs(coordinator: BatchCoordinator) -> None:
    await new_topic(coordinator, name="cfg", configs={"a": "1", "b": "2"})

    async def configs() -> dict[str, str]:
        return dict((await coordinator.get_topics(["cfg"]))[0].configs)

    [r] = await coordinator.alter_topic_configs(
        [AlterTopicConfigsRequest("cfg", {"b": "3", "c": "4"}, ["a"])]
    )
    assert r.error == ErrorCode.none
    assert await configs() == {"b": "3", "c": "4"}

    [r] = await coordinator.alter_topic_configs(
        [AlterTopicConfigsRequest("cfg", {"z": "9"})], validate_only=True
    )
    assert r.error == ErrorCode.none
    assert await configs() == {"b": "3", "c": "4"}

    [r] = await coordinator.alter_topic_configs(
        [AlterTopicConfigsRequest("cfg", {"z": "9"}, replace=True)]
    )
    assert await configs() == {"z": "9"}

    [r] = await coordinator.alter_topic_configs([AlterTopicConfigsRequest("missing", {})])
    assert r.error == ErrorCode.unknown_topic_or_partition
