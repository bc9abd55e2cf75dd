"""The WAL writer against a real SQLite coordinator and a real (memory) object store, with
fault-injection wrappers for failed uploads and commits."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from lakelog.coordinator import CreateTopicRequest, FindBatchesRequest
from lakelog.coordinator.interface import BatchCoordinator
from lakelog.coordinator.log_types import TimestampType
from lakelog.log.produce.wal_writer import AppendRequest, CommittedObject, WalWriter
from lakelog.log.protocol.records import split_batches, validate
from lakelog.log.storage.store import ObjectStorage
from lakelog.log.storage.wal import read_footer
from lakelog.util.errors import ErrorCode
from tests.support.batches import build_batch


class FlakyStorage:
    """Fails the puts whose index is in `fail_puts`; can hold puts until released."""

    def __init__(self, inner: ObjectStorage, fail_puts: Sequence[int] = ()) -> None:
        self.inner = inner
        self.fail_puts = set(fail_puts)
        self.puts = 0
        self.gate: asyncio.Event | None = None

    async def put(self, key: str, parts: Any) -> None:
        index = self.puts
        self.puts += 1
        if self.gate is not None:
            await self.gate.wait()
        if index in self.fail_puts:
            raise OSError("injected upload failure")
        await self.inner.put(key, parts)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class FlakyCoordinator:
    """Fails the commits whose index is in `fail_commits` before they reach the database,
    and loses the answer of those in `lose_answers` after they committed; the first
    `fail_lookups` commit_outcome calls fail too (the outage goes on)."""

    def __init__(
        self,
        inner: BatchCoordinator,
        fail_commits: Sequence[int] = (),
        lose_answers: Sequence[int] = (),
        fail_lookups: int = 0,
    ) -> None:
        self.inner = inner
        self.fail_commits = set(fail_commits)
        self.lose_answers = set(lose_answers)
        self.fail_lookups = fail_lookups
        self.commits: list[str] = []
        self.lookups = 0

    async def commit_file(self, key: str, *args: Any, **kwargs: Any) -> Any:
        index = len(self.commits)
        self.commits.append(key)
        if index in self.fail_commits:
            raise OSError("injected commit failure")
        results = await self.inner.commit_file(key, *args, **kwargs)
        if index in self.lose_answers:
            raise OSError("injected lost commit answer")
        return results

    async def commit_outcome(self, key: str) -> Any:
        self.lookups += 1
        if self.lookups <= self.fail_lookups:
            raise OSError("injected lookup failure")
        return await self.inner.commit_outcome(key)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def _topic(coordinator: BatchCoordinator) -> Any:
    [result] = await coordinator.create_topics([CreateTopicRequest("t", 2, 1)])
    return result.topic_id


def _request(topic_id: Any, partition: int, value: bytes, **kw: Any) -> AppendRequest:
    data = build_batch([(b"k", value)], **kw)
    view = next(split_batches(data))
    return AppendRequest(topic_id, partition, view, validate(view), TimestampType.CREATE_TIME)


def _writer(
    storage: Any, coordinator: Any, committed: list[CommittedObject], **kw: Any
) -> WalWriter:
    options = {"max_buffer_bytes": 1 << 20, "commit_interval_ms": 20, "max_sealed_buffers": 2}
    options.update(kw)
    return WalWriter(
        storage,
        coordinator,
        broker_id=0,
        broker_epoch=lambda: -1,
        on_commit=committed.append,
        **options,
    )


async def test_batches_committed_with_dense_offsets_and_footer(
    coordinator: BatchCoordinator,
) -> None:
    storage = ObjectStorage.from_url("memory://")
    topic_id = await _topic(coordinator)
    committed: list[CommittedObject] = []
    writer = _writer(storage, coordinator, committed)
    futures = await writer.append([_request(topic_id, p % 2, b"v%d" % p) for p in range(6)])
    results = await asyncio.gather(*futures)
    assert [r.error for r in results] == [ErrorCode.none] * 6
    assert [r.base_offset for r in results] == [0, 0, 1, 1, 2, 2]
    [obj] = committed
    assert obj.object_key.startswith("wal/")
    entries = read_footer(bytes(await storage.get(obj.object_key)))
    assert len(entries) == 6
    # The object holds each partition's batches back to back: one row (a run) each.
    [found] = await coordinator.find_batches([FindBatchesRequest(topic_id, 0, 0, 1 << 20)])
    assert [(b.base_offset, b.last_offset) for b in found.batches] == [(0, 2)]
    await writer.close()


async def test_a_partitions_batches_group_by_producer(coordinator: BatchCoordinator) -> None:
    """Producers interleaved in arrival order: the object lays each producer's batches of a
    partition back to back, in that producer's order (plain batches, the connections'
    order), so each producer's batches share one row; offsets follow the object."""
    storage = ObjectStorage.from_url("memory://")
    topic_id = await _topic(coordinator)
    writer = _writer(storage, coordinator, [])
    a, b = dict(producer_id=7, producer_epoch=0), dict(producer_id=9, producer_epoch=0)
    futures = await writer.append(
        [
            _request(topic_id, 0, b"a0", base_sequence=0, **a),
            _request(topic_id, 0, b"x"),
            _request(topic_id, 0, b"b0", base_sequence=0, **b),
            _request(topic_id, 1, b"other"),
            _request(topic_id, 0, b"a1", base_sequence=1, **a),
            _request(topic_id, 0, b"y"),
            _request(topic_id, 0, b"b1", base_sequence=1, **b),
            _request(topic_id, 0, b"a2", base_sequence=2, **a),
        ]
    )
    results = await asyncio.gather(*futures)
    assert [(r.error, r.base_offset) for r in results] == [
        (ErrorCode.none, offset) for offset in (2, 0, 5, 0, 3, 1, 6, 4)
    ]
    [found] = await coordinator.find_batches([FindBatchesRequest(topic_id, 0, 0, 1 << 20)])
    assert [(c.base_offset, c.last_offset, c.producer_id) for c in found.batches] == [
        (0, 1, -1),
        (2, 4, 7),
        (5, 6, 9),
    ]
    await writer.close()


