"""The small-write path (issue 32) in the WAL writer, against a real SQLite coordinator
and a real (memory) store: which buffers go inline, that their bytes read back through
`InlineAwareStorage` exactly as an object's would, that a lost commit answer is recovered
as for an object, and the move into an ordinary WAL object."""

from __future__ import annotations

import asyncio
from typing import Any

from lakelog.coordinator import FindBatchesRequest
from lakelog.coordinator.interface import BatchCoordinator
from lakelog.coordinator.log_types import InlineFile
from lakelog.log.produce.inline_policy import InlinePolicy
from lakelog.log.produce.seal_policy import PutBudget
from lakelog.log.produce.wal_writer import CommittedObject
from lakelog.log.storage.inline_store import InlineAwareStorage
from lakelog.log.storage.store import ObjectNotFoundError, ObjectStorage
from lakelog.pipeline.inline_move import move_inline_files
from lakelog.server.background.inline_mover import due_files
from lakelog.util.errors import ErrorCode
from tests.unit.produce.test_wal_writer import FlakyCoordinator, _request, _topic, _writer

FOREVER = 1 << 60


def _policy(**kw: Any) -> InlinePolicy:
    options = dict(
        max_bytes=64 * 1024, below_rate=1 << 20, broker_max_bytes=1 << 20, total_max_bytes=1 << 20
    )
    options.update(kw)
    return InlinePolicy(**options)


async def _bytes_of(storage: ObjectStorage, coordinator: BatchCoordinator, topic_id: Any) -> list:
    """Each partition-0 row's bytes, read where its coordinates say."""
    [found] = await coordinator.find_batches([FindBatchesRequest(topic_id, 0, 0, 1 << 20)])
    return [
        (
            c.object_key,
            bytes(
                await storage.get_range(c.object_key, c.byte_offset, c.byte_offset + c.byte_size)
            ),
        )
        for c in found.batches
    ]


async def test_small_buffers_go_inline_and_read_back(coordinator: BatchCoordinator) -> None:
    store = ObjectStorage.from_url("memory://")
    storage = InlineAwareStorage(store, coordinator)
    topic_id = await _topic(coordinator)
    committed: list[CommittedObject] = []
    writer = _writer(storage, coordinator, committed, inline=_policy())
    requests = [_request(topic_id, 0, b"v%d" % i) for i in range(3)]
    results = await asyncio.gather(*await writer.append(requests))
    assert [(r.error, r.base_offset) for r in results] == [(ErrorCode.none, i) for i in range(3)]
    [obj] = committed
    assert obj.object_key.startswith("inline/")
    assert await store.list() == []  # no PUT
    [(key, data)] = await _bytes_of(storage, coordinator, topic_id)
    assert key == obj.object_key
    assert data == b"".join(bytes(r.data) for r in requests)
    assert writer.inline is not None and writer.inline.broker_bytes > 0
    await writer.close()


async def test_big_buffers_busy_brokers_and_full_caps_use_objects(
    coordinator: BatchCoordinator,
) -> None:
    topic_id = await _topic(coordinator)
    cases = {
        "too big": _policy(max_bytes=10),
        "rate too high": _policy(below_rate=1),
        "broker cap": _policy(broker_max_bytes=10),
        "total cap": _policy(total_max_bytes=10),
    }
    for name, policy in cases.items():
        store = ObjectStorage.from_url("memory://")
        committed: list[CommittedObject] = []
        writer = _writer(
            InlineAwareStorage(store, coordinator), coordinator, committed, inline=policy
        )
        [result] = await asyncio.gather(*await writer.append([_request(topic_id, 0, b"x" * 50)]))
        assert result.error == ErrorCode.none, name
        [obj] = committed
        assert obj.object_key.startswith("wal/"), name
        assert [o.key for o in await store.list()] == [obj.object_key], name
        await writer.close()


