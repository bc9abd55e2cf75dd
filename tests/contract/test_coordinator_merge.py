"""The pipeline's coordinator methods: listing files and their batches, GC's last check,
and commit_merge, which swaps batches to rewritten objects only where they still live."""

from __future__ import annotations

import uuid
from dataclasses import replace

from contract_support import batch, commit, log_info, new_key, new_topic, read_all

from lakelog.coordinator import BatchCoordinator, DeleteRecordsRequest, PartitionKey
from lakelog.coordinator.pipeline_types import BatchMove, BatchSource, FileBatch, MergeCommit
from lakelog.coordinator.txn_types import InitTxnProducerRequest, TxnRef
from lakelog.util.errors import ErrorCode

FOREVER = 1 << 60
NOW = 1_000_000


def seg_key() -> str:
    return f"seg/{uuid.uuid4()}/0/{0:020d}-{uuid.uuid4()}"


def moves_for(batches: list[FileBatch], start: int = 0) -> tuple[list[BatchMove], int]:
    """Moves placing the batches back to back in a new object from `start`; and its size."""
    moves, position = [], start
    for b in batches:
        moves.append(BatchMove(b.topic_id, b.partition, (b.source,), position, b.byte_size))
        position += b.byte_size
    return moves, position


async def marked(coordinator: BatchCoordinator) -> set[str]:
    return {f.object_key for f in await coordinator.files_to_delete(FOREVER)}


async def infos(coordinator: BatchCoordinator, prefix: str = "") -> dict[str, tuple[str, int]]:
    return {
        f.object_key: (f.state, f.live_bytes)
        for f in await coordinator.list_file_infos(prefix, "", 1000)
    }


async def test_list_file_infos_pages_by_key_within_a_prefix(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator)
    keys = sorted(new_key() for _ in range(5))
    for key in keys:
        await commit(coordinator, [batch(t, size=100)], key=key)
    await commit(coordinator, [batch(t)], key=seg_key())

    first = await coordinator.list_file_infos("wal/", "", 3)
    assert [f.object_key for f in first] == keys[:3]
    rest = await coordinator.list_file_infos("wal/", first[-1].object_key, 3)
    assert [f.object_key for f in rest] == keys[3:]
    assert await coordinator.list_file_infos("wal/", keys[-1], 3) == []
    assert all(
        (f.state, f.size, f.live_bytes, f.marked_at) == ("committed", 100, 100, None) for f in first
    )
    assert len(await coordinator.list_file_infos("", "", 100)) == 6
    assert len(await coordinator.list_file_infos("seg/", "", 100)) == 1


async def test_file_batches_and_references(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator, partitions=2)
    a, b = new_key(), new_key()
    await commit(coordinator, [batch(t, 1, records=2, size=50), batch(t, 0, size=70)], key=a)
    await commit(coordinator, [batch(t, 0, records=3, size=30)], key=b)

    found = await coordinator.file_batches([a, b, "wal/unknown"])
    assert [
        (f.object_key, f.partition, f.base_offset, f.last_offset, f.byte_offset, f.byte_size)
        for f in found
    ] == [
        (a, 0, 0, 0, 50, 70),
        (b, 0, 1, 3, 0, 30),
        (a, 1, 0, 1, 0, 50),
    ]
    assert all(f.topic_id == t for f in found)

    refs = await coordinator.file_references([b, "wal/unknown", a])
    assert [(r.object_key, r.known, r.state, r.batch_count) for r in refs] == [
        (b, True, "committed", 1),
        ("wal/unknown", False, None, 0),
        (a, True, "committed", 2),
    ]
    await coordinator.delete_records([DeleteRecordsRequest(t, 0, -1)])
    [ref] = await coordinator.file_references([b])
    assert (ref.state, ref.batch_count) == ("deleting", 0)


