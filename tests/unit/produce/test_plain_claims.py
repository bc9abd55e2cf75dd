"""Plain producers' order across brokers that both think they lead a partition: the race
the long fault run on PostgreSQL + S3 found once. Broker A accepts a plain batch and is
slow to commit it; meanwhile the client (told by Metadata that B leads now) sends its next
batch to B, which commits it. A's batch must then be refused, not committed behind it.
Two WAL writers on one real SQLite coordinator; a gate on A's commits is the only fake."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any
from uuid import UUID

from lakelog.coordinator import FindBatchesRequest
from lakelog.coordinator.interface import BatchCoordinator
from lakelog.coordinator.log_types import PlainOwnerKey
from lakelog.log.produce.plain_claims import PlainClaims
from lakelog.log.produce.wal_writer import AppendRequest, WalWriter
from lakelog.log.storage.store import ObjectStorage
from lakelog.util.errors import ErrorCode
from tests.unit.produce.test_wal_writer import _request, _topic


class GatedCoordinator:
    """Holds commit_file until `gate` is set; `entered` is set when one waits. Can also
    fail claims (a coordinator outage)."""

    def __init__(self, inner: BatchCoordinator) -> None:
        self.inner = inner
        self.gate = asyncio.Event()
        self.gate.set()
        self.entered = asyncio.Event()
        self.claims_fail = False
        self.claims = 0

    async def commit_file(self, *args: Any, **kwargs: Any) -> Any:
        self.entered.set()
        await self.gate.wait()
        return await self.inner.commit_file(*args, **kwargs)

    async def claim_plain_partitions(self, *args: Any) -> Any:
        self.claims += 1
        if self.claims_fail:
            raise OSError("injected outage")
        return await self.inner.claim_plain_partitions(*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _broker(coordinator: Any, broker_id: int, leads: set[int] | None = None) -> WalWriter:
    """A broker's writer whose cluster view says it leads `leads` (None: everything)."""

    async def still_leads(topic: UUID, partition: int, zone: str | None) -> bool:
        return leads is None or partition in leads

    claims = PlainClaims(
        coordinator, broker_id=broker_id, broker_epoch=lambda: -1, still_leads=still_leads
    )
    return WalWriter(
        ObjectStorage.from_url("memory://"),
        coordinator,
        broker_id=broker_id,
        broker_epoch=lambda: -1,
        max_buffer_bytes=1 << 20,
        commit_interval_ms=5,
        max_sealed_buffers=2,
        on_commit=lambda committed: None,
        still_leads=still_leads,
        claims=claims,
    )


def _plain(topic_id: UUID, partition: int, value: bytes, zone: str | None = "z1") -> AppendRequest:
    r = _request(topic_id, partition, value)
    return AppendRequest(
        r.topic_id, r.partition, r.data, r.header, r.timestamp_type, zone, check_owner=True
    )


@contextlib.asynccontextmanager
async def _two_brokers(
    coordinator: BatchCoordinator,
) -> AsyncIterator[tuple[GatedCoordinator, WalWriter, WalWriter]]:
    """Brokers A (its commits held while the gate is clear, as it starts) and B, both
    believing they lead everything."""
    gated = GatedCoordinator(coordinator)
    gated.gate.clear()
    a, b = _broker(gated, 1), _broker(coordinator, 2)
    try:
        yield gated, a, b
    finally:
        gated.gate.set()
        await a.close()
        await b.close()


async def _values(coordinator: BatchCoordinator, topic_id: UUID, partition: int) -> list[int]:
    [found] = await coordinator.find_batches([FindBatchesRequest(topic_id, partition, 0, 1 << 20)])
    return [b.base_offset for b in found.batches]


async def test_a_held_plain_batch_is_refused_once_another_broker_claims_its_partition(
    coordinator: BatchCoordinator,
) -> None:
    topic_id = await _topic(coordinator)
    async with _two_brokers(coordinator) as (gated, a, b):
        [first] = await a.append([_plain(topic_id, 0, b"first")])
        await asyncio.wait_for(gated.entered.wait(), 10)  # A is committing, slowly
        [second] = await b.append([_plain(topic_id, 0, b"second")])
        assert (await asyncio.wait_for(second, 10)).base_offset == 0
        gated.gate.set()
        assert (await asyncio.wait_for(first, 10)).error == ErrorCode.kafka_storage_error
        assert await _values(coordinator, topic_id, 0) == [0]
        # A's next batch claims the partition back and lands after B's.
        [third] = await a.append([_plain(topic_id, 0, b"third")])
        assert (await asyncio.wait_for(third, 10)).base_offset == 1
        # ...and B's old claim is now refused in turn.
        [fourth] = await b.append([_plain(topic_id, 0, b"fourth")])
        assert (await asyncio.wait_for(fourth, 10)).error == ErrorCode.kafka_storage_error


