"""The idempotent-producer rules every coordinator shares (coordinator/idempotence.py)."""

from __future__ import annotations

import uuid

from lakelog.coordinator.idempotence import (
    REMEMBERED_BATCHES,
    SEQUENCE_MODULUS,
    ProducerBatch,
    check,
    remember,
)
from lakelog.coordinator.log_types import CommitBatch, TimestampType
from lakelog.util.errors import ErrorCode

TOPIC = uuid.uuid4()


def batch(seq: int, records: int = 1, epoch: int = 0) -> CommitBatch:
    return CommitBatch(TOPIC, 0, 0, 10, records, 0, 0, TimestampType.CREATE_TIME, 7, epoch, seq)


def history(*spans: tuple[int, int], epoch: int = 0) -> list[ProducerBatch]:
    """Remembered batches with the given (base, last) sequences, one offset per record."""
    out, offset = [], 0
    for base, last in spans:
        count = (last - base) % SEQUENCE_MODULUS + 1
        out.append(ProducerBatch(epoch, base, last, offset, offset + count - 1))
        offset += count
    return out


def test_a_producer_the_partition_has_not_seen_may_start_anywhere() -> None:
    assert check([], batch(41)).error == ErrorCode.none
    assert check([], batch(-1)).error == ErrorCode.out_of_order_sequence_number


def test_next_sequence_is_accepted_and_a_gap_is_out_of_order() -> None:
    seen = history((0, 2), (3, 4))
    assert check(seen, batch(5)).error == ErrorCode.none
    assert check(seen, batch(6)).error == ErrorCode.out_of_order_sequence_number
    assert check(seen, batch(4)).error == ErrorCode.out_of_order_sequence_number


def test_a_retry_of_a_remembered_batch_is_a_duplicate_of_it() -> None:
    seen = history((0, 2), (3, 4))
    verdict = check(seen, batch(0, records=3))
    assert (verdict.error, verdict.duplicate_of) == (ErrorCode.none, seen[0])
    # Same base, other length: not that batch, and not the next one either.
    assert check(seen, batch(0, records=2)).error == ErrorCode.out_of_order_sequence_number


def test_epochs_fence_old_producers_and_restart_sequences() -> None:
    seen = history((0, 2), epoch=3)
    assert check(seen, batch(3, epoch=2)).error == ErrorCode.invalid_producer_epoch
    assert check(seen, batch(0, epoch=4)).error == ErrorCode.none
    assert check(seen, batch(3, epoch=4)).error == ErrorCode.out_of_order_sequence_number


def test_sequences_wrap_around() -> None:
    top = SEQUENCE_MODULUS - 1
    seen = history((top - 1, top))
    assert check(seen, batch(0)).error == ErrorCode.none
    wrapping = batch(top - 1, records=4)  # last sequence 1 after the wrap
    assert check(history((top - 1, 1)), wrapping).duplicate_of is not None


def test_remember_keeps_the_last_five_of_the_current_epoch() -> None:
    kept = history(*((i, i) for i in range(REMEMBERED_BATCHES)))
    entry = ProducerBatch(0, 5, 5, 5, 5)
    assert remember(kept, entry) == [*kept[1:], entry]
    fresh = ProducerBatch(1, 0, 0, 6, 6)
    assert remember(kept, fresh) == [fresh]
    assert kept == history(*((i, i) for i in range(REMEMBERED_BATCHES)))  # not changed