async def test_upload_failure_fails_only_that_object(coordinator: BatchCoordinator) -> None:
    storage = FlakyStorage(ObjectStorage.from_url("memory://"), fail_puts=[0])
    topic_id = await _topic(coordinator)
    writer = _writer(storage, coordinator, [], max_buffer_bytes=1)  # one object per append
    first = await writer.append([_request(topic_id, 0, b"a")])
    second = await writer.append([_request(topic_id, 0, b"b")])
    [r1] = await asyncio.gather(*first)
    [r2] = await asyncio.gather(*second)
    assert r1.error == ErrorCode.kafka_storage_error and r1.error.retriable
    assert r2.error == ErrorCode.none and r2.base_offset == 0  # no offset used by the failure
    await writer.close()


async def test_commit_failure_fails_only_that_object(coordinator: BatchCoordinator) -> None:
    storage = ObjectStorage.from_url("memory://")
    flaky = FlakyCoordinator(coordinator, fail_commits=[0])
    topic_id = await _topic(coordinator)
    writer = _writer(storage, flaky, [], max_buffer_bytes=1, commit_retry_ms=0)
    first = await writer.append([_request(topic_id, 0, b"a")])
    second = await writer.append([_request(topic_id, 0, b"b")])
    [r1] = await asyncio.gather(*first)
    [r2] = await asyncio.gather(*second)
    assert r1.error == ErrorCode.kafka_storage_error
    assert r2.error == ErrorCode.none and r2.base_offset == 0
    await writer.close()


async def test_commits_follow_seal_order_even_when_uploads_finish_out_of_order(
    coordinator: BatchCoordinator,
) -> None:
    storage = FlakyStorage(ObjectStorage.from_url("memory://"))
    flaky = FlakyCoordinator(coordinator)
    topic_id = await _topic(coordinator)
    writer = _writer(storage, flaky, [], max_buffer_bytes=1, max_sealed_buffers=4)
    slow_first = asyncio.Event()
    original_put = storage.put

    async def put(key: str, parts: Any) -> None:
        if storage.puts == 0:
            storage.puts += 1
            await slow_first.wait()
            await storage.inner.put(key, parts)
            return
        await original_put(key, parts)

    storage.put = put  # type: ignore[method-assign]
    f1 = await writer.append([_request(topic_id, 0, b"first")])
    f2 = await writer.append([_request(topic_id, 0, b"second")])
    await asyncio.sleep(0.05)
    assert not f2[0].done()  # uploaded, but waits for the first object's commit
    slow_first.set()
    r1, r2 = (await asyncio.gather(*f1))[0], (await asyncio.gather(*f2))[0]
    assert (r1.base_offset, r2.base_offset) == (0, 1)
    await writer.close()


