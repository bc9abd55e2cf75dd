"""Which batches a read_committed reader keeps: Kafka's consumer rule, as a pure filter.

The coordinator answers read_committed `find_batches` with the batches below the last stable
offset, the transaction markers among them (coordinates with `control_type >= 0` and no
bytes) and the aborted transactions that meet the range (producer id + first offset). A
transactional batch of producer P is aborted when it lies at or after the first offset of
one of P's aborted transactions and before P's next abort marker. Markers carry no records.

The filter keeps state across pages of one partition, so the same aborted transaction
reported again with the next page (its marker lies further on) is counted once.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from typing import Protocol, TypeVar

__all__ = ["CONTROL_ABORT", "AbortedFilter", "committed_batches"]

CONTROL_ABORT = 0
"""`control_type` of an abort marker (1 is commit; -1 a data batch)."""


class AbortedLike(Protocol):
    @property
    def producer_id(self) -> int: ...
    @property
    def first_offset(self) -> int: ...


class BatchLike(Protocol):
    @property
    def base_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def producer_id(self) -> int: ...
    @property
    def is_transactional(self) -> bool: ...
    @property
    def control_type(self) -> int: ...


B = TypeVar("B", bound=BatchLike)


class AbortedFilter:
    """Feed it a partition's batches in offset order (markers included) with `keep`."""

    __slots__ = ("_active", "_pending", "_seen")

    def __init__(self, aborted: Iterable[AbortedLike] = ()) -> None:
        self._pending: list[tuple[int, int]] = []
        """(first offset, producer id) of aborted transactions not yet reached: a heap."""
        self._seen: set[tuple[int, int]] = set()
        self._active: set[int] = set()
        """Producers inside an aborted transaction at the current position."""
        self.add(aborted)

    def add(self, aborted: Iterable[AbortedLike]) -> None:
        """Learn aborted transactions (repeats of known ones are ignored)."""
        for txn in aborted:
            entry = (txn.first_offset, txn.producer_id)
            if entry not in self._seen:
                self._seen.add(entry)
                heapq.heappush(self._pending, entry)

    def keep(self, batch: BatchLike) -> bool:
        """True if the batch holds records a read_committed consumer sees."""
        pending = self._pending
        while pending and pending[0][0] <= batch.last_offset:
            self._active.add(heapq.heappop(pending)[1])
        if batch.control_type >= 0:
            if batch.control_type == CONTROL_ABORT:
                self._active.discard(batch.producer_id)
            return False
        return not (batch.is_transactional and batch.producer_id in self._active)


def committed_batches(batches: Sequence[B], aborted: Iterable[AbortedLike]) -> list[B]:
    """The data batches of `batches` (one partition, offset order) that are neither markers
    nor part of an aborted transaction."""
    keep = AbortedFilter(aborted).keep
    return [batch for batch in batches if keep(batch)]
