"""Plain-write claims: a broker claims a partition (for a client zone) before it accepts a
plain producer's batch, and commit_file refuses the batch once another broker has claimed
since. The concurrent test tries to break the one promise that matters: a claim, once
taken over, never commits again, so each claim's batches lie in one unbroken run of
offsets whatever the interleaving of claims and commits."""

from __future__ import annotations

import asyncio
import dataclasses
import random
import uuid

import pytest
from contract_support import OpenInstance, batch, commit, new_topic, read_all

from lakelog.coordinator import BatchCoordinator
from lakelog.coordinator.log_types import NOT_PLAIN_OWNER, CommitBatch, PlainOwnerKey
from lakelog.coordinator.ops import plain_owners
from lakelog.util.errors import ErrorCode


def claimed(b: CommitBatch, epoch: int | None, zone: str | None = None) -> CommitBatch:
    return dataclasses.replace(b, owner_zone=zone, owner_epoch=epoch)


async def test_a_claim_is_kept_by_its_holder_and_taken_over_by_another(
    coordinator: BatchCoordinator,
) -> None:
    t = await new_topic(coordinator, partitions=2)
    keys = [PlainOwnerKey(t, 0, None), PlainOwnerKey(t, 1, "zone-a"), PlainOwnerKey(t, 0, None)]
    first = await coordinator.claim_plain_partitions(1, -1, keys)
    assert first[0] is not None and first[1] is not None and first[0] != first[1]
    assert first[2] == first[0]  # one key asked twice: one claim
    assert await coordinator.claim_plain_partitions(1, -1, keys) == first
    [taken] = await coordinator.claim_plain_partitions(2, -1, [keys[0]])
    assert taken is not None and taken not in first
    [back] = await coordinator.claim_plain_partitions(1, -1, [keys[0]])
    assert back is not None and back not in (*first, taken)  # never an old epoch again
    # Zones are claimed apart; "" and None are the same zone.
    [other_zone] = await coordinator.claim_plain_partitions(2, -1, [PlainOwnerKey(t, 1, "b")])
    assert other_zone is not None
    assert await coordinator.claim_plain_partitions(1, -1, [keys[1]]) == [first[1]]
    assert await coordinator.claim_plain_partitions(1, -1, [PlainOwnerKey(t, 0, "")]) == [back]
    # A zone's key is its first ZONE_KEY_CHARS characters: a row stays small.
    long_zone = "z" * plain_owners.ZONE_KEY_CHARS
    [cut] = await coordinator.claim_plain_partitions(1, -1, [PlainOwnerKey(t, 0, long_zone)])
    assert await coordinator.claim_plain_partitions(
        1, -1, [PlainOwnerKey(t, 0, long_zone + "-and-more" * 1000)]
    ) == [cut]
    [ok] = await commit(coordinator, [claimed(batch(t, 0), cut, long_zone + "x" * 5000)])
    assert ok.error == ErrorCode.none


async def test_unknown_partitions_and_fenced_brokers_claim_nothing(
    coordinator: BatchCoordinator,
) -> None:
    t = await new_topic(coordinator)
    unknown = [PlainOwnerKey(t, 5, None), PlainOwnerKey(uuid.uuid4(), 0, None)]
    assert await coordinator.claim_plain_partitions(1, -1, unknown) == [None, None]
    old = await coordinator.register_broker(1, None, "127.0.0.1", 1)
    assert (await coordinator.claim_plain_partitions(1, old, [PlainOwnerKey(t, 0, None)]))[0]
    new = await coordinator.register_broker(1, None, "127.0.0.1", 1)
    assert await coordinator.claim_plain_partitions(1, old, [PlainOwnerKey(t, 0, None)]) == [None]
    [mine] = await coordinator.claim_plain_partitions(1, new, [PlainOwnerKey(t, 0, None)])
    assert mine is not None


