"""Mirroring in the batch coordinator (KIP-1279), on every implementation: mirror
definitions, partition rows and leases, commits at explicit offsets (gaps, duplicates,
ownership, fencing), the transaction index rebuilt from mirrored batches (LSO, aborted
ranges), read-only mirror topics, and failover (truncation to the LSO, group offsets)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from uuid import UUID

from contract_support import BIG, batch, commit, log_info, new_key, new_topic
from test_coordinator_offsets_topic import decode_key, decode_offset_value, java_partition
from test_coordinator_offsets_topic import records as offsets_topic_records

from lakelog.coordinator import (
    BatchCoordinator,
    CommitBatchResult,
    FindBatchesRequest,
    PartitionKey,
)
from lakelog.coordinator.group_types import OffsetCommit
from lakelog.coordinator.mirror_types import (
    READ_ONLY_ERROR,
    MirrorBatch,
    MirrorDefinition,
    MirrorPartition,
    MirrorPartitionUpdate,
    MirrorState,
    mirrored_producer_id,
)
from lakelog.coordinator.txn_types import AbortedTxn
from lakelog.util.errors import ErrorCode

NOW = 1_000_000
TTL = 10_000
ABORT, COMMIT = 0, 1


def mbatch(
    topic: UUID,
    base: int,
    records: int = 1,
    *,
    partition: int = 0,
    pid: int = -1,
    transactional: bool = False,
    control: int = -1,
    size: int = 100,
    epoch: int = 3,
) -> MirrorBatch:
    return MirrorBatch(
        topic_id=topic,
        partition=partition,
        byte_offset=0,
        byte_size=size,
        base_offset=base,
        last_offset=base + records - 1,
        base_timestamp=1_000 + base,
        max_timestamp=1_000 + base,
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        base_sequence=0 if pid >= 0 and control < 0 else -1,
        is_transactional=transactional,
        control_type=control,
        leader_epoch=epoch,
    )


async def mirror_commit(
    c: BatchCoordinator,
    batches: Sequence[MirrorBatch],
    broker_id: int,
    broker_epoch: int,
    key: str | None = None,
) -> list[CommitBatchResult]:
    """Commit the batches as one object, placed back to back."""
    placed = []
    position = 0
    for b in batches:
        placed.append(
            MirrorBatch(**{**{f: getattr(b, f) for f in b.__slots__}, "byte_offset": position})
        )
        position += b.byte_size
    return await c.commit_mirror(key or new_key(), broker_id, broker_epoch, position, placed)


class Mirrored:
    """A mirror topic on one broker's lease, MIRRORING from `start`."""

    def __init__(self, c: BatchCoordinator, topic: UUID, name: str, broker: int, epoch: int):
        self.c, self.topic, self.name, self.broker, self.epoch = c, topic, name, broker, epoch

    @classmethod
    async def make(
        cls, c: BatchCoordinator, partitions: int = 1, start: int = 0, broker: int = 1
    ) -> Mirrored:
        name = f"m-{uuid.uuid4().hex[:8]}"
        topic_name = f"t-{uuid.uuid4().hex[:8]}"
        topic = await new_topic(c, partitions, name=topic_name)
        created = await c.create_mirror(
            MirrorDefinition(name, "src:9092", topics=[topic_name]), NOW
        )
        assert created.error == ErrorCode.none
        keys = [PartitionKey(topic, p) for p in range(partitions)]
        added = await c.add_mirror_partitions(name, keys, False, NOW)
        assert [a.error for a in added] == [ErrorCode.none] * partitions
        epoch = await c.register_broker(broker, None, "h", 9000 + broker)
        held = await c.acquire_mirror_leases(broker, epoch, 1, NOW, TTL)
        assert {(p.topic_id, p.partition) for p in held} >= {(topic, p) for p in range(partitions)}
        updates = [
            MirrorPartitionUpdate(topic, p, broker, MirrorState.MIRRORING, start_offset=start)
            for p in range(partitions)
        ]
        assert await c.update_mirror_partitions(updates, NOW) == [ErrorCode.none] * partitions
        return cls(c, topic, name, broker, epoch)

    async def send(self, *batches: MirrorBatch) -> list[CommitBatchResult]:
        return await mirror_commit(self.c, batches, self.broker, self.epoch)

    async def state(self, partition: int = 0) -> MirrorPartition:
        rows = await self.c.mirror_partitions(self.name)
        [row] = [r for r in rows if r.partition == partition]
        return row


