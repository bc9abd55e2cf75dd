"""The pipeline's side of the coordinator: files and their batches for gc, merge and
compaction, and `commit_merge`, which swaps batches to rewritten objects.

`commit_merge` runs in one write transaction. On PostgreSQL it first locks the partitions
it touches (the writers' order) before checking where their batches live, so no commit,
retention pass or other merge can change those batches between the check and the swap;
files are locked last, in id order, by `FreedBytes`. The lock, the check of the new keys
and the lookup of every move's rows travel in one round trip; the writes need none. The
rules (errors, skips, all-or-nothing) are `merge_rules`."""

from __future__ import annotations

from collections.abc import Sequence

from lakelog.coordinator.engine import Pending, Session
from lakelog.coordinator.merge_rules import (
    MERGE_UPLOADER,
    Matched,
    SourceRow,
    bytes_changes,
    decide,
    invalid_moves,
    prefix_upper_bound,
    row_update,
)
from lakelog.coordinator.ops.release import FreedBytes
from lakelog.coordinator.ops.rows import now_ms
from lakelog.coordinator.pipeline_types import (
    FileBatch,
    FileInfo,
    FileReference,
    MergeCommit,
    MergeCommitResult,
)
from lakelog.util.errors import ErrorCode

_OBJECT_KEYS = (("object_key", "text"),)

_IDS = (("id", "bigint"),)

_SOURCE_KEYS = (
    ("i", "int"),
    ("j", "int"),
    ("topic_uuid", "uuid"),
    ("partition", "int"),
    ("base_offset", "bigint"),
    ("last_offset", "bigint"),
    ("byte_offset", "bigint"),
    ("object_key", "text"),
)

_ROW_UPDATES = (
    ("id", "bigint"),
    ("byte_offset", "bigint"),
    ("byte_size", "bigint"),
    ("base_offset", "bigint"),
    ("last_offset", "bigint"),
    ("max_timestamp", "bigint"),
    ("timestamp_high", "bigint"),
)

_SIZE_CHANGES = (("topic_id", "bigint"), ("partition", "int"), ("delta", "bigint"))


async def list_file_infos(
    s: Session, key_prefix: str, after_key: str, limit: int
) -> list[FileInfo]:
    upper = prefix_upper_bound(key_prefix)
    sql = (
        "SELECT object_key, state, size, live_bytes, committed_at, marked_at FROM files"
        " WHERE object_key > ? AND object_key >= ?"
    )
    args: list[object] = [after_key, key_prefix]
    if upper is not None:
        sql += " AND object_key < ?"
        args.append(upper)
    sql += " ORDER BY object_key LIMIT ?"
    args.append(max(limit, 0))
    return [FileInfo(*row) for row in await s.fetchall(sql, args)]


async def file_batches(s: Session, object_keys: Sequence[str]) -> list[FileBatch]:
    keyset, params = s.dialect.keyset("k", _OBJECT_KEYS, [(k,) for k in object_keys])
    rows = await s.fetchall(
        "SELECT f.object_key, t.topic_uuid, b.partition, b.base_offset, b.last_offset,"
        " b.byte_offset, b.byte_size, b.timestamp_type, b.is_transactional FROM files f"
        " JOIN batches b ON b.file_id = f.id JOIN topics t ON t.id = b.topic_id"
        f" WHERE f.object_key IN (SELECT k.object_key FROM {keyset})",
        params,
    )
    to_uuid = s.dialect.to_uuid
    batches = [
        FileBatch(key, to_uuid(topic), *rest[:-1], bool(rest[-1])) for key, topic, *rest in rows
    ]
    batches.sort(key=lambda b: (b.topic_id.bytes, b.partition, b.base_offset))
    return batches


async def file_references(s: Session, object_keys: Sequence[str]) -> list[FileReference]:
    keyset, params = s.dialect.keyset("k", _OBJECT_KEYS, [(k,) for k in object_keys])
    rows = await s.fetchall(
        "SELECT f.object_key, f.state, (SELECT COUNT(*) FROM batches b WHERE b.file_id = f.id)"
        f" FROM files f WHERE f.object_key IN (SELECT k.object_key FROM {keyset})",
        params,
    )
    known = {key: (state, count) for key, state, count in rows}
    return [
        FileReference(key, True, *known[key]) if key in known else FileReference(key, False)
        for key in object_keys
    ]