async def test_a_batch_under_a_claim_taken_over_is_refused_and_nothing_else_is(
    coordinator: BatchCoordinator,
) -> None:
    t = await new_topic(coordinator, partitions=2)
    [a0, a1] = await coordinator.claim_plain_partitions(
        1, -1, [PlainOwnerKey(t, 0, "z"), PlainOwnerKey(t, 1, "z")]
    )
    [b0] = await coordinator.claim_plain_partitions(2, -1, [PlainOwnerKey(t, 0, "z")])
    results = await commit(
        coordinator,
        [
            claimed(batch(t, 0), a0, "z"),  # taken over by broker 2
            batch(t, 0, pid=7, epoch=0, seq=0),  # idempotent: no claim needed
            claimed(batch(t, 1), a1, "z"),  # still broker 1's
            batch(t, 0),  # a plain batch without a claim is not checked
        ],
    )
    assert [r.error for r in results] == [
        NOT_PLAIN_OWNER,
        ErrorCode.none,
        ErrorCode.none,
        ErrorCode.none,
    ]
    assert [r.base_offset for r in results[1:]] == [0, 0, 1]
    assert [c.base_offset for c in await read_all(coordinator, t, 0)] == [0, 1]
    [ok] = await commit(coordinator, [claimed(batch(t, 0), b0, "z")], broker_id=2)
    assert (ok.error, ok.base_offset) == (ErrorCode.none, 2)


async def test_claims_go_with_their_topic(coordinator: BatchCoordinator) -> None:
    name = f"topic-{uuid.uuid4().hex[:8]}"
    t = await new_topic(coordinator, name=name)
    [epoch] = await coordinator.claim_plain_partitions(1, -1, [PlainOwnerKey(t, 0, None)])
    await coordinator.delete_topics([name])
    again = await new_topic(coordinator, name=name)
    [result] = await commit(coordinator, [claimed(batch(again, 0), epoch)])
    assert result.error == NOT_PLAIN_OWNER
    [fresh] = await coordinator.claim_plain_partitions(1, -1, [PlainOwnerKey(again, 0, None)])
    assert fresh is not None and fresh != epoch


async def test_past_the_row_cap_the_oldest_claims_go_and_their_batches_are_refused(
    coordinator: BatchCoordinator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(plain_owners, "MAX_ROWS", 3)
    t = await new_topic(coordinator, partitions=6)
    epochs = []
    for p in range(6):
        [e] = await coordinator.claim_plain_partitions(1, -1, [PlainOwnerKey(t, p, None)])
        epochs.append(e)
    results = await commit(coordinator, [claimed(batch(t, p), epochs[p]) for p in range(6)])
    # The three newest claims are kept.
    assert [r.error for r in results] == [NOT_PLAIN_OWNER] * 3 + [ErrorCode.none] * 3
    # Claiming again works as for a new key.
    [e0] = await coordinator.claim_plain_partitions(1, -1, [PlainOwnerKey(t, 0, None)])
    [ok] = await commit(coordinator, [claimed(batch(t, 0), e0)])
    assert ok.error == ErrorCode.none


async def test_claims_taken_over_never_commit_again_under_concurrency(
    open_instance: OpenInstance,
) -> None:
    """Two brokers (two coordinator instances: two connections on PostgreSQL) take one
    partition from each other over and over while committing under their claims. Every
    claim's committed batches must form one unbroken run of offsets: a batch committed
    under a claim after another claim's batch would be a client's records reordered."""
    instances = [await open_instance(), await open_instance()]
    t = await new_topic(instances[0])
    key = PlainOwnerKey(t, 0, None)
    committed: list[tuple[int, int]] = []  # (offset, claim epoch)
    refused = 0
    rng = random.Random(1150)

    async def broker(broker_id: int, coordinator: BatchCoordinator) -> None:
        nonlocal refused
        for _ in range(30):
            [epoch] = await coordinator.claim_plain_partitions(broker_id, -1, [key])
            assert epoch is not None
            for _ in range(rng.randint(1, 3)):
                await asyncio.sleep(rng.random() / 500)
                [r] = await commit(coordinator, [claimed(batch(t, 0), epoch)], broker_id=broker_id)
                if r.error == NOT_PLAIN_OWNER:
                    refused += 1
                    break
                assert r.error == ErrorCode.none
                committed.append((r.base_offset, epoch))

    await asyncio.wait_for(
        asyncio.gather(*(broker(i + 1, c) for i, c in enumerate(instances))), 120
    )
    runs = [epoch for _, epoch in sorted(committed)]
    seen: set[int] = set()
    for i, epoch in enumerate(runs):
        if i and runs[i - 1] == epoch:
            continue
        assert epoch not in seen, f"claim {epoch} committed again after another: {runs}"
        seen.add(epoch)
    assert sorted(o for o, _ in committed) == list(range(len(committed)))
    assert committed and refused + len(committed) >= 60