async def test_mirror_definitions_are_created_listed_altered_and_deleted(
    coordinator: BatchCoordinator,
) -> None:
    c = coordinator
    d = MirrorDefinition("dr", "a:1,b:2", {"security.protocol": "PLAINTEXT"}, ["x"], ["y.*"])
    assert (await c.create_mirror(d, NOW)).error == ErrorCode.none
    assert (await c.create_mirror(d, NOW)).error == ErrorCode.invalid_request
    [listed] = await c.list_mirrors()
    assert (listed.name, listed.source_bootstrap, dict(listed.source_configs)) == (
        "dr",
        "a:1,b:2",
        {"security.protocol": "PLAINTEXT"},
    )
    assert (list(listed.topics), list(listed.patterns), listed.created_at) == (["x"], ["y.*"], NOW)
    assert (await c.alter_mirror("dr", ["z", "x"], ["q"], ["x"])).error == ErrorCode.none
    [altered] = await c.list_mirrors(["dr"])
    assert (list(altered.topics), list(altered.patterns)) == (["z"], ["y.*", "q"])
    assert (await c.alter_mirror("nope", ["z"])).error == ErrorCode.resource_not_found
    assert await c.list_mirrors(["nope"]) == []
    assert (await c.delete_mirror("dr")).error == ErrorCode.none
    assert (await c.delete_mirror("dr")).error == ErrorCode.resource_not_found


async def test_partitions_join_one_mirror_only_and_topics_become_read_only(
    coordinator: BatchCoordinator,
) -> None:
    c = coordinator
    t = await new_topic(c, 2, name="orders")
    for name in ("a", "b"):
        assert (await c.create_mirror(MirrorDefinition(name, "s:1"), NOW)).error == ErrorCode.none
    keys = [PartitionKey(t, 0), PartitionKey(t, 1), PartitionKey(uuid.uuid4(), 0)]
    added = await c.add_mirror_partitions("a", keys, False, NOW)
    assert [r.error for r in added] == [
        ErrorCode.none,
        ErrorCode.none,
        ErrorCode.unknown_topic_or_partition,
    ]
    assert [r.error for r in await c.add_mirror_partitions("a", keys[:1], False, NOW)] == [
        ErrorCode.none
    ]
    [taken] = await c.add_mirror_partitions("b", keys[:1], True, NOW)
    assert taken.error == ErrorCode.invalid_request and "'a'" in (taken.message or "")
    missing = await c.add_mirror_partitions("zz", keys[:1], False, NOW)
    assert [r.error for r in missing] == [ErrorCode.resource_not_found]
    rows = await c.mirror_partitions("a")
    assert [(r.topic, r.partition, r.state) for r in rows] == [
        ("orders", 0, MirrorState.PREPARING),
        ("orders", 1, MirrorState.PREPARING),
    ]
    assert await c.mirror_partitions(topic_ids=[t]) == rows
    assert await c.mirror_topic_ids() == [t]
    assert await c.mirror_partitions("b") == []

    # Normal produce to a mirror topic is refused with the read-only error.
    results = await commit(c, [batch(t, 0), batch(t, 1)])
    assert [r.error for r in results] == [READ_ONLY_ERROR, READ_ONLY_ERROR]
    assert (await log_info(c, t)).high_watermark == 0
    # A busy mirror cannot be deleted.
    refused = await c.delete_mirror("a")
    assert refused.error == ErrorCode.invalid_request


