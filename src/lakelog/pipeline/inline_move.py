"""Move inline files' batches into one ordinary WAL object (issue 32).

Inline files keep small writes in the coordinator; this bounds how long they stay there.
The batches of a set of inline files are read from the coordinator, laid out as one WAL
object (same bytes, so offsets still follow each other from each row's coordinate, as in
any WAL object), PUT, and swapped in with `commit_merge`, all or nothing: either every row
now points into the new object, or none does (a row that changed meanwhile, e.g. retention
dropped it, makes the whole move a no-op; the next pass tries again with fresh rows). The
inline files, now holding no batch, are marked for deletion like any emptied object, and
the file cleaner's `delete_files` drops their bytes after the grace period, so a fetch
that read the old coordinates can still finish.

A crash between the PUT and the swap leaves an object no row names: GC's orphan pass
removes it, as for a WAL upload whose commit never happened. Used by the broker's
`InlineMover` and by `lakelog pipeline merge` (which moves every inline file, whoever
wrote it)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from lakelog.coordinator.interface import BatchCoordinator
from lakelog.coordinator.pipeline_types import BatchMove, MergeCommit
from lakelog.log.protocol.records import read_header
from lakelog.log.storage.keys import new_wal_key
from lakelog.log.storage.store import ObjectStorage
from lakelog.log.storage.wal import build_wal
from lakelog.util.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class MoveOutcome:
    object_key: str | None
    """The new object (None: nothing to move)."""
    files: int
    batches: int
    moved: bool
    """False: the rows changed meanwhile (or the commit failed); nothing moved."""


async def move_inline_files(
    coordinator: BatchCoordinator,
    storage: ObjectStorage,
    keys: Sequence[str],
    *,
    fault_delay_s: float = 0.0,
) -> MoveOutcome:
    """Move every batch row of the inline files `keys` into one new WAL object.
    `fault_delay_s` (tests only) widens the window between the PUT and the swap."""
    rows = await coordinator.file_batches(list(keys))
    if not rows:
        return MoveOutcome(None, len(keys), 0, False)
    found = await coordinator.inline_files_data(sorted({r.object_key for r in rows}))
    data = {key: memoryview(got) for key, got in found.items()}
    rows = [r for r in rows if r.object_key in data]  # deleted meanwhile: not ours to move
    if not rows:
        return MoveOutcome(None, len(keys), 0, False)
    entries = []
    for r in rows:
        view = data[r.object_key][r.byte_offset : r.byte_offset + r.byte_size]
        header = read_header(view)
        entries.append(
            (
                r.topic_id,
                r.partition,
                view,
                r.last_offset - r.base_offset + 1,
                header.producer_id,
                header.producer_epoch,
                header.base_sequence,
            )
        )
    wal = build_wal(entries)
    key = new_wal_key()
    await storage.put(key, wal.parts)
    if fault_delay_s:
        await asyncio.sleep(fault_delay_s)
    moves = [
        BatchMove(r.topic_id, r.partition, (r.source,), offset, size)
        for r, (offset, size) in zip(rows, wal.placements, strict=True)
    ]
    # If this raises, the swap may or may not have happened: the object is live, or an
    # orphan that GC's orphan pass removes.
    [result] = await coordinator.commit_merge([MergeCommit(key, wal.size, moves)], True)
    if result.error != ErrorCode.none:
        # Not recorded: nobody will ever read it.
        await storage.delete(key)
        return MoveOutcome(key, len(data), len(rows), False)
    # Skipped moves (all or nothing: then all of them): the object was recorded already
    # marked for deletion, and the cleaner removes it.
    return MoveOutcome(key, len(data), len(rows), result.moved == len(moves))
