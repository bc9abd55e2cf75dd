"""Share-group admin calls over the Kafka protocol (KIP-932): describe a share group and
its start offsets, alter and delete them. Each request goes to the group's coordinator."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from lakelog.admin.client import AdminClient
from lakelog.admin.groups import COORDINATOR_RETRIABLE
from lakelog.admin.results import Node, TopicPartition
from lakelog.admin.wire import KafkaError
from lakelog.util.errors import ErrorCode

SHARE_GROUP_DESCRIBE, DESCRIBE_OFFSETS, ALTER_OFFSETS, DELETE_OFFSETS = 77, 90, 91, 92


@dataclass(frozen=True, slots=True)
class ShareMember:
    member_id: str
    client_id: str
    client_host: str
    member_epoch: int
    assignment: dict[str, tuple[int, ...]]


@dataclass(frozen=True, slots=True)
class ShareGroupDescription:
    group_id: str
    state: str
    group_epoch: int
    coordinator: Node
    members: list[ShareMember] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ShareOffset:
    topic: str
    partition: int
    start_offset: int
    lag: int
    error: ErrorCode


def _raise(error: int, what: str) -> None:
    if error != ErrorCode.none:
        raise KafkaError(ErrorCode(error), what)


async def describe_share_group(client: AdminClient, group_id: str) -> ShareGroupDescription:
    async def op(c: AdminClient, node: Node) -> ShareGroupDescription:
        def make(m: ModuleType, _v: int) -> Any:
            return m.ShareGroupDescribeRequest(
                group_ids=(group_id,), include_authorized_operations=False
            )

        response, _ = await c._call(SHARE_GROUP_DESCRIBE, make)
        [g] = response.groups
        _raise(g.error_code, f"group {group_id}")
        members = [
            ShareMember(
                m.member_id,
                m.client_id,
                m.client_host,
                int(m.member_epoch),
                {t.topic_name: tuple(t.partitions) for t in m.assignment.topic_partitions},
            )
            for m in g.members
        ]
        return ShareGroupDescription(group_id, g.group_state, int(g.group_epoch), node, members)

    return await client._on_coordinator(group_id, op)


async def share_offsets(
    client: AdminClient, group_id: str, topics: Mapping[str, Sequence[int]] | None = None
) -> list[ShareOffset]:
    """Start offsets and lag; every partition the group has state for when `topics` is
    None."""

    async def op(c: AdminClient, _node: Node) -> list[ShareOffset]:
        def make(m: ModuleType, _v: int) -> Any:
            asked = None
            if topics is not None:
                asked = tuple(
                    m.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=tuple(ps))
                    for t, ps in topics.items()
                )
            return m.DescribeShareGroupOffsetsRequest(
                groups=(m.DescribeShareGroupOffsetsRequestGroup(group_id=group_id, topics=asked),)
            )

        response, _ = await c._call(DESCRIBE_OFFSETS, make)
        [g] = response.groups
        if g.error_code in COORDINATOR_RETRIABLE:
            raise KafkaError(ErrorCode(g.error_code), f"group {group_id}")
        _raise(g.error_code, f"group {group_id}")
        return [
            ShareOffset(
                t.topic_name,
                int(p.partition_index),
                int(p.start_offset),
                int(getattr(p, "lag", -1)),
                ErrorCode(p.error_code),
            )
            for t in g.topics
            for p in t.partitions
        ]

    return await client._on_coordinator(group_id, op)


async def alter_share_offsets(
    client: AdminClient, group_id: str, offsets: Mapping[TopicPartition, int]
) -> dict[TopicPartition, ErrorCode]:
    async def op(c: AdminClient, _node: Node) -> dict[TopicPartition, ErrorCode]:
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append((partition, offset))

        def make(m: ModuleType, _v: int) -> Any:
            return m.AlterShareGroupOffsetsRequest(
                group_id=group_id,
                topics=tuple(
                    m.AlterShareGroupOffsetsRequestTopic(
                        topic_name=t,
                        partitions=tuple(
                            m.AlterShareGroupOffsetsRequestPartition(
                                partition_index=p, start_offset=o
                            )
                            for p, o in ps
                        ),
                    )
                    for t, ps in by_topic.items()
                ),
            )

        response, _ = await c._call(ALTER_OFFSETS, make)
        if response.error_code in COORDINATOR_RETRIABLE:
            raise KafkaError(ErrorCode(response.error_code), f"group {group_id}")
        _raise(response.error_code, f"group {group_id}")
        return {
            (t.topic_name, int(p.partition_index)): ErrorCode(p.error_code)
            for t in response.responses
            for p in t.partitions
        }

    return await client._on_coordinator(group_id, op)


async def delete_share_offsets(
    client: AdminClient, group_id: str, topics: Sequence[str]
) -> dict[str, ErrorCode]:
    async def op(c: AdminClient, _node: Node) -> dict[str, ErrorCode]:
        def make(m: ModuleType, _v: int) -> Any:
            return m.DeleteShareGroupOffsetsRequest(
                group_id=group_id,
                topics=tuple(m.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics),
            )

        response, _ = await c._call(DELETE_OFFSETS, make)
        if response.error_code in COORDINATOR_RETRIABLE:
            raise KafkaError(ErrorCode(response.error_code), f"group {group_id}")
        _raise(response.error_code, f"group {group_id}")
        return {t.topic_name: ErrorCode(t.error_code) for t in response.responses}

    return await client._on_coordinator(group_id, op)