async def test_leases_are_shared_renewed_and_fenced(coordinator: BatchCoordinator) -> None:
    c = coordinator
    t = await new_topic(c, 4, name="t")
    await c.create_mirror(MirrorDefinition("m", "s:1"), NOW)
    await c.add_mirror_partitions("m", [PartitionKey(t, p) for p in range(4)], False, NOW)
    e1 = await c.register_broker(1, None, "h", 1)
    e2 = await c.register_broker(2, None, "h", 2)
    first = await c.acquire_mirror_leases(1, e1, 1, NOW, TTL)
    assert [p.partition for p in first] == [0, 1, 2, 3]
    assert all(p.lease_owner == 1 and p.lease_expiry == NOW + TTL for p in first)
    # A second broker: the first gives back what exceeds its share, the second takes it.
    assert await c.acquire_mirror_leases(2, e2, 2, NOW, TTL) == []
    kept = await c.acquire_mirror_leases(1, e1, 2, NOW + 1, TTL)
    assert [p.partition for p in kept] == [0, 1]
    taken = await c.acquire_mirror_leases(2, e2, 2, NOW + 2, TTL)
    assert [p.partition for p in taken] == [2, 3]
    # Broker 2 dies: once its leases expire, broker 1 (alone now) takes them over.
    assert len(await c.acquire_mirror_leases(1, e1, 1, NOW + 3, TTL)) == 2
    later = NOW + 2 + TTL + 1
    assert [p.partition for p in await c.acquire_mirror_leases(1, e1, 1, later, TTL)] == [
        0,
        1,
        2,
        3,
    ]
    # A stale broker epoch holds nothing.
    assert await c.acquire_mirror_leases(1, e1 - 1, 1, later, TTL) == []
    # Only the owner reports; an administrator (-1) may too.
    update = MirrorPartitionUpdate(t, 0, 2, source_end_offset=5)
    assert await c.update_mirror_partitions([update], later) == [ErrorCode.not_leader_or_follower]
    updates = [
        MirrorPartitionUpdate(t, 0, 1, source_end_offset=5, source_high_watermark=6, lag_ms=7),
        MirrorPartitionUpdate(t, 1, -1, MirrorState.FAILED, "broken"),
        MirrorPartitionUpdate(uuid.uuid4(), 0, 1),
    ]
    assert await c.update_mirror_partitions(updates, later) == [
        ErrorCode.none,
        ErrorCode.none,
        ErrorCode.unknown_topic_or_partition,
    ]
    rows = {r.partition: r for r in await c.mirror_partitions("m")}
    assert (rows[0].source_end_offset, rows[0].source_high_watermark, rows[0].lag_ms) == (5, 6, 7)
    assert rows[0].lag_records == 5
    assert (rows[1].state, rows[1].reason, rows[1].lease_owner) == (
        MirrorState.FAILED,
        "broken",
        -1,
    )
    # FAILED partitions are not leased; add-topics with restart brings them back.
    held = await c.acquire_mirror_leases(1, e1, 1, later, TTL)
    assert 1 not in [p.partition for p in held]
    await c.add_mirror_partitions("m", [PartitionKey(t, 1)], True, later)
    again = {r.partition: r for r in await c.mirror_partitions("m")}
    assert (again[1].state, again[1].reason) == (MirrorState.PREPARING, None)


async def test_claim_mirror_task_is_a_lease(coordinator: BatchCoordinator) -> None:
    c = coordinator
    await c.create_mirror(MirrorDefinition("m", "s:1"), NOW)
    assert await c.claim_mirror_task("m", 1, NOW, TTL)
    assert not await c.claim_mirror_task("m", 2, NOW + 1, TTL)
    assert await c.claim_mirror_task("m", 1, NOW + 2, TTL)
    assert await c.claim_mirror_task("m", 2, NOW + 2 + TTL + 1, TTL)
    assert not await c.claim_mirror_task("nope", 1, NOW, TTL)


async def test_mirror_commits_keep_source_offsets(coordinator: BatchCoordinator) -> None:
    c = coordinator
    m = await Mirrored.make(c, start=100)
    info = await log_info(c, m.topic)
    assert (info.log_start_offset, info.high_watermark) == (100, 100)
    # A gap (compacted on the source) is kept as a gap.
    results = await m.send(mbatch(m.topic, 100, 3), mbatch(m.topic, 105, 2))
    assert [(r.error, r.base_offset) for r in results] == [
        (ErrorCode.none, 100),
        (ErrorCode.none, 105),
    ]
    info = await log_info(c, m.topic)
    assert (info.high_watermark, info.last_stable_offset) == (107, 107)
    [found] = await c.find_batches([FindBatchesRequest(m.topic, 0, 100, BIG)])
    assert [(b.base_offset, b.last_offset) for b in found.batches] == [(100, 102), (105, 106)]
    assert found.batches[0].max_timestamp == 1_100
    # A retry of what was copied is a duplicate; a batch straddling the end is refused.
    again = await m.send(mbatch(m.topic, 105, 2), mbatch(m.topic, 106, 2))
    assert (again[0].error, again[0].is_duplicate, again[0].base_offset) == (
        ErrorCode.none,
        True,
        105,
    )
    assert again[1].error == ErrorCode.invalid_record
    assert (await m.state()).source_epoch == 3
    assert (await m.state()).high_watermark == 107
    # A start offset applies only to an empty partition.
    late = MirrorPartitionUpdate(m.topic, 0, m.broker, start_offset=500)
    assert await c.update_mirror_partitions([late], NOW) == [ErrorCode.invalid_request]


