"""The read side: batch lookup for fetch, log bounds, ListOffsets. Each operation runs in
one read transaction (PostgreSQL: REPEATABLE READ, READ ONLY), so a partition's bounds
and its batches agree and readers never conflict with writers.

Round trips cost more than rows on PostgreSQL, so lookups are set-wise: find_batches sends
one query for every asked partition with its oldest ongoing transaction (the last stable
offset) and another for the first page of batches of every request, both read in one
round trip; read_committed fetches then ask for their aborted transactions in one more."""

from __future__ import annotations

from collections.abc import Sequence

from lakelog.coordinator.engine import Pending, Row, Session
from lakelog.coordinator.log_types import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    BatchCoordinate,
    FindBatchesRequest,
    FindBatchesResult,
    ListOffsetsRequest,
    ListOffsetsResult,
    LogInfo,
    PartitionKey,
)
from lakelog.coordinator.ops.rows import (
    BATCH_COLUMN_COUNT,
    BATCH_COLUMNS,
    BATCH_TIMESTAMP_SQL,
    BATCHES_FROM,
    PartitionKeyTuple,
    PartitionRow,
    batch_timestamp,
    coordinate,
    fetch_weight,
)
from lakelog.coordinator.txn_types import AbortedTxn
from lakelog.util.errors import ErrorCode

EARLIEST_LOCAL_TIMESTAMP = -4
"""KIP-405's "earliest local offset": with no tiered storage, the log start."""

PAGE = 128
"""Batches read per partition and query; a fetch needing more reads further pages."""

_FROM = f"FROM {BATCHES_FROM} WHERE b.topic_id = ? AND b.partition = ?"

_PARTITION_KEYS = (("topic_uuid", "uuid"), ("partition", "int"))

_PARTITIONS_WITH_UNSTABLE = (
    "SELECT t.topic_uuid, p.topic_id, p.partition, p.log_start_offset, p.high_watermark,"
    " p.byte_size, p.max_timestamp,"
    " (SELECT MIN(tp.first_offset) FROM txn_partitions tp"
    "  WHERE tp.topic_id = p.topic_id AND tp.partition = p.partition AND tp.first_offset >= 0),"
    " (SELECT MIN(mt.first_offset) FROM mirror_txns mt"
    "  WHERE mt.topic_id = p.topic_id AND mt.partition = p.partition)"
    " FROM {keys} JOIN topics t ON t.topic_uuid = k.topic_uuid"
    " JOIN partitions p ON p.topic_id = t.id AND p.partition = k.partition"
)
"""The asked partitions that exist, each with the first offset of its oldest ongoing
transaction, local (index txn_partitions_lso) and mirrored (mirror_txns, rebuilt from
mirrored batches: see mirror_types), one index seek each (NULL: none)."""

_PAGE_KEYS = (("i", "int"), ("topic_uuid", "uuid"), ("partition", "int"), ("from_offset", "bigint"))

_ABORTED_KEYS = (
    ("i", "int"),
    ("topic_id", "bigint"),
    ("partition", "int"),
    ("from_offset", "bigint"),
    ("to_offset", "bigint"),
)


def stable_offset(first_unstable: int | None, part: PartitionRow) -> int:
    """The last stable offset from the oldest ongoing transaction's first offset (None: no
    transaction has written to the partition): never below the log start (Kafka's rule,
    for a transaction whose start was deleted) nor above the high watermark."""
    if first_unstable is None:
        return part.high_watermark
    return min(max(first_unstable, part.log_start_offset), part.high_watermark)


def visible(found: ListOffsetsResult, limit: int) -> ListOffsetsResult:
    """Kafka answers a time lookup only with an offset the isolation level may read
    (below the last stable offset for read_committed), else no offset."""
    if found.offset >= limit:
        return ListOffsetsResult(ErrorCode.none)
    return found


# -- partitions and their last stable offsets


