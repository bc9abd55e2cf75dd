"""Cluster mirroring (KIP-1279) in the batch coordinator: mirror definitions, per-partition
state and the batches a mirror commit carries.

Design, in short:
- A mirror (`mirrors` row) names a source cluster and the topics (names and patterns) it
  copies. Each mirrored partition has one `mirror_partitions` row: its state, the source
  leader epoch of the last batch copied, lease owner and expiry, failure reason, the
  source's end offsets (for lag), and the failover offset once stopped.
- A topic with a partition in any state but STOPPED is read-only: `commit_file` refuses
  its batches with READ_ONLY_ERROR, so normal produce can never interleave with mirrored
  offsets. Only `commit_mirror` writes there, at the source's offsets (gaps allowed), and
  only the broker holding the partition's lease, in state MIRRORING.
- Transaction state is rebuilt locally from the mirrored bytes, never copied: a
  transactional data batch opens its producer's range in the partition (`mirror_txns`), a
  control batch closes it and, for an abort, records the aborted range in `aborted_txns`.
  The last stable offset reads `mirror_txns` beside `txn_partitions`, so read_committed
  fetches of mirror topics answer like those of local transactions. Mirrored markers keep
  their real bytes in the object (object key set, control_type 0/1).
- Failover stops a partition (STOPPING: commits refused), truncates it to its last stable
  offset (nothing of a transaction the source had not decided survives), records that
  offset and epoch, and marks it STOPPED: the topic is writable again at the next offset.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from uuid import UUID

from lakelog.util.errors import ErrorCode

READ_ONLY_ERROR = ErrorCode.invalid_request
"""KIP-1279 answers a produce to a mirror topic with ReadOnlyTopicException, which has no
code in the wire protocol yet. INVALID_REQUEST, as Kafka answers a write no one may make
(creating `__cluster_metadata`, KAFKA-16975): clients fail the delivery at once without
retrying, and the broker's error message (Produce v8+) says the topic is a read-only
mirror. Not TOPIC_AUTHORIZATION_FAILED: that tells the operator to look at ACLs, and
librdkafka then forgets the topic's partitions ("partition count changed ... to 0")."""

PID_CEILING = 2**63 - 1
"""Long.MAX_VALUE: mirrored producer ids become `PID_CEILING - source_pid - 1`."""


def mirrored_producer_id(source_pid: int) -> int:
    """The destination's producer id for a source producer id: positive (so idempotence
    and transaction tracking apply) and far above locally allocated ids. -1 stays -1."""
    return source_pid if source_pid < 0 else PID_CEILING - source_pid - 1


class MirrorState(enum.StrEnum):
    PREPARING = "PREPARING"
    """Waiting for its owner to pick the start offset (or check failback divergence)."""
    MIRRORING = "MIRRORING"
    FAILED = "FAILED"
    """Stopped by an error of its own (corrupt batch, divergence, data lost at the
    source); the others keep going. Still read-only; add-topics restarts it."""
    STOPPING = "STOPPING"
    """Failover asked: no commit accepted; truncation pending."""
    STOPPED = "STOPPED"
    """Failed over: truncated to its last stable offset and writable."""


ACTIVE_STATES = (MirrorState.PREPARING, MirrorState.MIRRORING)
"""States a lease owner works on."""


@dataclass(frozen=True, slots=True)
class MirrorDefinition:
    name: str
    source_bootstrap: str
    source_configs: Mapping[str, str] = field(default_factory=dict)
    """Client settings for the source (security.protocol, sasl.*, ssl.*)."""
    topics: Sequence[str] = ()
    patterns: Sequence[str] = ()
    """Regular expressions (full match) over source topic names."""
    created_at: int = 0


@dataclass(frozen=True, slots=True)
class MirrorResult:
    error: ErrorCode
    message: str | None = None


@dataclass(frozen=True, slots=True)
class MirrorPartition:
    """One mirrored partition's state, as stored plus the local log bounds."""

    mirror: str
    topic: str
    topic_id: UUID
    partition: int
    state: MirrorState
    high_watermark: int
    """The local log end: the next offset to copy."""
    last_stable_offset: int
    log_start_offset: int
    source_epoch: int
    """The partition leader epoch in the header of the last batch copied (-1: none)."""
    lease_owner: int
    lease_expiry: int
    reason: str | None
    source_end_offset: int
    """The source's last stable offset at the owner's last report (-1: unknown)."""
    source_high_watermark: int
    lag_ms: int
    failover_offset: int
    """Where failover truncated the partition (-1: not failed over)."""
    updated_at: int

    @property
    def lag_records(self) -> int:
        if self.source_end_offset < 0:
            return -1
        return max(0, self.source_end_offset - self.high_watermark)


@dataclass(frozen=True, slots=True)
class MirrorPartitionUpdate:
    """What a lease owner reports; None leaves a field as it is. Refused (NOT_LEADER)
    unless `broker_id` holds the lease; broker_id -1 is an administrator (no lease)."""

    topic_id: UUID
    partition: int
    broker_id: int
    state: MirrorState | None = None
    reason: str | None = None
    source_end_offset: int | None = None
    source_high_watermark: int | None = None
    lag_ms: int | None = None
    start_offset: int | None = None
    """PREPARING -> MIRRORING on an empty partition: the log starts (and ends) here, the
    source's log start, so offsets match from the first batch."""


@dataclass(frozen=True, slots=True)
class MirrorBatch:
    """One source batch in an uploaded object, at the offsets it has on the source."""

    topic_id: UUID
    partition: int
    byte_offset: int
    byte_size: int
    base_offset: int
    last_offset: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    """Already rewritten (`mirrored_producer_id`), as in the stored bytes."""
    producer_epoch: int
    base_sequence: int
    is_transactional: bool
    control_type: int = -1
    """-1 data; 0 abort or 1 commit for a control batch (read from its record key)."""
    leader_epoch: int = -1