async def test_back_pressure_bounds_sealed_buffers(coordinator: BatchCoordinator) -> None:
    storage = FlakyStorage(ObjectStorage.from_url("memory://"))
    storage.gate = asyncio.Event()
    topic_id = await _topic(coordinator)
    writer = _writer(storage, coordinator, [], max_buffer_bytes=1, max_sealed_buffers=2)
    await writer.append([_request(topic_id, 0, b"1")])
    await writer.append([_request(topic_id, 0, b"2")])
    third = asyncio.create_task(writer.append([_request(topic_id, 0, b"3")]))
    await asyncio.sleep(0.05)
    assert not third.done()  # two objects in flight: the third append waits
    storage.gate.set()
    futures = await asyncio.wait_for(third, 5)
    [r3] = await asyncio.gather(*futures)
    assert r3.base_offset == 2
    await writer.close()


async def test_time_based_seal(coordinator: BatchCoordinator) -> None:
    storage = ObjectStorage.from_url("memory://")
    topic_id = await _topic(coordinator)
    writer = _writer(storage, coordinator, [], commit_interval_ms=30)
    futures = await writer.append([_request(topic_id, 1, b"x")])
    [result] = await asyncio.wait_for(asyncio.gather(*futures), 5)
    assert result.error == ErrorCode.none
    await writer.close()


async def test_duplicate_batch_gets_original_offset(coordinator: BatchCoordinator) -> None:
    storage = ObjectStorage.from_url("memory://")
    topic_id = await _topic(coordinator)
    writer = _writer(storage, coordinator, [], max_buffer_bytes=1)
    batch = dict(producer_id=5, producer_epoch=0, base_sequence=0)
    [first] = await asyncio.gather(*await writer.append([_request(topic_id, 0, b"a", **batch)]))
    [again] = await asyncio.gather(*await writer.append([_request(topic_id, 0, b"a", **batch)]))
    assert again.is_duplicate and again.base_offset == first.base_offset == 0
    gap = dict(producer_id=5, producer_epoch=0, base_sequence=3)
    [bad] = await asyncio.gather(*await writer.append([_request(topic_id, 0, b"c", **gap)]))
    assert bad.error == ErrorCode.out_of_order_sequence_number
    await writer.close()


async def test_failed_commit_is_retried_through_an_outage(coordinator: BatchCoordinator) -> None:
    storage = ObjectStorage.from_url("memory://")
    flaky = FlakyCoordinator(coordinator, fail_commits=[0, 1, 2], fail_lookups=2)
    topic_id = await _topic(coordinator)
    writer = _writer(storage, flaky, [], max_buffer_bytes=1)
    first = await writer.append([_request(topic_id, 0, b"a")])
    second = await writer.append([_request(topic_id, 0, b"b")])
    [r1] = await asyncio.wait_for(asyncio.gather(*first), 20)
    [r2] = await asyncio.wait_for(asyncio.gather(*second), 20)
    assert (r1.error, r1.base_offset) == (ErrorCode.none, 0)
    assert (r2.error, r2.base_offset) == (ErrorCode.none, 1)  # still after the stalled one
    await writer.close()


async def test_lost_commit_answer_is_answered_from_the_rows(
    coordinator: BatchCoordinator,
) -> None:
    """The commit happened but its answer was lost: the batches get their offsets (those
    inside a producer's run too), and nothing is committed twice."""
    storage = ObjectStorage.from_url("memory://")
    flaky = FlakyCoordinator(coordinator, lose_answers=[0], fail_lookups=1)
    topic_id = await _topic(coordinator)
    writer = _writer(storage, flaky, [], max_buffer_bytes=1 << 20, commit_interval_ms=20)
    batch = dict(producer_id=7, producer_epoch=0)
    futures = await writer.append(
        [
            _request(topic_id, 0, b"a", base_sequence=0, **batch),
            _request(topic_id, 1, b"b"),
            _request(topic_id, 0, b"c", base_sequence=1, **batch),
        ]
    )
    results = await asyncio.wait_for(asyncio.gather(*futures), 20)
    assert [(r.error, r.base_offset) for r in results] == [
        (ErrorCode.none, 0),
        (ErrorCode.none, 0),
        (ErrorCode.none, 1),
    ]
    assert len(flaky.commits) == 1  # looked up, never committed again
    [found] = await coordinator.find_batches([FindBatchesRequest(topic_id, 0, 0, 1 << 20)])
    assert [(b.base_offset, b.last_offset) for b in found.batches] == [(0, 1)]
    await writer.close()


