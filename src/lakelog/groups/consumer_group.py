"""One KIP-848 consumer group (`group.protocol=consumer`): members, epochs, the target
assignment and each member's incremental reconciliation towards it.

Kept whole at about 600 lines: it has one job, the group's state machine, and the JSON
document that persists that state (`document`/`restore`) must change with it.

No I/O, no clock: requests come in as calls with the topics they may see and the time.
The rules, in our words:

- The **group epoch** goes up whenever what the assignment depends on changes: a member
  joins or leaves (or its session expires), a subscription or the chosen assignor changes,
  a regex matches other topics, a subscribed topic gains partitions or disappears. The
  **target assignment** is then recomputed by the server-side assignor and stamped with
  the group epoch (the assignment epoch).
- Each member moves to the target on its own heartbeats. A member is never given a
  partition that another member still holds (assigned, or revoked but not yet confirmed
  released): it first gives up what it must lose (its epoch stays), then, once its
  heartbeat shows it no longer owns those partitions, takes the target epoch and the
  partitions that are free; the rest follow on later heartbeats as they are released.
  Hence no partition is ever owned by two members at once.
- A regex subscription (KIP-848's server-side regex) must match a whole topic name. Kafka
  compiles it with RE2J; we use Python's `re`, which agrees on the usual syntax (classes,
  alternation, anchors, repetition) but also accepts what RE2J refuses (backreferences,
  lookaround). It is resolved again on every heartbeat against the topic cache, so a new
  topic joins the subscription within a heartbeat of the cache seeing it.
- A heartbeat must carry the member's current epoch, or its previous one when it lost
  our last answer (and then owns no more than we assigned); anything else is fenced.
"""

from __future__ import annotations

import re
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lakelog.groups.assignors import ASSIGNORS, Assignment, AssignorMember, TopicPartition
from lakelog.util.errors import ErrorCode

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
EMPTY: Assignment = frozenset()


@dataclass(frozen=True, slots=True)
class ConsumerGroupConfig:
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    assignors: tuple[str, ...] = ("uniform", "range")
    """Server assignors offered; the first is the default."""
    max_size: int = 2**31 - 1
    """group.consumer.max.size: a new member beyond it gets GROUP_MAX_SIZE_REACHED."""


@dataclass(frozen=True, slots=True)
class TopicMeta:
    topic_id: uuid.UUID
    partitions: int


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    """A ConsumerGroupHeartbeat; None (or -1) means "unchanged since the last one"."""

    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None
    client_id: str = ""
    client_host: str = ""
    may_describe: Callable[[str], bool] | None = None
    """Whether the heartbeating principal may DESCRIBE a topic (None: no authorizer). A
    regex subscription only gets the topics it may (Kafka filters regex matches so)."""


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: ErrorCode
    member_id: str = ""
    member_epoch: int = 0
    assignment: Assignment | None = None
    """None: unchanged, the member keeps what it has."""
    message: str | None = None


