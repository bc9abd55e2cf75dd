"""Transaction markers have no object: the reader builds their control batches, in order
among the data batches it reads from the store."""

from __future__ import annotations

from kafka.record.default_records import DefaultRecordBatch

from lakelog.coordinator.log_types import BatchCoordinate, TimestampType
from lakelog.coordinator.txn_types import CONTROL_ABORT, CONTROL_COMMIT, NO_CONTROL
from lakelog.log.fetch.cache import BatchCache
from lakelog.log.fetch.reader import BatchReader
from lakelog.log.storage.store import ObjectStorage


def _coord(
    key: str, start: int, size: int, base: int, control: int = NO_CONTROL
) -> BatchCoordinate:
    marker = control != NO_CONTROL
    return BatchCoordinate(
        object_key="" if marker else key,
        byte_offset=0 if marker else start,
        byte_size=0 if marker else size,
        base_offset=base,
        last_offset=base,
        base_timestamp=1_234,
        max_timestamp=1_234,
        timestamp_type=TimestampType.CREATE_TIME,
        log_append_time=-1,
        producer_id=55,
        producer_epoch=2,
        base_sequence=-1 if marker else 0,
        is_transactional=True,
        control_type=control,
    )


async def test_markers_are_built_and_data_is_read() -> None:
    storage = ObjectStorage.from_url("memory://")
    await storage.put("wal/x", [b"aaaa", b"bbbb"])
    cache = BatchCache(1 << 20)
    reader = BatchReader(storage, cache)
    coords = [
        _coord("wal/x", 0, 4, 0),
        _coord("", 0, 0, 1, CONTROL_ABORT),
        _coord("wal/x", 4, 4, 2),
        _coord("", 0, 0, 3, CONTROL_COMMIT),
    ]
    [data], [abort], [more], [commit] = await reader.read(coords)
    assert (bytes(data), bytes(more)) == (b"aaaa", b"bbbb")
    for raw, offset, control in ((abort, 1, CONTROL_ABORT), (commit, 3, CONTROL_COMMIT)):
        batch = DefaultRecordBatch(bytes(raw))
        assert batch.validate_crc() and batch.is_control_batch
        assert (batch.base_offset, batch.producer_id, batch.producer_epoch) == (offset, 55, 2)
        assert batch.max_timestamp == 1_234
        assert [r.type for r in batch] == [control]
    assert cache.size == 8  # markers take no cache space


async def test_markers_alone_never_touch_the_store() -> None:
    storage = ObjectStorage.from_url("memory://")  # empty: any read would fail
    reader = BatchReader(storage, BatchCache(1 << 20))
    [[raw]] = await reader.read([_coord("", 0, 0, 7, CONTROL_COMMIT)])
    assert DefaultRecordBatch(bytes(raw)).base_offset == 7