async def commit_merge(
    s: Session, commits: Sequence[MergeCommit], all_or_nothing: bool
) -> list[MergeCommitResult]:
    await _lock_partitions(s, commits)
    known = await _send_known_keys(s, commits)
    shaped = [i for i, c in enumerate(commits) if not invalid_moves(c)]
    sources = await _send_sources(s, [commits[i] for i in shaped])
    taken = {row[0] for row in await known.fetchall()} if known is not None else set()
    found = await _matched(sources, [commits[i] for i in shaped])
    per_commit = dict(zip(shaped, found, strict=True))
    errors = [_error(c, i in per_commit, taken) for i, c in enumerate(commits)]
    matched = [per_commit.get(i, []) for i in range(len(commits))]
    now = now_ms()
    verdicts = decide(commits, errors, matched, all_or_nothing)
    results: list[MergeCommitResult] = []
    for commit, verdict in zip(commits, verdicts, strict=True):
        if verdict.error != ErrorCode.none:
            results.append(MergeCommitResult(verdict.error, skipped=verdict.skipped))
            continue
        kept = [m for m in verdict.apply if not m.move.drop]
        dropped = [m for m in verdict.apply if m.move.drop]
        if commit.new_object_key is not None:
            await _record_new_file(s, commit, kept, now)
        await _delete_rows(s, [r.batch_id for m in dropped for r in m.rows])
        results.append(MergeCommitResult(ErrorCode.none, len(kept), len(dropped), verdict.skipped))
    freed_per_file, size_change = bytes_changes([m for v in verdicts for m in v.apply])
    changes = [(*part, delta) for part, delta in sorted(size_change.items()) if delta]
    if changes:
        keyset, params = s.dialect.keyset("u", _SIZE_CHANGES, changes)
        await s.execute(
            "UPDATE partitions AS p SET byte_size = p.byte_size + u.delta"
            f" FROM {keyset} WHERE p.topic_id = u.topic_id AND p.partition = u.partition",
            params,
        )
    freed = FreedBytes()
    for file_id, size in freed_per_file.items():
        freed.add(file_id, size)
    await freed.apply(s, now)
    return results


def _error(commit: MergeCommit, well_formed: bool, taken: set[str]) -> ErrorCode:
    """corrupt_message for malformed moves, invalid_request for a known new key."""
    if not well_formed:
        return ErrorCode.corrupt_message
    if commit.new_object_key in taken:
        return ErrorCode.invalid_request
    return ErrorCode.none


async def _lock_partitions(s: Session, commits: Sequence[MergeCommit]) -> None:
    """PostgreSQL: lock the partitions the moves name, in the writers' order, without
    waiting for the answer (the statements after it run once it holds the locks)."""
    d = s.dialect
    if not d.for_update:
        return
    keys = sorted({(m.topic_id, m.partition) for c in commits for m in c.moves})
    if not keys:
        return
    keyset, params = d.keyset(
        "k", (("topic_uuid", "uuid"), ("partition", "int")), [(d.uuid(t), p) for t, p in keys]
    )
    await s.execute(
        f"SELECT 1 FROM {keyset} JOIN topics t ON t.topic_uuid = k.topic_uuid"
        " JOIN partitions p ON p.topic_id = t.id AND p.partition = k.partition"
        f" ORDER BY p.topic_id, p.partition{d.for_update} OF p",
        params,
    )


async def _send_known_keys(s: Session, commits: Sequence[MergeCommit]) -> Pending | None:
    """Send the lookup of the new object keys already known (such a commit does nothing)."""
    keys = sorted({c.new_object_key for c in commits if c.new_object_key is not None})
    if not keys:
        return None
    keyset, params = s.dialect.keyset("k", _OBJECT_KEYS, [(k,) for k in keys])
    return await s.send(
        f"SELECT object_key FROM files WHERE object_key IN (SELECT k.object_key FROM {keyset})",
        params,
    )


