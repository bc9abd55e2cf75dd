"""Share sessions (epochs like incremental fetch sessions) and share-group membership."""

from __future__ import annotations

import uuid

from lakelog.groups.share.groups import Heartbeat, ShareGroups
from lakelog.groups.share.sessions import ShareSessions
from lakelog.util.errors import ErrorCode

T = uuid.UUID(int=7)


def test_session_epochs() -> None:
    sessions = ShareSessions(limit=2)
    assert sessions.open("g", "m", 1)[0] == ErrorCode.share_session_not_found
    error, session = sessions.open("g", "m", 0)
    assert error == ErrorCode.none and session is not None
    assert sessions.open("g", "m", 2)[0] == ErrorCode.invalid_share_session_epoch
    assert sessions.open("g", "m", 1)[0] == ErrorCode.none
    assert sessions.open("g", "m", 1)[0] == ErrorCode.invalid_share_session_epoch
    assert sessions.open("g", "m", 2)[0] == ErrorCode.none
    assert sessions.open("g", "m", 0, acknowledge_only=True)[0] == (
        ErrorCode.invalid_share_session_epoch
    )
    assert sessions.open("g", "m", -1) == (ErrorCode.none, session)
    assert sessions.get("g", "m") is None


def test_session_cache_is_bounded() -> None:
    sessions = ShareSessions(limit=2)
    assert sessions.open("g", "a", 0)[0] == ErrorCode.none
    assert sessions.open("g", "b", 0)[0] == ErrorCode.none
    assert sessions.open("g", "c", 0)[0] == ErrorCode.share_session_limit_reached
    assert len(sessions) == 2


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_members_join_get_every_partition_and_expire() -> None:
    clock = Clock()
    groups = ShareGroups(clock)
    topics = {"t": (T, 3)}
    a, _ = groups.heartbeat("g", Heartbeat("a", 0, ("t",)), 1000, topics)
    b, _ = groups.heartbeat("g", Heartbeat("b", 0, ("t",)), 1000, topics)
    every = frozenset((T, p) for p in range(3))
    assert a.assignment == every and b.assignment == every
    assert b.member_epoch > a.member_epoch
    same, _ = groups.heartbeat("g", Heartbeat("a", a.member_epoch, None), 1000, topics)
    assert same.error == ErrorCode.none and same.assignment is None
    fenced, _ = groups.heartbeat("g", Heartbeat("a", a.member_epoch + 5, None), 1000, topics)
    assert fenced.error == ErrorCode.fenced_member_epoch
    grown, _ = groups.heartbeat("g", Heartbeat("a", a.member_epoch, None), 1000, {"t": (T, 4)})
    assert grown.assignment is not None and len(grown.assignment) == 4
    clock.now += 2
    unknown, _ = groups.heartbeat("g", Heartbeat("b", b.member_epoch, None), 1000, topics)
    assert unknown.error == ErrorCode.unknown_member_id
    group = groups.get("g")
    assert group is not None and group.members == {} and group.state == "Empty"
    left, _ = groups.heartbeat("g", Heartbeat("c", -1, None), 1000, topics)
    assert left.member_epoch == -1
    # Their records are to be released: both expired members, none for the stranger.
    assert sorted(m.member_id for _, m in groups.take_departed()) == ["a", "b"]
    assert groups.take_departed() == []
