"""The WAL's early-sealing policy (pure, on a given clock) and the writer following it:
sealed at once when idle, batches gathered while an upload runs, the PUT budget spacing
seals, and order kept throughout."""

from __future__ import annotations

import asyncio
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings
from pydantic import ValidationError

from lakelog.cli import cost_model
from lakelog.cli.cost_model import Prices
from lakelog.config import Settings
from lakelog.coordinator.interface import BatchCoordinator
from lakelog.log.produce.inline_policy import InlinePolicy
from lakelog.log.produce.seal_policy import ByteRate, PutBudget, SealPolicy
from lakelog.log.produce.wal_writer import CommittedObject
from lakelog.log.storage.store import ObjectStorage
from lakelog.server.put_budget import put_budget
from lakelog.util.errors import ErrorCode
from tests.unit.produce.test_wal_writer import FlakyStorage, _request, _topic, _writer

MiB = 1 << 20
GiB = 1 << 30


def test_byte_rate_counts_the_last_second_and_forgets_older_bytes() -> None:
    rate = ByteRate()
    rate.add(0.0, 1000)
    rate.add(0.1, 1000)
    assert rate.per_second(0.2) == 4000  # 2,000 bytes in the current half second
    assert 0 < rate.per_second(0.7) < 4000  # the older bucket fades out
    assert rate.per_second(5.0) == 0


DEFAULT_BUDGET = put_budget(Settings(broker_id=0))
"""The broker's budget at the default settings and prices."""


@pytest.mark.parametrize(
    ("mib_s", "puts_s"),
    [
        (0.01, 4.0),  # the floor: one PUT per 250 ms commit interval
        (1, 4.0),  # the cost target (0.96/s) is below the floor
        (10, 9.58),  # 0.04 x $310.4 x 10 / $12.96
        (50, 47.9),
        (200, 100.0),  # the cap
    ],
)
def test_default_budget_at_each_rate(mib_s: float, puts_s: float) -> None:
    assert DEFAULT_BUDGET.per_second(mib_s * MiB) == pytest.approx(puts_s, rel=0.01)


def test_the_budget_is_the_cost_fraction_of_kafkas_bill_in_the_middle() -> None:
    """PUTs bought by the budget at 10 MiB/s cost 4% of classic Kafka's bill, priced by the
    same model `lakelog cost` uses (which prices Kafka at ~$310 per MiB/s a month)."""
    prices = Prices()
    kafka = cost_model.classic_kafka_usd_per_byte_per_second(prices) * 10 * MiB
    assert kafka == pytest.approx(3104, rel=0.01)
    puts = DEFAULT_BUDGET.per_second(10 * MiB) * cost_model.put_usd_per_put_per_second(prices)
    assert puts == pytest.approx(0.04 * kafka)
    usage = cost_model.Usage(bytes_in=10 * MiB, bytes_out=10 * MiB)
    assert cost_model.project(usage, prices).classic_usd == pytest.approx(kafka)


def test_settings_move_the_budget() -> None:
    settings = Settings(
        broker_id=0,
        produce_put_cost_fraction=0.08,
        produce_commit_interval_ms=100,
        produce_max_puts_per_second=30,
    )
    budget = put_budget(settings)
    assert budget.per_second(0) == 10  # one per 100 ms interval
    assert budget.per_second(10 * MiB) == pytest.approx(2 * DEFAULT_BUDGET.per_second(10 * MiB))
    assert budget.per_second(50 * MiB) == 30
    with pytest.raises(ValidationError):
        Settings(broker_id=0, produce_put_cost_fraction=-1)


RATES = st.just(0.0) | st.floats(min_value=1.0, max_value=1e12)
"""Bytes per second: none, or at least one (no subnormal arithmetic)."""


@settings(max_examples=300, deadline=None)
@given(
    RATES,
    RATES,
    st.floats(min_value=0, max_value=1000),
    st.floats(min_value=0, max_value=1000),
    st.just(0.0) | st.floats(min_value=1e-12, max_value=1e-3),
)
def test_budget_grows_with_rate_while_puts_per_gib_fall(
    rate_a: float, rate_b: float, cap: float, floor: float, per_byte: float
) -> None:
    low, high = sorted((rate_a, rate_b))
    budget = PutBudget(max_per_second=cap, min_per_second=floor, puts_per_byte=per_byte)
    assert budget.per_second(low) <= budget.per_second(high)
    if low > 0:
        per_gib_low = budget.per_second(low) / low * GiB
        per_gib_high = budget.per_second(high) / high * GiB
        assert per_gib_high <= per_gib_low * (1 + 1e-9)
    assert budget.per_second(high) <= cap


