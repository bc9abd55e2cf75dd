"""Objects bigger than what the implementations handle per statement (SQLite binds at
most 300 keys per lookup; batch rows go out a slice of 100 batches at a time while the
rest is planned): answers and logs must be exactly those of small objects."""

from __future__ import annotations

from uuid import UUID

from contract_support import batch, commit, new_topic

from lakelog.coordinator import BatchCoordinator, CommitBatch, FindBatchesRequest, PartitionKey
from lakelog.util.errors import ErrorCode

PER_PARTITION = 3
RECORDS = 2


def producer(index: int, partition: int) -> int:
    """Most partitions have an idempotent producer (several share one id); every tenth
    has none."""
    return -1 if partition % 10 == 0 else 5000 + index % 7


def grouped(parts: list[tuple[UUID, int]], first_seq: int) -> list[CommitBatch]:
    """PER_PARTITION batches per partition, grouped by partition as in a WAL object."""
    out = []
    for i, (topic, p) in enumerate(parts):
        pid = producer(i, p)
        for k in range(PER_PARTITION):
            seq = first_seq + k * RECORDS if pid >= 0 else -1
            epoch = 0 if pid >= 0 else -1
            out.append(batch(topic, p, records=RECORDS, pid=pid, epoch=epoch, seq=seq))
    return out


async def test_a_large_object_over_many_partitions(coordinator: BatchCoordinator) -> None:
    t1, t2 = await new_topic(coordinator, 250), await new_topic(coordinator, 150)
    parts = [(t1, p) for p in range(250)] + [(t2, p) for p in range(150)]
    span = PER_PARTITION * RECORDS

    first = grouped(parts, 0)
    # Refusals among them: an unknown partition, a gap, a retry inside the object.
    extra = [
        batch(t1, 999),
        batch(t1, 1, records=RECORDS, pid=producer(1, 1), epoch=0, seq=100),
        batch(t1, 1, records=RECORDS, pid=producer(1, 1), epoch=0, seq=RECORDS),
    ]
    results = await commit(coordinator, first[:7] + extra + first[7:])
    got, tail = results[:7] + results[10:], results[7:10]
    assert [r.error for r in tail[:2]] == [
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.out_of_order_sequence_number,
    ]
    assert (tail[2].error, tail[2].base_offset, tail[2].is_duplicate) == (
        ErrorCode.none,
        RECORDS,
        True,
    )
    expected = [k * RECORDS for _ in parts for k in range(PER_PARTITION)]
    assert [(r.error, r.base_offset, r.is_duplicate) for r in got] == [
        (ErrorCode.none, offset, False) for offset in expected
    ]
    infos = await coordinator.log_info([PartitionKey(t, p) for t, p in parts])
    assert {info.high_watermark for info in infos} == {span}

    # The same batches again in a new object (a broker retrying after a lost answer):
    # idempotent ones are duplicates with their first offsets, the others are new.
    again = await commit(coordinator, first)
    for r, b, offset in zip(again, first, expected, strict=True):
        if b.producer_id >= 0:
            assert (r.error, r.base_offset, r.is_duplicate) == (ErrorCode.none, offset, True)
        else:
            assert (r.error, r.base_offset, r.is_duplicate) == (
                ErrorCode.none,
                offset + span,
                False,
            )

    # The producers carry on where the first object left them.
    after = await commit(coordinator, grouped(parts, span))
    for r, b, offset in zip(after, first, expected, strict=True):
        start = span if b.producer_id >= 0 else 2 * span
        assert (r.error, r.base_offset) == (ErrorCode.none, start + offset)
    # Each object's batches of a partition share one row (one producer, back to back),
    # rows crossing the slices the insert goes out in; the refusals in the first object
    # split (t1, 2)'s batches in two.
    found = await coordinator.find_batches(
        [FindBatchesRequest(topic, p, 0, 1 << 30) for topic, p in parts]
    )
    for i, ((topic, p), result) in enumerate(zip(parts, found, strict=True)):
        objects = 2 if producer(i, p) >= 0 else 3
        rows = [(k * span, (k + 1) * span - 1) for k in range(objects)]
        if (topic, p) == (t1, 2):
            rows[:1] = [(0, RECORDS - 1), (RECORDS, span - 1)]
        assert [(c.base_offset, c.last_offset) for c in result.batches] == rows, (topic, p)
        assert [c.byte_size for c in result.batches] == [
            (c.last_offset - c.base_offset + 1) // RECORDS * 100 for c in result.batches
        ]
