"""The WAL's early-sealing policy (pure, on a given clock) and the writer following it:
sealed at once when idle, batches gathered while an upload runs, the PUT budget spacing
seals, and order kept throughout."""

from __future__ import annotations

import asyncio
from typing import Any

from lakelog.coordinator.interface import BatchCoordinator
from lakelog.log.produce.seal_policy import ByteRate, SealPolicy
from lakelog.log.produce.wal_writer import CommittedObject
from lakelog.log.storage.store import ObjectStorage
from lakelog.util.errors import ErrorCode
from tests.unit.produce.test_wal_writer import FlakyStorage, _request, _topic, _writer

MiB = 1 << 20


def test_byte_rate_counts_the_last_second_and_forgets_older_bytes() -> None:
    rate = ByteRate()
    rate.add(0.0, 1000)
    rate.add(0.1, 1000)
    assert rate.per_second(0.2) == 4000  # 2,000 bytes in the current half second
    assert 0 < rate.per_second(0.7) < 4000  # the older bucket fades out
    assert rate.per_second(5.0) == 0


def test_budget_halves_at_the_halving_rate_and_spaces_seals() -> None:
    policy = SealPolicy(max_puts_per_second=100, halving_rate=6 * MiB)
    assert policy.puts_per_second(0) == 100
    assert policy.puts_per_second(6 * MiB) == 50
    assert policy.puts_per_second(54 * MiB) == 10  # ~5 MiB objects at 54 MiB/s
    assert policy.early_at(0.0) is not None and policy.early_at(0.0) < 0  # never sealed yet
    policy.sealed(10.0)
    assert policy.early_at(10.0) == 10.0 + 1 / 100
    off = SealPolicy(max_puts_per_second=0, halving_rate=6 * MiB)
    assert off.early_at(10.0) is None


async def test_idle_writer_seals_at_once_not_after_the_interval(
    coordinator: BatchCoordinator,
) -> None:
    topic_id = await _topic(coordinator)
    committed: list[CommittedObject] = []
    writer = _writer(
        ObjectStorage.from_url("memory://"),
        coordinator,
        committed,
        commit_interval_ms=600_000,  # only an early seal can end this test
        max_puts_per_second=1000,
    )
    for i in range(3):
        [future] = await writer.append([_request(topic_id, 0, b"v%d" % i)])
        result = await asyncio.wait_for(future, 60)
        assert (result.error, result.base_offset) == (ErrorCode.none, i)
    assert len(committed) == 3
    await writer.close()


async def test_batches_gather_while_an_upload_runs_and_keep_their_order(
    coordinator: BatchCoordinator,
) -> None:
    topic_id = await _topic(coordinator)
    storage = FlakyStorage(ObjectStorage.from_url("memory://"))
    storage.gate = asyncio.Event()
    committed: list[CommittedObject] = []
    writer = _writer(
        storage, coordinator, committed, commit_interval_ms=600_000, max_puts_per_second=1000
    )
    first = await writer.append([_request(topic_id, 0, b"a")])
    while storage.puts == 0:  # the first object is uploading (held at the gate)
        await asyncio.sleep(0.001)
    later: list[Any] = []
    for value in (b"b", b"c", b"d"):
        later += await writer.append([_request(topic_id, 0, value)])
    await asyncio.sleep(0.05)
    assert storage.puts == 1  # nothing sealed while the upload runs
    storage.gate.set()
    results = await asyncio.wait_for(asyncio.gather(*first, *later), 60)
    assert [r.base_offset for r in results] == [0, 1, 2, 3]
    assert [len(obj.batches) for obj in committed] == [1, 3]
    await writer.close()


async def test_the_put_budget_spaces_early_seals(coordinator: BatchCoordinator) -> None:
    topic_id = await _topic(coordinator)
    writer = _writer(
        ObjectStorage.from_url("memory://"),
        coordinator,
        [],
        commit_interval_ms=600_000,
        max_puts_per_second=2,  # one early seal per half second at light load
    )
    sealed_at: list[float] = []

    class Recording(SealPolicy):
        def sealed(self, now: float) -> None:
            sealed_at.append(now)
            super().sealed(now)

    writer._policy = Recording(max_puts_per_second=2, halving_rate=6 * MiB)
    for i in range(3):
        [future] = await writer.append([_request(topic_id, 0, b"v%d" % i)])
        assert (await asyncio.wait_for(future, 60)).error == ErrorCode.none
    # Timers never fire early: seals are at least the budget's interval apart.
    assert len(sealed_at) == 3
    assert sealed_at[1] - sealed_at[0] >= 0.5
    assert sealed_at[2] - sealed_at[1] >= 0.5
    await writer.close()