def test_seals_are_spaced_by_the_budget_and_inline_ones_group_committed() -> None:
    policy = SealPolicy(PutBudget(max_per_second=100, min_per_second=4, puts_per_byte=1e-6))
    assert policy.early_at(0.0) is not None and policy.early_at(0.0) < 0  # never sealed yet
    policy.sealed(10.0)
    assert policy.early_at(10.0) == 10.0 + 1 / 4  # no load: the floor
    assert policy.early_at(10.0, inline=True) == 10.0  # a commit, not a PUT: group commit
    policy.appended(10.0, 10 * MiB)
    # ~20 MiB/s over the half-second bucket: 1e-6 x 20 MiB = ~21 PUTs a second.
    assert policy.early_at(10.0) == pytest.approx(10.0 + 1 / (20 * MiB * 1e-6))
    off = SealPolicy(PutBudget(max_per_second=0, min_per_second=4, puts_per_byte=1))
    assert off.early_at(10.0) is None
    assert off.early_at(10.0, inline=True) is None


def test_a_buffer_that_fills_within_the_horizon_is_left_to_fill() -> None:
    """Near full speed an early seal would save little latency for a PUT and a commit:
    a buffer that reaches its size within the horizon at the current rate waits."""
    budget = PutBudget(max_per_second=100, min_per_second=4, puts_per_byte=1e-3)
    policy = SealPolicy(budget, max_bytes=8 * MiB, fill_horizon_s=0.05)
    policy.sealed(10.0)
    policy.appended(10.0, 100 * MiB)  # ~200 MiB/s: 8 MiB in 40 ms
    assert policy.early_at(10.0, size=1 * MiB) is None  # 7 MiB more in 35 ms: wait
    assert policy.early_at(10.0, size=1 * MiB, inline=True) == 10.0  # not a PUT
    slow = SealPolicy(budget, max_bytes=8 * MiB, fill_horizon_s=0.05)
    slow.sealed(10.0)
    slow.appended(10.0, 25 * MiB)  # ~50 MiB/s: 7 MiB more in 140 ms: seal early
    assert slow.early_at(10.0, size=1 * MiB) == pytest.approx(10.0 + 1 / 100)
    unbounded = SealPolicy(budget, max_bytes=8 * MiB)  # no horizon: the budget decides
    unbounded.sealed(10.0)
    unbounded.appended(10.0, 100 * MiB)
    assert unbounded.early_at(10.0, size=1 * MiB) == pytest.approx(10.0 + 1 / 100)


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
        put_budget=PutBudget(1000, 1000),
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
        storage,
        coordinator,
        committed,
        commit_interval_ms=600_000,
        put_budget=PutBudget(1000, 1000),
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
        put_budget=PutBudget(2, 2),  # one early seal per half second
    )
    sealed_at: list[float] = []

    class Recording(SealPolicy):
        def sealed(self, now: float) -> None:
            sealed_at.append(now)
            super().sealed(now)

    writer._policy = Recording(PutBudget(2, 2))
    for i in range(3):
        [future] = await writer.append([_request(topic_id, 0, b"v%d" % i)])
        assert (await asyncio.wait_for(future, 60)).error == ErrorCode.none
    # Timers never fire early: seals are at least the budget's interval apart.
    assert len(sealed_at) == 3
    assert sealed_at[1] - sealed_at[0] >= 0.5
    assert sealed_at[2] - sealed_at[1] >= 0.5
    await writer.close()


async def test_inline_seals_follow_the_cap_and_object_seals_the_budget(
    coordinator: BatchCoordinator,
) -> None:
    """A buffer that goes inline costs no PUT: it is sealed at the cap's pace, while the
    same writer without the small-write path waits out its (tiny) PUT budget."""
    topic_id = await _topic(coordinator)
    budget = PutBudget(max_per_second=1000, min_per_second=0.001)  # 1,000 s between PUTs
    policy = InlinePolicy(
        max_bytes=64 * 1024, below_rate=1 << 20, broker_max_bytes=1 << 20, total_max_bytes=1 << 20
    )
    committed: list[CommittedObject] = []
    inline = _writer(
        ObjectStorage.from_url("memory://"),
        coordinator,
        committed,
        commit_interval_ms=600_000,  # only an early seal can end this test
        put_budget=budget,
        inline=policy,
    )
    for i in range(3):
        [future] = await inline.append([_request(topic_id, 0, b"i%d" % i)])
        assert (await asyncio.wait_for(future, 60)).error == ErrorCode.none
    assert [obj.object_key.split("/")[0] for obj in committed] == ["inline"] * 3
    await inline.close()

    objects: list[CommittedObject] = []
    plain = _writer(
        ObjectStorage.from_url("memory://"),
        coordinator,
        objects,
        commit_interval_ms=600_000,
        put_budget=budget,
    )
    [first] = await plain.append([_request(topic_id, 0, b"o0")])
    assert (await asyncio.wait_for(first, 60)).error == ErrorCode.none  # idle: at once
    [second] = await plain.append([_request(topic_id, 0, b"o1")])
    await asyncio.sleep(0.5)
    assert not second.done() and len(objects) == 1  # the next PUT is 1,000 s away
    await plain.close()
    assert (await asyncio.wait_for(second, 60)).error == ErrorCode.none  # close flushes
