"""The pure rules the pipeline jobs and the broker's background loops share."""

from __future__ import annotations

import uuid

from lakelog.config import Settings
from lakelog.coordinator.log_types import BatchCoordinate, TimestampType
from lakelog.coordinator.pipeline_types import FileBatch, FileInfo, FileReference
from lakelog.coordinator.topic_types import TopicInfo
from lakelog.log.storage.keys import segment_key
from lakelog.pipeline.planning import (
    KeyState,
    ListedObject,
    MergePolicy,
    compacted_topics,
    compaction_range,
    deletable,
    find_orphans,
    is_merge_candidate,
    join_runs,
    keep_record,
    latest_per_key,
    plan_segments,
    retention_policies,
)

NOW = 1_800_000_000_000
HOUR = 3_600_000


def wal_key(created_ms: int) -> str:
    value = (created_ms << 80) | (7 << 76) | (2 << 62) | uuid.uuid4().int & ((1 << 62) - 1)
    return f"wal/{uuid.UUID(int=value)}"


def test_orphans_are_unknown_old_objects_of_our_layout() -> None:
    old, young, known = wal_key(NOW - 2 * HOUR), wal_key(NOW - 60_000), wal_key(NOW - 2 * HOUR)
    listing = [
        ListedObject(old, 10, NOW - 2 * HOUR),
        ListedObject(young, 10, NOW - 60_000),
        ListedObject(known, 10, NOW - 2 * HOUR),
        ListedObject("wal/not-a-uuid", 10, NOW - 2 * HOUR),
        ListedObject("backup/thing", 10, NOW - 2 * HOUR),
        # Listed as old but named recently (a clock ran ahead): the younger time counts.
        ListedObject(wal_key(NOW - 1000), 10, NOW - 2 * HOUR),
    ]
    assert [o.key for o in find_orphans(listing, {known}, NOW, HOUR)] == [old]
    assert len(find_orphans(listing, {known}, NOW, 0)) == 3


def test_last_check_never_deletes_referenced_objects() -> None:
    refs = [
        FileReference("a", False),
        FileReference("b", True, "deleting", 0),
        FileReference("c", True, "committed", 0),
        FileReference("d", True, "deleting", 2),  # marked, yet a batch points into it
        FileReference("e", True, "committed", 3),
    ]
    assert deletable(refs, orphans=True) == ["a"]
    assert deletable(refs, orphans=False) == ["a", "b"]


def topic(configs: dict[str, str], partitions: int = 2) -> TopicInfo:
    return TopicInfo(uuid.uuid4(), f"t-{uuid.uuid4().hex[:6]}", partitions, 1, configs)


def test_retention_and_compaction_topics() -> None:
    settings = Settings(log_retention_ms=1000)
    plain = topic({})
    unlimited = topic({"retention.ms": "-1"})
    compacted = topic({"cleanup.policy": "compact", "delete.retention.ms": "5"})
    both = topic({"cleanup.policy": "compact,delete"})
    policies = retention_policies([plain, unlimited, compacted, both], settings)
    assert {(p.topic_id, p.partition, p.retention_ms) for p in policies} == {
        (plain.topic_id, 0, 1000),
        (plain.topic_id, 1, 1000),
        (both.topic_id, 0, 1000),
        (both.topic_id, 1, 1000),
    }
    chosen = compacted_topics([plain, compacted, both], settings)
    assert [(c.topic.name, c.delete_retention_ms) for c in chosen] == [
        (compacted.name, 5),
        (both.name, 24 * HOUR),
    ]


