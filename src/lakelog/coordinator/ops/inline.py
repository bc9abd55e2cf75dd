"""Inline files (issue 32): a small WAL object's bytes stored in the coordinator, so a
lightly loaded broker acknowledges a write after one commit and no PUT.

An inline file is an ordinary `files` row under an `inline/` key whose bytes live in
`inline_files`; batch rows point into it like into any object. Its bytes are written in
commit_file's transaction (so an acknowledged write is exactly as durable as one in an
object) and deleted in delete_files' (so they never outlive the row, nor the row them)."""

from __future__ import annotations

from lakelog.coordinator.engine import Session
from lakelog.coordinator.log_types import InlineFile, InlineUsage
from lakelog.coordinator.merge_rules import prefix_upper_bound

INLINE_PREFIX = "inline/"


async def store(s: Session, object_key: str, data: bytes) -> None:
    """Record the bytes of a file whose row this transaction just claimed."""
    await s.execute("INSERT INTO inline_files (object_key, data) VALUES (?, ?)", (object_key, data))


async def read(s: Session, object_key: str) -> bytes | None:
    row = await s.fetchone("SELECT data FROM inline_files WHERE object_key = ?", (object_key,))
    return None if row is None else bytes(row[0])


READ_MANY_CHUNK = 500
"""Keys per statement: well under SQLite's limit on bound parameters."""


async def read_many(s: Session, object_keys: list[str]) -> dict[str, bytes]:
    """The bytes of several inline files, in one transaction (missing keys left out)."""
    found: dict[str, bytes] = {}
    for start in range(0, len(object_keys), READ_MANY_CHUNK):
        chunk = object_keys[start : start + READ_MANY_CHUNK]
        marks = ", ".join("?" * len(chunk))
        rows = await s.fetchall(
            f"SELECT object_key, data FROM inline_files WHERE object_key IN ({marks})", chunk
        )
        for key, data in rows:
            found[str(key)] = bytes(data)
    return found


async def usage(s: Session, broker_id: int) -> InlineUsage:
    """Inline bytes held for one broker and in all, from the files' sizes (an index range
    over `files.object_key`, no blob is read)."""
    row = await s.fetchone(
        "SELECT COUNT(*), COALESCE(SUM(size), 0),"
        " COALESCE(SUM(CASE WHEN uploader_broker_id = ? THEN size ELSE 0 END), 0)"
        " FROM files WHERE object_key >= ? AND object_key < ?",
        (broker_id, INLINE_PREFIX, prefix_upper_bound(INLINE_PREFIX)),
    )
    assert row is not None
    return InlineUsage(files=int(row[0]), total_bytes=int(row[1]), broker_bytes=int(row[2]))


async def delete_with_files(s: Session, keyset: str, params: list[object]) -> None:
    """Drop the bytes of the files `delete_files` is about to delete (state 'deleting')."""
    await s.execute(
        "DELETE FROM inline_files WHERE object_key IN (SELECT f.object_key FROM files f"
        f" WHERE f.state = 'deleting' AND f.object_key IN (SELECT k.object_key FROM {keyset}))",
        params,
    )


async def list_committed(s: Session, limit: int) -> list[InlineFile]:
    """Inline files that still hold batches, oldest key (uuid7: oldest commit) first."""
    rows = await s.fetchall(
        "SELECT object_key, size, committed_at, uploader_broker_id FROM files"
        " WHERE object_key >= ? AND object_key < ? AND state = 'committed'"
        " ORDER BY object_key LIMIT ?",
        (INLINE_PREFIX, prefix_upper_bound(INLINE_PREFIX), max(limit, 0)),
    )
    return [InlineFile(str(k), int(size), int(at), int(b)) for k, size, at, b in rows]
