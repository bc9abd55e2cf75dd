"""Poison pill: a batch corrupted in the source's object storage (bit rot in one WAL
object) fails only its own partition on the mirror, with the reason; the batches before it
are mirrored, and the other partitions of the same objects keep mirroring."""

from __future__ import annotations

import asyncio

from cluster_support import metric_sum, scrape
from e2e_fixtures import BrokerFactory
from e2e_harness import BrokerProcess, create_topic, wait_until
from mirror_support import end_offsets, mirror_cli, produce_keyed, two_clusters, wait_states

from lakelog.log.storage.store import ObjectStorage
from lakelog.log.storage.wal import read_footer

PARTITIONS = 3
POISONED = 1


def _overwrite(broker: BrokerProcess, key: str, data: bytes) -> None:
    """Replace an object in place (what bit rot does; the store itself is create-only)."""
    storage = ObjectStorage.from_url(broker.backend.storage_url)

    async def write() -> None:
        await storage.delete(key)
        await storage.put(key, [data])

    asyncio.run(write())


def _corrupt_newest_batch_of(broker: BrokerProcess, topic_partition: int) -> None:
    """Flip one byte inside the partition's batch in the newest WAL object holding it."""
    for key in sorted(broker.backend.list_keys("wal/"), reverse=True):
        data = bytearray(broker.backend.read(key))
        entries = [e for e in read_footer(bytes(data)) if e.partition == topic_partition]
        if entries:
            entry = entries[-1]
            data[entry.offset + entry.size - 3] ^= 0xFF
            _overwrite(broker, key, bytes(data))
            return
    raise AssertionError("no WAL object holds the partition")


def test_a_corrupt_batch_fails_only_its_partition(
    broker_factory: BrokerFactory, topic_name: str
) -> None:
    # The source writes objects (not inline files): the test corrupts a batch in one.
    c = two_clusters(broker_factory, source_env={"PRODUCE_INLINE": False})
    src = c.source.bootstrap
    create_topic(src, topic_name, PARTITIONS)
    produce_keyed(src, topic_name, 60, PARTITIONS, "first")
    before = end_offsets(src, topic_name, PARTITIONS)
    produce_keyed(src, topic_name, 60, PARTITIONS, "second")
    _corrupt_newest_batch_of(c.source, POISONED)
    c.source.restart()  # forget the batches it cached when they were produced

    mirror_cli(c.dest, "create", "dr", "--source", src, "--topic", topic_name)
    want = {p: "MIRRORING" for p in range(PARTITIONS)} | {POISONED: "FAILED"}
    rows = wait_states(c.dest, "dr", topic_name, want)
    assert "CRC mismatch" in (rows[POISONED]["reason"] or ""), rows[POISONED]
    source_end = end_offsets(src, topic_name, PARTITIONS)

    def healthy_caught_up() -> bool:
        got = end_offsets(c.dest.bootstrap, topic_name, PARTITIONS)
        return all(got[p] == source_end[p] for p in range(PARTITIONS) if p != POISONED)

    wait_until(healthy_caught_up, 30, "the healthy partitions mirrored")
    # The poisoned partition kept everything before the bad batch, and nothing after it.
    dest_end = end_offsets(c.dest.bootstrap, topic_name, PARTITIONS)
    assert before[POISONED] <= dest_end[POISONED] < source_end[POISONED]

    # The others keep mirroring new data.
    produce_keyed(src, topic_name, 30, PARTITIONS, "third")
    source_end = end_offsets(src, topic_name, PARTITIONS)
    wait_until(healthy_caught_up, 30, "new data mirrored on the healthy partitions")
    assert end_offsets(c.dest.bootstrap, topic_name, PARTITIONS)[POISONED] == dest_end[POISONED]
    assert c.dest.metrics_port is not None
    failures = metric_sum(scrape(c.dest.metrics_port), "lakelog_mirror_failures_total")
    assert failures == 1
    assert c.dest.alive() and c.source.alive()
