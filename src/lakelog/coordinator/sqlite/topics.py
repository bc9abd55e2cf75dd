"""Topic administration in SQLite: create, delete, grow, configure and look up topics.
Each function runs inside a transaction its caller opened."""

from __future__ import annotations

import base64
import json
import sqlite3
import uuid
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from lakelog.coordinator.interface import (
    AlterTopicConfigsRequest,
    CreatePartitionsRequest,
    CreateTopicRequest,
    CreateTopicResult,
    DeleteTopicResult,
    TopicInfo,
    TopicResult,
)
from lakelog.coordinator.sqlite.release import drop_topic
from lakelog.coordinator.sqlite.rows import now_ms
from lakelog.coordinator.topic_rules import already_exists, invalid_create, not_more_partitions
from lakelog.errors import ErrorCode

_TOPIC_COLUMNS = "topic_uuid, name, num_partitions, replication_factor, configs"


def new_topic_id() -> UUID:
    """A random id Kafka tools accept: never zero, never the metadata topic's id
    (…0001), never one whose base64 form starts with '-' (Kafka's Uuid.randomUuid rule)."""
    while True:
        topic_id = uuid.uuid4()
        text = base64.urlsafe_b64encode(topic_id.bytes).decode()
        if topic_id.int > 1 and not text.startswith("-"):
            return topic_id


def _info(row: tuple[Any, ...]) -> TopicInfo:
    return TopicInfo(
        topic_id=UUID(row[0]),
        name=row[1],
        num_partitions=row[2],
        replication_factor=row[3],
        configs=json.loads(row[4]),
    )


def create_topics(
    conn: sqlite3.Connection, requests: Sequence[CreateTopicRequest], validate_only: bool
) -> list[CreateTopicResult]:
    results: list[CreateTopicResult] = []
    seen: set[str] = set()
    now = now_ms()
    for req in requests:
        refusal = invalid_create(req)
        if refusal is not None:
            results.append(refusal)
            continue
        taken = conn.execute("SELECT 1 FROM topics WHERE name = ?", (req.name,)).fetchone()
        if taken or req.name in seen:
            results.append(already_exists(req.name))
            continue
        seen.add(req.name)
        if validate_only:
            results.append(CreateTopicResult(req.name, ErrorCode.none))
            continue
        topic_id = new_topic_id()
        cursor = conn.execute(
            "INSERT INTO topics (topic_uuid, name, num_partitions, replication_factor, configs,"
            " created_at) VALUES (?, ?, ?, ?, ?, ?)",
            (
                str(topic_id),
                req.name,
                req.num_partitions,
                req.replication_factor,
                json.dumps(dict(req.configs), sort_keys=True),
                now,
            ),
        )
        conn.executemany(
            "INSERT INTO partitions (topic_id, partition) VALUES (?, ?)",
            [(cursor.lastrowid, p) for p in range(req.num_partitions)],
        )
        results.append(CreateTopicResult(req.name, ErrorCode.none, topic_id=topic_id))
    return results


def delete_topics(conn: sqlite3.Connection, names: Sequence[str]) -> list[DeleteTopicResult]:
    results: list[DeleteTopicResult] = []
    now = now_ms()
    for name in names:
        row = conn.execute("SELECT id, topic_uuid FROM topics WHERE name = ?", (name,)).fetchone()
        if row is None:
            results.append(DeleteTopicResult(name, ErrorCode.unknown_topic_or_partition))
            continue
        drop_topic(conn, row[0], now)
        # As in Kafka, a deleted topic's committed offsets go with it: a topic re-created
        # under the same name starts without them.
        conn.execute("DELETE FROM group_offsets WHERE topic = ?", (name,))
        results.append(DeleteTopicResult(name, ErrorCode.none, topic_id=UUID(row[1])))
    return results


def create_partitions(
    conn: sqlite3.Connection, requests: Sequence[CreatePartitionsRequest], validate_only: bool
) -> list[TopicResult]:
    results: list[TopicResult] = []
    for req in requests:
        row = conn.execute(
            "SELECT id, num_partitions FROM topics WHERE name = ?", (req.name,)
        ).fetchone()
        if row is None:
            results.append(TopicResult(req.name, ErrorCode.unknown_topic_or_partition))
            continue
        topic_id, current = row
        if req.new_total <= current:
            results.append(not_more_partitions(req.name, current, req.new_total))
            continue
        if not validate_only:
            conn.executemany(
                "INSERT INTO partitions (topic_id, partition) VALUES (?, ?)",
                [(topic_id, p) for p in range(current, req.new_total)],
            )
            conn.execute(
                "UPDATE topics SET num_partitions = ? WHERE id = ?", (req.new_total, topic_id)
            )
        results.append(TopicResult(req.name, ErrorCode.none))
    return results


def get_topics(conn: sqlite3.Connection, names: Sequence[str] | None) -> list[TopicInfo]:
    if names is None:
        rows = conn.execute(f"SELECT {_TOPIC_COLUMNS} FROM topics ORDER BY name").fetchall()
        return [_info(row) for row in rows]
    rows = conn.execute(
        f"SELECT {_TOPIC_COLUMNS} FROM topics WHERE name IN (SELECT value FROM json_each(?))",
        (json.dumps(list(names)),),
    ).fetchall()
    by_name = {row[1]: _info(row) for row in rows}
    return [by_name[n] for n in dict.fromkeys(names) if n in by_name]


def get_topics_by_id(conn: sqlite3.Connection, topic_ids: Sequence[UUID]) -> list[TopicInfo]:
    wanted = [str(t) for t in topic_ids]
    rows = conn.execute(
        f"SELECT {_TOPIC_COLUMNS} FROM topics WHERE topic_uuid IN (SELECT value FROM json_each(?))",
        (json.dumps(wanted),),
    ).fetchall()
    by_id = {row[0]: _info(row) for row in rows}
    return [by_id[t] for t in dict.fromkeys(wanted) if t in by_id]


def alter_topic_configs(
    conn: sqlite3.Connection, requests: Sequence[AlterTopicConfigsRequest], validate_only: bool
) -> list[TopicResult]:
    results: list[TopicResult] = []
    for req in requests:
        row = conn.execute("SELECT id, configs FROM topics WHERE name = ?", (req.name,)).fetchone()
        if row is None:
            results.append(TopicResult(req.name, ErrorCode.unknown_topic_or_partition))
            continue
        configs: dict[str, str] = {} if req.replace else json.loads(row[1])
        configs.update(req.set_configs)
        for name in req.delete_configs:
            configs.pop(name, None)
        if not validate_only:
            conn.execute(
                "UPDATE topics SET configs = ? WHERE id = ?",
                (json.dumps(configs, sort_keys=True), row[0]),
            )
        results.append(TopicResult(req.name, ErrorCode.none))
    return results
