"""commit_file: assign dense offsets to an uploaded object's batches, with the fencing and
idempotent-producer checks, and record the object. The hot path: every acks=all produce
waits for one, and a full object holds ~1,600 batches over ~100 partitions, so the
statement count is fixed, whatever the batch count.

Locking (PostgreSQL, READ COMMITTED): the uploader's broker row FOR KEY SHARE (a
re-registration or fencing locks it FOR UPDATE to change the epoch, so it waits for
commits under the old epoch, and later ones see the new epoch; heartbeats are not held
up), then the touched partitions FOR UPDATE in (topic, partition) order until commit.
SQLite's one writer (BEGIN IMMEDIATE) serializes commits whole.

Round trips (PostgreSQL pipeline mode): the key claim, the epoch and the loads are sent
before any answer is read; the shared planner (`commit_plan`) then decides in Python while
the batch rows (one per run of batches) already go out a slice of 100 batches at a time;
the other writes travel unawaited with the COMMIT.

A plain producer's batch accepted under a plain-write claim (`plain_owners`) is refused
when another broker has claimed its partition since: the claims are read after the
partition locks, in the same round trip."""

from __future__ import annotations

from collections.abc import Sequence

from lakelog.coordinator import commit_outcome
from lakelog.coordinator.commit_plan import (
    BATCH_ROW_COLUMNS,
    CommitPlan,
    Wanted,
    plan_batch,
    wanted,
)
from lakelog.coordinator.engine import Pending, Session
from lakelog.coordinator.idempotence import ProducerBatch
from lakelog.coordinator.log_types import NOT_PLAIN_OWNER, CommitBatch, CommitBatchResult
from lakelog.coordinator.mirror_rules import refuse_read_only
from lakelog.coordinator.ops import inline, objects, plain_owners
from lakelog.coordinator.ops.mirror_commit import read_only
from lakelog.coordinator.ops.rows import (
    TIME_MARK_TYPES,
    now_ms,
    partitions_of,
    send_partitions,
    time_marks,
)
from lakelog.coordinator.ops.txn import load_ongoing, record_first_offsets
from lakelog.util.errors import ErrorCode

ROWS_PER_INSERT = 100
"""Batches planned per slice; each slice's finished rows go out in one INSERT."""

_TYPES = {
    "partition": "int",
    "timestamp_type": "smallint",
    "producer_epoch": "int",
    "base_sequence": "int",
    "is_transactional": "boolean",
}
BATCH_ROW_TYPES = tuple((name, _TYPES.get(name, "bigint")) for name in BATCH_ROW_COLUMNS)
"""The plan rows' columns with their PostgreSQL types (`Session.insert_int_rows`)."""

_PRODUCER_STATE = (
    ("topic_id", "bigint"),
    ("partition", "int"),
    ("producer_id", "bigint"),
    ("producer_epoch", "int"),
    ("base_sequence", "int"),
    ("last_sequence", "int"),
    ("base_offset", "bigint"),
    ("last_offset", "bigint"),
)
_PRODUCER_KEY = _PRODUCER_STATE[:3]
_TOUCHED = (
    ("topic_id", "bigint"),
    ("partition", "int"),
    ("hw", "bigint"),
    ("added", "bigint"),
    ("max_ts", "bigint"),
)
_WANTED_PRODUCERS = (("topic_uuid", "uuid"), ("partition", "int"), ("pid", "bigint"))


async def commit_file(
    s: Session,
    object_key: str,
    uploader_broker_id: int,
    broker_epoch: int,
    file_size: int,
    batches: Sequence[CommitBatch],
    inline_data: bytes | None = None,
) -> list[CommitBatchResult]:
    # In pipeline mode these share one round trip. They run in this order, so the loads
    # happen under the partition locks. (A known key or a fenced broker makes the loads
    # needless; both are rare.)
    claimed = await objects.send_claim(s, object_key, uploader_broker_id, broker_epoch, file_size)
    epoch = await objects.send_epoch(s, uploader_broker_id, broker_epoch)
    want = wanted(batches, file_size)
    partitions = await send_partitions(s, want.partitions, lock=True)
    histories = await _send_histories(s, want)
    claims = (
        await plain_owners.send_check(s, batches)
        if any(b.owner_epoch is not None for b in batches)
        else None
    )

    file_row = await claimed.fetchone()
    if file_row is None:
        # A second commit of one object would point two batch rows at the same bytes.
        return [CommitBatchResult(ErrorCode.invalid_request) for _ in batches]
    if inline_data is not None:
        # Even if every batch is refused below: the row is then marked for deletion, and
        # its bytes go with it (`delete_files`).
        await inline.store(s, object_key, inline_data)
    epoch_row = None if epoch is None else await epoch.fetchone()
    # Taken under the partition locks, so LogAppendTime follows the commit order.
    plan = CommitPlan(now=now_ms(), file_id=int(file_row[0]))
    # Keyed by the batches' own topic id objects: a dict lookup that finds the identical
    # object skips UUID.__eq__, 1,600 times a commit.
    same = {topic: topic for topic, _ in want.partitions}
    plan.partitions = {
        (same.get(topic, topic), p): row
        for (topic, p), row in (await partitions_of(s, partitions)).items()
    }
    await _read_histories(plan, histories)
    stale = await plain_owners.stale_indexes(batches, claims)
    if objects.fenced(epoch_row, broker_epoch):
        results = [CommitBatchResult(ErrorCode.stale_broker_epoch)] * len(batches)
    else:
        # The commit barrier: read under the partition locks, which an end of the
        # transaction takes too, so a batch lands before its marker or is refused.
        plan.txns = await load_ongoing(s, (b.producer_id for b in batches if b.is_transactional))
        refused = await read_only(s, plan.partitions)
        results = await _plan_and_insert_owned(s, plan, batches, file_size, stale)
        results = refuse_read_only(batches, results, refused)
    await _write(s, plan)
    await record_first_offsets(s, plan.txn_firsts)
    return results


