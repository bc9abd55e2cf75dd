"""Fetch byte limits over the wire, as Kafka's broker applies them (KIP-74; ReplicaManager's
readFromLocalLog with minOneMessage, LogSegment.read): per partition, whole batches while
they fit within min(partition_max_bytes, what is left of max_bytes); a batch over that
limit goes only as the first batch of the first partition that returns data, and alone.

Each batch is produced by its own request, so the sizes of the stored batches are known.
A real consumer (confluent-kafka) with a small max.partition.fetch.bytes still reads
everything, the oversized batches included."""

from __future__ import annotations

import dataclasses
import datetime
import time
from collections.abc import Sequence
from typing import Any

import pytest
from e2e_harness import BrokerProcess, create_topic, now_ms
from e2e_wire import (
    WireClient,
    parse_batch_header,
    produce_errors,
    produce_v7,
    record_batch,
    request_class,
)

pytestmark = pytest.mark.timeout(120)

SMALL, BIG = 300, 3000
"""Value sizes: a small batch, and one bigger than the partition limits used here."""


def _build(cls: type, **fields: Any) -> Any:
    """A kio request object with only the fields its version has."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in fields.items() if k in names})


def fetch_request(
    version: int, topic: str, limits: Sequence[tuple[int, int]], max_bytes: int
) -> Any:
    """Fetch from offset 0 of each (partition, partition_max_bytes), in that order."""
    m = request_class(1, version)
    return _build(
        m.FetchRequest,
        replica_id=m.BrokerId(-1),
        max_wait=datetime.timedelta(milliseconds=50),
        min_bytes=m.i32(1),
        max_bytes=m.i32(max_bytes),
        isolation_level=m.i8(0),
        session_id=m.i32(0),
        session_epoch=m.i32(-1),
        forgotten_topics_data=(),
        rack_id="",
        topics=(
            _build(
                m.FetchTopic,
                topic=m.TopicName(topic),
                partitions=tuple(
                    _build(
                        m.FetchPartition,
                        partition=m.i32(p),
                        fetch_offset=m.i64(0),
                        partition_max_bytes=m.i32(limit),
                    )
                    for p, limit in limits
                ),
            ),
        ),
    )


def batch_sizes(records: bytes | None) -> list[int]:
    """The sizes of the whole batches in a partition's records (no partial ones)."""
    data = bytes(records or b"")
    sizes, pos = [], 0
    while pos < len(data):
        header = parse_batch_header(data[pos:])
        assert header.crc_ok, "a returned batch failed its CRC"
        sizes.append(header.size)
        pos += header.size
    assert pos == len(data), "the response ends inside a batch"
    return sizes


@pytest.fixture
def sized_topic(shared_broker: BrokerProcess, topic_name: str) -> dict[int, list[int]]:
    """Partition 0: batches small, small, big, small; partition 1: big, small."""
    create_topic(shared_broker.bootstrap, topic_name, partitions=2)
    layout = {0: [SMALL, SMALL, BIG, SMALL], 1: [BIG, SMALL]}
    sizes: dict[int, list[int]] = {0: [], 1: []}
    with WireClient(shared_broker.port) as client:
        for partition, values in layout.items():
            for i, value_size in enumerate(values):
                batch = record_batch([bytes([65 + i]) * value_size], now_ms(), keys=[b"k"])
                response = client.request(0, 7, produce_v7({topic_name: {partition: batch}}))
                assert produce_errors(response)[topic_name, partition] == (0, i)
                sizes[partition].append(len(batch))
    return sizes


def fetch(
    broker: BrokerProcess,
    topic: str,
    limits: Sequence[tuple[int, int]],
    max_bytes: int = 1 << 20,
    version: int = 4,
) -> dict[int, list[int]]:
    """{partition: sizes of the batches returned}."""
    with WireClient(broker.port) as client:
        response = client.request(1, version, fetch_request(version, topic, limits, max_bytes))
    out = {}
    for part in response.responses[0].partitions:
        assert int(part.error_code) == 0, part.error_code
        assert int(part.high_watermark) > 0
        out[int(part.partition_index)] = batch_sizes(part.records)
    return out


