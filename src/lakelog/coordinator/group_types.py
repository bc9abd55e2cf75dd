"""Consumer groups as the batch coordinator stores them: committed offsets and the durable
state of classic and KIP-848 groups (see `coordinator.interface`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class OffsetCommit:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = None


@dataclass(frozen=True, slots=True)
class GroupOffsetCommit:
    """One OffsetCommit request's accepted offsets, as a member of a batch of commits
    written in one transaction (`commit_offset_batch`)."""

    group_id: str
    offsets: Sequence[OffsetCommit]


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    topic: str
    partition: int
    offset: int
    """-1 when the group has no committed offset for the partition."""
    leader_epoch: int = -1
    metadata: str | None = None
    commit_time: int = -1


@dataclass(frozen=True, slots=True)
class GroupMemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocols: Sequence[tuple[str, bytes]]
    """(protocol name, member metadata) in the member's order of preference."""
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class GroupRecord:
    """A classic group's durable state, saved on every generation change, so a restarted
    or replacing broker resumes the generation instead of forgetting it."""

    group_id: str
    state: str
    """Empty, PreparingRebalance, CompletingRebalance, Stable or Dead (Kafka's names)."""
    protocol_type: str | None = None
    protocol: str | None = None
    generation: int = 0
    leader: str | None = None
    members: Sequence[GroupMemberRecord] = ()
    updated_at: int = 0


@dataclass(frozen=True, slots=True)
class ConsumerGroupRecord:
    """A KIP-848 consumer group's durable state, so that any broker can take the group over
    where its last coordinator left it. `document` is the group coordinator's own JSON;
    the coordinator only stores it."""

    group_id: str
    state: str
    """Empty, Assigning, Reconciling or Stable (Kafka's names)."""
    group_epoch: int
    revision: int
    """Grows with every change of the group's state machine."""
    document: str
    updated_at: int = 0


@dataclass(frozen=True, slots=True)
class OffsetsTopicRow:
    """One record of `__consumer_offsets` as stored: its offset, key, value (None: a
    tombstone) and timestamp (ms)."""

    offset: int
    key: bytes
    value: bytes | None
    timestamp: int


@dataclass(frozen=True, slots=True)
class OffsetsTopicRead:
    """A read of one `__consumer_offsets` partition: its high watermark and records."""

    high_watermark: int
    rows: Sequence[OffsetsTopicRow]
