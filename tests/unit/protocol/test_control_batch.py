"""Synthesized control batches, read back by kafka-python's own record parser (what a
consumer does) and by our header reader."""

from __future__ import annotations

import pytest
from kafka.record.default_records import ControlRecord, DefaultRecordBatch
from kafka.record.memory_records import MemoryRecords

from lakelog.log.protocol.control_batch import (
    CONTROL_ABORT,
    CONTROL_BATCH_SIZE,
    CONTROL_COMMIT,
    control_batch,
)
from lakelog.log.protocol.records import read_header, split_batches, validate


@pytest.mark.parametrize("control_type", [CONTROL_ABORT, CONTROL_COMMIT])
def test_kafka_python_reads_a_control_batch(control_type: int) -> None:
    data = control_batch(1234, 77, 3, control_type, 1_700_000_000_123)
    assert len(data) == CONTROL_BATCH_SIZE == 78
    batch = DefaultRecordBatch(data)
    assert batch.validate_crc()
    assert batch.is_control_batch and batch.is_transactional
    assert (batch.base_offset, batch.last_offset_delta, batch.records_count) == (1234, 0, 1)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (77, 3, -1)
    assert batch.first_timestamp == batch.max_timestamp == 1_700_000_000_123
    [record] = list(batch)
    assert isinstance(record, ControlRecord)
    assert (record.offset, record.version, record.type) == (1234, 0, control_type)
    assert record.abort == (control_type == CONTROL_ABORT)
    assert record.value == b"\x00\x00\x00\x00\x00\x00"  # version 0, coordinator epoch 0


def test_control_batches_follow_each_other_in_one_records_buffer() -> None:
    data = control_batch(5, 1, 0, CONTROL_COMMIT, 10) + control_batch(9, 2, 4, CONTROL_ABORT, 11)
    records = MemoryRecords(data)
    seen = []
    while (batch := records.next_batch()) is not None:
        seen.append((batch.base_offset, batch.producer_id, [r.type for r in batch]))
    assert seen == [(5, 1, [CONTROL_COMMIT]), (9, 2, [CONTROL_ABORT])]


def test_our_own_validation_accepts_it() -> None:
    data = control_batch(0, 42, 1, CONTROL_COMMIT, 0)
    [view] = list(split_batches(data))
    header = validate(view)
    assert header == read_header(data)
    assert header.is_control and header.is_transactional and header.record_count == 1


def test_unknown_control_type_is_refused() -> None:
    with pytest.raises(ValueError, match="control type"):
        control_batch(0, 1, 0, 2, 0)
