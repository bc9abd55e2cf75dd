"""`LakelogDataSource`: `spark.read.format("lakelog")` and `spark.readStream.format("lakelog")`.

It behaves like Spark's Kafka source (same options, same columns) but reads committed
batches straight from object storage, asking the coordinator where they are; no broker is
involved. One Spark input partition per topic-partition offset range. Streams use the
offsets JSON (`{"topic":{"0":42}}`, next offset per partition) as their position: Spark
checkpoints it, and a micro-batch's range is a pure function of its start and end, so a
query restarted from its checkpoint re-reads exactly the unfinished micro-batch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from lakelog.spark.offsets import (
    FROM_LOG_START,
    OffsetRange,
    OffsetSpec,
    PartitionBounds,
    TopicPartition,
    position_from_json,
    position_to_json,
    rate_limit,
    resolve,
)
from lakelog.spark.options import SourceOptions, parse_options

if TYPE_CHECKING:
    import pyarrow as pa

    from lakelog.spark.log_access import LogSession

# Spark runs each step of a read in a fresh Python process (the source's schema, then its
# partitions, then the reading tasks), and every one of them imports this module: what
# only reading needs (pyarrow, the decoder, object storage) and what only planning needs
# (the coordinator) is imported where it is used, not here.

__all__ = ["SCHEMA", "LakelogDataSource", "RangePartition", "WarmUpSource"]

SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int, headers array<struct<key:string,value:binary>>"
)


class RangePartition(InputPartition):
    """One Spark task: one topic-partition offset range."""

    def __init__(self, rng: OffsetRange) -> None:
        super().__init__(rng)
        self.range = rng


class LakelogDataSource(DataSource):
    """Register with `lakelog.spark.register(spark)`, then use format "lakelog"."""

    @classmethod
    def name(cls) -> str:
        return "lakelog"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return LakelogBatchReader(parse_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return LakelogStreamReader(parse_options(self.options, streaming=True))


def _read(options: SourceOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    if not isinstance(partition, RangePartition):
        # Nothing to read: Spark still runs one task, with a placeholder partition.
        return
    from lakelog.spark.range_reader import ReadSettings, iter_range_batches, to_spark_arrow

    settings = ReadSettings(
        options.connection,
        read_committed=options.read_committed,
        fail_on_data_loss=options.fail_on_data_loss,
        max_bytes=options.fetch_max_bytes,
    )
    rng = partition.range
    for columns in iter_range_batches(rng, settings):
        yield to_spark_arrow(columns, rng.topic, rng.partition)


def _log_session(options: SourceOptions) -> LogSession:
    from lakelog.spark.log_access import LogSession

    return LogSession(options.connection)


async def _bounds(log: LogSession, options: SourceOptions) -> list[PartitionBounds]:
    from lakelog.spark.log_access import partition_bounds

    return await partition_bounds(
        log.coordinator, options.topics, read_committed=options.read_committed
    )


async def _by_timestamp(
    log: LogSession,
    options: SourceOptions,
    bounds: Sequence[PartitionBounds],
    timestamp: int,
    *,
    missing_is_error: bool,
) -> dict[TopicPartition, int]:
    from lakelog.spark.log_access import offsets_for_timestamp

    found = await offsets_for_timestamp(
        log.coordinator, log.storage, bounds, timestamp, read_committed=options.read_committed
    )
    out: dict[TopicPartition, int] = {}
    for b in bounds:
        offset = found[b.key]
        if offset is None:
            if missing_is_error:
                raise ValueError(
                    f"no record at or after timestamp {timestamp} in {b.topic}-{b.partition}; "
                    "set startingOffsetsByTimestampStrategy=latest to start at the end"
                )
            offset = b.end
        out[b.key] = offset
    return out


async def _starting(
    log: LogSession,
    options: SourceOptions,
    bounds: Sequence[PartitionBounds],
    default: OffsetSpec,
) -> dict[TopicPartition, int]:
    """startingTimestamp wins over startingOffsets (Spark's precedence)."""
    if options.starting_timestamp is not None:
        return await _by_timestamp(
            log,
            options,
            bounds,
            options.starting_timestamp,
            missing_is_error=not options.timestamp_strategy_latest,
        )
    return resolve(options.starting or default, bounds, "startingOffsets")


class LakelogBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        ranges = asyncio.run(self._plan())
        return [RangePartition(rng) for rng in ranges]

    async def _plan(self) -> list[OffsetRange]:
        options = self.options
        async with _log_session(options) as log:
            bounds = await _bounds(log, options)
            start = await _starting(log, options, bounds, OffsetSpec("earliest"))
            if options.ending_timestamp is not None:
                end = await _by_timestamp(
                    log, options, bounds, options.ending_timestamp, missing_is_error=False
                )
            else:
                end = resolve(options.ending or OffsetSpec("latest"), bounds, "endingOffsets")
        ranges = []
        for b in bounds:
            first, last = start[b.key], end[b.key]
            if first > last:
                raise ValueError(
                    f"{b.topic}-{b.partition}: starting offset {first} is after the ending "
                    f"offset {last}"
                )
            if first < last:
                ranges.append(OffsetRange(b.topic, b.topic_id, b.partition, first, last))
        return ranges

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition)


class LakelogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._target: dict[TopicPartition, int] | None = None
        """Trigger.AvailableNow: the ends recorded when the query started."""
        self._topic_ids: dict[TopicPartition, str] = {}

    # -- planning (Spark's planner process)
    def initialOffset(self) -> dict[str, Any]:
        async def plan() -> dict[TopicPartition, int]:
            async with _log_session(self.options) as log:
                bounds = await _bounds(log, self.options)
                return await _starting(log, self.options, bounds, OffsetSpec("latest"))

        return position_to_json(asyncio.run(plan()))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {b.key: b.end for b in self._current_bounds()}

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = position_from_json(start)
        bounds = self._current_bounds()
        latest: dict[TopicPartition, int] = {}
        for b in bounds:
            # A partition new to the stream is read from its log start (Spark's rule).
            first = begin.setdefault(b.key, b.log_start)
            end = b.end
            if self._target is not None:
                end = min(end, self._target.get(b.key, first))
            latest[b.key] = max(first, end)
        if isinstance(limit, ReadMaxRows):
            latest = rate_limit(begin, latest, limit.max_rows)
        # Partitions that vanished (deleted topic) keep their position: offsets never regress.
        return position_to_json({**begin, **latest})

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return position_to_json({b.key: b.end for b in self._current_bounds()})

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin = position_from_json(start)
        finish = position_from_json(end)
        missing = [tp for tp in finish if tp not in self._topic_ids]
        if missing:
            self._current_bounds()
        out: list[InputPartition] = []
        for tp, last in sorted(finish.items()):
            first = begin.get(tp, FROM_LOG_START)
            topic_id = self._topic_ids.get(tp)
            if topic_id is None or (first != FROM_LOG_START and first >= last):
                continue
            if first == FROM_LOG_START and last <= 0:
                continue
            out.append(RangePartition(OffsetRange(tp[0], topic_id, tp[1], first, last)))
        return out

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to release: the log keeps no per-reader state."""

    def _current_bounds(self) -> list[PartitionBounds]:
        async def fetch() -> list[PartitionBounds]:
            async with _log_session(self.options) as log:
                return await _bounds(log, self.options)

        bounds = asyncio.run(fetch())
        self._topic_ids.update({b.key: b.topic_id for b in bounds})
        return bounds

    # -- reading (executors)
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition)


class _WarmUpPartition(InputPartition):
    pass


class WarmUpSource(DataSource):
    """format("lakelog_warm_up"): one row per partition and no data access.

    Reading it makes Spark start the Python processes a `format("lakelog")` read uses
    (the planner and the readers) and makes them import this module, so the first real
    read does not pay for that (see `lakelog.spark.warm_up`)."""

    @classmethod
    def name(cls) -> str:
        return "lakelog_warm_up"

    def schema(self) -> str:
        return "n int"

    def reader(self, schema: StructType) -> DataSourceReader:
        return _WarmUpReader(int(self.options.get("partitions", "1")))


class _WarmUpReader(DataSourceReader):
    """Imports what a real read's planning and reading steps import (this module alone no
    longer brings them in), so the warmed processes have them."""

    def __init__(self, partitions: int) -> None:
        self.count = partitions

    def partitions(self) -> Sequence[InputPartition]:
        import lakelog.config
        import lakelog.spark.log_access  # noqa: F401

        return [_WarmUpPartition(i) for i in range(self.count)]

    def read(self, partition: InputPartition) -> Iterator[tuple[int]]:
        import lakelog.spark.range_reader  # noqa: F401

        yield (1,)
