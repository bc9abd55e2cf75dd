"""The idempotent-producer rules as pure functions, so every coordinator implementation
decides duplicates, gaps and fencing the same way (Kafka's ProducerStateManager rules)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lakelog.coordinator.interface import CommitBatch
from lakelog.errors import ErrorCode

REMEMBERED_BATCHES = 5
"""Kafka keeps the metadata of the last 5 batches per producer and partition; the same
bound caps a producer's in-flight requests (max.in.flight.requests.per.connection <= 5)."""

SEQUENCE_MODULUS = 2**31


@dataclass(frozen=True, slots=True)
class ProducerBatch:
    """One remembered batch of a producer on a partition."""

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


def check(history: Sequence[ProducerBatch], batch: CommitBatch) -> Verdict:
    """Decide a batch of a producer (producer_id >= 0) against its remembered batches on the
    partition, oldest first. An empty history is a producer the partition has not seen."""
    if batch.base_sequence < 0:
        return Verdict(ErrorCode.out_of_order_sequence_number)
    if not history:
        return ACCEPT
    current = history[-1]
    if batch.producer_epoch < current.producer_epoch:
        return Verdict(ErrorCode.invalid_producer_epoch)
    if batch.producer_epoch > current.producer_epoch:
        # A new epoch restarts the producer's sequences at 0 (Kafka: "Invalid sequence
        # number for new epoch" otherwise).
        return (
            ACCEPT if batch.base_sequence == 0 else Verdict(ErrorCode.out_of_order_sequence_number)
        )
    for old in history:
        if (old.base_sequence, old.last_sequence) == (batch.base_sequence, batch.last_sequence):
            return Verdict(ErrorCode.none, duplicate_of=old)
    if batch.base_sequence != (current.last_sequence + 1) % SEQUENCE_MODULUS:
        return Verdict(ErrorCode.out_of_order_sequence_number)
    return ACCEPT


def remember(history: Sequence[ProducerBatch], entry: ProducerBatch) -> list[ProducerBatch]:
    """The history after an accepted batch: a new epoch forgets the old one's batches."""
    kept = [old for old in history if old.producer_epoch == entry.producer_epoch]
    kept.append(entry)
    return kept[-REMEMBERED_BATCHES:]
