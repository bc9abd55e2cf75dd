"""An uploaded object's row in `files`, as commit_file and commit_mirror record it: the
key claimed first (one object is committed once), the uploader's epoch checked under its
row lock, the final state written last."""

from __future__ import annotations

from lakelog.coordinator.engine import Pending, Row, Session


async def send_claim(
    s: Session, object_key: str, broker_id: int, broker_epoch: int, file_size: int
) -> Pending:
    """Insert the file row (its final state is written by `finish`); no row comes back if
    the key is known. A concurrent commit of the same key waits on the unique index, then
    gets no row either."""
    return await s.send(
        "INSERT INTO files (object_key, state, size, live_bytes, uploader_broker_id,"
        " broker_epoch, committed_at) VALUES (?, 'deleting', ?, 0, ?, ?, 0)"
        " ON CONFLICT (object_key) DO NOTHING RETURNING id",
        (object_key, file_size, broker_id, broker_epoch),
    )


async def send_epoch(s: Session, broker_id: int, broker_epoch: int) -> Pending | None:
    """The uploader's current epoch, its row locked FOR KEY SHARE (PostgreSQL): fencing,
    which locks it FOR UPDATE to change the epoch, waits for commits under the old one,
    and heartbeats are not held up. None for an uploader without an epoch (-1)."""
    if broker_epoch < 0:
        return None
    return await s.send(
        "SELECT broker_epoch FROM brokers WHERE broker_id = ?" + s.dialect.lock("KEY SHARE"),
        (broker_id,),
    )


def fenced(epoch_row: Row | None, broker_epoch: int) -> bool:
    """Has the uploader taken a newer epoch since it accepted the object's batches?"""
    return epoch_row is not None and int(epoch_row[0]) > broker_epoch


async def finish(s: Session, file_id: int, kept: bool, live_bytes: int, now: int) -> None:
    """The file's final state: committed if any batch of it was kept, else marked for
    deletion at once."""
    state, marked_at = ("committed", None) if kept else ("deleting", now)
    await s.execute(
        "UPDATE files SET state = ?, live_bytes = ?, committed_at = ?, marked_at = ? WHERE id = ?",
        (state, live_bytes, now, marked_at, file_id),
    )
