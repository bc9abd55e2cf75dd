"""Rows holding runs of batches, end to end. A producer's batches that one WAL object holds
back to back share one coordinator row, and their bytes keep whatever base offsets the
producer wrote (garbage here, on purpose): every read must give each batch its own offset.

The broker seals by time only (no early seal), so a burst of pipelined requests lands in
one object and forms runs; the test checks that it did. Then: a raw Fetch from every
offset (each answer starts at the batch holding it, offsets and records exact, CRCs
valid), a tiny partition limit (the batch holding the offset goes alone), real consumers
reading it all and seeking into the middle of runs, ListOffsets by every record's
timestamp, and a LogAppendTime topic whose runs get one append time and new CRCs."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass

import pytest
from e2e_fixtures import BrokerFactory
from e2e_harness import BrokerProcess, create_topic, now_ms
from e2e_wire import (
    WireClient,
    decode_response,
    encode_request,
    fetch_v4,
    list_offsets_v1,
    parse_batch_header,
    parse_records,
    produce_errors,
    produce_v7,
    record_batch,
)

from lakelog.coordinator import FindBatchesRequest, open_coordinator

pytestmark = pytest.mark.timeout(300)

RUNS = {"PRODUCE_MAX_PUTS_PER_SECOND": 0, "PRODUCE_COMMIT_INTERVAL_MS": 400}
LOG_APPEND_TIME = 0x08


@dataclass(frozen=True)
class Stored:
    offset: int
    value: bytes
    timestamp: int
    key: bytes | None = None


def _value(partition: int, i: int, j: int, tag: bytes = b"") -> bytes:
    head = tag + b"p%d-b%03d-r%d:" % (partition, i, j)
    size = 20_000 if i % 9 == 4 else 40 + (i * 37) % 300  # mostly small, some big
    return head + b"x" * size


def produce_burst(
    broker: BrokerProcess,
    topic: str,
    partitions: int,
    count: int,
    t0: int,
    keys: int = 0,
    log: dict[int, list[Stored]] | None = None,
) -> dict[int, list[Stored]]:
    """`count` single-batch Produce requests pipelined on one connection (every fifth to a
    partition in turn, the rest to partition 0; 1-4 records; garbage base offsets), then
    every answer, in order. `keys`: records keyed k0..k(keys-1) in turn (else keyless).
    `log`: what earlier bursts stored, extended (values then carry the burst's number)."""
    log = log if log is not None else {p: [] for p in range(partitions)}
    tag = b"%d-" % len(log[0]) if log[0] else b""
    frames, sent = [], []
    for i in range(count):
        p = 0 if i % 5 else i // 5 % partitions
        n = 1 + i % 4
        values = [_value(p, i, j, tag) for j in range(n)]
        names = [b"k%d" % ((4 * i + j) % keys) for j in range(n)] if keys else None
        batch = record_batch(values, t0 + 10 * i, keys=names, base_offset=1_000_003 + 7 * i)
        frames.append(encode_request(0, 7, i + 1, produce_v7({topic: {p: batch}})))
        sent.append((p, values, t0 + 10 * i, names or [None] * n))
    with WireClient(broker.port, timeout=60) as client:
        client.send_raw(b"".join(frames))
        for i, (p, values, ts, names) in enumerate(sent):
            correlation_id, response = decode_response(0, 7, client.read_frame())
            assert correlation_id == i + 1
            error, base = produce_errors(response)[(topic, p)]
            assert error == 0, f"request {i}: error {error}"
            assert base == len(log[p]), f"request {i}: offset {base}, expected {len(log[p])}"
            log[p] += [
                Stored(base + j, v, ts + j, k)
                for j, (v, k) in enumerate(zip(values, names, strict=True))
            ]
    return log


def _rows(broker: BrokerProcess, topic_id: object, partition: int) -> list[tuple[int, int]]:
    async def find() -> list[tuple[int, int]]:
        coordinator = open_coordinator(broker.backend.coordinator_url)
        await coordinator.start()
        try:
            [found] = await coordinator.find_batches(
                [FindBatchesRequest(topic_id, partition, 0, 1 << 40)]  # type: ignore[arg-type]
            )
            return [(c.base_offset, c.last_offset) for c in found.batches]
        finally:
            await coordinator.close()

    return asyncio.run(find())


def assert_runs(broker: BrokerProcess, topic: str, log: list[Stored]) -> None:
    """Partition 0's rows hold runs: fewer rows than batches (else the test proves
    nothing)."""
    rows = _rows(broker, _topic_id(broker, topic), 0)
    batches = len({s.value.split(b"-r")[0] for s in log})
    assert rows[-1][1] == len(log) - 1
    assert len(rows) < batches, f"no run formed: {len(rows)} rows for {batches} batches"


def _topic_id(broker: BrokerProcess, topic: str) -> object:
    async def find() -> object:
        coordinator = open_coordinator(broker.backend.coordinator_url)
        await coordinator.start()
        try:
            return next(t.topic_id for t in await coordinator.get_topics() if t.name == topic)
        finally:
            await coordinator.close()

    return asyncio.run(find())


def fetched_batches(records: bytes | None) -> list[tuple[int, int, int, bytes, int, int]]:
    """(base offset, last offset, attributes, bytes, max timestamp, position) of each
    batch of a partition's answer, checking CRCs and that no batch is cut."""
    data = bytes(records or b"")
    out, pos = [], 0
    while pos < len(data):
        header = parse_batch_header(data[pos:])
        assert header.crc_ok, f"batch at {header.base_offset}: CRC mismatch"
        end = pos + header.size
        assert end <= len(data), "the answer ends inside a batch"
        out.append(
            (
                header.base_offset,
                header.base_offset + header.last_offset_delta,
                header.attributes,
                data[pos:end],
                header.max_timestamp,
                pos,
            )
        )
        pos = end
    return out


def fetch_batches(
    client: WireClient, topic: str, partition: int, offset: int, max_bytes: int
) -> list:
    response = client.request(1, 4, fetch_v4(topic, partition, offset, max_bytes, max_wait_ms=0))
    part = response.responses[0].partitions[0]
    assert int(part.error_code) == 0, part.error_code
    return fetched_batches(part.records)


def check_batches(batches: Sequence[tuple], log: list[Stored], offset: int) -> None:
    """The batches start at the one holding `offset`, follow each other without a gap,
    and every record is the one stored at its offset."""
    assert batches, f"nothing returned at {offset}"
    assert batches[0][0] <= offset <= batches[0][1]
    for (_, last, *_), (base, *_) in itertools.pairwise(batches):
        assert base == last + 1
    for base, last, _, raw, _, _ in batches:
        records = parse_records(raw)
        assert [base + r.offset_delta for r in records] == list(range(base, last + 1))
        assert [r.value for r in records] == [s.value for s in log[base : last + 1]]


@pytest.fixture
def run_broker(broker_factory: BrokerFactory) -> BrokerProcess:
    return broker_factory(RUNS)


def test_runs_serve_every_offset_exactly(run_broker: BrokerProcess, topic_name: str) -> None:
    create_topic(run_broker.bootstrap, topic_name, partitions=2)
    t0 = now_ms() - 60_000
    log = produce_burst(run_broker, topic_name, 2, 120, t0)
    assert_runs(run_broker, topic_name, log[0])

    end = len(log[0])
    with WireClient(run_broker.port, timeout=30) as client:
        for offset in range(end):
            check_batches(fetch_batches(client, topic_name, 0, offset, 1 << 20), log[0], offset)
            # A limit below one batch: the batch holding the offset comes alone.
            alone = fetch_batches(client, topic_name, 0, offset, 100)
            assert len(alone) == 1
            check_batches(alone, log[0], offset)
        check_batches(fetch_batches(client, topic_name, 1, 0, 1 << 20), log[1], 0)

        # ListOffsets: each record's own timestamp finds it; one ms later finds the next.
        for stored in log[0]:
            after = stored.offset + 1 if stored.offset + 1 < end else -1
            for asked, want in ((stored.timestamp, stored.offset), (stored.timestamp + 1, after)):
                response = client.request(2, 1, list_offsets_v1(topic_name, 0, asked))
                got = int(response.topics[0].partitions[0].offset)
                assert got == want, f"timestamp {asked}: offset {got}, expected {want}"


def test_real_consumers_read_runs(run_broker: BrokerProcess, topic_name: str) -> None:
    from confluent_kafka import Consumer, TopicPartition
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaTopicPartition

    create_topic(run_broker.bootstrap, topic_name, partitions=1)
    log = produce_burst(run_broker, topic_name, 1, 80, now_ms())[0]
    assert_runs(run_broker, topic_name, log)
    expected = [(s.offset, s.value) for s in log]

    # librdkafka with a partition limit below the big records: runs are cut between batches.
    consumer = Consumer(
        {
            "bootstrap.servers": run_broker.bootstrap,
            "group.id": f"{topic_name}-c",
            "enable.auto.commit": False,
            "max.partition.fetch.bytes": 1000,
            "fetch.max.bytes": 30_000,
            "message.max.bytes": 30_000,
        }
    )
    got: list[tuple[int, bytes]] = []
    try:
        consumer.assign([TopicPartition(topic_name, 0, 0)])
        deadline = time.monotonic() + 60
        while len(got) < len(expected) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append((msg.offset(), msg.value()))
    finally:
        consumer.close()
    assert got == expected

    # kafka-python seeking into the middle of runs.
    reader = KafkaConsumer(
        bootstrap_servers=run_broker.bootstrap, enable_auto_commit=False, consumer_timeout_ms=5000
    )
    try:
        tp = KafkaTopicPartition(topic_name, 0)
        reader.assign([tp])
        for start in (1, len(log) // 3, len(log) // 2 + 1, len(log) - 2):
            reader.seek(tp, start)
            seen: list[tuple[int, bytes]] = []
            deadline = time.monotonic() + 30
            while len(seen) < len(log) - start and time.monotonic() < deadline:
                for records in reader.poll(timeout_ms=500).values():
                    seen += [(r.offset, r.value) for r in records]
            assert seen == expected[start:], f"from {start}"
    finally:
        reader.close()


def test_log_append_time_runs(run_broker: BrokerProcess, topic_name: str) -> None:
    create_topic(
        run_broker.bootstrap,
        topic_name,
        partitions=1,
        configs={"message.timestamp.type": "LogAppendTime"},
    )
    before = now_ms()
    log = produce_burst(run_broker, topic_name, 1, 40, 1_000)[0]
    after = now_ms()
    assert_runs(run_broker, topic_name, log)
    with WireClient(run_broker.port, timeout=30) as client:
        batches = fetch_batches(client, topic_name, 0, 0, 1 << 22)
    check_batches(batches, log, 0)
    assert batches[-1][1] == len(log) - 1
    for _, _, attributes, _, max_timestamp, _ in batches:
        assert attributes & LOG_APPEND_TIME
        assert before <= max_timestamp <= after
