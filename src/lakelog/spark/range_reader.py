"""Read one partition's offset range [start, end) straight from object storage.

The coordinator says where the batches are (`find_batches`, a page of at most
`max_bytes` of batches at a time), object storage serves their bytes (one ranged read per
run of neighbouring batches in an object), `RecordColumns` decodes them. Markers and, for
read_committed, the records of aborted transactions are dropped. Memory per reader: one
page of batch bytes plus its decoded columns.

Used by the Spark source's tasks and by the export job, so both see the same records.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from uuid import UUID

import numpy as np
import pyarrow as pa

from lakelog.coordinator import BatchCoordinate, FindBatchesRequest, TimestampType
from lakelog.log.fetch.reader import plan_ranges, read_spans
from lakelog.log.protocol.batch_runs import batches_in_range
from lakelog.log.protocol.records import InvalidBatch
from lakelog.log.storage.keys import offsets_in_headers
from lakelog.log.storage.store import ObjectStorage
from lakelog.pipeline.records import (
    HEADER_TYPE,
    RecordColumns,
    RecordDecodeError,
    numpy_array,
    numpy_values,
    repeated_string,
)
from lakelog.spark.aborted import AbortedFilter
from lakelog.spark.log_access import LogSession
from lakelog.spark.offsets import FROM_LOG_START, OffsetRange
from lakelog.spark.options import Connection
from lakelog.util.errors import ErrorCode

__all__ = [
    "SPARK_ARROW_SCHEMA",
    "DataLossError",
    "ReadSettings",
    "iter_range_batches",
    "read_range",
    "to_spark_arrow",
]

MAX_PARALLEL_OBJECT_READS = 16

SPARK_ARROW_SCHEMA = pa.schema(
    [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
        pa.field("headers", HEADER_TYPE),
    ]
)
"""Spark's Kafka source columns, as Arrow types Spark converts without a cast."""


class DataLossError(RuntimeError):
    """Offsets the query planned to read are gone (retention, DeleteRecords, a deleted
    topic); raised only with failOnDataLoss=true, as Spark's Kafka source does."""


@dataclass(frozen=True, slots=True)
class ReadSettings:
    connection: Connection
    read_committed: bool = True
    fail_on_data_loss: bool = True
    max_bytes: int = 8 * 1024 * 1024


async def read_range(
    log: LogSession, rng: OffsetRange, settings: ReadSettings
) -> AsyncIterator[RecordColumns]:
    """The range's records, one `RecordColumns` per coordinator page (never empty)."""
    topic_id = UUID(rng.topic_id)
    offset = max(rng.start, 0)
    aborted = AbortedFilter()
    while offset < rng.end:
        request = FindBatchesRequest(
            topic_id, rng.partition, offset, settings.max_bytes, settings.read_committed
        )
        (found,) = await log.coordinator.find_batches([request])
        if found.error == ErrorCode.offset_out_of_range and offset < found.log_start_offset:
            if rng.start != FROM_LOG_START:
                _data_loss(
                    settings,
                    f"{rng.topic}-{rng.partition}: offsets {offset}..{found.log_start_offset - 1}"
                    " were deleted (retention or DeleteRecords) before this query read them",
                )
            offset = found.log_start_offset
            continue
        if found.error != ErrorCode.none or not found.batches:
            why = found.error.name if found.error != ErrorCode.none else "no batches"
            _data_loss(
                settings,
                f"{rng.topic}-{rng.partition}: offsets {offset}..{rng.end - 1} are not readable "
                f"({why}; the topic may have been deleted or truncated)",
            )
            return
        aborted.add(found.aborted)
        wanted: list[BatchCoordinate] = []
        for coord in found.batches:
            if coord.base_offset >= rng.end:
                offset = rng.end
                break
            offset = coord.last_offset + 1
            keep = aborted.keep(coord) if settings.read_committed else coord.control_type < 0
            if keep:
                wanted.append(coord)
        if not wanted:
            continue
        columns = RecordColumns()
        for coord, data in zip(wanted, await _read_batches(log.storage, wanted), strict=True):
            append_time = (
                coord.log_append_time
                if coord.timestamp_type == TimestampType.LOG_APPEND_TIME
                else -1
            )
            try:
                # A coordinate may cover a run of batches.
                for base_offset, batch in batches_in_range(
                    data,
                    coord.base_offset,
                    offsets_in_headers=offsets_in_headers(coord.object_key),
                ):
                    columns.add_batch(
                        batch,
                        base_offset=base_offset,
                        log_append_time=append_time,
                        min_offset=rng.start,
                        end_offset=rng.end,
                    )
            except (RecordDecodeError, InvalidBatch) as exc:
                raise RecordDecodeError(
                    f"{rng.topic}-{rng.partition} batch at offset {coord.base_offset} "
                    f"({coord.object_key}@{coord.byte_offset}): {exc}"
                ) from exc
        if len(columns):
            yield columns


def _data_loss(settings: ReadSettings, message: str) -> None:
    if settings.fail_on_data_loss:
        raise DataLossError(message + "; set failOnDataLoss=false to skip missing offsets")


async def _read_batches(
    storage: ObjectStorage, coords: Sequence[BatchCoordinate]
) -> list[memoryview]:
    """The bytes of each batch, in order: one ranged request per run of close batches."""
    found: dict[tuple[str, int], memoryview] = {}
    limit = asyncio.Semaphore(MAX_PARALLEL_OBJECT_READS)

    async def read_object(key: str, spans: list[tuple[int, int]]) -> None:
        for coord, data in await read_spans(storage, key, spans, coords, limit):
            found[(key, coord.byte_offset)] = data

    await asyncio.gather(*(read_object(k, s) for k, s in plan_ranges(coords).items()))
    return [found[(c.object_key, c.byte_offset)] for c in coords]


def to_spark_arrow(columns: RecordColumns, topic: str, partition: int) -> pa.RecordBatch:
    """One page of records as a record batch of `SPARK_ARROW_SCHEMA`.

    numpy and Arrow buffers, not `pa.array`/`pa.repeat`/`to_numpy`: the first of those in
    a process imports pandas (see `lakelog.pipeline.records.numpy_array`)."""
    rec = columns.to_arrow()
    rows = rec.num_rows
    micros = numpy_values(rec.column("timestamp")) * 1000
    return pa.RecordBatch.from_arrays(
        [
            rec.column("key"),
            rec.column("value"),
            repeated_string(topic, rows),
            numpy_array(np.full(rows, partition, dtype=np.int32), pa.int32()),
            rec.column("offset"),
            numpy_array(micros, pa.timestamp("us", tz="UTC")),
            rec.column("timestampType"),
            rec.column("headers"),
        ],
        schema=SPARK_ARROW_SCHEMA,
    )


def iter_range_batches(rng: OffsetRange, settings: ReadSettings) -> Iterator[RecordColumns]:
    """`read_range` for synchronous callers (Spark tasks): drives it on a private loop."""
    loop = asyncio.new_event_loop()
    try:
        session = LogSession(settings.connection)
        loop.run_until_complete(session.__aenter__())
        try:
            pages = read_range(session, rng, settings)
            try:
                while True:
                    try:
                        page = loop.run_until_complete(anext(pages))
                    except StopAsyncIteration:
                        break
                    yield page
            finally:
                loop.run_until_complete(pages.aclose())
        finally:
            loop.run_until_complete(session.__aexit__(None, None, None))
    finally:
        loop.close()