async def test_commit_merge_swaps_coordinates(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator, partitions=2)
    a, b = new_key(), new_key()
    await commit(coordinator, [batch(t, 0, records=2, size=40), batch(t, 1, size=60)], key=a)
    await commit(coordinator, [batch(t, 0, records=3, size=30)], key=b)
    before = await log_info(coordinator, t)

    part0 = [f for f in await coordinator.file_batches([a, b]) if f.partition == 0]
    moves, size = moves_for(part0)
    new = seg_key()
    [result] = await coordinator.commit_merge([MergeCommit(new, size, moves)])
    assert (result.error, result.moved, result.dropped, result.skipped) == (ErrorCode.none, 2, 0, 0)

    coords = await read_all(coordinator, t, 0)
    assert [
        (c.object_key, c.byte_offset, c.byte_size, c.base_offset, c.last_offset) for c in coords
    ] == [(new, 0, 40, 0, 1), (new, 40, 30, 2, 4)]
    assert await log_info(coordinator, t) == before  # offsets and sizes unchanged
    files = await infos(coordinator)
    assert files[new] == ("committed", 70)
    assert files[a] == ("committed", 60)  # partition 1's batch still lives there
    assert files[b] == ("deleting", 0)
    assert await marked(coordinator) == {b}
    [(c1)] = await read_all(coordinator, t, 1)
    assert c1.object_key == a


async def test_commit_merge_skips_batches_gone_or_moved(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator)
    a = new_key()
    await commit(
        coordinator, [batch(t, size=10), batch(t, size=20), batch(t, size=30)], key=a, spaced=True
    )
    planned = await coordinator.file_batches([a])
    # Meanwhile: retention drops the first batch, another merge moves the second.
    await coordinator.delete_records([DeleteRecordsRequest(t, 0, 1)])
    other_moves, other_size = moves_for(planned[1:2])
    other = seg_key()
    [r] = await coordinator.commit_merge([MergeCommit(other, other_size, other_moves)])
    assert r.moved == 1

    moves, size = moves_for(planned)
    new = seg_key()
    [result] = await coordinator.commit_merge([MergeCommit(new, size, moves)])
    assert (result.error, result.moved, result.skipped) == (ErrorCode.none, 1, 2)
    assert [c.object_key for c in await read_all(coordinator, t)] == [other, new]
    files = await infos(coordinator)
    assert files[new] == ("committed", 30)
    assert files[a] == ("deleting", 0)

    # Nothing left to move: the new object is recorded already marked, for the cleaner.
    empty = seg_key()
    [result] = await coordinator.commit_merge([MergeCommit(empty, size, moves)])
    assert (result.moved, result.skipped) == (0, 3)
    assert empty in await marked(coordinator)


async def test_all_or_nothing_and_drops(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator)
    a = new_key()
    await commit(
        coordinator,
        [batch(t, records=2, size=100), batch(t, size=100), batch(t, size=100)],
        key=a,
        spaced=True,
    )
    planned = await coordinator.file_batches([a])
    moves, _ = moves_for(planned)
    compacted = [
        replace(moves[0], new_byte_offset=0, new_byte_size=40),
        replace(moves[1], drop=True),
        replace(moves[2], new_byte_offset=40, new_byte_size=60),
    ]
    stale = [*compacted, BatchMove(t, 0, (BatchSource(7, 7, a, 999),), 100, 1)]  # no such row
    results = await coordinator.commit_merge(
        [MergeCommit(seg_key(), 40, compacted[:1]), MergeCommit(seg_key(), 101, stale[1:])],
        all_or_nothing=True,
    )
    assert [(r.error, r.moved, r.dropped, r.skipped) for r in results] == [
        (ErrorCode.none, 0, 0, 1),
        (ErrorCode.none, 0, 0, 3),
    ]
    assert {c.object_key for c in await read_all(coordinator, t)} == {a}

    new = seg_key()
    [r] = await coordinator.commit_merge([MergeCommit(new, 100, compacted)], all_or_nothing=True)
    assert (r.moved, r.dropped, r.skipped) == (2, 1, 0)
    coords = await read_all(coordinator, t)
    assert [(c.base_offset, c.last_offset, c.byte_offset, c.byte_size) for c in coords] == [
        (0, 1, 0, 40),
        (3, 3, 40, 60),
    ]
    info = await log_info(coordinator, t)
    assert (info.log_start_offset, info.high_watermark, info.byte_size) == (0, 4, 100)
    assert (await infos(coordinator))[a] == ("deleting", 0)