async def _send_histories(s: Session, want: Wanted) -> Pending | None:
    """Send the lookup of the idempotent producers' remembered batches, oldest first."""
    if not want.producers:
        return None
    d = s.dialect
    keys, params = d.keyset(
        "k", _WANTED_PRODUCERS, [(d.uuid(t), p, pid) for t, p, pid in want.producers]
    )
    return await s.send(
        "SELECT t.id, k.partition, k.pid, s.producer_epoch, s.base_sequence,"
        f" s.last_sequence, s.base_offset, s.last_offset FROM {keys}"
        " JOIN topics t ON t.topic_uuid = k.topic_uuid"
        + d.join_each(
            "producer_state",
            "s",
            "s.topic_id = t.id AND s.partition = k.partition AND s.producer_id = k.pid",
        )
        + " ORDER BY t.id, k.partition, k.pid, s.base_offset",
        params,
    )


async def _read_histories(plan: CommitPlan, sent: Pending | None) -> None:
    if sent is None:
        return
    histories = plan.histories
    for row in await sent.fetchall():
        key = row[:3]
        history = histories.get(key)
        if history is None:
            history = histories[key] = []
        history.append(ProducerBatch(*row[3:]))


_NOT_OWNER = CommitBatchResult(NOT_PLAIN_OWNER)


async def _plan_and_insert_owned(
    s: Session,
    plan: CommitPlan,
    batches: Sequence[CommitBatch],
    file_size: int,
    stale: set[int],
) -> list[CommitBatchResult]:
    """`_plan_and_insert` for the batches whose plain-write claim still holds; the others
    (`stale`) are refused with NOT_PLAIN_OWNER and never planned."""
    if not stale:
        return await _plan_and_insert(s, plan, batches, file_size)
    kept = [b for i, b in enumerate(batches) if i not in stale]
    planned = iter(await _plan_and_insert(s, plan, kept, file_size))
    return [_NOT_OWNER if i in stale else next(planned) for i in range(len(batches))]


async def _plan_and_insert(
    s: Session, plan: CommitPlan, batches: Sequence[CommitBatch], file_size: int
) -> list[CommitBatchResult]:
    """Plan the batches a slice at a time, sending each slice's rows as soon as it is
    planned: on PostgreSQL the server inserts one slice while Python plans the next (on
    two cores the commit then takes about the longer of the two, not their sum)."""
    results: list[CommitBatchResult] = []
    rows = plan.rows
    sent = 0
    for start in range(0, len(batches), ROWS_PER_INSERT):
        results.extend(
            [plan_batch(plan, b, file_size) for b in batches[start : start + ROWS_PER_INSERT]]
        )
        # The last row may still grow with the next batch: it goes with the next slice.
        if len(rows) - 1 > sent:
            await s.insert_int_rows("batches", BATCH_ROW_TYPES, rows[sent:-1])
            sent = len(rows) - 1
    if len(rows) > sent:
        await s.insert_int_rows("batches", BATCH_ROW_TYPES, rows[sent:])
    return results


async def _write(s: Session, plan: CommitPlan) -> None:
    """Send the writes but the batch rows (sent while planning); nothing waits for them
    (the caller's COMMIT does)."""
    await objects.finish(s, plan.file_id, bool(plan.rows), plan.live_bytes, plan.now)
    if not plan.rows:
        return
    d = s.dialect
    touched, params = d.keyset(
        "u",
        _TOUCHED,
        [
            (*key, part.high_watermark, plan.added_bytes[key], part.max_timestamp)
            for key, part in plan.touched.items()
        ],
    )
    await s.execute(
        "UPDATE partitions AS p SET high_watermark = u.hw,"
        f" byte_size = p.byte_size + u.added, max_timestamp = u.max_ts FROM {touched}"
        " WHERE p.topic_id = u.topic_id AND p.partition = u.partition",
        params,
    )
    await s.insert_int_rows("time_index", TIME_MARK_TYPES, time_marks(plan.touched.values()))
    if plan.changed_producers:
        keys = sorted(plan.changed_producers)
        changed, params = d.keyset("k", _PRODUCER_KEY, keys)
        await s.execute(
            "DELETE FROM producer_state WHERE (topic_id, partition, producer_id) IN"
            f" (SELECT k.topic_id, k.partition, k.producer_id FROM {changed})",
            params,
        )
        await s.insert_int_rows(
            "producer_state",
            _PRODUCER_STATE,
            [(*key, *e) for key in keys for e in plan.histories[key]],
        )


async def committed_batches(s: Session, object_key: str) -> commit_outcome.CommitOutcome | None:
    row = await s.fetchone("SELECT id FROM files WHERE object_key = ?", (object_key,))
    if row is None:
        return None
    rows = await s.fetchall(
        "SELECT b.byte_offset, b.byte_size, b.base_offset, b.log_append_time,"
        " p.log_start_offset"
        " FROM batches b JOIN partitions p"
        " ON p.topic_id = b.topic_id AND p.partition = b.partition"
        " WHERE b.file_id = ?",
        (row[0],),
    )
    return commit_outcome.outcome(rows)