async def test_back_pressure_is_first_come_first_served(coordinator: BatchCoordinator) -> None:
    """An append that arrives as room frees up queues behind those already waiting, so a
    connection's Produce requests keep their order under back-pressure."""
    storage = FlakyStorage(ObjectStorage.from_url("memory://"))
    storage.gate = asyncio.Event()
    topic_id = await _topic(coordinator)
    writer = _writer(storage, coordinator, [], max_buffer_bytes=1, max_sealed_buffers=1)
    held = await writer.append([_request(topic_id, 0, b"0")])
    waiting = [
        asyncio.create_task(writer.append([_request(topic_id, 0, b"%d" % i)])) for i in (1, 2)
    ]
    await asyncio.sleep(0.05)
    assert not any(task.done() for task in waiting)
    storage.gate.set()

    async def arrive_as_room_frees() -> list[asyncio.Future[Any]]:
        # Polls every loop turn, so it runs right after the room frees, before the
        # waiting appends are woken: the two of them asked first all the same.
        for _ in range(100_000):
            if writer._sealed < 1:
                break
            await asyncio.sleep(0)
        return await writer.append([_request(topic_id, 0, b"3")])

    late = await asyncio.wait_for(arrive_as_room_frees(), 5)
    ordered = [held, *[await task for task in waiting], late]
    results = [(await asyncio.wait_for(asyncio.gather(*f), 5))[0] for f in ordered]
    assert [r.base_offset for r in results] == [0, 1, 2, 3]
    await writer.close()


async def test_failed_upload_leaves_no_object(coordinator: BatchCoordinator) -> None:
    """The store kept the object but the upload still failed (its answer was lost after
    the retries): the writer removes it, so no orphan waits for GC."""
    inner = ObjectStorage.from_url("memory://")

    class StoredThenFailed(FlakyStorage):
        async def put(self, key: str, parts: Any) -> None:
            await self.inner.put(key, parts)
            raise OSError("injected lost answer")

    topic_id = await _topic(coordinator)
    writer = _writer(StoredThenFailed(inner), coordinator, [], max_buffer_bytes=1)
    [result] = await asyncio.gather(*await writer.append([_request(topic_id, 0, b"a")]))
    assert result.error == ErrorCode.kafka_storage_error
    await writer.close()
    assert await inner.list("wal") == []


async def test_batches_of_an_abandoned_request_are_not_committed(
    coordinator: BatchCoordinator,
) -> None:
    """A request cancelled before its commit (its connection closed) leaves no record: the
    client was never told, and may have sent the records elsewhere already."""
    storage = FlakyStorage(ObjectStorage.from_url("memory://"))
    storage.gate = asyncio.Event()
    topic_id = await _topic(coordinator)
    writer = _writer(storage, coordinator, [], max_buffer_bytes=1 << 20, commit_interval_ms=10)
    gone = await writer.append([_request(topic_id, 0, b"gone")])
    kept = await writer.append([_request(topic_id, 0, b"kept")])
    await asyncio.sleep(0.05)  # sealed, upload held
    gone[0].cancel()
    storage.gate.set()
    [result] = await asyncio.wait_for(asyncio.gather(*kept), 5)
    assert (result.error, result.base_offset) == (ErrorCode.none, 0)
    [found] = await coordinator.find_batches([FindBatchesRequest(topic_id, 0, 0, 1 << 20)])
    assert [b.base_offset for b in found.batches] == [0]
    # Every request abandoned: nothing committed, and the object is removed.
    storage.gate.clear()
    alone = await writer.append([_request(topic_id, 1, b"alone")])
    await asyncio.sleep(0.05)
    alone[0].cancel()
    storage.gate.set()
    await writer.close()
    [found] = await coordinator.find_batches([FindBatchesRequest(topic_id, 1, 0, 1 << 20)])
    assert list(found.batches) == []
    assert len(await storage.inner.list("wal")) == 1


