"""Topic administration in PostgreSQL: create, delete, grow, configure and look up topics.
Each function runs inside a transaction its caller opened. Writers lock topic rows in id
order, then partition rows in (topic, partition) order, then file rows in id order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from psycopg.types.json import Jsonb

from lakelog.coordinator.interface import (
    AlterTopicConfigsRequest,
    CreatePartitionsRequest,
    CreateTopicRequest,
    CreateTopicResult,
    DeleteTopicResult,
    TopicInfo,
    TopicResult,
)
from lakelog.coordinator.postgres.release import FreedBytes, drop_topic
from lakelog.coordinator.postgres.rows import Conn, lock_topic_partitions, now_ms
from lakelog.coordinator.sqlite.topics import new_topic_id
from lakelog.coordinator.topic_rules import already_exists, invalid_create, not_more_partitions
from lakelog.errors import ErrorCode

_TOPIC_COLUMNS = "topic_uuid, name, num_partitions, replication_factor, configs"


def _info(row: tuple[Any, ...]) -> TopicInfo:
    return TopicInfo(
        topic_id=row[0],
        name=row[1],
        num_partitions=row[2],
        replication_factor=row[3],
        configs=dict(row[4]),
    )


async def _lock_topics(conn: Conn, names: Sequence[str], lock: bool) -> dict[str, list[Any]]:
    """name -> [row id, topic uuid, partitions, configs] of the named topics that exist,
    locked FOR UPDATE in id order when `lock`."""
    cursor = await conn.execute(
        "SELECT name, id, topic_uuid, num_partitions, configs FROM topics"
        " WHERE name = ANY(%s::text[]) ORDER BY id" + (" FOR UPDATE" if lock else ""),
        (list(dict.fromkeys(names)),),
    )
    return {row[0]: list(row[1:]) for row in await cursor.fetchall()}


async def create_topics(
    conn: Conn, requests: Sequence[CreateTopicRequest], validate_only: bool
) -> list[CreateTopicResult]:
    results: list[CreateTopicResult] = []
    existing = await _lock_topics(conn, [r.name for r in requests], lock=False)
    seen: set[str] = set()
    now = now_ms()
    for req in requests:
        refusal = invalid_create(req)
        if refusal is not None:
            results.append(refusal)
            continue
        exists = already_exists(req.name)
        if req.name in existing or req.name in seen:
            results.append(exists)
            continue
        seen.add(req.name)
        if validate_only:
            results.append(CreateTopicResult(req.name, ErrorCode.none))
            continue
        topic_id = new_topic_id()
        # Another broker may create the same name at the same moment: the unique index
        # decides, and the loser answers as if the name had been taken before.
        cursor = await conn.execute(
            "INSERT INTO topics (topic_uuid, name, num_partitions, replication_factor, configs,"
            " created_at) VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (name) DO NOTHING"
            " RETURNING id",
            (
                topic_id,
                req.name,
                req.num_partitions,
                req.replication_factor,
                Jsonb(dict(req.configs)),
                now,
            ),
        )
        row = await cursor.fetchone()
        if row is None:
            results.append(exists)
            continue
        await conn.execute(
            "INSERT INTO partitions (topic_id, partition)"
            " SELECT %s, p FROM generate_series(0, %s - 1) AS p",
            (row[0], req.num_partitions),
        )
        results.append(CreateTopicResult(req.name, ErrorCode.none, topic_id=topic_id))
    return results


async def delete_topics(conn: Conn, names: Sequence[str]) -> list[DeleteTopicResult]:
    topics = await _lock_topics(conn, names, lock=True)
    await lock_topic_partitions(conn, (row[0] for row in topics.values()))
    freed = FreedBytes()
    results: list[DeleteTopicResult] = []
    for name in names:
        row = topics.pop(name, None)
        if row is None:
            results.append(DeleteTopicResult(name, ErrorCode.unknown_topic_or_partition))
            continue
        await drop_topic(conn, freed, row[0])
        # As in Kafka, a deleted topic's committed offsets go with it: a topic re-created
        # under the same name starts without them.
        await conn.execute("DELETE FROM group_offsets WHERE topic = %s", (name,))
        results.append(DeleteTopicResult(name, ErrorCode.none, topic_id=row[1]))
    await freed.apply(conn, now_ms())
    return results


async def create_partitions(
    conn: Conn, requests: Sequence[CreatePartitionsRequest], validate_only: bool
) -> list[TopicResult]:
    topics = await _lock_topics(conn, [r.name for r in requests], lock=not validate_only)
    results: list[TopicResult] = []
    for req in requests:
        row = topics.get(req.name)
        if row is None:
            results.append(TopicResult(req.name, ErrorCode.unknown_topic_or_partition))
            continue
        topic_id, current = row[0], row[2]
        if req.new_total <= current:
            results.append(not_more_partitions(req.name, current, req.new_total))
            continue
        if not validate_only:
            await conn.execute(
                "INSERT INTO partitions (topic_id, partition)"
                " SELECT %s, p FROM generate_series(%s, %s - 1) AS p",
                (topic_id, current, req.new_total),
            )
            await conn.execute(
                "UPDATE topics SET num_partitions = %s WHERE id = %s", (req.new_total, topic_id)
            )
            row[2] = req.new_total
        results.append(TopicResult(req.name, ErrorCode.none))
    return results


async def get_topics(conn: Conn, names: Sequence[str] | None) -> list[TopicInfo]:
    if names is None:
        cursor = await conn.execute(f"SELECT {_TOPIC_COLUMNS} FROM topics ORDER BY name")
        return [_info(row) for row in await cursor.fetchall()]
    cursor = await conn.execute(
        f"SELECT {_TOPIC_COLUMNS} FROM topics WHERE name = ANY(%s::text[])", (list(names),)
    )
    by_name = {row[1]: _info(row) for row in await cursor.fetchall()}
    return [by_name[n] for n in dict.fromkeys(names) if n in by_name]


async def get_topics_by_id(conn: Conn, topic_ids: Sequence[UUID]) -> list[TopicInfo]:
    cursor = await conn.execute(
        f"SELECT {_TOPIC_COLUMNS} FROM topics WHERE topic_uuid = ANY(%s::uuid[])",
        (list(topic_ids),),
    )
    by_id = {row[0]: _info(row) for row in await cursor.fetchall()}
    return [by_id[t] for t in dict.fromkeys(topic_ids) if t in by_id]


async def alter_topic_configs(
    conn: Conn, requests: Sequence[AlterTopicConfigsRequest], validate_only: bool
) -> list[TopicResult]:
    topics = await _lock_topics(conn, [r.name for r in requests], lock=not validate_only)
    results: list[TopicResult] = []
    for req in requests:
        row = topics.get(req.name)
        if row is None:
            results.append(TopicResult(req.name, ErrorCode.unknown_topic_or_partition))
            continue
        configs: dict[str, str] = {} if req.replace else dict(row[3])
        configs.update(req.set_configs)
        for name in req.delete_configs:
            configs.pop(name, None)
        if not validate_only:
            await conn.execute(
                "UPDATE topics SET configs = %s WHERE id = %s", (Jsonb(configs), row[0])
            )
            row[3] = configs
        results.append(TopicResult(req.name, ErrorCode.none))
    return results