async def _send_partitions(s: Session, keys: Sequence[PartitionKeyTuple]) -> Pending | None:
    """Send the lookup of the partitions among `keys` with their oldest ongoing
    transactions (read it with `_partitions_of`), so other queries share its round trip."""
    if not keys:
        return None
    d = s.dialect
    keyset, params = d.keyset("k", _PARTITION_KEYS, [(d.uuid(t), p) for t, p in keys])
    return await s.send(_PARTITIONS_WITH_UNSTABLE.format(keys=keyset), params)


async def _partitions_of(
    s: Session, pending: Pending | None
) -> dict[PartitionKeyTuple, tuple[PartitionRow, int]]:
    """Each existing partition with its last stable offset."""
    if pending is None:
        return {}
    found: dict[PartitionKeyTuple, tuple[PartitionRow, int]] = {}
    for row in await pending.fetchall():
        part = PartitionRow(*row[1:7])
        firsts = [f for f in row[7:9] if f is not None]
        lso = stable_offset(min(firsts) if firsts else None, part)
        found[(s.dialect.to_uuid(row[0]), row[2])] = (part, lso)
    return found


async def _partitions_with_lso(
    s: Session, keys: Sequence[PartitionKeyTuple]
) -> dict[PartitionKeyTuple, tuple[PartitionRow, int]]:
    return await _partitions_of(s, await _send_partitions(s, list(dict.fromkeys(keys))))


# -- find_batches


class _Reading:
    """One find_batches request being filled."""

    def __init__(self, part: PartitionRow, req: FindBatchesRequest, lso: int) -> None:
        self.part = part
        self.req = req
        self.lso = lso
        self.limit = lso if req.read_committed else part.high_watermark
        """Batches end below this."""
        self.batches: list[BatchCoordinate] = []
        self.aborted: list[AbortedTxn] = []
        self.total = 0

    def add(self, rows: Sequence[Row]) -> bool:
        """Take rows in offset order until max_bytes or the limit; True if the page ran out
        first and was full, so more batches may follow."""
        for row in rows:
            batch = coordinate(row)
            if batch.last_offset >= self.limit:
                return False
            self.batches.append(batch)
            self.total += fetch_weight(batch)
            if self.total >= self.req.max_bytes:
                return False
        return len(rows) >= PAGE

    def result(self) -> FindBatchesResult:
        return FindBatchesResult(
            ErrorCode.none,
            self.batches,
            self.part.log_start_offset,
            self.part.high_watermark,
            self.lso,
            self.aborted,
        )


async def find_batches(
    s: Session, requests: Sequence[FindBatchesRequest]
) -> list[FindBatchesResult]:
    keys = list(dict.fromkeys((r.topic_id, r.partition) for r in requests))
    located = await _send_partitions(s, keys)
    pages = await _send_first_pages(s, requests)
    parts = await _partitions_of(s, located)
    first_pages = await _first_pages(pages)
    results: list[FindBatchesResult | _Reading] = []
    for i, req in enumerate(requests):
        found = parts.get((req.topic_id, req.partition))
        if found is None:
            results.append(FindBatchesResult(ErrorCode.unknown_topic_or_partition))
            continue
        part, lso = found
        bounds = {
            "log_start_offset": part.log_start_offset,
            "high_watermark": part.high_watermark,
            "last_stable_offset": lso,
        }
        if req.offset < part.log_start_offset or req.offset > part.high_watermark:
            results.append(FindBatchesResult(ErrorCode.offset_out_of_range, **bounds))
            continue
        reading = _Reading(part, req, lso)
        if req.offset >= reading.limit:
            results.append(FindBatchesResult(ErrorCode.none, **bounds))
            continue
        more = reading.add(first_pages.get(i, []))
        while more:
            more = await _next_page(s, reading)
        results.append(reading)
    await _find_aborted(s, [r for r in results if isinstance(r, _Reading)])
    return [r.result() if isinstance(r, _Reading) else r for r in results]


