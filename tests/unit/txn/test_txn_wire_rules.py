"""Pure rules of the transaction APIs: error codes per request version, ListTransactions
filters and TxnOffsetCommit's group check."""

from __future__ import annotations

import pytest

from lakelog.coordinator.txn_types import TransactionInfo, TxnState
from lakelog.groups.group import Group, GroupConfig, Member
from lakelog.server.txn.group_check import check_txn_commit
from lakelog.server.txn.listing import InvalidPattern, make_filter, matches, unknown_states
from lakelog.server.txn.wire_errors import (
    ADD_OFFSETS_TO_TXN,
    ADD_PARTITIONS_TO_TXN,
    END_TXN,
    INIT_PRODUCER_ID,
    PRODUCE,
    TXN_OFFSET_COMMIT,
    for_version,
)
from lakelog.util.errors import ErrorCode

FENCED, OLD_EPOCH = ErrorCode.producer_fenced, ErrorCode.invalid_producer_epoch


@pytest.mark.parametrize(
    ("api", "last_old", "first_new"),
    [
        (INIT_PRODUCER_ID, 3, 4),
        (ADD_PARTITIONS_TO_TXN, 1, 2),
        (ADD_OFFSETS_TO_TXN, 1, 2),
        (END_TXN, 1, 2),
    ],
)
def test_producer_fenced_only_from_the_version_that_knows_it(
    api: int, last_old: int, first_new: int
) -> None:
    assert for_version(FENCED, api, last_old) == OLD_EPOCH
    assert for_version(FENCED, api, first_new) == FENCED
    assert for_version(ErrorCode.invalid_txn_state, api, 0) == ErrorCode.invalid_txn_state


def test_produce_and_txn_offset_commit_never_carry_producer_fenced() -> None:
    for api in (PRODUCE, TXN_OFFSET_COMMIT):
        assert for_version(FENCED, api, 10) == OLD_EPOCH
        assert for_version(ErrorCode.none, api, 10) == ErrorCode.none


def _info(tid: str, state: TxnState, pid: int = 1, start: int = -1) -> TransactionInfo:
    return TransactionInfo(tid, state, pid, 0, 60_000, start)


def test_list_filters_combine() -> None:
    ongoing = _info("orders-1", TxnState.ONGOING, pid=7, start=1_000)
    empty = _info("orders-2", TxnState.EMPTY, pid=8)
    everything = make_filter([], [])
    assert matches(ongoing, everything, 2_000) and matches(empty, everything, 2_000)
    by_state = make_filter(["Ongoing"], [])
    assert matches(ongoing, by_state, 0) and not matches(empty, by_state, 0)
    by_pid = make_filter([], [8])
    assert not matches(ongoing, by_pid, 0) and matches(empty, by_pid, 0)
    longer_than_500 = make_filter([], [], duration_ms=500)
    assert matches(ongoing, longer_than_500, 1_501)
    assert not matches(ongoing, longer_than_500, 1_500)
    assert not matches(empty, longer_than_500, 10**12)  # not running at all
    pattern = make_filter([], [], pattern="orders-[0-9]")
    assert matches(ongoing, pattern, 0)
    assert not matches(_info("orders-12", TxnState.EMPTY), pattern, 0)  # whole id must match
    assert matches(empty, make_filter([], [], pattern=""), 0)  # "" is no filter


def test_unknown_states_are_reported_and_match_nothing() -> None:
    assert unknown_states(["Ongoing", "Bogus", "PrepareCommit", "Bogus", "x"]) == ["Bogus", "x"]
    only_unknown = make_filter(["Bogus"], [])
    assert not matches(_info("a", TxnState.ONGOING), only_unknown, 0)


def test_bad_patterns_are_refused() -> None:
    with pytest.raises(InvalidPattern):
        make_filter([], [], pattern="(unclosed")
    with pytest.raises(InvalidPattern):
        make_filter([], [], pattern="a" * 1001)


def _group(generation: int = 3) -> Group:
    group = Group("g", GroupConfig(0.0, 1000, 60_000), generation=generation)
    for member_id, instance in (("m1", None), ("m2", "static-2")):
        group.members[member_id] = Member(
            member_id, instance, "client", "/127.0.0.1", 10_000, 10_000, [("range", b"")], b""
        )
    group.static["static-2"] = "m2"
    return group


def test_txn_commit_group_check_enforces_only_what_was_sent() -> None:
    group = _group()
    assert check_txn_commit(group, 3, "m1", None) == ErrorCode.none
    assert check_txn_commit(group, -1, "", None) == ErrorCode.none
    assert check_txn_commit(group, 4, "m1", None) == ErrorCode.illegal_generation
    assert check_txn_commit(group, 4, "", None) == ErrorCode.illegal_generation
    assert check_txn_commit(group, 3, "gone", None) == ErrorCode.unknown_member_id
    assert check_txn_commit(group, 3, "m1", "static-2") == ErrorCode.fenced_instance_id
    assert check_txn_commit(group, 3, "m2", "static-2") == ErrorCode.none


def test_txn_commit_to_a_group_without_live_state() -> None:
    assert check_txn_commit(None, -1, "", None) == ErrorCode.none
    assert check_txn_commit(None, 0, "", None) == ErrorCode.none
    assert check_txn_commit(None, 1, "", None) == ErrorCode.illegal_generation
    assert check_txn_commit(None, -1, "m1", None) == ErrorCode.unknown_member_id
