"""ListTransactions filters (KIP-664, KIP-994 duration, KIP-1152 id pattern), as pure
functions over the coordinator's `TransactionInfo` rows."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from lakelog.coordinator.txn_types import TransactionInfo

KAFKA_STATES = frozenset(
    {
        "Empty",
        "Ongoing",
        "PrepareCommit",
        "PrepareAbort",
        "CompleteCommit",
        "CompleteAbort",
        "Dead",
        "PrepareEpochFence",
    }
)
"""Every state name Kafka knows: a filter on one of these is valid even if Lakelog never
persists it (Prepare* states do not exist here: ends are atomic)."""

MAX_PATTERN_CHARS = 1000
"""Longer transactional id patterns are refused (a bound on regex compile work)."""


class InvalidPattern(ValueError):
    """The transactional id pattern is not a usable regular expression."""


@dataclass(frozen=True, slots=True)
class ListFilter:
    states: frozenset[str] = frozenset()
    """Requested state names (unknown names included: they match nothing)."""
    producer_ids: frozenset[int] = frozenset()
    duration_ms: int = -1
    """Only transactions running longer than this; < 0: no filter."""
    pattern: re.Pattern[str] | None = field(default=None)


def unknown_states(requested: Iterable[str]) -> list[str]:
    """Requested state names Kafka does not know, in request order, once each."""
    seen: list[str] = []
    for name in requested:
        if name not in KAFKA_STATES and name not in seen:
            seen.append(name)
    return seen


def compile_pattern(pattern: str | None) -> re.Pattern[str] | None:
    """None or "" means no filter; the whole id must match (Java's `matches()`)."""
    if not pattern:
        return None
    if len(pattern) > MAX_PATTERN_CHARS:
        raise InvalidPattern(f"pattern longer than {MAX_PATTERN_CHARS} characters")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise InvalidPattern(str(exc)) from exc


def make_filter(
    states: Sequence[str],
    producer_ids: Sequence[int],
    duration_ms: int = -1,
    pattern: str | None = None,
) -> ListFilter:
    return ListFilter(
        frozenset(states), frozenset(producer_ids), duration_ms, compile_pattern(pattern)
    )


def matches(info: TransactionInfo, flt: ListFilter, now_ms: int) -> bool:
    if flt.producer_ids and info.producer_id not in flt.producer_ids:
        return False
    if flt.states and str(info.state) not in flt.states:
        return False
    if flt.duration_ms >= 0 and (
        info.start_time_ms < 0 or now_ms - info.start_time_ms <= flt.duration_ms
    ):
        return False
    return flt.pattern is None or flt.pattern.fullmatch(info.transactional_id) is not None
