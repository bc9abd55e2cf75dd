"""The pipeline's side of the PostgreSQL coordinator: files and their batches for gc, merge
and compaction, and `commit_merge`. The swap locks the partitions it touches (writers'
order) before checking where their batches live, so no commit, retention pass or other
merge can change those batches between the check and the swap; files are locked last, in
id order, by `FreedBytes`. The rules (errors, skips, all-or-nothing) are SQLite's
`decide`, so both coordinators answer alike."""

from __future__ import annotations

from collections.abc import Sequence

from lakelog.coordinator.ops.release import FreedBytes
from lakelog.coordinator.pipeline_types import (
    BatchMove,
    FileBatch,
    FileInfo,
    FileReference,
    MergeCommit,
    MergeCommitResult,
)
from lakelog.coordinator.postgres.engine import PostgresSession
from lakelog.coordinator.postgres.rows import Conn, PartitionRow, find_partitions, now_ms
from lakelog.coordinator.sqlite.merge import (
    MERGE_UPLOADER,
    Matched,
    SourceRow,
    bytes_changes,
    decide,
    invalid_moves,
    prefix_upper_bound,
    row_update,
)
from lakelog.errors import ErrorCode


async def list_file_infos(
    conn: Conn, key_prefix: str, after_key: str, limit: int
) -> list[FileInfo]:
    upper = prefix_upper_bound(key_prefix)
    sql = (
        "SELECT object_key, state, size, live_bytes, committed_at, marked_at FROM files"
        " WHERE object_key > %s AND object_key >= %s"
    )
    args: list[object] = [after_key, key_prefix]
    if upper is not None:
        sql += " AND object_key < %s"
        args.append(upper)
    sql += " ORDER BY object_key LIMIT %s"
    args.append(max(limit, 0))
    cursor = await conn.execute(sql, args)
    return [FileInfo(*row) for row in await cursor.fetchall()]


async def file_batches(conn: Conn, object_keys: Sequence[str]) -> list[FileBatch]:
    cursor = await conn.execute(
        "SELECT f.object_key, t.topic_uuid, b.partition, b.base_offset, b.last_offset,"
        " b.byte_offset, b.byte_size, b.timestamp_type, b.is_transactional FROM files f"
        " JOIN batches b ON b.file_id = f.id JOIN topics t ON t.id = b.topic_id"
        " WHERE f.object_key = ANY(%s::text[])",
        (list(object_keys),),
    )
    batches = [FileBatch(*row) for row in await cursor.fetchall()]
    batches.sort(key=lambda b: (b.topic_id.bytes, b.partition, b.base_offset))
    return batches


async def file_references(conn: Conn, object_keys: Sequence[str]) -> list[FileReference]:
    cursor = await conn.execute(
        "SELECT f.object_key, f.state, (SELECT COUNT(*) FROM batches b WHERE b.file_id = f.id)"
        " FROM files f WHERE f.object_key = ANY(%s::text[])",
        (list(object_keys),),
    )
    known = {key: (state, count) for key, state, count in await cursor.fetchall()}
    return [
        FileReference(key, True, *known[key]) if key in known else FileReference(key, False)
        for key in object_keys
    ]


async def commit_merge(
    conn: Conn, commits: Sequence[MergeCommit], all_or_nothing: bool
) -> list[MergeCommitResult]:
    keys = [(m.topic_id, m.partition) for c in commits for m in c.moves]
    parts = await find_partitions(conn, keys, lock=True)
    now = now_ms()
    errors = [await _check(conn, commit) for commit in commits]
    matched = [
        await _match(conn, parts, commit.moves) if error == ErrorCode.none else []
        for commit, error in zip(commits, errors, strict=True)
    ]
    verdicts = decide(commits, errors, matched, all_or_nothing)
    results: list[MergeCommitResult] = []
    for commit, verdict in zip(commits, verdicts, strict=True):
        if verdict.error != ErrorCode.none:
            results.append(MergeCommitResult(verdict.error, skipped=verdict.skipped))
            continue
        kept = [m for m in verdict.apply if not m.move.drop]
        dropped = [m for m in verdict.apply if m.move.drop]
        if commit.new_object_key is not None:
            await _record_new_file(conn, commit, kept, now)
        if dropped:
            await conn.execute(
                "DELETE FROM batches WHERE id = ANY(%s::bigint[])",
                ([r.batch_id for m in dropped for r in m.rows],),
            )
        results.append(MergeCommitResult(ErrorCode.none, len(kept), len(dropped), verdict.skipped))
    freed_per_file, size_change = bytes_changes([m for v in verdicts for m in v.apply])
    for (topic_row, partition), delta in sorted(size_change.items()):
        if delta:
            await conn.execute(
                "UPDATE partitions SET byte_size = byte_size + %s"
                " WHERE topic_id = %s AND partition = %s",
                (delta, topic_row, partition),
            )
    freed = FreedBytes()
    for file_id, size in freed_per_file.items():
        freed.add(file_id, size)
    await freed.apply(PostgresSession(conn), now)
    return results