async def _send_first_pages(s: Session, requests: Sequence[FindBatchesRequest]) -> Pending | None:
    """Send the first page of batches of every request, found by topic id like the
    partitions so both go out together (one snapshot: they agree)."""
    if not requests:
        return None
    d = s.dialect
    keyset, params = d.keyset(
        "k",
        _PAGE_KEYS,
        [(i, d.uuid(r.topic_id), r.partition, r.offset) for i, r in enumerate(requests)],
    )
    page = d.first_rows_join(
        "batches",
        "b",
        "id",
        "b.topic_id = t.id AND b.partition = k.partition AND b.last_offset >= k.from_offset",
        "b.last_offset",
        PAGE,
    )
    return await s.send(
        f"SELECT k.i, {BATCH_COLUMNS} FROM {keyset}"
        f" JOIN topics t ON t.topic_uuid = k.topic_uuid{page}"
        " LEFT JOIN files f ON f.id = b.file_id ORDER BY k.i, b.last_offset",
        params,
    )


async def _first_pages(pending: Pending | None) -> dict[int, list[Row]]:
    pages: dict[int, list[Row]] = {}
    if pending is not None:
        for row in await pending.fetchall():
            pages.setdefault(row[0], []).append(row[1:])
    return pages


async def _next_page(s: Session, reading: _Reading) -> bool:
    after = reading.batches[-1].last_offset
    rows = await s.fetchall(
        f"SELECT {BATCH_COLUMNS} {_FROM} AND b.last_offset > ? AND b.last_offset < ?"
        f" ORDER BY b.last_offset LIMIT {PAGE}",
        (reading.part.topic_id, reading.part.partition, after, reading.limit),
    )
    return reading.add(rows)


async def _find_aborted(s: Session, readings: Sequence[_Reading]) -> None:
    """Fill the aborted transactions of every read_committed reading, in one query: those
    meeting the read range (Kafka's rule: the marker at or after the fetch offset, the
    first offset at or before the last offset returned)."""
    wanted = [r for r in readings if r.req.read_committed and r.batches]
    if not wanted:
        return
    keyset, params = s.dialect.keyset(
        "k",
        _ABORTED_KEYS,
        [
            (i, r.part.topic_id, r.part.partition, r.req.offset, r.batches[-1].last_offset)
            for i, r in enumerate(wanted)
        ],
    )
    rows = await s.fetchall(
        f"SELECT k.i, a.producer_id, a.first_offset FROM {keyset}"
        " JOIN aborted_txns a ON a.topic_id = k.topic_id AND a.partition = k.partition"
        " AND a.marker_offset >= k.from_offset AND a.first_offset <= k.to_offset"
        " ORDER BY k.i, a.marker_offset",
        params,
    )
    for i, producer_id, first_offset in rows:
        wanted[i].aborted.append(AbortedTxn(producer_id, first_offset))


# -- log_info


async def log_info(s: Session, partitions: Sequence[PartitionKey]) -> list[LogInfo]:
    parts = await _partitions_with_lso(s, [(k.topic_id, k.partition) for k in partitions])
    results: list[LogInfo] = []
    for key in partitions:
        found = parts.get((key.topic_id, key.partition))
        if found is None:
            results.append(LogInfo(ErrorCode.unknown_topic_or_partition))
            continue
        part, lso = found
        results.append(
            LogInfo(ErrorCode.none, part.log_start_offset, part.high_watermark, part.byte_size, lso)
        )
    return results


# -- list_offsets


async def list_offsets(
    s: Session, requests: Sequence[ListOffsetsRequest]
) -> list[ListOffsetsResult]:
    parts = await _partitions_with_lso(s, [(r.topic_id, r.partition) for r in requests])
    return [await _list_offset(s, parts.get((r.topic_id, r.partition)), r) for r in requests]


