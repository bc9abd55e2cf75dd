"""`__consumer_offsets` records in Kafka's own key/value formats, so lag tools that read
the topic (Burrow and other exporters) decode them as they decode Kafka's.

Kafka's group coordinator writes these (group-coordinator's OffsetCommitKey/Value and
GroupMetadataKey/Value message specs, non-flexible versions): a key starts with an int16
"version" that names the record type, a value with its own int16 version. Strings are an
int16 length and UTF-8 bytes (-1 for null), bytes an int32 length. Lakelog writes:

- offset commits: key version 1 (group, topic, partition), value version 3 (offset, leader
  epoch, metadata, commit timestamp), which Kafka 4 writes when no expire timestamp is
  set (it never is since KIP-211);
- classic group metadata: key version 2 (group), value version 3 (protocol type,
  generation, protocol, leader, state timestamp, members);
- tombstones (null value) when an offset or a classic group is deleted or expires.

KIP-848 groups' own records (key versions 3 and up) are not written: their offsets are
offset-commit records like any group's, which is what lag tools read.
No SQL here: pure rules both engines share.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from lakelog.coordinator.group_types import GroupRecord

OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_TOPIC_PARTITIONS = 50
"""Kafka's default `offsets.topic.num.partitions`. Fixed: a group's partition is a hash of
its id modulo this count, so changing it would move every group (Kafka, too, never
changes it once the topic exists)."""

OFFSET_COMMIT_KEY_VERSION = 1
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_KEY_VERSION = 2
GROUP_METADATA_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


@dataclass(frozen=True, slots=True)
class OffsetsTopicRecord:
    """One record to append: its partition of `__consumer_offsets`, key, value (None: a
    tombstone) and timestamp (ms)."""

    partition: int
    key: bytes
    value: bytes | None
    timestamp: int


def java_string_hash(text: str) -> int:
    """Java's `String.hashCode()`: over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, partitions: int = OFFSETS_TOPIC_PARTITIONS) -> int:
    """Kafka's `Utils.abs(groupId.hashCode()) % partitions`: Utils.abs is Math.abs except
    that Integer.MIN_VALUE (which Math.abs leaves negative) becomes 0."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def _string(value: str | None) -> bytes:
    if value is None:
        return _I16.pack(-1)
    data = value.encode()
    return _I16.pack(len(data)) + data


def _bytes(value: bytes) -> bytes:
    return _I32.pack(len(value)) + value


def offset_commit_key(group_id: str, topic: str, partition: int) -> bytes:
    return (
        _I16.pack(OFFSET_COMMIT_KEY_VERSION)
        + _string(group_id)
        + _string(topic)
        + _I32.pack(partition)
    )


def offset_commit_value(
    offset: int, leader_epoch: int, metadata: str | None, commit_time: int
) -> bytes:
    """Kafka's metadata string is not nullable here: a null commit metadata is written as
    "" (OffsetAndMetadata.NO_METADATA), as Kafka does."""
    return (
        _I16.pack(OFFSET_COMMIT_VALUE_VERSION)
        + _I64.pack(offset)
        + _I32.pack(leader_epoch)
        + _string(metadata or "")
        + _I64.pack(commit_time)
    )


def group_metadata_key(group_id: str) -> bytes:
    return _I16.pack(GROUP_METADATA_KEY_VERSION) + _string(group_id)


def group_metadata_value(group: GroupRecord) -> bytes:
    """A classic group as Kafka's GroupMetadataValue v3: each member's subscription is its
    metadata for the group's chosen protocol (empty while none is chosen)."""
    out = bytearray(_I16.pack(GROUP_METADATA_VALUE_VERSION))
    out += _string(group.protocol_type or "")
    out += _I32.pack(group.generation)
    out += _string(group.protocol)
    out += _string(group.leader)
    out += _I64.pack(group.updated_at)
    out += _I32.pack(len(group.members))
    for m in group.members:
        subscription = next(
            (bytes(meta) for name, meta in m.protocols if name == group.protocol), b""
        )
        out += _string(m.member_id)
        out += _string(m.group_instance_id)
        out += _string(m.client_id)
        out += _string(m.client_host)
        out += _I32.pack(m.rebalance_timeout_ms)
        out += _I32.pack(m.session_timeout_ms)
        out += _bytes(subscription)
        out += _bytes(bytes(m.assignment))
    return bytes(out)


def offset_commit_records(
    group_id: str,
    commits: Sequence[tuple[str, int, int, int, str | None]],
    commit_time: int,
) -> list[OffsetsTopicRecord]:
    """The records of a group's commits: (topic, partition, offset, leader epoch, metadata)
    each, in the order given (a repeated partition's later commit comes later)."""
    partition = partition_for(group_id)
    return [
        OffsetsTopicRecord(
            partition,
            offset_commit_key(group_id, topic, p),
            offset_commit_value(offset, epoch, metadata, commit_time),
            commit_time,
        )
        for topic, p, offset, epoch, metadata in commits
    ]


def offset_tombstones(
    deleted: Sequence[tuple[str, str, int]], now_ms: int
) -> list[OffsetsTopicRecord]:
    """Tombstones for deleted offsets: (group, topic, partition) each."""
    return [
        OffsetsTopicRecord(
            partition_for(group_id), offset_commit_key(group_id, topic, p), None, now_ms
        )
        for group_id, topic, p in deleted
    ]
