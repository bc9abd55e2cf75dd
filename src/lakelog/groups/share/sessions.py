"""Share sessions (KIP-932): like incremental fetch sessions, a member's ShareFetch names
only the partitions that changed; the broker remembers the rest and the epoch it expects
next. Sessions live on the broker that serves them and are lost with it (the client then
gets SHARE_SESSION_NOT_FOUND and starts a new one)."""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field

from lakelog.util.errors import ErrorCode

INITIAL_EPOCH, FINAL_EPOCH = 0, -1
MAX_SESSIONS = 10_000
IDLE_EVICT_S = 120.0
"""A full cache may drop a session idle this long to make room for a new one."""


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    next_epoch: int = 1
    partitions: dict[tuple[str, int], None] = field(default_factory=dict)
    """(topic id text, partition), in the order first asked."""
    used: float = 0.0


class ShareSessions:
    def __init__(self, limit: int = MAX_SESSIONS) -> None:
        self._limit = limit
        self._sessions: OrderedDict[tuple[str, str], ShareSession] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get((group_id, member_id))

    def open(
        self, group_id: str, member_id: str, epoch: int, *, acknowledge_only: bool = False
    ) -> tuple[ErrorCode, ShareSession | None]:
        """The session a request with `epoch` belongs to, checked and advanced. The final
        epoch returns the session (if any) and forgets it."""
        key = (group_id, member_id)
        now = time.monotonic()
        if epoch == INITIAL_EPOCH:
            if acknowledge_only:
                return ErrorCode.invalid_share_session_epoch, None
            self._sessions.pop(key, None)
            if len(self._sessions) >= self._limit and not self._evict(now):
                return ErrorCode.share_session_limit_reached, None
            session = ShareSession(group_id, member_id, used=now)
            self._sessions[key] = session
            return ErrorCode.none, session
        session = self._sessions.get(key)
        if epoch == FINAL_EPOCH:
            self._sessions.pop(key, None)
            return ErrorCode.none, session
        if session is None:
            return ErrorCode.share_session_not_found, None
        if epoch != session.next_epoch:
            return ErrorCode.invalid_share_session_epoch, None
        session.next_epoch = epoch + 1 if epoch < 2**31 - 1 else 1
        session.used = now
        self._sessions.move_to_end(key)
        return ErrorCode.none, session

    def _evict(self, now: float) -> bool:
        oldest_key, oldest = next(iter(self._sessions.items()))
        if now - oldest.used < IDLE_EVICT_S:
            return False
        del self._sessions[oldest_key]
        return True