async def test_idempotent_batches_and_other_zones_are_not_touched_by_a_claim(
    coordinator: BatchCoordinator,
) -> None:
    topic_id = await _topic(coordinator)
    async with _two_brokers(coordinator) as (gated, a, b):
        held = await a.append(
            [
                _plain(topic_id, 0, b"z1"),
                _plain(topic_id, 0, b"z2", zone="z2"),
                _request(topic_id, 0, b"idem", producer_id=7, producer_epoch=0, base_sequence=0),
            ]
        )
        await asyncio.wait_for(gated.entered.wait(), 10)
        [other] = await b.append([_plain(topic_id, 0, b"b-z1")])  # takes zone z1 only
        assert (await asyncio.wait_for(other, 10)).error == ErrorCode.none
        gated.gate.set()
        z1, z2, idem = await asyncio.wait_for(asyncio.gather(*held), 10)
        assert z1.error == ErrorCode.kafka_storage_error
        assert (z2.error, idem.error) == (ErrorCode.none, ErrorCode.none)


async def test_a_broker_that_does_not_lead_refuses_without_claiming(
    coordinator: BatchCoordinator,
) -> None:
    """A client with stale metadata sends to a broker that leads the partition no longer:
    refused at once, and the leader's claim stays (no stealing, no refusal there)."""
    topic_id = await _topic(coordinator)
    leader, other = _broker(coordinator, 1), _broker(coordinator, 2, leads={1})
    try:
        [ok] = await leader.append([_plain(topic_id, 0, b"a")])
        assert (await asyncio.wait_for(ok, 10)).error == ErrorCode.none
        [stale] = await other.append([_plain(topic_id, 0, b"b")])
        assert stale.done() and stale.result().error == ErrorCode.kafka_storage_error
        [mine] = await other.append([_plain(topic_id, 1, b"c")])  # one it leads
        assert (await asyncio.wait_for(mine, 10)).error == ErrorCode.none
        [again] = await leader.append([_plain(topic_id, 0, b"d")])
        assert (await asyncio.wait_for(again, 10)).base_offset == 1
    finally:
        await leader.close()
        await other.close()


async def test_claims_are_asked_once_and_an_outage_refuses_only_new_partitions(
    coordinator: BatchCoordinator,
) -> None:
    topic_id = await _topic(coordinator)
    gated = GatedCoordinator(coordinator)
    writer = _broker(gated, 1)
    try:
        for value in (b"a", b"b", b"c"):
            futures = await writer.append([_plain(topic_id, 0, value), _plain(topic_id, 0, value)])
            for result in await asyncio.wait_for(asyncio.gather(*futures), 10):
                assert result.error == ErrorCode.none
        assert gated.claims == 1  # one call, for the first request
        gated.claims_fail = True
        [held] = await writer.append([_plain(topic_id, 0, b"held")])
        [new] = await writer.append([_plain(topic_id, 1, b"new")])
        assert (await asyncio.wait_for(held, 10)).error == ErrorCode.none
        assert new.done() and new.result().error == ErrorCode.kafka_storage_error
        gated.claims_fail = False
        [later] = await writer.append([_plain(topic_id, 1, b"later")])
        assert (await asyncio.wait_for(later, 10)).error == ErrorCode.none
        assert await coordinator.claim_plain_partitions(
            1, -1, [PlainOwnerKey(topic_id, 1, "z1")]
        ) != [None]
    finally:
        await writer.close()


async def test_the_claim_cache_is_bounded_and_an_evicted_claim_comes_back_unchanged(
    coordinator: BatchCoordinator,
) -> None:
    topic_id = await _topic(coordinator)
    claims = PlainClaims(coordinator, broker_id=1, broker_epoch=lambda: -1, max_cached=1)
    [first] = await claims.claim([_plain(topic_id, 0, b"a")])
    [second] = await claims.claim([_plain(topic_id, 1, b"b")])
    assert len(claims) == 1
    [again] = await claims.claim([_plain(topic_id, 0, b"c")])
    assert first is not None and second is not None and again is not None
    assert again.owner_epoch == first.owner_epoch != second.owner_epoch
