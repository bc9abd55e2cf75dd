"""Group operations of the admin client: find a group's coordinator, list, describe and
delete groups, read and reset their committed offsets; each request goes to the group's
coordinator, looked up again while it moves."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from types import ModuleType
from typing import Any, Self, TypeVar

from lakelog.admin.connection import AdminConnection
from lakelog.admin.results import (
    GroupDescription,
    GroupMember,
    ListedGroup,
    Node,
    TopicPartition,
    decode_assignment,
)
from lakelog.admin.wire import (
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    FIND_COORDINATOR,
    GROUP_KEY_TYPE,
    LIST_GROUPS,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    KafkaError,
)
from lakelog.log.protocol.kio_build import build
from lakelog.util.errors import ErrorCode

COORDINATOR_RETRIABLE = frozenset(
    {
        ErrorCode.coordinator_not_available,
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_load_in_progress,
    }
)
"""Errors after which the coordinator is looked up again: it moved or is still loading."""
COORDINATOR_ATTEMPTS = 10
RETRY_BACKOFF_S = 0.2
T = TypeVar("T")


class GroupOperations(AdminConnection):
    async def find_coordinator(self, group_id: str) -> Node:
        """The broker that coordinates `group_id` (FindCoordinator, key type 0)."""

        def make(m: ModuleType, version: int) -> Any:
            if version >= 4:
                return m.FindCoordinatorRequest(
                    key_type=GROUP_KEY_TYPE, coordinator_keys=(group_id,)
                )
            return build(m.FindCoordinatorRequest, key=group_id, key_type=GROUP_KEY_TYPE)

        response, version = await self._call(FIND_COORDINATOR, make)
        if version >= 4:
            if not response.coordinators:
                raise KafkaError(ErrorCode.coordinator_not_available, f"group {group_id}")
            response = response.coordinators[0]
        if response.error_code != ErrorCode.none:
            raise KafkaError(
                response.error_code, getattr(response, "error_message", None) or f"group {group_id}"
            )
        return Node(int(response.node_id), response.host, int(response.port))

    async def _on_coordinator(self, group_id: str, op: Callable[[Self, Node], Awaitable[T]]) -> T:
        """Run `op` on the group's coordinator; look it up again while it moves or loads."""
        for attempt in range(1, COORDINATOR_ATTEMPTS + 1):
            try:
                node = await self.find_coordinator(group_id)
                return await op(await self.client_for(node), node)
            except KafkaError as exc:
                if exc.error not in COORDINATOR_RETRIABLE or attempt == COORDINATOR_ATTEMPTS:
                    raise
            await asyncio.sleep(RETRY_BACKOFF_S)
        raise AssertionError("unreachable")

    async def list_groups(self, states: Sequence[str] = ()) -> list[ListedGroup]:
        """Every group of the cluster, by id: each broker lists the groups it coordinates.
        `states` keeps groups in those states (case-insensitive); brokers older than
        ListGroups v4 cannot filter, so the groups are described here to learn their state."""
        found: dict[str, ListedGroup] = {}
        filter_here = False
        for node in await self.brokers() or [None]:
            client = self if node is None else await self.client_for(node)
            groups, filtered = await client._list_groups_here(states)
            filter_here |= bool(states) and not filtered
            for group in groups:
                found.setdefault(group.group_id, group)
        listed = sorted(found.values(), key=lambda g: g.group_id)
        if not filter_here:
            return listed
        wanted = {s.lower() for s in states}
        kept = []
        for group in listed:
            state = group.state
            if not state:
                try:
                    state = (await self.describe_group(group.group_id)).state
                except KafkaError:
                    continue  # deleted since it was listed
            if state.lower() in wanted:
                kept.append(ListedGroup(group.group_id, group.protocol_type, state))
        return kept

    async def _list_groups_here(self, states: Sequence[str]) -> tuple[list[ListedGroup], bool]:
        def make(m: ModuleType, _version: int) -> Any:
            return build(m.ListGroupsRequest, states_filter=tuple(states), types_filter=())

        response, version = await self._call(LIST_GROUPS, make)
        if response.error_code != ErrorCode.none:
            raise KafkaError(response.error_code, "ListGroups")
        groups = [
            ListedGroup(g.group_id, g.protocol_type, getattr(g, "group_state", ""))
            for g in response.groups
        ]
        return groups, version >= 4

    async def describe_group(self, group_id: str) -> GroupDescription:
        """DescribeGroups at the coordinator, with each consumer member's assignment decoded."""

        async def op(client: Self, node: Node) -> GroupDescription:
            def make(m: ModuleType, _version: int) -> Any:
                return build(
                    m.DescribeGroupsRequest, groups=(group_id,), include_authorized_operations=False
                )

            response, _ = await client._call(DESCRIBE_GROUPS, make)
            [group] = response.groups
            if group.error_code != ErrorCode.none:
                raise KafkaError(
                    group.error_code, getattr(group, "error_message", None) or f"group {group_id}"
                )
            consumer = group.protocol_type == "consumer"
            members = tuple(
                GroupMember(
                    m.member_id,
                    getattr(m, "group_instance_id", None),
                    m.client_id,
                    m.client_host,
                    _safe_assignment(m.member_assignment) if consumer else {},
                )
                for m in group.members
            )
            return GroupDescription(
                group.group_id,
                group.group_state,
                group.protocol_type,
                group.protocol_data,
                members,
                node,
            )

        return await self._on_coordinator(group_id, op)

    async def committed_offsets(
        self,
        group_id: str,
        partitions: Sequence[TopicPartition] | None = None,
    ) -> dict[TopicPartition, int]:
        """The group's committed offsets (OffsetFetch), for every partition it committed when
        `partitions` is None; partitions without a commit are left out."""
        asked = None if partitions is None else _by_topic(partitions)

        def make(m: ModuleType, version: int) -> Any:
            if version >= 8:
                topics = (
                    None
                    if asked is None
                    else tuple(
                        m.OffsetFetchRequestTopics(name=t, partition_indexes=ps)
                        for t, ps in asked.items()
                    )
                )
                group = build(
                    m.OffsetFetchRequestGroup,
                    group_id=group_id,
                    member_id=None,
                    member_epoch=-1,
                    topics=topics,
                )
                return build(m.OffsetFetchRequest, groups=(group,), require_stable=False)
            topics = (
                None
                if asked is None
                else tuple(
                    m.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
                    for t, ps in asked.items()
                )
            )
            return build(
                m.OffsetFetchRequest, group_id=group_id, topics=topics, require_stable=False
            )

        async def op(client: Self, _node: Node) -> dict[TopicPartition, int]:
            response, version = await client._call(OFFSET_FETCH, make)
            holder = response.groups[0] if version >= 8 else response
            if holder.error_code != ErrorCode.none:
                raise KafkaError(holder.error_code, f"group {group_id}")
            out = {}
            for topic in holder.topics:
                for p in topic.partitions:
                    if p.error_code != ErrorCode.none:
                        raise KafkaError(p.error_code, f"{topic.name}-{p.partition_index}")
                    if p.committed_offset >= 0:
                        out[(topic.name, int(p.partition_index))] = int(p.committed_offset)
            return out

        return await self._on_coordinator(group_id, op)

    async def commit_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, int],
    ) -> dict[TopicPartition, ErrorCode]:
        """OffsetCommit in the standalone form admin tools use (generation -1, no member
        id): coordinators accept it only while the group has no active member. Returns each
        partition's error code."""
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append((partition, offset))

        def make(m: ModuleType, _version: int) -> Any:
            topics = tuple(
                m.OffsetCommitRequestTopic(
                    name=topic,
                    partitions=tuple(
                        build(
                            m.OffsetCommitRequestPartition,
                            partition_index=p,
                            committed_offset=o,
                            committed_leader_epoch=-1,
                            committed_metadata="",
                        )
                        for p, o in parts
                    ),
                )
                for topic, parts in by_topic.items()
            )
            return build(
                m.OffsetCommitRequest,
                group_id=group_id,
                generation_id_or_member_epoch=-1,
                member_id="",
                group_instance_id=None,
                topics=topics,
            )

        async def op(client: Self, _node: Node) -> dict[TopicPartition, ErrorCode]:
            response, _ = await client._call(OFFSET_COMMIT, make)
            errors = {
                (t.name, int(p.partition_index)): p.error_code
                for t in response.topics
                for p in t.partitions
            }
            moved = next((e for e in errors.values() if e in COORDINATOR_RETRIABLE), None)
            if moved is not None:
                raise KafkaError(moved, f"group {group_id}")
            return errors

        return await self._on_coordinator(group_id, op)

    async def delete_groups(self, group_ids: Sequence[str]) -> dict[str, ErrorCode]:
        """DeleteGroups, each group at its coordinator; each group's error code, so one
        failure does not hide the others."""

        async def op(client: Self, _node: Node, group_id: str) -> ErrorCode:
            def make(m: ModuleType, _version: int) -> Any:
                return m.DeleteGroupsRequest(groups_names=(group_id,))

            response, _ = await client._call(DELETE_GROUPS, make)
            [result] = response.results
            if result.error_code in COORDINATOR_RETRIABLE:
                raise KafkaError(result.error_code, f"group {group_id}")
            return ErrorCode(result.error_code)

        out = {}
        for group_id in group_ids:
            try:
                out[group_id] = await self._on_coordinator(
                    group_id, lambda client, node, g=group_id: op(client, node, g)
                )
            except KafkaError as exc:
                out[group_id] = exc.error
        return out


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, tuple[int, ...]]:
    out: dict[str, list[int]] = {}
    for topic, partition in sorted(set(partitions)):
        out.setdefault(topic, []).append(partition)
    return {topic: tuple(parts) for topic, parts in out.items()}


def _safe_assignment(data: bytes | None) -> dict[str, tuple[int, ...]]:
    """A member whose assignment does not decode shows as assigned nothing, rather than
    making the whole group undescribable."""
    try:
        return decode_assignment(data)
    except ValueError:
        return {}