@dataclass(slots=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_names: tuple[str, ...] = ()
    subscribed_regex: str | None = None
    server_assignor: str | None = None
    rebalance_timeout_ms: int = 300_000
    member_epoch: int = 0
    previous_epoch: int = -1
    assigned: Assignment = EMPTY
    revoking: Assignment = EMPTY
    """Partitions the member must give up; still its own until a heartbeat shows them gone."""
    static_left: bool = False
    """A static member that left with epoch -2: it keeps its partitions until its session
    expires, so that it can come back without a rebalance."""
    classic_session_ms: int | None = None
    """Set for a member speaking the classic protocol (JoinGroup, SyncGroup, Heartbeat) in
    a group that was upgraded: its own session timeout (see `mixed`)."""
    classic_protocols: tuple[tuple[str, bytes], ...] = ()
    session_deadline: float = 0.0
    revoke_deadline: float | None = None
    regex_hidden: tuple[str, ...] = ()
    """Topics its regex matches that its principal may not DESCRIBE: never assigned to it."""

    @property
    def owns(self) -> Assignment:
        return self.assigned | self.revoking

    @property
    def is_classic(self) -> bool:
        return self.classic_session_ms is not None

    def session_timeout_ms(self, config: ConsumerGroupConfig) -> int:
        return (
            config.session_timeout_ms
            if self.classic_session_ms is None
            else self.classic_session_ms
        )


def _hidden_matches(
    matches: Iterable[str], may_describe: Callable[[str], bool] | None
) -> tuple[str, ...]:
    """The regex matches (sorted) the member's principal may not DESCRIBE."""
    if may_describe is None:
        return ()
    return tuple(n for n in matches if not may_describe(n))


def _fail(error: ErrorCode, message: str | None = None, member_id: str = "") -> HeartbeatResult:
    return HeartbeatResult(error, member_id=member_id, message=message)


@dataclass
class ConsumerGroup:
    group_id: str
    config: ConsumerGroupConfig
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    subscribed_metadata: tuple[tuple[str, str, int], ...] = ()
    """(name, topic id, partitions) of every subscribed topic that exists, sorted."""
    regex_matches: dict[str, tuple[str, ...]] = field(default_factory=dict)
    revision: int = 0
    """Bumped by every durable change."""
    saved_revision: int = 0
    """The revision of the record this copy last loaded or saved (0: none)."""
    dirty: bool = False

    # ------------------------------------------------------------------ views
    @property
    def is_empty(self) -> bool:
        return not self.members

    @property
    def state(self) -> str:
        """Kafka's consumer group states: Empty, Assigning, Reconciling, Stable."""
        if not self.members:
            return "Empty"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.revoking:
                return "Reconciling"
            if m.assigned != self.target.get(m.member_id, EMPTY):
                return "Reconciling"
        return "Stable"

    @property
    def assignor(self) -> str:
        """The most common assignor the members asked for, else the default."""
        asked = Counter(m.server_assignor for m in self.members.values() if m.server_assignor)
        if not asked:
            return self.config.assignors[0]
        return min(asked, key=lambda name: (-asked[name], name))

    def subscribed_topics(self, member: ConsumerMember) -> set[str]:
        names = set(member.subscribed_names)
        if member.subscribed_regex:
            names.update(self.regex_matches.get(member.subscribed_regex, ()))
            names.difference_update(member.regex_hidden)
        return names

    def topic_names(self) -> set[str]:
        """Every topic some member is subscribed to (by name or by regex)."""
        names: set[str] = set()
        for m in self.members.values():
            names |= self.subscribed_topics(m)
        return names

    # ------------------------------------------------------------------ heartbeat
    def heartbeat(
        self, req: HeartbeatRequest, topics: Mapping[str, TopicMeta], now: float
    ) -> HeartbeatResult:
        if req.server_assignor is not None and req.server_assignor not in self.config.assignors:
            return _fail(ErrorCode.unsupported_assignor, f"unknown assignor {req.server_assignor}")
        if req.subscribed_topic_regex:
            try:
                re.compile(req.subscribed_topic_regex)
            except re.error as e:
                return _fail(ErrorCode.invalid_regular_expression, str(e))
        if req.member_epoch == LEAVE_EPOCH:
            return self._leave(req, now)
        if req.member_epoch == STATIC_LEAVE_EPOCH:
            return self._static_leave(req)
        if req.member_epoch == 0:
            joined = self._join(req)
            if isinstance(joined, HeartbeatResult):
                return joined
            member, changed = joined
        elif req.member_epoch > 0:
            member_or_error = self._known_member(req)
            if isinstance(member_or_error, HeartbeatResult):
                return member_or_error
            member = member_or_error
            changed = self._update(member, req)
        else:
            return _fail(ErrorCode.invalid_request, f"bad member epoch {req.member_epoch}")
        member.session_deadline = now + member.session_timeout_ms(self.config) / 1000
        before = member.assigned
        if self._refresh_matches(topics):
            changed = True
        matched = self.regex_matches.get(member.subscribed_regex or "", ())
        hidden = _hidden_matches(matched, req.may_describe)
        if hidden != member.regex_hidden:
            member.regex_hidden = hidden
            changed = True
        if self._refresh_subscribed(topics):
            changed = True
        if changed:
            self._bump()
        self._reconcile(member, req.owned, now)
        full = req.member_epoch == 0 or (
            req.rebalance_timeout_ms != -1
            and (req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None)
            and req.owned is not None
        )
        return HeartbeatResult(
            ErrorCode.none,
            member_id=member.member_id,
            member_epoch=member.member_epoch,
            assignment=member.assigned if full or member.assigned != before else None,
        )

    def _join(self, req: HeartbeatRequest) -> tuple[ConsumerMember, bool] | HeartbeatResult:
        if req.rebalance_timeout_ms < 0:
            return _fail(ErrorCode.invalid_request, "RebalanceTimeoutMs must be set on join")
        if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
            return _fail(ErrorCode.invalid_request, "a subscription must be set on join")
        if req.owned:
            return _fail(ErrorCode.invalid_request, "TopicPartitions must be empty on join")
        member_id = req.member_id or uuid.uuid4().hex
        existing = self.members.get(member_id)
        if existing is not None:
            if req.instance_id is not None and existing.instance_id != req.instance_id:
                return _fail(ErrorCode.fenced_instance_id, member_id=member_id)
            existing.static_left = False
            return existing, self._update(existing, req)
        if req.instance_id is not None:
            old = self._by_instance(req.instance_id)
            if old is not None:
                if not old.static_left:
                    return _fail(
                        ErrorCode.unreleased_instance_id,
                        f"instance {req.instance_id} is still used by {old.member_id}",
                        member_id,
                    )
                # The static member is back: same partitions, same epoch, no rebalance.
                del self.members[old.member_id]
                self.target[member_id] = self.target.pop(old.member_id, EMPTY)
                old.member_id = member_id
                old.static_left = False
                old.client_id, old.client_host = req.client_id, req.client_host
                self.members[member_id] = old
                self._touch()
                return old, self._update(old, req)
        if len(self.members) >= self.config.max_size:
            return _fail(
                ErrorCode.group_max_size_reached,
                f"the group has reached its maximum size of {self.config.max_size} members",
            )
        member = ConsumerMember(
            member_id, req.instance_id, client_id=req.client_id, client_host=req.client_host
        )
        self.members[member_id] = member
        self._update(member, req)
        return member, True

    def _known_member(self, req: HeartbeatRequest) -> ConsumerMember | HeartbeatResult:
        member = self.members.get(req.member_id)
        if member is None or member.static_left:
            return _fail(ErrorCode.unknown_member_id, member_id=req.member_id)
        if req.instance_id is not None and member.instance_id != req.instance_id:
            return _fail(ErrorCode.fenced_instance_id, member_id=req.member_id)
        if req.member_epoch == member.member_epoch:
            return member
        if req.member_epoch == member.previous_epoch and (
            req.owned is None or req.owned <= member.assigned
        ):
            return member  # it missed our last answer; it gets it again
        return _fail(
            ErrorCode.fenced_member_epoch,
            f"epoch {req.member_epoch}, current {member.member_epoch}",
            req.member_id,
        )

    def _update(self, member: ConsumerMember, req: HeartbeatRequest) -> bool:
        """Apply the request's set fields; True when the assignment depends on a change."""
        changed = False
        if req.rack_id is not None:
            member.rack_id = req.rack_id
        if req.rebalance_timeout_ms >= 0:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        if req.subscribed_topic_names is not None:
            names = tuple(sorted(set(req.subscribed_topic_names)))
            changed |= names != member.subscribed_names
            member.subscribed_names = names
        if req.subscribed_topic_regex is not None:
            regex = req.subscribed_topic_regex or None
            changed |= regex != member.subscribed_regex
            member.subscribed_regex = regex
        if req.server_assignor is not None:
            changed |= req.server_assignor != member.server_assignor
            member.server_assignor = req.server_assignor
        if changed:
            self._touch()
        return changed

    def _leave(self, req: HeartbeatRequest, now: float) -> HeartbeatResult:
        member = self.members.get(req.member_id)
        if member is None and req.instance_id is not None:
            member = self._by_instance(req.instance_id)
        if member is None:
            return _fail(ErrorCode.unknown_member_id, member_id=req.member_id)
        if req.instance_id is not None and member.member_id != req.member_id:
            return _fail(ErrorCode.fenced_instance_id, member_id=req.member_id)
        self._remove([member.member_id])
        return HeartbeatResult(ErrorCode.none, member_id=req.member_id, member_epoch=LEAVE_EPOCH)

    def _static_leave(self, req: HeartbeatRequest) -> HeartbeatResult:
        if req.instance_id is None:
            return _fail(ErrorCode.invalid_request, "epoch -2 needs an instance id")
        member = self._by_instance(req.instance_id)
        if member is None:
            return _fail(ErrorCode.unknown_member_id, member_id=req.member_id)
        if member.member_id != req.member_id:
            return _fail(ErrorCode.fenced_instance_id, member_id=req.member_id)
        member.static_left = True
        self._touch()
        return HeartbeatResult(
            ErrorCode.none, member_id=req.member_id, member_epoch=STATIC_LEAVE_EPOCH
        )

    def _by_instance(self, instance_id: str) -> ConsumerMember | None:
        for m in self.members.values():
            if m.instance_id == instance_id:
                return m
        return None

    # ------------------------------------------------------------------ the target
    def _touch(self) -> None:
        self.revision += 1
        self.dirty = True

    def _bump(self) -> None:
        """A new group epoch and its target assignment."""
        self.group_epoch += 1
        ids = {name: uuid.UUID(tid) for name, tid, _ in self.subscribed_metadata}
        partitions = {uuid.UUID(tid): n for _, tid, n in self.subscribed_metadata}
        members = {
            m.member_id: AssignorMember(
                frozenset(ids[n] for n in self.subscribed_topics(m) if n in ids), m.instance_id
            )
            for m in self.members.values()
        }
        self.target = ASSIGNORS[self.assignor](members, partitions, self.target)
        self.assignment_epoch = self.group_epoch
        self._touch()

    def _refresh_metadata(self, topics: Mapping[str, TopicMeta]) -> bool:
        """Re-resolve regexes and subscribed topics' partition counts; True if changed."""
        changed = self._refresh_matches(topics)
        return self._refresh_subscribed(topics) or changed

    def _refresh_matches(self, topics: Mapping[str, TopicMeta]) -> bool:
        """Re-resolve the members' regexes (one scan of the topics each); True if changed."""
        matches: dict[str, tuple[str, ...]] = {}
        for m in self.members.values():
            regex = m.subscribed_regex
            if regex and regex not in matches:
                pattern = re.compile(regex)
                matches[regex] = tuple(sorted(n for n in topics if pattern.fullmatch(n)))
        changed = matches != self.regex_matches
        self.regex_matches = matches
        return changed

    def _refresh_subscribed(self, topics: Mapping[str, TopicMeta]) -> bool:
        """The subscribed topics' ids and partition counts; True if changed."""
        names = self.topic_names()
        metadata = tuple(
            sorted((n, str(topics[n].topic_id), topics[n].partitions) for n in names if n in topics)
        )
        changed = metadata != self.subscribed_metadata
        self.subscribed_metadata = metadata
        return changed

    def _remove(self, member_ids: Iterable[str]) -> None:
        removed = False
        for member_id in member_ids:
            if self.members.pop(member_id, None) is not None:
                self.target.pop(member_id, None)
                removed = True
        if removed:
            self._bump()

    # ------------------------------------------------------------------ reconciliation
    def _reconcile(self, member: ConsumerMember, owned: Assignment | None, now: float) -> None:
        """Move the member one safe step towards its target (see the module docstring)."""
        before = (member.member_epoch, member.assigned, member.revoking)
        if member.revoking:
            if owned is None or owned & member.revoking:
                return  # still owns what it must give up
            member.revoking = EMPTY
            member.revoke_deadline = None
        target = self.target.get(member.member_id, EMPTY)
        if member.member_epoch != self.assignment_epoch:
            lose = member.assigned - target
            if lose:
                member.assigned -= lose
                member.revoking = lose
                member.revoke_deadline = now + member.rebalance_timeout_ms / 1000
            else:
                member.previous_epoch = member.member_epoch
                member.member_epoch = self.assignment_epoch
        if member.member_epoch == self.assignment_epoch and not member.revoking:
            missing = target - member.assigned
            if missing:
                taken = self._owned_by_others(member.member_id)
                member.assigned |= missing - taken
        if (member.member_epoch, member.assigned, member.revoking) != before:
            self._touch()

    def _owned_by_others(self, member_id: str) -> set[TopicPartition]:
        taken: set[TopicPartition] = set()
        for m in self.members.values():
            if m.member_id != member_id:
                taken |= m.owns
        return taken

    # ------------------------------------------------------------------ time
    def tick(self, now: float) -> bool:
        """Drop members whose session expired or who did not give partitions up within
        their rebalance timeout; True when the group changed."""
        gone = [
            m.member_id
            for m in self.members.values()
            if now > m.session_deadline
            or (m.revoke_deadline is not None and now > m.revoke_deadline)
        ]
        self._remove(gone)
        return bool(gone)

    # ------------------------------------------------------------------ offsets
    def check_commit(
        self, member_id: str, epoch: int, partitions: Iterable[TopicPartition]
    ) -> ErrorCode:
        """OffsetCommit by member epoch. Besides the current epoch we accept the previous
        one for partitions the member still owns (its commit raced our answer that moved
        it on), so an owner's commit is never lost and a former owner's never lands."""
        if epoch < 0 and not self.members:
            # A commit from outside the group (admin tools, assign() consumers) to a group
            # nobody is in; KIP-1082 clients name their own member id even then.
            return ErrorCode.none
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if epoch == member.member_epoch:
            return ErrorCode.none
        if epoch == member.previous_epoch and set(partitions) <= member.owns:
            return ErrorCode.none
        return ErrorCode.stale_member_epoch

    def check_txn_commit(self, member_id: str, epoch: int) -> ErrorCode:
        """TxnOffsetCommit v3+: a producer naming a member must name a current one (no
        member id: the offsets come from outside the group's management)."""
        if not member_id:
            return ErrorCode.none
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if epoch >= 0 and epoch != member.member_epoch:
            return ErrorCode.illegal_generation
        return ErrorCode.none

    def check_fetch(self, member_id: str | None, epoch: int) -> ErrorCode:
        """OffsetFetch v9+: a member that names itself must be current."""
        if member_id is None:
            return ErrorCode.none
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if epoch not in (member.member_epoch, member.previous_epoch):
            return ErrorCode.stale_member_epoch
        return ErrorCode.none

    # ------------------------------------------------------------------ persistence
    def document(self) -> dict[str, Any]:
        """The durable state as plain JSON data (deadlines are not durable)."""
        return {
            "group_epoch": self.group_epoch,
            "assignment_epoch": self.assignment_epoch,
            "subscribed_metadata": [list(t) for t in self.subscribed_metadata],
            "regex_matches": {k: list(v) for k, v in self.regex_matches.items()},
            "target": {m: _tps_out(a) for m, a in self.target.items()},
            "members": [
                {
                    "member_id": m.member_id,
                    "instance_id": m.instance_id,
                    "rack_id": m.rack_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "subscribed_names": list(m.subscribed_names),
                    "subscribed_regex": m.subscribed_regex,
                    "server_assignor": m.server_assignor,
                    "rebalance_timeout_ms": m.rebalance_timeout_ms,
                    "member_epoch": m.member_epoch,
                    "previous_epoch": m.previous_epoch,
                    "assigned": _tps_out(m.assigned),
                    "revoking": _tps_out(m.revoking),
                    "static_left": m.static_left,
                    "classic_session_ms": m.classic_session_ms,
                    "classic_protocols": [[n, md.hex()] for n, md in m.classic_protocols],
                    "regex_hidden": list(m.regex_hidden),
                }
                for m in self.members.values()
            ],
        }

    @classmethod
    def restore(
        cls,
        group_id: str,
        doc: Mapping[str, Any],
        revision: int,
        config: ConsumerGroupConfig,
        now: float,
    ) -> ConsumerGroup:
        """A group from its document; every member gets a fresh session (and rebalance
        timeout), as if it had just heartbeated."""
        group = cls(
            group_id,
            config,
            group_epoch=doc["group_epoch"],
            assignment_epoch=doc["assignment_epoch"],
            subscribed_metadata=tuple(tuple(t) for t in doc["subscribed_metadata"]),  # type: ignore[misc]
            regex_matches={k: tuple(v) for k, v in doc["regex_matches"].items()},
            target={m: _tps_in(a) for m, a in doc["target"].items()},
            revision=revision,
            saved_revision=revision,
        )
        for d in doc["members"]:
            member = ConsumerMember(
                d["member_id"],
                d["instance_id"],
                d["rack_id"],
                d["client_id"],
                d["client_host"],
                tuple(d["subscribed_names"]),
                d["subscribed_regex"],
                d["server_assignor"],
                d["rebalance_timeout_ms"],
                d["member_epoch"],
                d["previous_epoch"],
                _tps_in(d["assigned"]),
                _tps_in(d["revoking"]),
                d["static_left"],
                d.get("classic_session_ms"),
                tuple((n, bytes.fromhex(md)) for n, md in d.get("classic_protocols", ())),
            )
            member.regex_hidden = tuple(d.get("regex_hidden", ()))
            member.session_deadline = now + member.session_timeout_ms(config) / 1000
            if member.revoking:
                member.revoke_deadline = now + member.rebalance_timeout_ms / 1000
            group.members[member.member_id] = member
        return group


def _tps_out(tps: Assignment) -> list[list[Any]]:
    return [[str(t), p] for t, p in sorted(tps)]


def _tps_in(rows: Iterable[list[Any]]) -> Assignment:
    return frozenset((uuid.UUID(t), int(p)) for t, p in rows)
