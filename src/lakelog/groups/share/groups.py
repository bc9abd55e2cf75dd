"""Share group membership (ShareGroupHeartbeat), kept by the group's coordinator broker.

Members are held in memory on the broker that owns the group id (as classic and KIP-848
groups are placed); the group's existence is recorded in the batch coordinator so that
ListGroups and DeleteGroups see it from any broker. A member that stops heartbeating for
share.session.timeout.ms is removed. The assignment is the simple one: every member gets
every partition of the topics it subscribes to (a share partition is read by many
members at once; the share-partition locks decide who gets which record)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from lakelog.util.errors import ErrorCode

LEAVE_EPOCH = -1
MAX_MEMBERS = 1_000
"""Members per share group; more get GROUP_MAX_SIZE_REACHED."""
MAX_GROUPS = 10_000

Assignment = frozenset[tuple[uuid.UUID, int]]


@dataclass(slots=True)
class ShareMember:
    member_id: str
    member_epoch: int
    subscribed: tuple[str, ...] = ()
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    assignment: Assignment = frozenset()
    last_seen: float = 0.0


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)

    @property
    def state(self) -> str:
        return "Stable" if self.members else "Empty"

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed}


@dataclass(frozen=True, slots=True)
class HeartbeatAnswer:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    assignment: Assignment | None = None
    """None: unchanged since the member's last heartbeat."""


@dataclass(frozen=True, slots=True)
class Heartbeat:
    member_id: str
    member_epoch: int
    subscribed: tuple[str, ...] | None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""


class ShareGroups:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._groups: dict[str, ShareGroup] = {}
        self._clock = clock
        self.departed: list[tuple[str, ShareMember]] = []
        """Members that left or expired since the caller last took them (`take_departed`):
        their acquired records are to be released."""

    def take_departed(self) -> list[tuple[str, ShareMember]]:
        gone, self.departed = self.departed[:MAX_MEMBERS], self.departed[MAX_MEMBERS:]
        return gone

    def get(self, group_id: str) -> ShareGroup | None:
        return self._groups.get(group_id)

    def known(self) -> list[ShareGroup]:
        return list(self._groups.values())

    def forget(self, group_ids: Sequence[str]) -> None:
        for group_id in group_ids:
            self._groups.pop(group_id, None)

    def expire(self, group: ShareGroup, session_timeout_ms: int) -> list[ShareMember]:
        """Remove members silent for longer than the session timeout."""
        cutoff = self._clock() - session_timeout_ms / 1000
        gone = [member for member in group.members.values() if member.last_seen < cutoff]
        for member in gone:
            del group.members[member.member_id]
        if gone:
            group.group_epoch += 1
        self.departed.extend((group.group_id, member) for member in gone)
        return gone

    def heartbeat(
        self,
        group_id: str,
        beat: Heartbeat,
        session_timeout_ms: int,
        partitions_of: Mapping[str, tuple[uuid.UUID, int]],
    ) -> tuple[HeartbeatAnswer, bool]:
        """One heartbeat; `partitions_of` maps each existing topic name to (id, partition
        count). Returns the answer and whether the group is new."""
        group = self._groups.get(group_id)
        created = group is None
        if group is None:
            if len(self._groups) >= MAX_GROUPS:
                self._drop_an_empty_group()
            group = self._groups[group_id] = ShareGroup(group_id)
        self.expire(group, session_timeout_ms)
        member = group.members.get(beat.member_id)
        if beat.member_epoch == LEAVE_EPOCH:
            if member is not None:
                del group.members[beat.member_id]
                group.group_epoch += 1
                self.departed.append((group_id, member))
            return HeartbeatAnswer(ErrorCode.none, member_id=beat.member_id, member_epoch=-1), False
        if beat.member_epoch == 0:
            if member is None and len(group.members) >= MAX_MEMBERS:
                return HeartbeatAnswer(ErrorCode.group_max_size_reached), created
            if beat.subscribed is None or not beat.subscribed:
                return HeartbeatAnswer(
                    ErrorCode.invalid_request, "SubscribedTopicNames must be set in first request."
                ), created
            group.group_epoch += 1
            member = ShareMember(beat.member_id, group.group_epoch)
            group.members[beat.member_id] = member
        elif member is None:
            return HeartbeatAnswer(
                ErrorCode.unknown_member_id, f"Member {beat.member_id} is not in the group."
            ), created
        elif beat.member_epoch != member.member_epoch:
            return HeartbeatAnswer(
                ErrorCode.fenced_member_epoch,
                f"The member epoch {beat.member_epoch} is not {member.member_epoch}.",
            ), created
        member.last_seen = self._clock()
        member.rack_id = beat.rack_id
        member.client_id, member.client_host = beat.client_id, beat.client_host
        if beat.subscribed is not None and tuple(beat.subscribed) != member.subscribed:
            member.subscribed = tuple(beat.subscribed)
            group.group_epoch += 1
        target = frozenset(
            (partitions_of[name][0], p)
            for name in member.subscribed
            if name in partitions_of
            for p in range(partitions_of[name][1])
        )
        changed = target != member.assignment or beat.member_epoch == 0
        if changed:
            member.assignment = target
            member.member_epoch = group.group_epoch
        return HeartbeatAnswer(
            ErrorCode.none,
            member_id=member.member_id,
            member_epoch=member.member_epoch,
            assignment=target if changed else None,
        ), created

    def _drop_an_empty_group(self) -> None:
        for group_id, group in self._groups.items():
            if not group.members:
                del self._groups[group_id]
                return