async def _send_sources(s: Session, commits: Sequence[MergeCommit]) -> Pending | None:
    """Send the lookup of every move's source rows where the move says they live (moves
    numbered across the commits, in order)."""
    d = s.dialect
    moves = [m for c in commits for m in c.moves]
    wanted = [
        (
            i,
            j,
            d.uuid(m.topic_id),
            m.partition,
            src.base_offset,
            src.last_offset,
            src.byte_offset,
            src.object_key,
        )
        for i, m in enumerate(moves)
        for j, src in enumerate(m.sources)
    ]
    if not wanted:
        return None
    keyset, params = d.keyset("k", _SOURCE_KEYS, wanted)
    return await s.send(
        "SELECT k.i, k.j, b.id, b.file_id, b.byte_size, b.max_timestamp, b.timestamp_high,"
        f" b.topic_id FROM {keyset} JOIN topics t ON t.topic_uuid = k.topic_uuid"
        " JOIN batches b ON b.topic_id = t.id AND b.partition = k.partition"
        "  AND b.last_offset = k.last_offset AND b.base_offset = k.base_offset"
        "  AND b.byte_offset = k.byte_offset"
        " JOIN files f ON f.id = b.file_id AND f.object_key = k.object_key",
        params,
    )


async def _matched(pending: Pending | None, commits: Sequence[MergeCommit]) -> list[list[Matched]]:
    """Per commit, the moves whose source rows all still live where the move says."""
    rows = await pending.fetchall() if pending is not None else []
    found = {(row[0], row[1]): row for row in rows}
    matched: list[list[Matched]] = []
    i = 0
    for commit in commits:
        ours: list[Matched] = []
        for move in commit.moves:
            hits = [found[i, j] for j in range(len(move.sources)) if (i, j) in found]
            i += 1
            if hits and len(hits) == len(move.sources):
                sources = tuple(SourceRow(*hit[2:7]) for hit in hits)
                ours.append(Matched(move, sources, (hits[0][7], move.partition)))
        matched.append(ours)
    return matched


async def _record_new_file(
    s: Session, commit: MergeCommit, kept: Sequence[Matched], now: int
) -> None:
    """Insert the new object, live with the kept batches, and point them at it; with none
    it is recorded already marked for deletion."""
    live = sum(m.move.new_byte_size for m in kept)
    state, marked_at = ("committed", None) if kept else ("deleting", now)
    await s.execute(
        "INSERT INTO files (object_key, state, size, live_bytes, uploader_broker_id,"
        " broker_epoch, committed_at, marked_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            commit.new_object_key,
            state,
            commit.new_object_size,
            live,
            MERGE_UPLOADER,
            MERGE_UPLOADER,
            now,
            marked_at,
        ),
    )
    if not kept:
        return
    # The joined rows go first: the first row takes over their last offset (unique index).
    await _delete_rows(s, [r.batch_id for m in kept for r in m.rows[1:]])
    keyset, params = s.dialect.keyset(
        "u", _ROW_UPDATES, [(m.rows[0].batch_id, *row_update(m)) for m in kept]
    )
    await s.execute(
        "UPDATE batches AS b SET file_id = (SELECT id FROM files WHERE object_key = ?),"
        " byte_offset = u.byte_offset, byte_size = u.byte_size, base_offset = u.base_offset,"
        " last_offset = u.last_offset, max_timestamp = u.max_timestamp,"
        f" timestamp_high = u.timestamp_high FROM {keyset} WHERE b.id = u.id",
        [commit.new_object_key, *params],
    )


async def _delete_rows(s: Session, batch_ids: Sequence[int]) -> None:
    if batch_ids:
        keyset, params = s.dialect.keyset("k", _IDS, [(i,) for i in batch_ids])
        await s.execute(f"DELETE FROM batches WHERE id IN (SELECT k.id FROM {keyset})", params)
