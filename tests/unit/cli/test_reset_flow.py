"""The reset-offsets flow against a fake client: the state check, the dry run, and a commit
the coordinator refuses because a member joined after the check."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from lakelog.admin.group_offsets import ResetMode, ResetSpec
from lakelog.admin.results import (
    GroupDescription,
    ListedOffset,
    Node,
    PartitionDescription,
    TopicDescription,
)
from lakelog.admin.wire import EARLIEST, LATEST, KafkaError
from lakelog.cli.groups import GroupActiveError, _reset
from lakelog.util.errors import ErrorCode

TP = tuple[str, int]


class FakeClient:
    def __init__(self, state: str = "Empty", commit_error: ErrorCode = ErrorCode.none) -> None:
        self.state = state
        self.commit_error = commit_error
        self.commits: list[dict[TP, int]] = []

    async def describe_group(self, group_id: str) -> GroupDescription:
        if self.state == "missing":
            raise KafkaError(ErrorCode.group_id_not_found)
        return GroupDescription(group_id, self.state, "consumer", "", (), Node(0, "h", 1))

    async def committed_offsets(self, group_id: str) -> dict[TP, int]:
        return {("t", 0): 5}

    async def describe_topics(self, names: Sequence[str]) -> list[TopicDescription]:
        return [
            TopicDescription(
                "t", None, tuple(PartitionDescription(p, 0, (0,), (0,)) for p in range(2))
            )
        ]

    async def list_offsets(self, asks: Mapping[TP, int]) -> dict[TP, ListedOffset]:
        answers = {EARLIEST: 2, LATEST: 9}
        return {tp: ListedOffset(answers.get(ts, 4), -1) for tp, ts in asks.items()}

    async def commit_offsets(self, group_id: str, offsets: Mapping[TP, int]) -> dict[TP, Any]:
        self.commits.append(dict(offsets))
        return dict.fromkeys(offsets, self.commit_error)


async def test_dry_run_commits_nothing() -> None:
    client = FakeClient()
    result = await _reset(
        client,
        "g",
        ["t"],
        False,
        ResetSpec(ResetMode.EARLIEST),  # type: ignore[arg-type]
        execute=False,
    )
    assert [(p.partition, p.offset) for p in result.plan] == [(0, 2), (1, 2)]
    assert result.previous == {("t", 0): 5}
    assert client.commits == []


async def test_execute_commits_the_plan() -> None:
    client = FakeClient(state="missing")  # a group that never existed can be seeded
    await _reset(
        client,
        "g",
        ["t:1"],
        False,
        ResetSpec(ResetMode.DATETIME, 1),  # type: ignore[arg-type]
        execute=True,
    )
    assert client.commits == [{("t", 1): 4}]


async def test_an_active_group_is_refused_before_planning() -> None:
    client = FakeClient(state="Stable")
    with pytest.raises(GroupActiveError, match="current state is Stable"):
        await _reset(client, "g", [], True, ResetSpec(ResetMode.LATEST), execute=True)  # type: ignore[arg-type]
    assert client.commits == []


async def test_a_member_joining_after_the_check_is_reported() -> None:
    client = FakeClient(commit_error=ErrorCode.unknown_member_id)
    with pytest.raises(GroupActiveError, match="UNKNOWN_MEMBER_ID"):
        await _reset(client, "g", [], True, ResetSpec(ResetMode.LATEST), execute=True)  # type: ignore[arg-type]


async def test_other_commit_errors_name_the_partitions() -> None:
    client = FakeClient(commit_error=ErrorCode.unknown_topic_or_partition)
    with pytest.raises(KafkaError, match="t-0: UNKNOWN_TOPIC_OR_PARTITION"):
        await _reset(client, "g", [], True, ResetSpec(ResetMode.LATEST), execute=True)  # type: ignore[arg-type]
