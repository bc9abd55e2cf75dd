"""Mirroring from a source cluster whose small writes are inline files (issue 32): the
mirror's fetches read them from the source's coordinator through its broker, and the copy
is the source's log, transactions included."""

from __future__ import annotations

import asyncio

from confluent_kafka import Producer
from e2e_fixtures import BrokerFactory
from e2e_harness import BrokerProcess, create_topic
from mirror_support import (
    end_offsets,
    mirror_cli,
    produce_keyed,
    read_log,
    two_clusters,
    values,
    wait_caught_up,
)

from lakelog.coordinator import open_coordinator

PARTITIONS = 2
INLINE = {"PRODUCE_INLINE": True, "PRODUCE_INLINE_MOVE_AGE_MS": 3_600_000}


def inline_files(broker: BrokerProcess) -> int:
    async def count() -> int:
        coordinator = open_coordinator(broker.backend.coordinator_url)
        await coordinator.start()
        try:
            return len(await coordinator.inline_files())
        finally:
            await coordinator.close()

    return asyncio.run(count())


def test_mirror_copies_inline_batches(broker_factory: BrokerFactory, topic_name: str) -> None:
    c = two_clusters(broker_factory, dest_env=INLINE, source_env=INLINE)
    src = c.source.bootstrap
    create_topic(src, topic_name, PARTITIONS)
    produce_keyed(src, topic_name, 100, PARTITIONS, "plain")
    producer = Producer({"bootstrap.servers": src, "transactional.id": "inline-mirror"})
    producer.init_transactions(30)
    aborted = []
    for t, commit in enumerate((True, False, True)):
        producer.begin_transaction()
        tag = f"committed{t}" if commit else "aborted"
        sent = [f"{tag}-{i}".encode() for i in range(10)]
        for i, value in enumerate(sent):
            producer.produce(topic_name, value=value, partition=i % PARTITIONS)
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
            aborted += sent
    assert inline_files(c.source) > 0, "the source wrote no inline files"

    mirror_cli(c.dest, "create", "dr", "--source", src, "--topic", topic_name)
    ends = wait_caught_up(c.source, c.dest, topic_name, PARTITIONS)
    assert ends == end_offsets(src, topic_name, PARTITIONS)
    assert inline_files(c.source) > 0  # still inline while the mirror read them
    for read_committed in (False, True):
        source_log = read_log(src, topic_name, PARTITIONS, read_committed)
        dest_log = read_log(c.dest.bootstrap, topic_name, PARTITIONS, read_committed)
        assert dest_log == source_log, f"read_committed={read_committed}"
    seen = set(values(dest_log))
    assert len(seen) == 120 and not seen & set(aborted)