class GatedCoordinator:
    """Holds each commit until the test opens its gate, so the test decides when a commit
    ends."""

    def __init__(self, inner: BatchCoordinator) -> None:
        self.inner = inner
        self.gates: list[asyncio.Event] = []
        self.sizes: list[int] = []

    async def commit_file(self, key: str, *args: Any, **kwargs: Any) -> Any:
        gate = asyncio.Event()
        self.gates.append(gate)
        self.sizes.append(len(args[3]))  # (broker_id, epoch, size, batches)
        await gate.wait()
        return await self.inner.commit_file(key, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def test_inline_buffers_are_group_committed(coordinator: BatchCoordinator) -> None:
    """A lone request is committed at once (no budget interval: 1,000 s here), requests
    that arrive while a commit is pending gather into one buffer, sealed as soon as that
    commit ends, and only one inline commit is in flight at a time."""
    gated = GatedCoordinator(coordinator)
    topic_id = await _topic(coordinator)
    storage = InlineAwareStorage(ObjectStorage.from_url("memory://"), coordinator)
    writer = _writer(
        storage,
        gated,
        [],
        inline=_policy(),
        commit_interval_ms=1_000_000,
        max_sealed_buffers=4,
        put_budget=PutBudget(max_per_second=0.001, min_per_second=0.001),
    )
    first = await writer.append([_request(topic_id, 0, b"first")])
    for _ in range(100):
        if gated.gates:
            break
        await asyncio.sleep(0.01)
    assert gated.sizes == [1]  # sealed at once, though the budget allows one seal in 1,000 s
    later = []
    for i in range(5):
        later += await writer.append([_request(topic_id, 0, b"later%d" % i)])
        await asyncio.sleep(0.01)
    assert len(gated.gates) == 1  # they wait for the pending commit
    gated.gates[0].set()
    assert (await first[0]).error == ErrorCode.none
    for _ in range(100):
        if len(gated.gates) == 2:
            break
        await asyncio.sleep(0.01)
    assert gated.sizes == [1, 5]  # all five in the next commit, sealed when the first ended
    gated.gates[1].set()
    results = await asyncio.gather(*later)
    assert [r.base_offset for r in results] == [1, 2, 3, 4, 5]
    await writer.close()


async def test_lost_answer_of_an_inline_commit_is_recovered(
    coordinator: BatchCoordinator,
) -> None:
    """The commit landed but its answer was lost: the writer asks what became of the key
    and answers from its rows; the batch is neither failed nor written twice."""
    flaky = FlakyCoordinator(coordinator, lose_answers=[0])
    topic_id = await _topic(coordinator)
    storage = InlineAwareStorage(ObjectStorage.from_url("memory://"), coordinator)
    writer = _writer(storage, flaky, [], inline=_policy())
    [result] = await asyncio.gather(*await writer.append([_request(topic_id, 0, b"once")]))
    assert (result.error, result.base_offset) == (ErrorCode.none, 0)
    [found] = await coordinator.find_batches([FindBatchesRequest(topic_id, 0, 0, 1 << 20)])
    assert [(c.base_offset, c.last_offset) for c in found.batches] == [(0, 0)]
    assert len(await coordinator.inline_files()) == 1
    await writer.close()


async def test_move_into_a_wal_object_then_delete(coordinator: BatchCoordinator) -> None:
    store = ObjectStorage.from_url("memory://")
    storage = InlineAwareStorage(store, coordinator)
    topic_id = await _topic(coordinator)
    writer = _writer(storage, coordinator, [], inline=_policy())
    for i in range(4):  # four inline files, two partitions
        futures = await writer.append([_request(topic_id, i % 2, b"r%d" % i)])
        await asyncio.gather(*futures)
    before = await _bytes_of(storage, coordinator, topic_id)
    files = await coordinator.inline_files()
    assert len(files) == 4
    outcome = await move_inline_files(coordinator, storage, [f.object_key for f in files])
    assert outcome.moved and outcome.files == 4 and outcome.batches == 4
    after = await _bytes_of(storage, coordinator, topic_id)
    assert [data for _, data in after] == [data for _, data in before]
    assert {key for key, _ in after} == {outcome.object_key}
    assert [o.key for o in await store.list()] == [outcome.object_key]
    assert await coordinator.inline_files() == []
    marked = [f.object_key for f in await coordinator.files_to_delete(FOREVER)]
    assert sorted(marked) == sorted(f.object_key for f in files)
    # What the file cleaner does: the store ignores inline keys, the coordinator drops them.
    await storage.delete_many(marked)
    await coordinator.delete_files(marked)
    assert (await coordinator.inline_usage(0)).files == 0
    try:
        await storage.get(files[0].object_key)
    except ObjectNotFoundError:
        pass
    else:
        raise AssertionError("a deleted inline file still reads")
    assert await coordinator.list_files() == [outcome.object_key]
    await writer.close()


async def test_a_move_racing_another_leaves_one_object_live(
    coordinator: BatchCoordinator,
) -> None:
    """Two movers of the same files (two brokers): one swap wins, the other's object is
    recorded already marked for deletion, so nothing is orphaned or read twice."""
    store = ObjectStorage.from_url("memory://")
    storage = InlineAwareStorage(store, coordinator)
    topic_id = await _topic(coordinator)
    writer = _writer(storage, coordinator, [], inline=_policy())
    await asyncio.gather(*await writer.append([_request(topic_id, 0, b"a")]))
    keys = [f.object_key for f in await coordinator.inline_files()]
    first = await move_inline_files(coordinator, storage, keys)
    second = await move_inline_files(coordinator, storage, keys)
    assert first.moved and not second.moved and second.object_key is None
    assert [o.key for o in await store.list()] == [first.object_key]
    await writer.close()


class _MoverHost:
    """What the inline mover reads of a broker."""

    def __init__(self, coordinator: BatchCoordinator, storage: ObjectStorage) -> None:
        from lakelog.config import Settings

        self.coordinator = coordinator
        self.storage = storage
        self.broker_id = 0
        self.inline_policy = None
        self.settings = Settings(produce_inline_move_age_ms=1, produce_inline_move_bytes=1)


async def test_a_busy_broker_moves_its_inline_files_a_piece_at_a_time(
    coordinator: BatchCoordinator,
) -> None:
    """At light load one pass moves everything due into one object; once the broker writes
    faster than the inline threshold, each pass moves at most BUSY_MOVE_BYTES, so no swap
    holds the coordinator long."""
    from lakelog.server.background.inline_mover import BUSY_MOVE_BYTES, InlineMover

    store = ObjectStorage.from_url("memory://")
    storage = InlineAwareStorage(store, coordinator)
    topic_id = await _topic(coordinator)
    writer = _writer(
        storage,
        coordinator,
        [],
        inline=_policy(
            max_bytes=1 << 20, below_rate=1 << 40, broker_max_bytes=1 << 30, total_max_bytes=1 << 30
        ),
    )
    for _ in range(8):  # eight inline files of ~100 KiB: three to four busy pieces
        await asyncio.gather(*await writer.append([_request(topic_id, 0, bytes(100_000))]))
    assert len(await coordinator.inline_files()) == 8
    host = _MoverHost(coordinator, storage)
    rate = 10.0 * (1 << 30)
    busy = InlineMover(host, append_rate=lambda: rate)  # type: ignore[arg-type]
    moved = await busy.run_once()
    assert 0 < moved * 100_000 <= BUSY_MOVE_BYTES
    assert len(await store.list()) == 1
    passes = 1
    while await coordinator.inline_files():
        assert await busy.run_once() * 100_000 <= BUSY_MOVE_BYTES
        passes += 1
        assert passes < 10
    assert passes >= 3
    for _ in range(8):
        await asyncio.gather(*await writer.append([_request(topic_id, 0, bytes(100_000))]))
    calm = InlineMover(host)  # type: ignore[arg-type]
    before = len(await store.list())
    assert await calm.run_once() == 8
    assert len(await store.list()) == before + 1  # all in one object
    [found] = await coordinator.find_batches([FindBatchesRequest(topic_id, 0, 0, 1 << 30)])
    assert [c.base_offset for c in found.batches] == list(range(16))
    await writer.close()


def test_due_files_by_size_age_and_owner() -> None:
    now = 1_000_000

    def f(key: str, size: int, age: int, broker: int = 1) -> InlineFile:
        return InlineFile(key, size, now - age, broker)

    young = [f("a", 10, 5), f("b", 10, 5)]
    assert due_files(young, 1, now, 100, 60, 1000) == []
    assert due_files(young, 1, now, 20, 60, 1000) == ["a", "b"]  # by size
    assert due_files([f("a", 10, 61), f("b", 10, 5)], 1, now, 100, 60, 1000) == ["a", "b"]
    assert due_files([f("a", 10, 61), f("b", 10, 5)], 1, now, 100, 60, 15) == ["a"]  # one object
    others = [f("a", 10, 100, broker=2)]
    assert due_files(others, 1, now, 1, 60, 1000) == []  # another broker's, not yet abandoned
    assert due_files([f("a", 10, 121, broker=2)], 1, now, 1, 60, 1000) == ["a"]


def test_policy_allows_small_slow_under_caps() -> None:
    p = _policy(max_bytes=100, below_rate=1000, broker_max_bytes=250, total_max_bytes=1000)
    assert p.allows(100, 999) and not p.allows(101, 0) and not p.allows(10, 1000)
    p.added(200)
    assert not p.allows(100, 0) and p.allows(50, 0)
    p.set_usage(0, 950)
    assert not p.allows(100, 0) and p.allows(50, 0)
