"""Server-side partition assignors for KIP-848 consumer groups: `uniform` and `range`.

Pure functions: members' subscriptions (as topic ids) and the subscribed topics' partition
counts in, a target assignment out. The group state machine decides when to run one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from uuid import UUID

TopicPartition = tuple[UUID, int]
Assignment = frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class AssignorMember:
    """What an assignor may know about a member."""

    topics: frozenset[UUID]
    instance_id: str | None = None


AssignorFn = Callable[
    [Mapping[str, AssignorMember], Mapping[UUID, int], Mapping[str, Assignment]],
    dict[str, Assignment],
]


def uniform(
    members: Mapping[str, AssignorMember],
    partitions: Mapping[UUID, int],
    current: Mapping[str, Assignment],
) -> dict[str, Assignment]:
    """Spread partitions evenly over the members subscribed to them, moving as few as
    possible: each member keeps what it has unless it is above its fair share."""
    owned: dict[str, set[TopicPartition]] = {m: set() for m in members}
    taken: set[TopicPartition] = set()
    for member_id in sorted(current):
        if member_id not in members:
            continue
        subscribed = members[member_id].topics
        for tp in sorted(current[member_id]):
            topic, index = tp
            if topic in subscribed and index < partitions.get(topic, 0) and tp not in taken:
                owned[member_id].add(tp)
                taken.add(tp)
    eligible = {
        topic: sorted(m for m, info in members.items() if topic in info.topics)
        for topic in partitions
    }
    for topic in sorted(partitions):
        candidates = eligible[topic]
        if not candidates:
            continue
        for index in range(partitions[topic]):
            tp = (topic, index)
            if tp not in taken:
                target = min(candidates, key=lambda m: (len(owned[m]), m))
                owned[target].add(tp)
                taken.add(tp)
    _balance(owned, eligible)
    return {m: frozenset(tps) for m, tps in owned.items()}


def _balance(owned: dict[str, set[TopicPartition]], eligible: Mapping[UUID, list[str]]) -> None:
    """Move partitions from a member to an eligible one holding at least two fewer until
    none can move. Each move lowers the sum of squared counts, so this ends."""
    moved = True
    while moved:
        moved = False
        for giver in sorted(owned, key=lambda m: (-len(owned[m]), m)):
            count = len(owned[giver])
            for tp in sorted(owned[giver]):
                takers = [m for m in eligible[tp[0]] if len(owned[m]) <= count - 2]
                if takers:
                    taker = min(takers, key=lambda m: (len(owned[m]), m))
                    owned[giver].discard(tp)
                    owned[taker].add(tp)
                    moved = True
                    break
            if moved:
                break


def range_(
    members: Mapping[str, AssignorMember],
    partitions: Mapping[UUID, int],
    current: Mapping[str, Assignment],
) -> dict[str, Assignment]:
    """Per topic, contiguous ranges over the subscribed members in a fixed order (instance
    id when static, else member id), so members subscribed to co-partitioned topics get
    the same partition numbers of each. Not sticky beyond that order."""
    del current
    owned: dict[str, set[TopicPartition]] = {m: set() for m in members}
    for topic in sorted(partitions):
        subscribed = sorted(
            (m for m, info in members.items() if topic in info.topics),
            key=lambda m: (members[m].instance_id is None, members[m].instance_id or "", m),
        )
        if not subscribed:
            continue
        count = partitions[topic]
        share, extra = divmod(count, len(subscribed))
        start = 0
        for i, member_id in enumerate(subscribed):
            size = share + (1 if i < extra else 0)
            owned[member_id].update((topic, p) for p in range(start, start + size))
            start += size
    return {m: frozenset(tps) for m, tps in owned.items()}


ASSIGNORS: dict[str, AssignorFn] = {"uniform": uniform, "range": range_}
DEFAULT_ASSIGNOR = "uniform"
