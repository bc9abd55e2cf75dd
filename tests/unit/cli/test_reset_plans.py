"""Reset-offset planning: each mode, clamping to the log, and which partitions it touches."""

from __future__ import annotations

import datetime

import pytest

from lakelog.admin.group_offsets import (
    PartitionOffsets,
    PlanError,
    ResetMode,
    ResetSpec,
    canonical_state,
    clamp,
    parse_datetime,
    parse_topic_arg,
    plan_reset,
    select_partitions,
)

LOGS = {
    ("a", 0): PartitionOffsets(log_start=5, log_end=50, committed=20, at_time=30),
    ("a", 1): PartitionOffsets(log_start=0, log_end=10, committed=None, at_time=None),
    ("b", 0): PartitionOffsets(log_start=0, log_end=0, committed=0, at_time=-1),
}


def offsets(spec: ResetSpec, logs: dict = LOGS) -> dict[tuple[str, int], int]:  # type: ignore[type-arg]
    return {(p.topic, p.partition): p.offset for p in plan_reset(spec, logs)}


def test_to_earliest_and_latest() -> None:
    assert offsets(ResetSpec(ResetMode.EARLIEST)) == {("a", 0): 5, ("a", 1): 0, ("b", 0): 0}
    assert offsets(ResetSpec(ResetMode.LATEST)) == {("a", 0): 50, ("a", 1): 10, ("b", 0): 0}


def test_to_offset_is_clamped_to_the_log() -> None:
    plan = plan_reset(ResetSpec(ResetMode.OFFSET, 7), LOGS)
    assert [(p.topic, p.partition, p.offset, p.requested, p.clamped) for p in plan] == [
        ("a", 0, 7, 7, False),
        ("a", 1, 7, 7, False),
        ("b", 0, 0, 7, True),
    ]
    assert offsets(ResetSpec(ResetMode.OFFSET, 2)) == {("a", 0): 5, ("a", 1): 2, ("b", 0): 0}
    assert offsets(ResetSpec(ResetMode.OFFSET, -3)) == {("a", 0): 5, ("a", 1): 0, ("b", 0): 0}


def test_to_datetime_uses_the_log_end_when_no_record_is_that_late() -> None:
    assert offsets(ResetSpec(ResetMode.DATETIME, 123)) == {
        ("a", 0): 30,
        ("a", 1): 10,
        ("b", 0): 0,
    }


def test_shift_by_moves_the_committed_offset_within_the_log() -> None:
    logs = {tp: p for tp, p in LOGS.items() if p.committed is not None}
    assert offsets(ResetSpec(ResetMode.SHIFT, -3), logs) == {("a", 0): 17, ("b", 0): 0}
    assert offsets(ResetSpec(ResetMode.SHIFT, 100), logs) == {("a", 0): 50, ("b", 0): 0}
    assert offsets(ResetSpec(ResetMode.SHIFT, -100), logs) == {("a", 0): 5, ("b", 0): 0}


def test_shift_by_refuses_a_partition_without_a_commit() -> None:
    with pytest.raises(PlanError, match="a-1"):
        plan_reset(ResetSpec(ResetMode.SHIFT, 1), LOGS)


@pytest.mark.parametrize(("offset", "expected"), [(-1, 3), (3, 3), (4, 4), (9, 9), (10, 9)])
def test_clamp(offset: int, expected: int) -> None:
    assert clamp(offset, 3, 9) == expected


def test_parse_topic_arg() -> None:
    assert parse_topic_arg("orders") == ("orders", None)
    assert parse_topic_arg("orders:2,0,2") == ("orders", (0, 2))
    for bad in ("orders:x", "orders:", ":1"):
        with pytest.raises(PlanError):
            parse_topic_arg(bad)


def test_select_partitions() -> None:
    counts = {"a": 3, "b": 1}
    assert select_partitions(["a"], False, counts, []) == [("a", 0), ("a", 1), ("a", 2)]
    assert select_partitions(["a:2", "b", "a:0"], False, counts, []) == [
        ("a", 0),
        ("a", 2),
        ("b", 0),
    ]
    committed = [("z", 1), ("a", 0), ("z", 0)]
    assert select_partitions([], True, counts, committed) == [("a", 0), ("z", 0), ("z", 1)]
    with pytest.raises(PlanError, match="no partition 3"):
        select_partitions(["a:3"], False, counts, [])
    with pytest.raises(PlanError, match="does not exist"):
        select_partitions(["c"], False, counts, [])


def test_parse_datetime() -> None:
    assert parse_datetime("2024-03-01T12:00:00Z") == 1709294400000
    assert parse_datetime("2024-03-01T12:00:00.250+01:00") == 1709290800250
    naive = datetime.datetime(2024, 3, 1, 12, 0).astimezone()
    assert parse_datetime("2024-03-01T12:00:00") == int(naive.timestamp() * 1000)
    with pytest.raises(PlanError):
        parse_datetime("yesterday")


def test_canonical_state() -> None:
    assert canonical_state("stable") == "Stable"
    assert canonical_state(" PREPARINGREBALANCE ") == "PreparingRebalance"
    assert canonical_state("SomethingNew") == "SomethingNew"