async def test_bad_commits_change_nothing(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator)
    a = new_key()
    await commit(coordinator, [batch(t, size=100)], key=a)
    moves, size = moves_for(await coordinator.file_batches([a]))
    results = await coordinator.commit_merge(
        [
            MergeCommit(a, size, moves),  # a key the coordinator knows
            MergeCommit(seg_key(), size - 1, moves),  # the batch would end past the object
            MergeCommit(None, 0, moves),  # a kept batch needs an object
            MergeCommit(seg_key(), size, [replace(moves[0], sources=())]),
            MergeCommit(seg_key(), size, [replace(moves[0], new_last_offset=5)]),
        ]
    )
    assert [r.error for r in results] == [
        ErrorCode.invalid_request,
        ErrorCode.corrupt_message,
        ErrorCode.corrupt_message,
        ErrorCode.corrupt_message,
        ErrorCode.corrupt_message,
    ]
    assert [c.object_key for c in await read_all(coordinator, t)] == [a]
    assert set(await coordinator.list_files()) == {a}


async def test_markers_are_not_file_batches(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator)
    init = await coordinator.init_transactional_producer(InitTxnProducerRequest("tx", 60_000), NOW)
    ref = TxnRef("tx", init.producer_id, init.producer_epoch)
    assert await coordinator.add_partitions_to_txn(ref, [PartitionKey(t, 0)], NOW, False) == [
        ErrorCode.none
    ]
    a = new_key()
    tx_batch = batch(
        t,
        records=2,
        size=80,
        pid=ref.producer_id,
        epoch=ref.producer_epoch,
        seq=0,
        transactional=True,
    )
    [r] = await commit(coordinator, [tx_batch], key=a)
    assert r.error == ErrorCode.none
    assert await coordinator.end_txn(ref, True, NOW) == ErrorCode.none

    planned = await coordinator.file_batches([a])
    assert [(f.base_offset, f.last_offset) for f in planned] == [(0, 1)]
    moves, size = moves_for(planned)
    new = seg_key()
    [result] = await coordinator.commit_merge([MergeCommit(new, size, moves)])
    assert result.moved == 1
    coords = await read_all(coordinator, t)
    assert [(c.object_key, c.base_offset, c.control_type) for c in coords] == [
        (new, 0, -1),
        ("", 2, 1),
    ]


async def test_joining_rows(coordinator: BatchCoordinator) -> None:
    """A run of adjacent rows becomes one row; a gap or a missing row stops the join."""
    t = await new_topic(coordinator)
    keys = [new_key() for _ in range(4)]
    for i, key in enumerate(keys):
        await commit(coordinator, [batch(t, records=2, size=50, base_ts=100 + i)], key=key)
    planned = await coordinator.file_batches(keys)  # offsets 0-1, 2-3, 4-5, 6-7
    sources = tuple(b.source for b in planned)
    new = seg_key()
    results = await coordinator.commit_merge(
        [
            MergeCommit(
                new,
                200,
                [
                    BatchMove(t, 0, sources[:3], 0, 150),
                    BatchMove(t, 0, sources[3:], 150, 50),
                ],
            )
        ]
    )
    assert [(r.error, r.moved, r.skipped) for r in results] == [(ErrorCode.none, 2, 0)]
    coords = await read_all(coordinator, t)
    assert [
        (c.object_key, c.base_offset, c.last_offset, c.byte_offset, c.byte_size) for c in coords
    ] == [(new, 0, 5, 0, 150), (new, 6, 7, 150, 50)]
    assert (coords[0].base_timestamp, coords[0].max_timestamp) == (100, 102)
    info = await log_info(coordinator, t)
    assert (info.high_watermark, info.byte_size) == (8, 200)
    assert [k for k in keys if k in await marked(coordinator)] == keys

    # Not adjacent: refused. A source gone: skipped, nothing joined.
    joined = (await coordinator.file_batches([new]))[0].source
    [r] = await coordinator.commit_merge(
        [MergeCommit(seg_key(), 100, [BatchMove(t, 0, (joined, joined), 0, 100)])]
    )
    assert r.error == ErrorCode.corrupt_message
    gone = BatchSource(8, 9, new, 200)
    [r] = await coordinator.commit_merge(
        [MergeCommit(seg_key(), 300, [BatchMove(t, 0, (coords_source(coords[1]), gone), 0, 1)])]
    )
    assert (r.error, r.moved, r.skipped) == (ErrorCode.none, 0, 1)
    assert len(await read_all(coordinator, t)) == 2


def coords_source(c: object) -> BatchSource:
    return BatchSource(c.base_offset, c.last_offset, c.object_key, c.byte_offset)  # type: ignore[attr-defined]
