"""Topic administration: create, delete, grow, configure and look up topics. Writers lock
topic rows in id order, then partition rows in (topic, partition) order, then file rows
in id order (PostgreSQL; SQLite's one writer needs no row locks)."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from lakelog.coordinator.engine import Session
from lakelog.coordinator.offsets_topic_records import offset_tombstones
from lakelog.coordinator.ops import offsets_topic
from lakelog.coordinator.ops.release import FreedBytes, drop_topic
from lakelog.coordinator.ops.rows import lock_topic_partitions, now_ms
from lakelog.coordinator.topic_rules import already_exists, invalid_create, not_more_partitions
from lakelog.coordinator.topic_types import (
    AlterTopicConfigsRequest,
    CreatePartitionsRequest,
    CreateTopicRequest,
    CreateTopicResult,
    DeleteTopicResult,
    TopicInfo,
    TopicResult,
)
from lakelog.util.errors import ErrorCode

_TOPIC_COLUMNS = "topic_uuid, name, num_partitions, replication_factor, configs"


def new_topic_id() -> UUID:
    """A random id Kafka tools accept: never zero, never the metadata topic's id
    (…0001), never one whose base64 form starts with '-' (Kafka's Uuid.randomUuid rule)."""
    while True:
        topic_id = uuid.uuid4()
        text = base64.urlsafe_b64encode(topic_id.bytes).decode()
        if topic_id.int > 1 and not text.startswith("-"):
            return topic_id


def _info(s: Session, row: tuple[Any, ...]) -> TopicInfo:
    return TopicInfo(
        topic_id=s.dialect.to_uuid(row[0]),
        name=row[1],
        num_partitions=row[2],
        replication_factor=row[3],
        configs=s.dialect.from_json(row[4]),
    )


async def _lock_topics(s: Session, names: Sequence[str], lock: bool) -> dict[str, list[Any]]:
    """name -> [row id, topic uuid, partitions, configs] of the named topics that exist,
    locked FOR UPDATE in id order when `lock`."""
    keyset, params = s.dialect.keyset(
        "k", (("name", "text"),), [(n,) for n in dict.fromkeys(names)]
    )
    rows = await s.fetchall(
        "SELECT name, id, topic_uuid, num_partitions, configs FROM topics"
        f" WHERE name IN (SELECT k.name FROM {keyset}) ORDER BY id"
        + (s.dialect.for_update if lock else ""),
        params,
    )
    return {row[0]: list(row[1:]) for row in rows}


async def _add_partitions(s: Session, topic_id: int, first: int, end: int) -> None:
    keyset, params = s.dialect.keyset("k", (("p", "int"),), [(p,) for p in range(first, end)])
    await s.execute(
        f"INSERT INTO partitions (topic_id, partition) SELECT ?, k.p FROM {keyset}",
        [topic_id, *params],
    )


async def create_topics(
    s: Session, requests: Sequence[CreateTopicRequest], validate_only: bool
) -> list[CreateTopicResult]:
    results: list[CreateTopicResult] = []
    existing = await _lock_topics(s, [r.name for r in requests], lock=False)
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
        row = await s.fetchone(
            "INSERT INTO topics (topic_uuid, name, num_partitions, replication_factor, configs,"
            " created_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO NOTHING"
            " RETURNING id",
            (
                s.dialect.uuid(topic_id),
                req.name,
                req.num_partitions,
                req.replication_factor,
                s.dialect.json(dict(req.configs)),
                now,
            ),
        )
        if row is None:
            results.append(exists)
            continue
        await _add_partitions(s, row[0], 0, req.num_partitions)
        results.append(CreateTopicResult(req.name, ErrorCode.none, topic_id=topic_id))
    return results


async def delete_topics(s: Session, names: Sequence[str]) -> list[DeleteTopicResult]:
    topics = await _lock_topics(s, names, lock=True)
    await lock_topic_partitions(s, (row[0] for row in topics.values()))
    freed = FreedBytes()
    results: list[DeleteTopicResult] = []
    for name in names:
        row = topics.pop(name, None)
        if row is None:
            results.append(DeleteTopicResult(name, ErrorCode.unknown_topic_or_partition))
            continue
        await drop_topic(s, freed, row[0])
        # As in Kafka, a deleted topic's committed offsets go with it: a topic re-created
        # under the same name starts without them.
        gone = await s.fetchall(
            "DELETE FROM group_offsets WHERE topic = ? RETURNING group_id, partition", (name,)
        )
        await offsets_topic.append(
            s, offset_tombstones(sorted((g, name, p) for g, p in gone), now_ms())
        )
        results.append(DeleteTopicResult(name, ErrorCode.none, topic_id=s.dialect.to_uuid(row[1])))
    await freed.apply(s, now_ms())
    return results


async def create_partitions(
    s: Session, requests: Sequence[CreatePartitionsRequest], validate_only: bool
) -> list[TopicResult]:
    topics = await _lock_topics(s, [r.name for r in requests], lock=not validate_only)
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
            await _add_partitions(s, topic_id, current, req.new_total)
            await s.execute(
                "UPDATE topics SET num_partitions = ? WHERE id = ?", (req.new_total, topic_id)
            )
            row[2] = req.new_total
        results.append(TopicResult(req.name, ErrorCode.none))
    return results


async def get_topics(s: Session, names: Sequence[str] | None) -> list[TopicInfo]:
    if names is None:
        rows = await s.fetchall(f"SELECT {_TOPIC_COLUMNS} FROM topics ORDER BY name")
        return [_info(s, row) for row in rows]
    keyset, params = s.dialect.keyset("k", (("name", "text"),), [(n,) for n in names])
    rows = await s.fetchall(
        f"SELECT {_TOPIC_COLUMNS} FROM topics WHERE name IN (SELECT k.name FROM {keyset})",
        params,
    )
    by_name = {row[1]: _info(s, row) for row in rows}
    return [by_name[n] for n in dict.fromkeys(names) if n in by_name]


async def get_topics_by_id(s: Session, topic_ids: Sequence[UUID]) -> list[TopicInfo]:
    d = s.dialect
    keyset, params = d.keyset("k", (("id", "uuid"),), [(d.uuid(t),) for t in topic_ids])
    rows = await s.fetchall(
        f"SELECT {_TOPIC_COLUMNS} FROM topics WHERE topic_uuid IN (SELECT k.id FROM {keyset})",
        params,
    )
    by_id = {info.topic_id: info for info in (_info(s, row) for row in rows)}
    return [by_id[t] for t in dict.fromkeys(topic_ids) if t in by_id]


async def alter_topic_configs(
    s: Session, requests: Sequence[AlterTopicConfigsRequest], validate_only: bool
) -> list[TopicResult]:
    topics = await _lock_topics(s, [r.name for r in requests], lock=not validate_only)
    results: list[TopicResult] = []
    for req in requests:
        row = topics.get(req.name)
        if row is None:
            results.append(TopicResult(req.name, ErrorCode.unknown_topic_or_partition))
            continue
        configs: dict[str, str] = {} if req.replace else s.dialect.from_json(row[3])
        configs.update(req.set_configs)
        for name in req.delete_configs:
            configs.pop(name, None)
        if not validate_only:
            await s.execute(
                "UPDATE topics SET configs = ? WHERE id = ?", (s.dialect.json(configs), row[0])
            )
            row[3] = configs
        results.append(TopicResult(req.name, ErrorCode.none))
    return results
