"""The table lag rule shared by `topics describe` and the broker's table gauges."""

from __future__ import annotations

import json

from lakelog.tables.lag import Lag, next_offsets, snapshot_of, table_lag

TOPIC_ID = "6f1d0c52-8d0e-4a8e-9a43-2f8b8e1d2c3b"


def test_caught_up_table_lags_zero_records_and_zero_seconds() -> None:
    bounds = [(0, 0, 10), (1, 0, 5)]
    assert table_lag(bounds, {0: 10, 1: 5}, 1_000, 60_000) == Lag(0, 0.0)


def test_records_waiting_count_per_partition_and_seconds_are_the_commit_age() -> None:
    bounds = [(0, 0, 12), (1, 0, 5), (2, 0, 3)]
    lag = table_lag(bounds, {0: 10, 1: 5}, 1_000, 31_000)
    assert lag == Lag(2 + 0 + 3, 30.0)


def test_a_partition_the_table_never_read_lags_from_its_log_start() -> None:
    assert table_lag([(0, 40, 50)], {}, 1_000, 2_000).records == 10
    # Retention moved the log start past the table's next offset: only what is readable.
    assert table_lag([(0, 40, 50)], {0: 20}, 1_000, 2_000).records == 10


def test_no_commit_yet_has_no_age() -> None:
    assert table_lag([(0, 0, 7)], {}, None, 5_000) == Lag(7, None)


def test_a_table_ahead_of_the_end_never_lags_negatively() -> None:
    assert table_lag([(0, 0, 5)], {0: 9}, 0, 10_000) == Lag(0, 0.0)


def test_next_offsets_of_another_topic_id_or_unreadable_are_ignored() -> None:
    raw = json.dumps({"topic_id": TOPIC_ID, "next": {"0": 4, "1": 7}})
    assert next_offsets(raw, TOPIC_ID) == {0: 4, 1: 7}
    assert next_offsets(raw) == {0: 4, 1: 7}
    assert next_offsets(raw, "another-id") == {}
    assert next_offsets("not json", TOPIC_ID) == {}
    assert next_offsets(None, TOPIC_ID) == {}
    assert next_offsets(json.dumps({"topic_id": TOPIC_ID}), TOPIC_ID) == {}


def test_snapshot_of_reads_the_current_snapshot_from_metadata_json() -> None:
    metadata = {
        "current-snapshot-id": 2,
        "snapshots": [
            {"snapshot-id": 1, "timestamp-ms": 100, "summary": {"total-records": "3"}},
            {"snapshot-id": 2, "timestamp-ms": 200, "summary": {"total-records": "8"}},
        ],
        "properties": {"lakelog.next-offsets": '{"next": {"0": 8}}'},
    }
    snap = snapshot_of(metadata)
    assert (snap.snapshots, snap.rows, snap.last_commit_ms) == (2, 8, 200)
    assert next_offsets(snap.next_offsets) == {0: 8}


def test_snapshot_of_an_empty_or_odd_metadata_reads_as_nothing() -> None:
    snap = snapshot_of({"current-snapshot-id": -1, "snapshots": "nope", "properties": []})
    assert (snap.snapshots, snap.rows, snap.last_commit_ms, snap.next_offsets) == (
        0,
        0,
        None,
        None,
    )