async def test_only_the_lease_owner_commits_and_fencing_applies(
    coordinator: BatchCoordinator,
) -> None:
    c = coordinator
    m = await Mirrored.make(c)
    other = await c.register_broker(7, None, "h", 7)
    [refused] = await mirror_commit(c, [mbatch(m.topic, 0)], 7, other)
    assert refused.error == ErrorCode.not_leader_or_follower
    # A plain topic takes no mirror commit.
    plain = await new_topic(c)
    [alien] = await mirror_commit(c, [mbatch(plain, 0)], m.broker, m.epoch)
    assert alien.error == ErrorCode.not_leader_or_follower
    [unknown] = await mirror_commit(c, [mbatch(uuid.uuid4(), 0)], m.broker, m.epoch)
    assert unknown.error == ErrorCode.unknown_topic_or_partition
    # A re-registered broker's old epoch is fenced.
    await c.register_broker(m.broker, None, "h", 1)
    [stale] = await mirror_commit(c, [mbatch(m.topic, 0)], m.broker, m.epoch)
    assert stale.error == ErrorCode.stale_broker_epoch
    # A known object key changes nothing.
    key = new_key()
    fresh = await c.register_broker(m.broker, None, "h", 1)
    await c.acquire_mirror_leases(m.broker, fresh, 1, NOW, TTL)
    [ok] = await mirror_commit(c, [mbatch(m.topic, 0)], m.broker, fresh, key)
    assert ok.error == ErrorCode.none
    [twice] = await mirror_commit(c, [mbatch(m.topic, 1)], m.broker, fresh, key)
    assert twice.error == ErrorCode.invalid_request
    assert (await log_info(c, m.topic)).high_watermark == 1


async def test_transactions_are_rebuilt_from_mirrored_batches(
    coordinator: BatchCoordinator,
) -> None:
    c = coordinator
    m = await Mirrored.make(c)
    a, b = mirrored_producer_id(7), mirrored_producer_id(8)
    assert a == 2**63 - 9 and mirrored_producer_id(-1) == -1
    await m.send(
        mbatch(m.topic, 0, 2, pid=a, transactional=True),  # A opens at 0
        mbatch(m.topic, 2, 1),  # plain
        mbatch(m.topic, 3, 2, pid=b, transactional=True),  # B opens at 3
    )
    info = await log_info(c, m.topic)
    assert (info.high_watermark, info.last_stable_offset) == (5, 0)
    state = await m.state()
    assert (state.last_stable_offset, state.high_watermark) == (0, 5)
    await m.send(mbatch(m.topic, 5, pid=a, transactional=True, control=ABORT, size=78))
    info = await log_info(c, m.topic)
    assert (info.high_watermark, info.last_stable_offset) == (6, 3)
    await m.send(mbatch(m.topic, 6, pid=b, transactional=True, control=COMMIT, size=78))
    info = await log_info(c, m.topic)
    assert (info.high_watermark, info.last_stable_offset) == (7, 7)
    [found] = await c.find_batches([FindBatchesRequest(m.topic, 0, 0, BIG, True)])
    assert list(found.aborted) == [AbortedTxn(a, 0)]
    markers = [(x.base_offset, x.control_type, x.object_key != "") for x in found.batches]
    assert markers[-2:] == [(5, ABORT, True), (6, COMMIT, True)]
    assert markers[0] == (0, -1, True)
    # A marker of a producer with nothing open records no aborted range.
    await m.send(mbatch(m.topic, 7, pid=b, transactional=True, control=ABORT, size=78))
    [found] = await c.find_batches([FindBatchesRequest(m.topic, 0, 0, BIG, True)])
    assert list(found.aborted) == [AbortedTxn(a, 0)]


