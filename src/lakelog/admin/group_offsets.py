"""The arithmetic behind `lakelog groups`, free of I/O so it is tested on its own: which
partitions a reset touches, where each one lands, and each partition's lag."""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from lakelog.admin.results import GroupDescription, TopicPartition

INACTIVE_STATES = frozenset({"empty", "dead"})
"""Group states in which offsets may be reset: no member could overwrite them."""
KNOWN_STATES = (
    "PreparingRebalance",
    "CompletingRebalance",
    "Stable",
    "Dead",
    "Empty",
    "Assigning",
    "Reconciling",
)


class PlanError(ValueError):
    """A reset that cannot be planned (unknown partition, nothing to shift from)."""


class ResetMode(StrEnum):
    EARLIEST = "to-earliest"
    LATEST = "to-latest"
    OFFSET = "to-offset"
    DATETIME = "to-datetime"
    SHIFT = "shift-by"


@dataclass(frozen=True, slots=True)
class ResetSpec:
    mode: ResetMode
    value: int = 0
    """The offset (to-offset), the shift (shift-by) or the time in ms (to-datetime)."""


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    """What is known about one partition when planning its reset."""

    log_start: int
    log_end: int
    committed: int | None = None
    at_time: int | None = None
    """First offset at or after the to-datetime time; None when no record is that late."""


@dataclass(frozen=True, slots=True)
class PlannedOffset:
    topic: str
    partition: int
    offset: int
    requested: int
    """The offset the mode asked for, before clamping to the log's range."""

    @property
    def clamped(self) -> bool:
        return self.offset != self.requested


def canonical_state(text: str) -> str:
    """A group state as the protocol spells it ('stable' -> 'Stable'); unknown names pass
    through, so states newer than this tool still filter."""
    for state in KNOWN_STATES:
        if state.lower() == text.strip().lower():
            return state
    return text.strip()


def parse_datetime(text: str) -> int:
    """ISO 8601 to epoch milliseconds; a time without a zone is local time, as in Kafka's
    tool."""
    try:
        moment = datetime.datetime.fromisoformat(text.strip())
    except ValueError as exc:
        raise PlanError(f"not an ISO 8601 date-time: {text!r}") from exc
    if moment.tzinfo is None:
        moment = moment.astimezone()
    return int(moment.timestamp() * 1000)


def parse_topic_arg(arg: str) -> tuple[str, tuple[int, ...] | None]:
    """'topic' (every partition) or 'topic:0,2'."""
    topic, sep, rest = arg.rpartition(":") if ":" in arg else (arg, "", "")
    if not sep:
        return arg.strip(), None
    try:
        partitions = tuple(sorted({int(p) for p in rest.split(",") if p.strip()}))
    except ValueError as exc:
        raise PlanError(f"bad partition list in {arg!r}") from exc
    if not topic or not partitions:
        raise PlanError(f"expected TOPIC or TOPIC:P,P, got {arg!r}")
    return topic.strip(), partitions


def select_partitions(
    topic_args: Sequence[str],
    all_topics: bool,
    partition_counts: Mapping[str, int],
    committed: Iterable[TopicPartition],
) -> list[TopicPartition]:
    """The partitions a reset touches: the named ones, or with `all_topics` every partition
    the group has committed, as Kafka's tool does."""
    if all_topics:
        return sorted(set(committed))
    chosen: set[TopicPartition] = set()
    for arg in topic_args:
        topic, partitions = parse_topic_arg(arg)
        if topic not in partition_counts:
            raise PlanError(f"topic {topic!r} does not exist")
        count = partition_counts[topic]
        for p in range(count) if partitions is None else partitions:
            if not 0 <= p < count:
                raise PlanError(f"topic {topic!r} has no partition {p} (it has {count})")
            chosen.add((topic, p))
    return sorted(chosen)


def clamp(offset: int, log_start: int, log_end: int) -> int:
    """An offset moved into [log start, log end], where a consumer can resume."""
    return max(log_start, min(offset, log_end))


def target_offset(spec: ResetSpec, tp: TopicPartition, p: PartitionOffsets) -> int:
    """Where the mode puts one partition, before clamping."""
    match spec.mode:
        case ResetMode.EARLIEST:
            return p.log_start
        case ResetMode.LATEST:
            return p.log_end
        case ResetMode.OFFSET:
            return spec.value
        case ResetMode.DATETIME:
            return p.log_end if p.at_time is None or p.at_time < 0 else p.at_time
        case ResetMode.SHIFT:
            if p.committed is None:
                raise PlanError(
                    f"cannot shift {tp[0]}-{tp[1]}: the group has no committed offset there"
                )
            return p.committed + spec.value
    raise PlanError(f"unknown reset mode {spec.mode!r}")


def plan_reset(
    spec: ResetSpec, partitions: Mapping[TopicPartition, PartitionOffsets]
) -> list[PlannedOffset]:
    """The new offset of every partition, clamped to its log, sorted by topic and
    partition."""
    plan = []
    for tp in sorted(partitions):
        p = partitions[tp]
        wanted = target_offset(spec, tp, p)
        plan.append(PlannedOffset(tp[0], tp[1], clamp(wanted, p.log_start, p.log_end), wanted))
    return plan


@dataclass(frozen=True, slots=True)
class OffsetRow:
    """One line of `describe`: a partition, its progress and who consumes it."""

    topic: str
    partition: int
    current_offset: int | None
    log_end_offset: int | None
    consumer_id: str | None
    host: str | None
    client_id: str | None

    @property
    def lag(self) -> int | None:
        if self.current_offset is None or self.log_end_offset is None:
            return None
        return self.log_end_offset - self.current_offset


def offset_rows(
    group: GroupDescription,
    committed: Mapping[TopicPartition, int],
    log_ends: Mapping[TopicPartition, int | None],
) -> list[OffsetRow]:
    """A row per partition that is assigned to a member or has a committed offset, like
    kafka-consumer-groups --describe: members' partitions first (by member), then the
    committed partitions nobody owns."""
    rows = []
    seen: set[TopicPartition] = set()
    for member in sorted(group.members, key=lambda m: (m.client_id, m.member_id)):
        for tp in member.partitions():
            seen.add(tp)
            rows.append(
                OffsetRow(
                    tp[0],
                    tp[1],
                    committed.get(tp),
                    log_ends.get(tp),
                    member.member_id,
                    member.client_host,
                    member.client_id,
                )
            )
    for tp in sorted(set(committed) - seen):
        rows.append(OffsetRow(tp[0], tp[1], committed[tp], log_ends.get(tp), None, None, None))
    return rows