async def _check(conn: Conn, commit: MergeCommit) -> ErrorCode:
    if invalid_moves(commit):
        return ErrorCode.corrupt_message
    if commit.new_object_key is not None:
        cursor = await conn.execute(
            "SELECT 1 FROM files WHERE object_key = %s", (commit.new_object_key,)
        )
        if await cursor.fetchone() is not None:
            return ErrorCode.invalid_request
    return ErrorCode.none


async def _record_new_file(
    conn: Conn, commit: MergeCommit, kept: Sequence[Matched], now: int
) -> None:
    """Insert the new object, live with the kept batches, and point them at it; with none
    it is recorded already marked for deletion."""
    live = sum(m.move.new_byte_size for m in kept)
    state, marked_at = ("committed", None) if kept else ("deleting", now)
    cursor = await conn.execute(
        "INSERT INTO files (object_key, state, size, live_bytes, uploader_broker_id,"
        " broker_epoch, committed_at, marked_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
        " RETURNING id",
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
    row = await cursor.fetchone()
    if row is None or not kept:
        return
    joined = [r.batch_id for m in kept for r in m.rows[1:]]
    if joined:  # they go first: the first row takes over their last offset (unique index)
        await conn.execute("DELETE FROM batches WHERE id = ANY(%s::bigint[])", (joined,))
    updates = [row_update(m) for m in kept]
    await conn.execute(
        "UPDATE batches b SET file_id = %s, byte_offset = u.byte_offset, byte_size = u.byte_size,"
        " base_offset = u.base_offset, last_offset = u.last_offset,"
        " max_timestamp = u.max_timestamp, timestamp_high = u.timestamp_high"
        " FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[], %s::bigint[], %s::bigint[],"
        " %s::bigint[], %s::bigint[]) AS u (id, byte_offset, byte_size, base_offset,"
        " last_offset, max_timestamp, timestamp_high) WHERE b.id = u.id",
        (
            row[0],
            [m.rows[0].batch_id for m in kept],
            *([u[i] for u in updates] for i in range(6)),
        ),
    )


async def _match(
    conn: Conn, parts: dict[tuple[object, int], PartitionRow], moves: Sequence[BatchMove]
) -> list[Matched]:
    """The moves whose source rows all still live where the move says, with their rows."""
    wanted = [
        (i, j, parts[(m.topic_id, m.partition)], source)
        for i, m in enumerate(moves)
        if (m.topic_id, m.partition) in parts
        for j, source in enumerate(m.sources)
    ]
    if not wanted:
        return []
    cursor = await conn.execute(
        "SELECT k.i, k.j, b.id, b.file_id, b.byte_size, b.max_timestamp, b.timestamp_high"
        " FROM unnest(%s::int[], %s::int[], %s::bigint[], %s::int[], %s::bigint[],"
        " %s::bigint[], %s::bigint[], %s::text[]) AS k (i, j, topic_id, partition,"
        " base_offset, last_offset, byte_offset, object_key)"
        " JOIN batches b ON b.topic_id = k.topic_id AND b.partition = k.partition"
        "  AND b.last_offset = k.last_offset AND b.base_offset = k.base_offset"
        "  AND b.byte_offset = k.byte_offset"
        " JOIN files f ON f.id = b.file_id AND f.object_key = k.object_key",
        (
            [i for i, _, _, _ in wanted],
            [j for _, j, _, _ in wanted],
            [p.topic_id for _, _, p, _ in wanted],
            [moves[i].partition for i, _, _, _ in wanted],
            [s.base_offset for _, _, _, s in wanted],
            [s.last_offset for _, _, _, s in wanted],
            [s.byte_offset for _, _, _, s in wanted],
            [s.object_key for _, _, _, s in wanted],
        ),
    )
    found = {(row[0], row[1]): SourceRow(*row[2:]) for row in await cursor.fetchall()}
    matched = []
    for i, move in enumerate(moves):
        part = parts.get((move.topic_id, move.partition))
        rows = [found.get((i, j)) for j in range(len(move.sources))]
        if part is not None and all(r is not None for r in rows):
            matched.append(
                Matched(move, tuple(r for r in rows if r), (part.topic_id, move.partition))
            )
    return matched
