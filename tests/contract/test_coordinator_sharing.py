"""Several instances on one database, and reopening it: what brokers sharing a coordinator
and restarting rely on."""

from __future__ import annotations

import asyncio
import threading
from uuid import UUID

from contract_support import OpenInstance, batch, commit, log_info, new_topic, read_all

from lakelog.coordinator import BatchCoordinator, open_coordinator
from lakelog.util.errors import ErrorCode


async def test_reopen_keeps_everything(coordinator_url: str) -> None:
    first = open_coordinator(coordinator_url)
    await first.start()
    try:
        t = await new_topic(first, partitions=2, name="durable", configs={"k": "v"})
        await commit(first, [batch(t, 0, records=3), batch(t, 1, pid=5, epoch=0, seq=0)])
        epoch = await first.register_broker(1, None, "h", 1)
        pid = await first.allocate_producer_id()
    finally:
        await first.close()
    await first.close()  # closing twice is harmless

    second = open_coordinator(coordinator_url)
    await second.start()
    try:
        [topic] = await second.get_topics(["durable"])
        assert (topic.topic_id, topic.num_partitions, dict(topic.configs)) == (t, 2, {"k": "v"})
        assert (await log_info(second, t, 0)).high_watermark == 3
        assert [c.last_offset for c in await read_all(second, t, 0)] == [2]
        [dup] = await commit(second, [batch(t, 1, pid=5, epoch=0, seq=0)])
        assert (dup.is_duplicate, dup.base_offset) == (True, 0)
        assert await second.heartbeat_broker(1, epoch) == ErrorCode.none
        assert await second.register_broker(1, None, "h", 1) > epoch
        assert await second.allocate_producer_id() > pid
    finally:
        await second.close()


async def _produce(coordinator: BatchCoordinator, t: UUID, files: int) -> list[int]:
    offsets: list[int] = []
    for i in range(files):
        results = await commit(
            coordinator, [batch(t, 0, records=1 + i % 3), batch(t, 1), batch(t, 0, records=2)]
        )
        assert all(r.error == ErrorCode.none for r in results)
        offsets += [r.base_offset for r in results[::2]]
    return offsets


async def test_concurrent_instances_give_gap_free_offsets(open_instance: OpenInstance) -> None:
    instances = [await open_instance() for _ in range(3)]
    t = await new_topic(instances[0], partitions=2)
    # Each instance works on its own thread, so these commits really race for the database.
    await asyncio.gather(*(_produce(c, t, 15) for c in instances))
    await _check_dense(instances[1], t, expected_files=45)


async def test_instances_on_separate_event_loops(
    coordinator_url: str, open_instance: OpenInstance
) -> None:
    """Brokers in different processes don't share a loop: commit from other threads' loops."""
    setup = await open_instance()
    t = await new_topic(setup, partitions=2)
    errors: list[BaseException] = []

    async def broker() -> None:
        other = open_coordinator(coordinator_url)
        await other.start()
        try:
            await _produce(other, t, 10)
        finally:
            await other.close()

    def broker_thread() -> None:
        try:
            asyncio.run(broker())
        except BaseException as exc:  # reported in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=broker_thread) for _ in range(2)]
    for thread in threads:
        thread.start()
    await _produce(setup, t, 10)
    for thread in threads:
        await asyncio.to_thread(thread.join)
    assert errors == []
    await _check_dense(setup, t, expected_files=30)


async def _check_dense(coordinator: BatchCoordinator, t: UUID, expected_files: int) -> None:
    for partition in (0, 1):
        batches = await read_all(coordinator, t, partition)
        expected = 0
        for b in batches:
            assert b.base_offset == expected
            expected = b.last_offset + 1
        assert (await log_info(coordinator, t, partition)).high_watermark == expected
    assert len(await coordinator.list_files()) == expected_files