async def test_failover_truncates_to_the_lso_and_makes_the_topic_writable(
    coordinator: BatchCoordinator,
) -> None:
    c = coordinator
    m = await Mirrored.make(c, partitions=2)
    [topic] = await c.get_topics_by_id([m.topic])
    a = mirrored_producer_id(1)
    await m.send(
        mbatch(m.topic, 0, 2),
        mbatch(m.topic, 2, 2, pid=a, transactional=True),  # never decided on the copy
        mbatch(m.topic, 4, 3),
        mbatch(m.topic, 0, 5, partition=1),
    )
    await c.commit_offsets(
        "g", [OffsetCommit(topic.name, 0, 6), OffsetCommit(topic.name, 1, 4)], NOW
    )
    stopped = await c.stop_mirror_topics(m.name, [topic.name, "other"], NOW)
    assert [r.error for r in stopped] == [ErrorCode.none, ErrorCode.unknown_topic_or_partition]
    # STOPPING: the lease is gone and commits are refused; the topic is still read-only.
    assert (await m.state()).state == MirrorState.STOPPING
    [late] = await m.send(mbatch(m.topic, 7))
    assert late.error == ErrorCode.not_leader_or_follower
    [blocked] = await commit(c, [batch(m.topic, 0)])
    assert blocked.error == READ_ONLY_ERROR
    assert await c.acquire_mirror_leases(m.broker, m.epoch, 1, NOW, TTL) == []

    done = await c.finish_mirror_failover(NOW + 1)
    assert [(p.partition, p.state, p.failover_offset) for p in done] == [
        (0, MirrorState.STOPPED, 2),
        (1, MirrorState.STOPPED, 5),
    ]
    assert await c.finish_mirror_failover(NOW + 2) == []
    assert await c.mirror_topic_ids() == []
    info = await log_info(c, m.topic)
    assert (info.high_watermark, info.last_stable_offset) == (2, 2)
    [found] = await c.find_batches([FindBatchesRequest(m.topic, 0, 0, BIG)])
    assert [(b.base_offset, b.last_offset) for b in found.batches] == [(0, 1)]
    offsets = {o.partition: o.offset for o in await c.fetch_offsets("g", None)}
    assert offsets == {0: 2, 1: 4}
    # The lowered commit is a new record in __consumer_offsets, after the original two.
    last = (await offsets_topic_records(c, java_partition("g")))[-1]
    assert decode_key(last.key) == ("offset", "g", topic.name, 0)
    assert decode_offset_value(last.value or b"")[0] == 2
    # Writable: producers continue at the next offset.
    [written] = await commit(c, [batch(m.topic, 0, records=2)])
    assert (written.error, written.base_offset) == (ErrorCode.none, 2)
    # The mirror no longer lists the topic and may now be deleted; the record stays.
    [definition] = await c.list_mirrors([m.name])
    assert topic.name not in definition.topics
    assert (await c.delete_mirror(m.name)).error == ErrorCode.none
    assert [r.failover_offset for r in await c.mirror_partitions(m.name)] == [2, 5]
    # Mirroring it again (failback) starts from PREPARING.
    await c.create_mirror(MirrorDefinition(m.name, "s:1"), NOW)
    restarted = await c.add_mirror_partitions(m.name, [PartitionKey(m.topic, 0)], True, NOW)
    assert [r.error for r in restarted] == [ErrorCode.none]
    assert (await m.state()).state == MirrorState.PREPARING


async def test_deleting_a_mirror_topic_forgets_its_mirror_rows(
    coordinator: BatchCoordinator,
) -> None:
    c = coordinator
    m = await Mirrored.make(c)
    await m.send(mbatch(m.topic, 0, 2, pid=mirrored_producer_id(1), transactional=True))
    [topic] = await c.get_topics_by_id([m.topic])
    [deleted] = await c.delete_topics([topic.name])
    assert deleted.error == ErrorCode.none
    assert await c.mirror_partitions(m.name) == []
    assert (await c.delete_mirror(m.name)).error == ErrorCode.none