async def test_batches_commit_under_the_epoch_they_were_accepted_under(
    coordinator: BatchCoordinator,
) -> None:
    """A broker fenced while it held batches, and registered again before its buffer was
    sealed, must not commit them under the new epoch: they may be older than records the
    same producers sent to other brokers meanwhile; nor may a request read before the new
    epoch. Batches after the new epoch start a new buffer and commit."""
    storage = ObjectStorage.from_url("memory://")
    topic_id = await _topic(coordinator)
    epochs = [await coordinator.register_broker(0, None, "127.0.0.1", 1)]
    fenced: list[int] = []
    writer = WalWriter(
        storage,
        coordinator,
        broker_id=0,
        broker_epoch=lambda: epochs[-1],
        max_buffer_bytes=1 << 20,
        commit_interval_ms=200,
        max_sealed_buffers=2,
        on_commit=lambda committed: None,
        on_fenced=fenced.append,
    )
    held = await writer.append([_request(topic_id, 0, b"held")])
    assert await coordinator.fence_broker(0, epochs[0], 1 << 62)
    epochs.append(await coordinator.register_broker(0, None, "127.0.0.1", 1))
    fresh = await writer.append([_request(topic_id, 0, b"fresh")])
    # A request read under the old epoch and appended after the new one: refused at once.
    [late] = await writer.append([_request(topic_id, 0, b"late")], epoch=epochs[0])
    assert late.done() and late.result().error == ErrorCode.stale_broker_epoch
    [old] = await asyncio.wait_for(asyncio.gather(*held), 5)
    [new] = await asyncio.wait_for(asyncio.gather(*fresh), 5)
    assert old.error == ErrorCode.stale_broker_epoch
    assert (new.error, new.base_offset) == (ErrorCode.none, 0)
    assert fenced == [epochs[0]]
    await writer.close()


async def test_plain_batches_of_a_partition_led_elsewhere_by_commit_time_are_refused(
    coordinator: BatchCoordinator,
) -> None:
    """A plain producer's batch (no sequence) whose partition moved to another broker while
    it waited for its commit is refused (a counted retry for the client): the client may
    have sent later records to the new leader already. Idempotent batches and batches of
    partitions still led here commit."""
    storage = ObjectStorage.from_url("memory://")
    topic_id = await _topic(coordinator)
    asked: list[tuple[int, str | None]] = []

    async def still_leads(topic: Any, partition: int, zone: str | None) -> bool:
        asked.append((partition, zone))
        return partition == 0

    writer = WalWriter(
        storage,
        coordinator,
        broker_id=0,
        broker_epoch=lambda: -1,
        max_buffer_bytes=1 << 20,
        commit_interval_ms=20,
        max_sealed_buffers=2,
        on_commit=lambda committed: None,
        still_leads=still_leads,
    )

    def plain(partition: int, value: bytes) -> AppendRequest:
        r = _request(topic_id, partition, value)
        return AppendRequest(
            r.topic_id, r.partition, r.data, r.header, r.timestamp_type, "z1", check_owner=True
        )

    futures = await writer.append(
        [
            plain(0, b"here"),
            plain(1, b"moved"),
            _request(topic_id, 1, b"idempotent", producer_id=7, producer_epoch=0, base_sequence=0),
        ]
    )
    here, moved, idem = await asyncio.wait_for(asyncio.gather(*futures), 5)
    assert (here.error, here.base_offset) == (ErrorCode.none, 0)
    assert moved.error == ErrorCode.kafka_storage_error
    assert (idem.error, idem.base_offset) == (ErrorCode.none, 0)
    assert sorted(asked) == [(0, "z1"), (1, "z1")]
    [found] = await coordinator.find_batches([FindBatchesRequest(topic_id, 1, 0, 1 << 20)])
    assert [b.producer_id for b in found.batches] == [7]
    await writer.close()


async def test_objects_fill_to_the_size_batch_by_batch(coordinator: BatchCoordinator) -> None:
    """A request's batches may span two objects: each object is sealed once it reaches the
    size (so none is sealed short of it), and offsets follow the order of the batches."""
    storage = ObjectStorage.from_url("memory://")
    topic_id = await _topic(coordinator)
    committed: list[CommittedObject] = []
    one = len(_request(topic_id, 0, bytes(1000)).data)
    writer = _writer(
        storage, coordinator, committed, max_buffer_bytes=3 * one, commit_interval_ms=60_000
    )
    futures = []
    for r in range(4):  # 4 requests of 2 batches: objects of 3, 3 and 2 batches
        futures += await writer.append(
            [_request(topic_id, p, bytes(1000) + bytes([r])) for p in (0, 1)]
        )
    await writer.flush()
    results = await asyncio.wait_for(asyncio.gather(*futures), 5)
    assert [r.error for r in results] == [ErrorCode.none] * 8
    assert [len(c.batches) for c in committed] == [3, 3, 2]
    assert [r.base_offset for r in results[0::2]] == [0, 1, 2, 3]
    assert [r.base_offset for r in results[1::2]] == [0, 1, 2, 3]
    await writer.close()