async def _list_offset(
    s: Session, found: tuple[PartitionRow, int] | None, req: ListOffsetsRequest
) -> ListOffsetsResult:
    if found is None:
        return ListOffsetsResult(ErrorCode.unknown_topic_or_partition)
    part, lso = found
    if req.timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        return ListOffsetsResult(ErrorCode.none, part.log_start_offset)
    if req.timestamp < 0 and req.timestamp not in (LATEST_TIMESTAMP, MAX_TIMESTAMP):
        return ListOffsetsResult(ErrorCode.invalid_request)
    limit = lso if req.read_committed else part.high_watermark
    if req.timestamp == LATEST_TIMESTAMP:
        return ListOffsetsResult(ErrorCode.none, limit)
    if req.timestamp == MAX_TIMESTAMP:
        answer = await _max_timestamp(s, part)
    else:
        answer = await _by_timestamp(s, part, req.timestamp)
    return visible(answer, limit)


async def _mark_below(s: Session, key: tuple[int, int], time: int) -> int:
    """The last offset of the partition's last time mark below `time` (-1: none): no
    batch ending at or before it reaches `time`, since timestamp_high never decreases
    with the offset. Marks are one per commit, so a search scans one commit's batches."""
    row = await s.fetchone(
        "SELECT last_offset FROM time_index WHERE topic_id = ? AND partition = ?"
        " AND timestamp_high < ? ORDER BY timestamp_high DESC, last_offset DESC LIMIT 1",
        (*key, time),
    )
    return -1 if row is None else int(row[0])


async def _by_timestamp(s: Session, part: PartitionRow, time: int) -> ListOffsetsResult:
    key = (part.topic_id, part.partition)
    # The first batch whose timestamp_high reaches `time`, found from the time index. It
    # may be a batch whose own timestamp is lower when the high mark came from a batch
    # already deleted; then scan on from there.
    row = await s.fetchone(
        f"SELECT {BATCH_COLUMNS} {_FROM} AND b.last_offset > ? AND b.timestamp_high >= ?"
        " ORDER BY b.last_offset LIMIT 1",
        (*key, await _mark_below(s, key, time), time),
    )
    if row is not None and _timestamp_of(row) < time:
        row = await s.fetchone(
            f"SELECT {BATCH_COLUMNS} {_FROM} AND b.last_offset > ?"
            f" AND {BATCH_TIMESTAMP_SQL} >= ? ORDER BY b.last_offset LIMIT 1",
            (*key, row[4], time),
        )
    if row is None:
        return ListOffsetsResult(ErrorCode.none)
    batch = coordinate(row)
    return ListOffsetsResult(
        ErrorCode.none,
        offset=max(batch.base_offset, part.log_start_offset),
        timestamp=_timestamp_of(row),
        batch=batch,
    )


async def _max_timestamp(s: Session, part: PartitionRow) -> ListOffsetsResult:
    key = (part.topic_id, part.partition)
    # The last batch holds the highest timestamp_high (it never decreases with the
    # offset); the first batch reaching it is found from the time index.
    row = await s.fetchone(
        f"SELECT {BATCH_COLUMNS}, b.timestamp_high {_FROM} ORDER BY b.last_offset DESC LIMIT 1",
        key,
    )
    if row is None:
        return ListOffsetsResult(ErrorCode.none)
    highest = row[BATCH_COLUMN_COUNT]
    row = await s.fetchone(
        f"SELECT {BATCH_COLUMNS} {_FROM} AND b.last_offset > ? AND b.timestamp_high = ?"
        " ORDER BY b.last_offset LIMIT 1",
        (*key, await _mark_below(s, key, highest), highest),
    )
    if row is None or _timestamp_of(row) != highest:
        # The highest timestamp belonged to a deleted batch: find the live maximum.
        row = await s.fetchone(
            f"SELECT {BATCH_COLUMNS} {_FROM}"
            f" ORDER BY {BATCH_TIMESTAMP_SQL} DESC, b.last_offset LIMIT 1",
            key,
        )
    assert row is not None  # the partition has batches: the first query found one
    return ListOffsetsResult(
        ErrorCode.none, offset=row[4], timestamp=_timestamp_of(row), batch=coordinate(row)
    )


def _timestamp_of(row: Row) -> int:
    return batch_timestamp(row[7], row[6], row[8])