@pytest.mark.parametrize("version", [4, 11, 12])
def test_partition_max_bytes_keeps_whole_batches_within_the_limit(
    shared_broker: BrokerProcess, topic_name: str, sized_topic: dict[int, list[int]], version: int
) -> None:
    s = sized_topic[0]
    # The big third batch crosses the limit: it stays out (it used to come along).
    limit = s[0] + s[1] + s[2] - 1
    assert fetch(shared_broker, topic_name, [(0, limit)], version=version) == {0: s[:2]}
    assert fetch(shared_broker, topic_name, [(0, s[0] + s[1])], version=version) == {0: s[:2]}
    assert fetch(shared_broker, topic_name, [(0, sum(s))], version=version) == {0: s}


def test_first_batch_goes_alone_when_bigger_than_the_limit(
    shared_broker: BrokerProcess, topic_name: str, sized_topic: dict[int, list[int]]
) -> None:
    big = sized_topic[1][0]
    assert fetch(shared_broker, topic_name, [(1, big - 1)]) == {1: [big]}
    assert fetch(shared_broker, topic_name, [(1, 1)]) == {1: [big]}
    # The same when the response's max_bytes is the smaller limit.
    assert fetch(shared_broker, topic_name, [(1, 1 << 20)], max_bytes=100) == {1: [big]}


def test_later_partition_gets_no_oversized_first_batch(
    shared_broker: BrokerProcess, topic_name: str, sized_topic: dict[int, list[int]]
) -> None:
    s0, s1 = sized_topic[0], sized_topic[1]
    limit = s0[0] + s0[1] + 10  # below partition 1's big first batch
    assert limit < s1[0]
    got = fetch(shared_broker, topic_name, [(0, limit), (1, limit)])
    assert got == {0: s0[:2], 1: []}
    # In the other order partition 1 comes first: its big batch goes, then partition 0
    # gets what fits in its own limit.
    got = fetch(shared_broker, topic_name, [(1, limit), (0, limit)])
    assert got == {1: [s1[0]], 0: s0[:2]}


def test_response_max_bytes_is_shared_across_partitions(
    shared_broker: BrokerProcess, topic_name: str, sized_topic: dict[int, list[int]]
) -> None:
    s0, s1 = sized_topic[0], sized_topic[1]
    # Room for partition 0's two small batches only: partition 1 gets nothing.
    got = fetch(shared_broker, topic_name, [(0, 1 << 20), (1, 1 << 20)], s0[0] + s0[1] + 5)
    assert got == {0: s0[:2], 1: []}
    # Partition 1 first: its big batch fills the response alone.
    got = fetch(shared_broker, topic_name, [(1, 1 << 20), (0, 1 << 20)], s1[0] + 5)
    assert got == {1: [s1[0]], 0: []}
    # Enough for everything.
    got = fetch(shared_broker, topic_name, [(0, 1 << 20), (1, 1 << 20)], 1 << 20)
    assert got == {0: s0, 1: s1}


def test_consumer_with_small_partition_limit_reads_everything(
    shared_broker: BrokerProcess, topic_name: str, sized_topic: dict[int, list[int]]
) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": shared_broker.bootstrap,
            "group.id": f"{topic_name}-g",
            "enable.auto.commit": False,
            "max.partition.fetch.bytes": 1000,
            "fetch.max.bytes": 2000,
            "message.max.bytes": 1000,  # librdkafka: fetch.max.bytes must be >= this
        }
    )
    try:
        consumer.assign([TopicPartition(topic_name, p, 0) for p in (0, 1)])
        got: dict[int, list[int]] = {0: [], 1: []}
        deadline = time.monotonic() + 30
        while sum(map(len, got.values())) < 6 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got[msg.partition()].append(len(msg.value() or b""))
    finally:
        consumer.close()
    assert got == {0: [SMALL, SMALL, BIG, SMALL], 1: [BIG, SMALL]}
