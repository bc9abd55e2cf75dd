"""One classic consumer group's state machine (Kafka's JoinGroup/SyncGroup protocol).

No I/O: requests come in as calls, parked JoinGroup and SyncGroup calls wait on futures,
and time moves through `tick(now)`. The group coordinator around it does loading, saving
and placement.

Kept whole at about 600 lines: Kafka's classic protocol is one state machine whose
transitions (join, sync, heartbeat, leave, expiry, rebalance timeout) all read and write the
same member table and generation; split across files, a reader could no longer check one
transition against the others.
"""

from __future__ import annotations

import asyncio
import enum
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from lakelog.coordinator.group_types import GroupMemberRecord, GroupRecord
from lakelog.util.errors import ErrorCode


class GroupState(enum.StrEnum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class GroupConfig:
    initial_rebalance_delay_s: float
    min_session_timeout_ms: int
    max_session_timeout_ms: int
    max_size: int = 2**31 - 1
    """group.max.size: a new member beyond it gets GROUP_MAX_SIZE_REACHED."""


@dataclass(frozen=True, slots=True)
class JoinRequest:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: Sequence[tuple[str, bytes]]
    require_known_member_id: bool
    """JoinGroup v4+ (KIP-394): a new member first gets MEMBER_ID_REQUIRED and its id."""
    supports_skip_assignment: bool = False
    """JoinGroup v9+: a returning static leader can be told to skip the assignment."""


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str = ""
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: Sequence[tuple[str, str | None, bytes]] = ()
    """(member id, group instance id, metadata), only for the leader."""
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    deadline: float = 0.0
    join_future: asyncio.Future[JoinResult] | None = None
    sync_future: asyncio.Future[SyncResult] | None = None

    def metadata_for(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def record(self) -> GroupMemberRecord:
        return GroupMemberRecord(
            self.member_id,
            self.group_instance_id,
            self.client_id,
            self.client_host,
            self.rebalance_timeout_ms,
            self.session_timeout_ms,
            tuple(self.protocols),
            self.assignment,
        )


@dataclass
class Group:
    group_id: str
    config: GroupConfig
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    pending: dict[str, float] = field(default_factory=dict)
    """KIP-394: member ids handed out and not yet used, with their expiry."""
    static: dict[str, str] = field(default_factory=dict)
    """group instance id -> member id."""
    rebalance_deadline: float = 0.0
    initial_delay_until: float = 0.0
    rebalances: int = 0
    assignment_pending: bool = False
    """The leader's assignment for this generation arrived and is being saved: every
    waiting SyncGroup is answered at once when it is durable (`assignment_saved`)."""
    dirty: bool = False
    """The durable record changed; the coordinator saves it."""

    # ------------------------------------------------------------------ persistence
    def record(self, now_ms: int) -> GroupRecord:
        # The assignment being saved is what a restart must come back to: Stable.
        state = GroupState.STABLE if self.assignment_pending else self.state
        return GroupRecord(
            self.group_id,
            str(state),
            self.protocol_type,
            self.protocol,
            self.generation,
            self.leader,
            tuple(m.record() for m in self.members.values()),
            now_ms,
        )

    @classmethod
    def restore(cls, record: GroupRecord, config: GroupConfig, now: float) -> Group:
        """A group as saved: a Stable group comes back Stable with its members and their
        assignments, each given a fresh session to heartbeat again."""
        group = cls(
            record.group_id,
            config,
            generation=record.generation,
            protocol_type=record.protocol_type,
            protocol=record.protocol,
            leader=record.leader,
        )
        if record.state == GroupState.STABLE and record.members:
            group.state = GroupState.STABLE
            for m in record.members:
                member = Member(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.session_timeout_ms,
                    m.rebalance_timeout_ms,
                    list(m.protocols),
                    m.assignment,
                    deadline=now + m.session_timeout_ms / 1000,
                )
                group.members[m.member_id] = member
                if m.group_instance_id:
                    group.static[m.group_instance_id] = m.member_id
        else:
            group.leader = None
        return group

    # ------------------------------------------------------------------ queries
    @property
    def is_empty(self) -> bool:
        return not self.members

    def supports(self, protocol_type: str, protocols: Sequence[tuple[str, bytes]]) -> bool:
        if self.is_empty:
            return bool(protocol_type) and bool(protocols)
        if protocol_type != self.protocol_type:
            return False
        names = {name for name, _ in protocols}
        return bool(names & self._candidate_protocols())

    def _candidate_protocols(self) -> set[str]:
        sets = [{name for name, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def _select_protocol(self) -> str | None:
        candidates = self._candidate_protocols()
        votes: Counter[str] = Counter()
        for member in self.members.values():
            for name, _ in member.protocols:
                if name in candidates:
                    votes[name] += 1
                    break
        if not votes:
            return None
        best = max(votes.values())
        # Ties go to the first member's preference order, which is deterministic.
        first = next(iter(self.members.values()))
        for name, _ in first.protocols:
            if votes.get(name) == best:
                return name
        return votes.most_common(1)[0][0]

    def _check_member(self, member_id: str, instance_id: str | None) -> ErrorCode:
        if instance_id is not None:
            known = self.static.get(instance_id)
            if known is not None and known != member_id:
                return ErrorCode.fenced_instance_id
        if member_id not in self.members:
            return ErrorCode.unknown_member_id
        return ErrorCode.none

    # ------------------------------------------------------------------ JoinGroup
    def join(self, request: JoinRequest, now: float) -> JoinResult | asyncio.Future[JoinResult]:
        """An immediate answer, or a future answered when the rebalance completes."""
        if self.state == GroupState.DEAD:
            return JoinResult(ErrorCode.coordinator_not_available)
        if not self.supports(request.protocol_type, request.protocols):
            return JoinResult(ErrorCode.inconsistent_group_protocol)
        if not request.member_id:
            return self._join_new(request, now)
        if request.member_id in self.pending:
            del self.pending[request.member_id]
            return self._add_member(request.member_id, request, now)
        error = self._check_member(request.member_id, request.group_instance_id)
        if error != ErrorCode.none:
            return JoinResult(error, member_id=request.member_id)
        return self._rejoin(self.members[request.member_id], request, now)

    def _join_new(
        self, request: JoinRequest, now: float
    ) -> JoinResult | asyncio.Future[JoinResult]:
        member_id = f"{request.client_id or 'member'}-{uuid.uuid4()}"
        instance = request.group_instance_id
        if instance is not None and instance in self.static:
            return self._replace_static(self.static[instance], member_id, request, now)
        if len(self.members) + len(self.pending) >= self.config.max_size:
            return JoinResult(ErrorCode.group_max_size_reached, member_id=member_id)
        if request.require_known_member_id and instance is None:
            self.pending[member_id] = now + request.session_timeout_ms / 1000
            return JoinResult(ErrorCode.member_id_required, member_id=member_id)
        return self._add_member(member_id, request, now)

    def _new_member(self, member_id: str, request: JoinRequest, now: float) -> Member:
        return Member(
            member_id,
            request.group_instance_id,
            request.client_id,
            request.client_host,
            request.session_timeout_ms,
            request.rebalance_timeout_ms,
            list(request.protocols),
            deadline=now + request.session_timeout_ms / 1000,
        )

    def _add_member(
        self, member_id: str, request: JoinRequest, now: float
    ) -> asyncio.Future[JoinResult]:
        member = self._new_member(member_id, request, now)
        if self.is_empty:
            self.protocol_type = request.protocol_type
        self.members[member_id] = member
        if member.group_instance_id:
            self.static[member.group_instance_id] = member_id
        if self.leader is None:
            self.leader = member_id
        future: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        member.join_future = future
        if self.state != GroupState.PREPARING_REBALANCE:
            self._prepare_rebalance(now)
        else:
            self._extend_initial_delay(now)
        self._maybe_complete_join(now)
        return future

    def _replace_static(
        self, old_id: str, new_id: str, request: JoinRequest, now: float
    ) -> JoinResult | asyncio.Future[JoinResult]:
        """A static member came back under a new member id: it takes over the old one's
        place (and assignment); in a Stable group with unchanged metadata, no rebalance."""
        old = self.members.pop(old_id)
        if old.join_future is not None and not old.join_future.done():
            old.join_future.set_result(JoinResult(ErrorCode.fenced_instance_id, member_id=old_id))
        if old.sync_future is not None and not old.sync_future.done():
            old.sync_future.set_result(SyncResult(ErrorCode.fenced_instance_id))
        member = self._new_member(new_id, request, now)
        member.assignment = old.assignment
        self.members[new_id] = member
        assert request.group_instance_id is not None
        self.static[request.group_instance_id] = new_id
        was_leader = self.leader == old_id
        if was_leader:
            self.leader = new_id
        unchanged = list(request.protocols) == old.protocols
        if self.state == GroupState.STABLE and unchanged:
            # Kafka's rule: no rebalance. A returning leader either learns the members but
            # skips the assignment (v9+), or is told the old leader id and so acts as a
            # follower; either way it then syncs its kept assignment.
            self.dirty = True
            if not was_leader:
                return self._current(member, with_members=False)
            if request.supports_skip_assignment:
                result = self._current(member, with_members=True)
                return JoinResult(
                    result.error,
                    result.member_id,
                    result.generation,
                    result.protocol_type,
                    result.protocol_name,
                    result.leader,
                    result.members,
                    skip_assignment=True,
                )
            result = self._current(member, with_members=False)
            return JoinResult(
                result.error,
                result.member_id,
                result.generation,
                result.protocol_type,
                result.protocol_name,
                old_id,
            )
        future: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        member.join_future = future
        if self.state != GroupState.PREPARING_REBALANCE:
            self._prepare_rebalance(now)
        self._maybe_complete_join(now)
        return future

    def _rejoin(
        self, member: Member, request: JoinRequest, now: float
    ) -> JoinResult | asyncio.Future[JoinResult]:
        unchanged = list(request.protocols) == member.protocols
        member.deadline = now + request.session_timeout_ms / 1000
        member.session_timeout_ms = request.session_timeout_ms
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        if unchanged and self.state == GroupState.COMPLETING_REBALANCE:
            # It missed the JoinGroup answer: give it again.
            return self._current(member, with_members=member.member_id == self.leader)
        if unchanged and self.state == GroupState.STABLE and member.member_id != self.leader:
            return self._current(member, with_members=False)
        member.protocols = list(request.protocols)
        if member.join_future is not None and not member.join_future.done():
            member.join_future.set_result(JoinResult(ErrorCode.unknown_member_id))
        future: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        member.join_future = future
        if self.state != GroupState.PREPARING_REBALANCE:
            self._prepare_rebalance(now)
        self._maybe_complete_join(now)
        return future

    def _current(self, member: Member, *, with_members: bool) -> JoinResult:
        members = (
            tuple(
                (m.member_id, m.group_instance_id, m.metadata_for(self.protocol))
                for m in self.members.values()
            )
            if with_members
            else ()
        )
        return JoinResult(
            ErrorCode.none,
            member.member_id,
            self.generation,
            self.protocol_type,
            self.protocol,
            self.leader or "",
            members,
        )

    # ------------------------------------------------------------------ rebalance
    def _prepare_rebalance(self, now: float) -> None:
        if self.state == GroupState.COMPLETING_REBALANCE:
            for m in self.members.values():
                if m.sync_future is not None and not m.sync_future.done():
                    m.sync_future.set_result(SyncResult(ErrorCode.rebalance_in_progress))
                m.sync_future = None
        was_empty = self.state == GroupState.EMPTY
        self.state = GroupState.PREPARING_REBALANCE
        self.assignment_pending = False
        timeout = max((m.rebalance_timeout_ms for m in self.members.values()), default=0) / 1000
        self.rebalance_deadline = now + timeout
        delay = self.config.initial_rebalance_delay_s
        self.initial_delay_until = now + delay if was_empty and delay > 0 else 0.0
        self.rebalances += 1

    def _extend_initial_delay(self, now: float) -> None:
        """Kafka's delayed initial rebalance: each new member of a new group waits a bit
        more for the others, up to the rebalance timeout."""
        if self.initial_delay_until:
            self.initial_delay_until = min(
                now + self.config.initial_rebalance_delay_s, self.rebalance_deadline
            )

    def _all_joined(self) -> bool:
        return not self.pending and all(
            m.join_future is not None and not m.join_future.done() for m in self.members.values()
        )

    def _maybe_complete_join(self, now: float) -> None:
        if self.state != GroupState.PREPARING_REBALANCE:
            return
        if now < self.initial_delay_until and now < self.rebalance_deadline:
            return
        if self._all_joined() or now >= self.rebalance_deadline:
            self._complete_join(now)

    def _complete_join(self, now: float) -> None:
        for member_id in [
            m.member_id
            for m in self.members.values()
            if m.join_future is None or m.join_future.done()
        ]:
            self._remove(member_id)
        self.pending.clear()
        self.generation += 1
        self.initial_delay_until = 0.0
        self.assignment_pending = False
        if self.is_empty:
            self.state = GroupState.EMPTY
            self.protocol = None
            self.leader = None
            self.dirty = True
            return
        self.protocol = self._select_protocol()
        if self.leader not in self.members:
            self.leader = next(iter(self.members))
        self.state = GroupState.COMPLETING_REBALANCE
        for member in self.members.values():
            member.assignment = b""
            member.deadline = now + member.session_timeout_ms / 1000
            future, member.join_future = member.join_future, None
            assert future is not None
            future.set_result(self._current(member, with_members=member.member_id == self.leader))

    def _remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is None:
            return
        if member.group_instance_id and self.static.get(member.group_instance_id) == member_id:
            del self.static[member.group_instance_id]
        for fut, result in (
            (member.join_future, JoinResult(ErrorCode.unknown_member_id)),
            (member.sync_future, SyncResult(ErrorCode.unknown_member_id)),
        ):
            if fut is not None and not fut.done():
                fut.set_result(result)  # type: ignore[arg-type]
        if self.leader == member_id:
            self.leader = next(iter(self.members), None)

    def _member_gone(self, member_id: str, now: float) -> None:
        """After a leave or an expired session: rebalance the rest, or become Empty."""
        self._remove(member_id)
        if self.is_empty and self.state != GroupState.PREPARING_REBALANCE:
            self.state = GroupState.EMPTY
            self.protocol = None
            self.leader = None
            self.generation += 1
            self.dirty = True
            return
        if self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(now)
        self._maybe_complete_join(now)

    # ------------------------------------------------------------------ SyncGroup
    def sync(
        self,
        generation: int,
        member_id: str,
        instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: Sequence[tuple[str, bytes]],
        now: float,
    ) -> SyncResult | asyncio.Future[SyncResult]:
        error = self._check_member(member_id, instance_id)
        if error != ErrorCode.none:
            return SyncResult(error)
        if generation != self.generation:
            return SyncResult(ErrorCode.illegal_generation)
        if (protocol_type is not None and protocol_type != self.protocol_type) or (
            protocol_name is not None and protocol_name != self.protocol
        ):
            return SyncResult(ErrorCode.inconsistent_group_protocol)
        member = self.members[member_id]
        member.deadline = now + member.session_timeout_ms / 1000
        if self.state == GroupState.PREPARING_REBALANCE:
            return SyncResult(ErrorCode.rebalance_in_progress)
        if self.state == GroupState.STABLE:
            return SyncResult(ErrorCode.none, self.protocol_type, self.protocol, member.assignment)
        if self.state != GroupState.COMPLETING_REBALANCE:
            return SyncResult(ErrorCode.unknown_member_id)
        future: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        if member.sync_future is not None and not member.sync_future.done():
            member.sync_future.set_result(SyncResult(ErrorCode.rebalance_in_progress))
        member.sync_future = future
        if member_id == self.leader and not self.assignment_pending:
            # Kafka's order: nobody is answered yet. The coordinator saves the assignment
            # and then answers the leader and every waiting follower in one step
            # (`assignment_saved`), so no member starts on its partitions while another,
            # still waiting, holds the previous generation's.
            given = dict(assignments)
            for m in self.members.values():
                m.assignment = given.get(m.member_id, b"")
            self.assignment_pending = True
            self.dirty = True
        return future

    def assignment_saved(self, generation: int, error: ErrorCode, now: float) -> None:
        """The leader's assignment for `generation` is durable (error none), or could not be
        saved: answer every waiting SyncGroup together. With an error they all get it and
        the group rebalances again, as Kafka does when its group metadata append fails.
        Nothing happens if the group moved on meanwhile (its members were told then)."""
        if (
            not self.assignment_pending
            or generation != self.generation
            or self.state != GroupState.COMPLETING_REBALANCE
        ):
            return
        self.assignment_pending = False
        if error != ErrorCode.none:
            for m in self.members.values():
                if m.sync_future is not None and not m.sync_future.done():
                    m.sync_future.set_result(SyncResult(error))
                m.sync_future = None
                m.assignment = b""
            self._prepare_rebalance(now)
            self.dirty = True
            return
        self.state = GroupState.STABLE
        for m in self.members.values():
            if m.sync_future is not None and not m.sync_future.done():
                m.sync_future.set_result(
                    SyncResult(ErrorCode.none, self.protocol_type, self.protocol, m.assignment)
                )
            m.sync_future = None

    # ------------------------------------------------------------------ Heartbeat
    def heartbeat(
        self, generation: int, member_id: str, instance_id: str | None, now: float
    ) -> ErrorCode:
        error = self._check_member(member_id, instance_id)
        if error != ErrorCode.none:
            return error
        member = self.members[member_id]
        member.deadline = now + member.session_timeout_ms / 1000
        if self.state == GroupState.PREPARING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        # CompletingRebalance: a member waiting for its SyncGroup answer heartbeats as in
        # Stable (Kafka's rule); REBALANCE_IN_PROGRESS would make it rejoin at once.
        if generation != self.generation:
            return ErrorCode.illegal_generation
        return ErrorCode.none

    def start_rebalance(self, now: float) -> None:
        """Every member must rejoin: the group was just downgraded from the consumer
        protocol (`groups.mixed`), so it needs a classic generation of its own."""
        self._prepare_rebalance(now)
        self.dirty = True

    # ------------------------------------------------------------------ LeaveGroup
    def leave(self, member_id: str, instance_id: str | None, now: float) -> ErrorCode:
        if instance_id is not None:
            known = self.static.get(instance_id)
            if known is None:
                return ErrorCode.unknown_member_id
            if member_id and known != member_id:
                return ErrorCode.fenced_instance_id
            member_id = known
        if member_id in self.pending:
            del self.pending[member_id]
            self._maybe_complete_join(now)
            return ErrorCode.none
        if member_id not in self.members:
            return ErrorCode.unknown_member_id
        self._member_gone(member_id, now)
        return ErrorCode.none

    # ------------------------------------------------------------------ OffsetCommit
    def check_commit(self, generation: int, member_id: str, instance_id: str | None) -> ErrorCode:
        """Kafka's rules: generation -1 is a standalone commit (assign() consumers, admin
        tools), accepted while no member is in the group whatever member id it names
        (KIP-1082 clients send their own); with members, it needs a member's ids."""
        if generation < 0 and self.is_empty:
            return ErrorCode.none
        if generation < 0 and not member_id and instance_id is None:
            return ErrorCode.unknown_member_id
        error = self._check_member(member_id, instance_id)
        if error != ErrorCode.none:
            return error
        if generation != self.generation:
            return ErrorCode.illegal_generation
        if self.state == GroupState.COMPLETING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    # ------------------------------------------------------------------ time
    def tick(self, now: float) -> None:
        """Expire sessions and pending member ids; finish rebalances that timed out."""
        for member_id, deadline in list(self.pending.items()):
            if now >= deadline:
                del self.pending[member_id]
        for member in list(self.members.values()):
            waiting = member.join_future is not None and not member.join_future.done()
            if not waiting and now >= member.deadline:
                self._member_gone(member.member_id, now)
        self._maybe_complete_join(now)
