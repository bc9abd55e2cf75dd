"""When the broker compacts a partition: Kafka's cleanable range (active segment by
segment.ms / segment.bytes, min.compaction.lag.ms) and its choice (min.cleanable.dirty.ratio,
max.compaction.lag.ms, tombstones due), measured on a diskless log's batch rows."""

from __future__ import annotations

from lakelog.coordinator.log_types import BatchCoordinate, TimestampType
from lakelog.log.topic_config import CompactionConfig, validate
from lakelog.pipeline.planning import (
    CompactionRange,
    Dirtiness,
    cleanable,
    dirtiness,
    first_uncleanable_offset,
    needs_compaction,
)

NOW = 1_000_000


def row(base: int, last: int, appended: int, size: int = 100) -> BatchCoordinate:
    return BatchCoordinate(
        "wal/x", 0, size, base, last, appended, appended, TimestampType.CREATE_TIME, -1, -1, 0, 0,
        False,
    )  # fmt: skip


def config(**overrides: float) -> CompactionConfig:
    values: dict[str, float] = {
        "delete_retention_ms": 1000,
        "segment_ms": 1000,
        "segment_bytes": 10_000,
        "min_compaction_lag_ms": 0,
        "max_compaction_lag_ms": 2**63 - 1,
        "min_cleanable_dirty_ratio": 0.5,
    }
    values.update(overrides)
    return CompactionConfig(**values)  # type: ignore[arg-type]


def test_the_active_segment_is_the_young_small_tail() -> None:
    rows = [row(0, 9, NOW - 5000), row(10, 19, NOW - 500), row(20, 29, NOW - 100)]
    # the two young rows are the active segment
    assert first_uncleanable_offset(rows, NOW, config()) == 10
    # past segment.ms every row is closed
    assert first_uncleanable_offset(rows, NOW + 2000, config()) == 30
    # segment.bytes: a tail of 200 bytes is full at 150, so only the last row is active
    assert first_uncleanable_offset(rows, NOW, config(segment_bytes=150)) == 20


def test_min_compaction_lag_stops_at_the_first_young_record() -> None:
    rows = [row(0, 9, NOW - 5000), row(10, 19, NOW - 3000), row(20, 29, NOW - 2000)]
    assert first_uncleanable_offset(rows, NOW, config(min_compaction_lag_ms=3500)) == 10
    assert first_uncleanable_offset(rows, NOW, config(min_compaction_lag_ms=2500)) == 20
    assert first_uncleanable_offset(rows, NOW, config(min_compaction_lag_ms=1000)) == 30
    assert first_uncleanable_offset([], NOW, config()) == 0


def test_cleanable_keeps_rows_below_the_point() -> None:
    plan = CompactionRange([row(0, 9, 0), row(10, 19, 0)], [row(20, 24, 0)], [row(25, 29, 0)])
    cut = cleanable(plan, 20)
    assert [c.base_offset for c in cut.rewrite] == [0, 10]
    assert cut.aborted == [] and cut.kept == []


def test_dirty_ratio_counts_bytes_past_the_cleaned_offset() -> None:
    plan = CompactionRange(
        [row(0, 9, NOW - 9000, 300), row(10, 19, NOW - 8000, 100)], [], [row(20, 29, NOW, 100)]
    )
    dirt = dirtiness(plan, cleaned_offset=10)
    assert (dirt.dirty_bytes, dirt.total_bytes) == (200, 500)
    assert dirt.oldest_dirty_ms == NOW - 8000
    assert dirtiness(plan, 0).ratio == 1.0
    assert dirtiness(plan, 30).dirty_bytes == 0


def test_the_choice() -> None:
    dirty = Dirtiness(40, 100, NOW - 5000)
    assert not needs_compaction(dirty, config(), NOW, 0)
    assert needs_compaction(dirty, config(min_cleanable_dirty_ratio=0.4), NOW, 0)
    # a dirty record waiting longer than max.compaction.lag.ms forces a pass
    assert needs_compaction(dirty, config(max_compaction_lag_ms=4000), NOW, 0)
    clean = Dirtiness(0, 100, -1)
    assert not needs_compaction(clean, config(min_cleanable_dirty_ratio=0), NOW, 0)
    # a kept tombstone whose delete.retention.ms passed needs a pass with nothing new
    assert needs_compaction(clean, config(), NOW, NOW - 1)
    assert not needs_compaction(clean, config(), NOW, NOW + 1)
    assert not needs_compaction(Dirtiness(0, 0, -1), config(), NOW, NOW - 1)


def test_compaction_configs_are_validated() -> None:
    assert validate({"min.cleanable.dirty.ratio": "0.1", "segment.ms": "100"}) is None
    assert validate({"min.cleanable.dirty.ratio": "1.5"}) is not None
    assert validate({"min.cleanable.dirty.ratio": "x"}) is not None
    assert validate({"segment.ms": "0"}) is not None
    assert validate({"min.compaction.lag.ms": "-1"}) is not None
    assert validate({"max.compaction.lag.ms": "0"}) is not None
