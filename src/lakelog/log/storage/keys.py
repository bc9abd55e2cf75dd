"""The object key layout: the only names Lakelog writes under a store's root.

`wal/<uuid7>` holds produce objects; `seg/<topic-id>/<partition>/<base-offset>-<uuid7>`
holds merged or compacted ones; `inline/<uuid7>` names a small produce object whose bytes
live in the batch coordinator, never in the store (issue 32: `inline_store`).
UUIDv7 makes listings time-ordered and lets GC judge an object's age from its name; the
base offset is zero-padded to 20 digits (as Kafka names segment files) so a partition's
segments also list in offset order.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass

from lakelog.log.storage.uuid7 import uuid7, uuid7_time_ms

__all__ = [
    "INLINE_PREFIX",
    "SEGMENT_PREFIX",
    "WAL_PREFIX",
    "InvalidKeyError",
    "KeyKind",
    "ParsedKey",
    "is_inline_key",
    "key_kind",
    "new_inline_key",
    "new_wal_key",
    "offsets_in_headers",
    "parse_key",
    "segment_key",
    "segment_prefix",
]

WAL_PREFIX = "wal"
INLINE_PREFIX = "inline"
_INLINE_KEY_START = INLINE_PREFIX + "/"
SEGMENT_PREFIX = "seg"
_SEGMENT_KEY_START = SEGMENT_PREFIX + "/"
_OFFSET_DIGITS = 20
_MAX_PARTITION = 2**31 - 1
_MAX_OFFSET = 2**63 - 1


class KeyKind(enum.StrEnum):
    """What an object under the store's root is; UNKNOWN ones were not written by us."""

    WAL = "wal"
    SEGMENT = "seg"
    UNKNOWN = "unknown"


class InvalidKeyError(ValueError):
    """A key that does not follow the layout (a stray object, or a typo)."""


@dataclass(frozen=True, slots=True)
class ParsedKey:
    """The parts of a key; topic fields are None for WAL objects (they mix partitions)."""

    kind: KeyKind
    object_id: uuid.UUID
    created_ms: int
    topic_id: uuid.UUID | None = None
    partition: int | None = None
    base_offset: int | None = None


def new_wal_key() -> str:
    """A fresh, time-ordered key for one WAL object."""
    return f"{WAL_PREFIX}/{uuid7()}"


def new_inline_key() -> str:
    """A fresh key for one inline file (bytes in the coordinator, batches as in a WAL
    object: `offsets_in_headers` is false for it)."""
    return f"{INLINE_PREFIX}/{uuid7()}"


def is_inline_key(key: str) -> bool:
    return key.startswith(_INLINE_KEY_START)


def segment_prefix(topic_id: uuid.UUID, partition: int | None = None) -> str:
    """The listing prefix of a topic's (or one partition's) segment objects."""
    if partition is None:
        return f"{SEGMENT_PREFIX}/{topic_id}"
    _check_partition(partition)
    return f"{SEGMENT_PREFIX}/{topic_id}/{partition}"


def offsets_in_headers(object_key: str) -> bool:
    """Whether the batches of the object's runs carry their real base offsets (segments,
    which the pipeline writes so) or follow each other densely from the coordinate (WAL
    objects: the producer's bytes). See `protocol.batch_runs`."""
    return object_key.startswith(_SEGMENT_KEY_START)


def segment_key(topic_id: uuid.UUID, partition: int, base_offset: int) -> str:
    """A fresh key for a merged/compacted object of one partition starting at base_offset."""
    if not 0 <= base_offset <= _MAX_OFFSET:
        raise ValueError(f"base offset out of range: {base_offset}")
    return f"{segment_prefix(topic_id, partition)}/{base_offset:0{_OFFSET_DIGITS}d}-{uuid7()}"


def key_kind(key: str) -> KeyKind:
    """Classify a key without raising: UNKNOWN for anything that is not our layout."""
    try:
        return parse_key(key).kind
    except InvalidKeyError:
        return KeyKind.UNKNOWN


def parse_key(key: str) -> ParsedKey:
    """Split a key into its parts; `InvalidKeyError` unless it is exactly our layout."""
    parts = key.split("/")
    if len(parts) == 2 and parts[0] == WAL_PREFIX:
        object_id = _parse_uuid7(parts[1], key)
        return ParsedKey(KeyKind.WAL, object_id, uuid7_time_ms(object_id))
    if len(parts) == 4 and parts[0] == SEGMENT_PREFIX:
        topic_id = _parse_canonical_uuid(parts[1], key)
        partition = _parse_decimal(parts[2], key)
        if partition > _MAX_PARTITION:
            raise InvalidKeyError(f"partition out of range in key {key!r}")
        offset_text, sep, id_text = parts[3].partition("-")
        digits_ok = offset_text.isascii() and offset_text.isdigit()
        if not sep or len(offset_text) != _OFFSET_DIGITS or not digits_ok:
            raise InvalidKeyError(f"bad segment name in key {key!r}")
        base_offset = int(offset_text)
        if base_offset > _MAX_OFFSET:
            raise InvalidKeyError(f"base offset out of range in key {key!r}")
        object_id = _parse_uuid7(id_text, key)
        return ParsedKey(
            KeyKind.SEGMENT,
            object_id,
            uuid7_time_ms(object_id),
            topic_id,
            partition,
            base_offset,
        )
    raise InvalidKeyError(f"not a Lakelog object key: {key!r}")


def _check_partition(partition: int) -> None:
    if not 0 <= partition <= _MAX_PARTITION:
        raise ValueError(f"partition out of range: {partition}")


def _parse_decimal(text: str, key: str) -> int:
    """A non-negative int written canonically (no sign, no leading zeros)."""
    if not text.isascii() or not text.isdigit() or (len(text) > 1 and text[0] == "0"):
        raise InvalidKeyError(f"bad number {text!r} in key {key!r}")
    return int(text)


def _parse_canonical_uuid(text: str, key: str) -> uuid.UUID:
    """A UUID in the lowercase hyphenated form `str(UUID)` gives, so keys are unique."""
    try:
        value = uuid.UUID(text)
    except ValueError:
        raise InvalidKeyError(f"bad uuid {text!r} in key {key!r}") from None
    if str(value) != text:
        raise InvalidKeyError(f"non-canonical uuid {text!r} in key {key!r}")
    return value


def _parse_uuid7(text: str, key: str) -> uuid.UUID:
    value = _parse_canonical_uuid(text, key)
    if value.version != 7:
        raise InvalidKeyError(f"object id is not a UUIDv7 in key {key!r}")
    return value
