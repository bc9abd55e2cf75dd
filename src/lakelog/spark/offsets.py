"""Offset specs and stream positions, as pure functions (no I/O, unit-tested).

An offset spec is what users write in `startingOffsets` / `endingOffsets`: `earliest`,
`latest`, or JSON per partition (`{"topic":{"0":23,"1":-2}}`, -2 earliest, -1 latest),
exactly Spark's Kafka source format. A stream position is the same JSON with concrete
offsets only: for each partition the next offset to read. Spark keeps it in the checkpoint,
so a restarted query resumes exactly where the last committed micro-batch ended.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "EARLIEST",
    "FROM_LOG_START",
    "LATEST",
    "OffsetRange",
    "OffsetSpec",
    "PartitionBounds",
    "TopicPartition",
    "parse_offset_spec",
    "position_from_json",
    "position_to_json",
    "rate_limit",
    "resolve",
]

EARLIEST = -2
LATEST = -1
FROM_LOG_START = -2
"""`OffsetRange.start` for a partition first seen by a stream: wherever its log starts."""

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """What one Spark task reads. Here, not in `range_reader`, so planning (which only
    makes these) does not import the reading code."""

    topic: str
    topic_id: str
    partition: int
    start: int
    """First offset to read, or FROM_LOG_START."""
    end: int
    """First offset not to read."""


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    kind: Literal["earliest", "latest", "specific"]
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    """kind "specific": an offset >= 0, EARLIEST or LATEST per partition."""


@dataclass(frozen=True, slots=True)
class PartitionBounds:
    """What a reader may read of one partition right now."""

    topic: str
    topic_id: str
    partition: int
    log_start: int
    end: int
    """The last stable offset for read_committed, else the high watermark."""

    @property
    def key(self) -> TopicPartition:
        return (self.topic, self.partition)


def parse_offset_spec(text: str, option: str, topics: Sequence[str]) -> OffsetSpec:
    """Parse `earliest`, `latest` or per-partition JSON; ValueError names the option."""
    word = text.strip().lower()
    if word in ("earliest", "latest"):
        return OffsetSpec(word)  # type: ignore[arg-type]
    try:
        raw = json.loads(text)
    except ValueError:
        raise ValueError(
            f"option {option} must be earliest, latest or JSON like "
            f'{{"topic":{{"0":23,"1":-2}}}}, got {text!r}'
        ) from None
    offsets = _parse_partition_map(raw, option)
    unknown = sorted({t for t, _ in offsets} - set(topics))
    if unknown:
        raise ValueError(f"option {option} names topics not subscribed: {', '.join(unknown)}")
    for (topic, partition), offset in offsets.items():
        if offset < EARLIEST:
            raise ValueError(f"option {option}: bad offset {offset} for {topic}-{partition}")
    return OffsetSpec("specific", offsets)


def _parse_partition_map(raw: object, what: str) -> dict[TopicPartition, int]:
    if not isinstance(raw, dict):
        raise ValueError(f"{what} must be a JSON object of topics")
    out: dict[TopicPartition, int] = {}
    for topic, parts in raw.items():
        if not isinstance(parts, dict):
            raise ValueError(f"{what}: topic {topic!r} must map partitions to offsets")
        for partition, offset in parts.items():
            try:
                number = int(partition)
            except ValueError:
                raise ValueError(f"{what}: bad partition {partition!r} of {topic!r}") from None
            if number < 0 or isinstance(offset, bool) or not isinstance(offset, int):
                raise ValueError(f"{what}: bad entry {partition!r}: {offset!r} of {topic!r}")
            out[(str(topic), number)] = offset
    return out


def resolve(
    spec: OffsetSpec, bounds: Sequence[PartitionBounds], option: str
) -> dict[TopicPartition, int]:
    """Concrete offsets for every partition in `bounds`.

    A specific spec must name every partition (Spark's rule: use -2 or -1 for the ones you
    do not care about) and no partition that does not exist."""
    if spec.kind == "earliest":
        return {b.key: b.log_start for b in bounds}
    if spec.kind == "latest":
        return {b.key: b.end for b in bounds}
    known = {b.key for b in bounds}
    missing = sorted(known - set(spec.offsets))
    if missing:
        names = ", ".join(f"{t}-{p}" for t, p in missing)
        raise ValueError(
            f"option {option} must give every partition an offset (-2 earliest, -1 latest); "
            f"missing: {names}"
        )
    extra = sorted(set(spec.offsets) - known)
    if extra:
        names = ", ".join(f"{t}-{p}" for t, p in extra)
        raise ValueError(f"option {option} names partitions that do not exist: {names}")
    out: dict[TopicPartition, int] = {}
    for b in bounds:
        offset = spec.offsets[b.key]
        out[b.key] = b.log_start if offset == EARLIEST else b.end if offset == LATEST else offset
    return out


def position_to_json(position: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """A stream position as Spark stores it: {"topic": {"0": next offset}}."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(position.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def position_from_json(raw: object) -> dict[TopicPartition, int]:
    position = _parse_partition_map(raw, "stream offset")
    for key, offset in position.items():
        if offset < 0:
            raise ValueError(f"stream offset: negative offset {offset} for {key}")
    return position


def rate_limit(
    start: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    max_offsets: int,
) -> dict[TopicPartition, int]:
    """The end position of a micro-batch of at most about `max_offsets` offsets, shared out
    in proportion to each partition's backlog (Spark's Kafka source rule: a partition's
    share is floored, but a small backlog still gets at least one offset so none starves).
    Partitions not in `start` start at their latest entry's own start (callers put them in
    `start` first)."""
    sizes = {tp: max(0, end - start.get(tp, end)) for tp, end in latest.items()}
    total = sum(sizes.values())
    if total <= max_offsets:
        return dict(latest)
    out: dict[TopicPartition, int] = {}
    for tp, end in latest.items():
        begin = start.get(tp, end)
        share = max_offsets * (sizes[tp] / total)
        step = math.ceil(share) if share < 1 else math.floor(share)
        out[tp] = min(end, begin + step)
    return out
