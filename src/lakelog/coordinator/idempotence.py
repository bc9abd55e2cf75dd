"""The idempotent-producer rules as pure functions, so every coordinator implementation
decides duplicates, gaps and fencing the same way (Kafka's ProducerStateManager rules)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from lakelog.coordinator.log_types import CommitBatch
from lakelog.util.errors import ErrorCode

REMEMBERED_BATCHES = 5
"""Kafka keeps the metadata of the last 5 batches per producer and partition; the same
bound caps a producer's in-flight requests (max.in.flight.requests.per.connection <= 5)."""

SEQUENCE_MODULUS = 2**31


class ProducerBatch(NamedTuple):
    """One remembered batch of a producer on a partition. A tuple, not a dataclass: a
    commit makes one per accepted idempotent batch, and a tuple is built from a database
    row directly, at a third of a frozen dataclass's cost."""

    producer_epoch: int
    base_sequence: int
    last_sequence: int
    base_offset: int
    last_offset: int


@dataclass(frozen=True, slots=True)
class Verdict:
    error: ErrorCode
    duplicate_of: ProducerBatch | None = None


ACCEPT = Verdict(ErrorCode.none)
OUT_OF_ORDER = Verdict(ErrorCode.out_of_order_sequence_number)
FENCED = Verdict(ErrorCode.invalid_producer_epoch)


def check(history: Sequence[ProducerBatch], batch: CommitBatch) -> Verdict:
    """Decide a batch of a producer (producer_id >= 0) against its remembered batches on the
    partition, oldest first. An empty history is a producer the partition has not seen."""
    base = batch.base_sequence
    if base < 0:
        return OUT_OF_ORDER
    if not history:
        return ACCEPT
    current = history[-1]
    epoch = batch.producer_epoch
    if epoch < current.producer_epoch:
        return FENCED
    if epoch > current.producer_epoch:
        # A new epoch restarts the producer's sequences at 0 (Kafka: "Invalid sequence
        # number for new epoch" otherwise).
        return ACCEPT if base == 0 else OUT_OF_ORDER
    last = (base + batch.record_count - 1) % SEQUENCE_MODULUS  # CommitBatch.last_sequence
    for old in history:
        if old.base_sequence == base and old.last_sequence == last:
            return Verdict(ErrorCode.none, duplicate_of=old)
    if base != (current.last_sequence + 1) % SEQUENCE_MODULUS:
        return OUT_OF_ORDER
    return ACCEPT


def remember(history: Sequence[ProducerBatch], entry: ProducerBatch) -> list[ProducerBatch]:
    """The history after an accepted batch: a new epoch forgets the old one's batches."""
    kept = [old for old in history if old.producer_epoch == entry.producer_epoch]
    kept.append(entry)
    return kept[-REMEMBERED_BATCHES:]