def test_merge_candidates_and_segment_plans() -> None:
    policy = MergePolicy(60_000, 1000, 0.5, 300, 10, 250)
    old = NOW - HOUR
    seg = segment_key(uuid.uuid4(), 0, 0)

    def info(key: str, size: int, live: int, at: int = old, state: str = "committed") -> FileInfo:
        return FileInfo(key, state, size, live, at, None)

    assert is_merge_candidate(info(wal_key(old), 500, 500), NOW, policy)  # small
    assert is_merge_candidate(info(wal_key(old), 5000, 2000), NOW, policy)  # fragmented
    assert not is_merge_candidate(info(wal_key(old), 5000, 4000), NOW, policy)
    assert not is_merge_candidate(info(wal_key(old), 500, 500, NOW - 1000), NOW, policy)
    assert not is_merge_candidate(info(wal_key(old), 500, 0, state="deleting"), NOW, policy)
    assert is_merge_candidate(info(seg, 5000, 2000), NOW, policy)
    assert not is_merge_candidate(info(seg, 500, 500), NOW, policy)

    t = uuid.uuid4()
    rows = [FileBatch(f"wal/{i}", t, 0, 10 * i, 10 * i + 9, 0, 100) for i in range(5)]
    rows.append(FileBatch("wal/x", t, 1, 0, 0, 0, 100))
    plans = plan_segments(reversed(rows), policy.target_bytes)
    assert [(p.partition, [b.base_offset for b in p.batches]) for p in plans] == [
        (0, [0, 10, 20]),
        (0, [30, 40]),
        (1, [0]),
    ]

    # Rows join while adjacent, plain and small enough together.
    txn = FileBatch("wal/t", t, 0, 60, 60, 0, 10, is_transactional=True)
    lat = FileBatch("wal/l", t, 0, 61, 61, 0, 10, timestamp_type=1)
    later = FileBatch("wal/g", t, 0, 70, 70, 0, 10)  # a gap before it
    runs = join_runs([*rows[:5], txn, lat, later], policy.row_max_bytes)
    assert [[r.base_offset for r in run] for run in runs] == [
        [0, 10],
        [20, 30],
        [40],
        [60],
        [61],
        [70],
    ]


def coord(
    base: int, last: int, *, control: int = -1, pid: int = -1, txn: bool = False
) -> BatchCoordinate:
    return BatchCoordinate(
        "" if control >= 0 else "wal/x",
        0,
        10,
        base,
        last,
        0,
        0,
        TimestampType.CREATE_TIME,
        -1,
        pid,
        0,
        0,
        txn,
        control,
    )


def test_compaction_range_skips_markers_aborted_and_the_tail() -> None:
    coords = [
        coord(0, 4),
        coord(5, 6, pid=9, txn=True),  # aborted below
        coord(7, 7, pid=8, txn=True),  # committed
        coord(8, 8, control=0, pid=9),
        coord(9, 9, control=1, pid=8),
        coord(10, 12),
        coord(13, 14),  # the partition's last batch
    ]
    plan = compaction_range(coords, [(9, 5)], last_stable_offset=15)
    assert [c.base_offset for c in plan.rewrite] == [0, 7, 10]
    assert [c.base_offset for c in plan.aborted] == [5]
    assert [c.base_offset for c in plan.kept] == [13]
    below = compaction_range(coords, [(9, 5)], last_stable_offset=10)
    assert [c.base_offset for c in below.rewrite] == [0, 7]
    assert below.kept == []


def test_latest_record_per_key_and_tombstones() -> None:
    latest = latest_per_key(
        [
            (0, b"a", False, 100),
            (1, b"b", False, 100),
            (2, b"a", False, 200),
            (3, b"b", True, 50),
            (4, None, False, 10),
        ]
    )
    assert latest == {b"a": KeyState(2, False, 200), b"b": KeyState(3, True, 50)}
    assert not keep_record(0, b"a", latest, tombstone_horizon_ms=0)
    assert keep_record(2, b"a", latest, tombstone_horizon_ms=0)
    assert keep_record(3, b"b", latest, tombstone_horizon_ms=50)  # not older than the horizon
    assert not keep_record(3, b"b", latest, tombstone_horizon_ms=51)
    assert keep_record(4, None, latest, tombstone_horizon_ms=51)
    assert keep_record(9, b"untracked", latest, tombstone_horizon_ms=51)
