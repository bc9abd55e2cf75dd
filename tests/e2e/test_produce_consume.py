"""Produce 10,000 awkward records with each real client and read them back byte for byte.

Every client covers every codec and every acks value (the acks value rotates per client so
each codec also meets each acks across the clients). Consumers use manual assignment and
no commits: the group APIs are not part of this test.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import pytest
from e2e_harness import BrokerProcess, Rec, by_partition, create_topic, make_records, now_ms

N_RECORDS = 10_000
PARTITIONS = 3
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
ACKS = ["all", "1", "0"]
CLIENTS = ["kafka-python", "confluent-kafka", "aiokafka"]
CONSUME_TIMEOUT_S = 90.0
PRODUCE_TIMEOUT_S = 90.0


def _cases() -> list[Any]:
    cases = []
    for c, client in enumerate(CLIENTS):
        for i, codec in enumerate(CODECS):
            acks = ACKS[(i + c) % len(ACKS)]
            cases.append(pytest.param(client, codec, acks, id=f"{client}-{codec}-acks{acks}"))
    return cases


@dataclass(frozen=True, slots=True)
class Got:
    """A consumed record, normalised across clients."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int
    create_time: bool


def _got(m: Any) -> Got:
    """kafka-python's and aiokafka's ConsumerRecord have the same fields."""
    return Got(
        m.partition,
        m.offset,
        m.key,
        m.value,
        tuple((k, v) for k, v in m.headers),
        m.timestamp,
        m.timestamp_type == 0,
    )


class ClientAdapter(Protocol):
    def produce(self, topic: str, records: Sequence[Rec], codec: str, acks: str) -> list[int]:
        """Send all records, wait for every ack; the offset per record (-1 with acks=0)."""

    def consume(self, topic: str, partitions: int, expected: int) -> list[Got]:
        """Read from offset 0 of every partition until `expected` records came."""

    def offsets(
        self, topic: str, partitions: int, lookups: dict[int, list[int]]
    ) -> tuple[dict[int, int], dict[int, int], dict[tuple[int, int], tuple[int, int] | None]]:
        """(earliest, latest, {(partition, T): (offset, timestamp) or None})."""


# ------------------------------------------------------------------- kafka-python


class KafkaPythonClient:
    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def produce(self, topic: str, records: Sequence[Rec], codec: str, acks: str) -> list[int]:
        from kafka import KafkaProducer
        from kafka import codec as kafka_codec

        needs = {"snappy": "python-snappy", "lz4": "lz4", "zstd": "zstandard"}
        if codec in needs and not getattr(kafka_codec, f"has_{codec}")():
            pytest.fail(f"kafka-python needs the {needs[codec]} package for {codec}")
        producer = KafkaProducer(
            bootstrap_servers=self.bootstrap,
            acks="all" if acks == "all" else int(acks),
            compression_type=None if codec == "none" else codec,
            linger_ms=10,
            batch_size=32 * 1024,
            request_timeout_ms=30_000,
            max_block_ms=30_000,
        )
        try:
            futures = [
                producer.send(
                    topic,
                    key=r.key,
                    value=r.value,
                    headers=list(r.headers),
                    partition=r.partition,
                    timestamp_ms=r.timestamp,
                )
                for r in records
            ]
            producer.flush(timeout=PRODUCE_TIMEOUT_S)
            return [f.get(timeout=PRODUCE_TIMEOUT_S).offset for f in futures]
        finally:
            producer.close(timeout=10)

    def _consumer(self) -> Any:
        from kafka import KafkaConsumer

        return KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=100,
            request_timeout_ms=30_000,
        )

    def consume(self, topic: str, partitions: int, expected: int) -> list[Got]:
        from kafka import TopicPartition

        consumer = self._consumer()
        got: list[Got] = []
        try:
            tps = [TopicPartition(topic, p) for p in range(partitions)]
            consumer.assign(tps)
            consumer.seek_to_beginning(*tps)
            deadline = time.monotonic() + CONSUME_TIMEOUT_S
            while len(got) < expected and time.monotonic() < deadline:
                for tp_records in consumer.poll(timeout_ms=500, max_records=5000).values():
                    got.extend(_got(m) for m in tp_records)
        finally:
            consumer.close()
        return got

    def offsets(
        self, topic: str, partitions: int, lookups: dict[int, list[int]]
    ) -> tuple[dict[int, int], dict[int, int], dict[tuple[int, int], tuple[int, int] | None]]:
        from kafka import TopicPartition

        consumer = self._consumer()
        try:
            tps = [TopicPartition(topic, p) for p in range(partitions)]
            earliest = {tp.partition: o for tp, o in consumer.beginning_offsets(tps).items()}
            latest = {tp.partition: o for tp, o in consumer.end_offsets(tps).items()}
            by_time: dict[tuple[int, int], tuple[int, int] | None] = {}
            for p, stamps in lookups.items():
                for ts in stamps:
                    tp = TopicPartition(topic, p)
                    answer = consumer.offsets_for_times({tp: ts})[tp]
                    by_time[p, ts] = None if answer is None else (answer.offset, answer.timestamp)
            return earliest, latest, by_time
        finally:
            consumer.close()


# ------------------------------------------------------------------- confluent-kafka


class ConfluentClient:
    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def produce(self, topic: str, records: Sequence[Rec], codec: str, acks: str) -> list[int]:
        from confluent_kafka import KafkaException, Producer

        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": acks,
                "compression.type": codec,
                "linger.ms": 10,
                "batch.size": 32 * 1024,
                "message.timeout.ms": int(PRODUCE_TIMEOUT_S * 1000),
            }
        )
        offsets = [-2] * len(records)
        errors: list[str] = []

        def delivered(index: int) -> Any:
            def callback(err: Any, msg: Any) -> None:
                if err is not None:
                    errors.append(f"record {index}: {err}")
                else:
                    offsets[index] = msg.offset() if acks != "0" else -1

            return callback

        deadline = time.monotonic() + PRODUCE_TIMEOUT_S
        for i, r in enumerate(records):
            while True:
                try:
                    producer.produce(
                        topic,
                        value=r.value,
                        key=r.key,
                        partition=r.partition,
                        timestamp=r.timestamp,
                        headers=list(r.headers),
                        on_delivery=delivered(i),
                    )
                    break
                except BufferError:
                    if time.monotonic() > deadline:
                        raise
                    producer.poll(0.1)
            producer.poll(0)
        left = producer.flush(PRODUCE_TIMEOUT_S)
        if left:
            raise KafkaException(f"{left} records not delivered after flush")
        assert not errors, errors[:10]
        return offsets

    def _consumer(self) -> Any:
        from confluent_kafka import Consumer

        return Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                # librdkafka wants a group id even for assign(); nothing joins or commits.
                "group.id": f"e2e-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "auto.offset.reset": "earliest",
                "fetch.wait.max.ms": 100,
            }
        )

    def consume(self, topic: str, partitions: int, expected: int) -> list[Got]:
        from confluent_kafka import OFFSET_BEGINNING, TIMESTAMP_CREATE_TIME, TopicPartition

        consumer = self._consumer()
        got: list[Got] = []
        problems: list[str] = []
        try:
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
            deadline = time.monotonic() + CONSUME_TIMEOUT_S
            while len(got) < expected and time.monotonic() < deadline:
                for m in consumer.consume(num_messages=2000, timeout=0.5):
                    if m.error():
                        problems.append(str(m.error()))
                        continue
                    ts_type, ts = m.timestamp()
                    got.append(
                        Got(
                            m.partition(),
                            m.offset(),
                            m.key(),
                            m.value(),
                            tuple(m.headers() or ()),
                            ts,
                            ts_type == TIMESTAMP_CREATE_TIME,
                        )
                    )
        finally:
            consumer.close()
        assert not problems, f"consumer errors: {problems[:10]}"
        return got

    def offsets(
        self, topic: str, partitions: int, lookups: dict[int, list[int]]
    ) -> tuple[dict[int, int], dict[int, int], dict[tuple[int, int], tuple[int, int] | None]]:
        from confluent_kafka import TopicPartition

        consumer = self._consumer()
        try:
            earliest: dict[int, int] = {}
            latest: dict[int, int] = {}
            for p in range(partitions):
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, p), timeout=15, cached=False
                )
                earliest[p], latest[p] = low, high
            by_time: dict[tuple[int, int], tuple[int, int] | None] = {}
            for p, stamps in lookups.items():
                for ts in stamps:
                    (answer,) = consumer.offsets_for_times(
                        [TopicPartition(topic, p, ts)], timeout=15
                    )
                    assert answer.error is None, answer.error
                    # librdkafka reports "no such record" as OFFSET_END (-1); no timestamp.
                    by_time[p, ts] = None if answer.offset < 0 else (answer.offset, -1)
            return earliest, latest, by_time
        finally:
            consumer.close()


# ------------------------------------------------------------------- aiokafka


class AioKafkaClient:
    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def produce(self, topic: str, records: Sequence[Rec], codec: str, acks: str) -> list[int]:
        return asyncio.run(
            asyncio.wait_for(self._produce(topic, records, codec, acks), PRODUCE_TIMEOUT_S)
        )

    async def _produce(
        self, topic: str, records: Sequence[Rec], codec: str, acks: str
    ) -> list[int]:
        from aiokafka import AIOKafkaProducer

        producer = AIOKafkaProducer(
            bootstrap_servers=self.bootstrap,
            acks="all" if acks == "all" else int(acks),
            compression_type=None if codec == "none" else codec,
            linger_ms=10,
            max_batch_size=32 * 1024,
            request_timeout_ms=30_000,
        )
        await producer.start()
        try:
            futures = [
                await producer.send(
                    topic,
                    value=r.value,
                    key=r.key,
                    partition=r.partition,
                    timestamp_ms=r.timestamp,
                    headers=list(r.headers),
                )
                for r in records
            ]
            await producer.flush()
            # acks=0: aiokafka resolves the futures with None.
            return [-1 if m is None else m.offset for m in await asyncio.gather(*futures)]
        finally:
            await producer.stop()

    def consume(self, topic: str, partitions: int, expected: int) -> list[Got]:
        return asyncio.run(
            asyncio.wait_for(self._consume(topic, partitions, expected), CONSUME_TIMEOUT_S + 30)
        )

    def _consumer(self) -> Any:
        from aiokafka import AIOKafkaConsumer

        return AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=100,
            request_timeout_ms=30_000,
        )

    async def _consume(self, topic: str, partitions: int, expected: int) -> list[Got]:
        from aiokafka import TopicPartition

        consumer = self._consumer()
        await consumer.start()
        got: list[Got] = []
        try:
            tps = [TopicPartition(topic, p) for p in range(partitions)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            deadline = time.monotonic() + CONSUME_TIMEOUT_S
            while len(got) < expected and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=500, max_records=5000)
                for tp_records in batches.values():
                    got.extend(_got(m) for m in tp_records)
        finally:
            await consumer.stop()
        return got

    def offsets(
        self, topic: str, partitions: int, lookups: dict[int, list[int]]
    ) -> tuple[dict[int, int], dict[int, int], dict[tuple[int, int], tuple[int, int] | None]]:
        return asyncio.run(asyncio.wait_for(self._offsets(topic, partitions, lookups), 60))

    async def _offsets(
        self, topic: str, partitions: int, lookups: dict[int, list[int]]
    ) -> tuple[dict[int, int], dict[int, int], dict[tuple[int, int], tuple[int, int] | None]]:
        from aiokafka import TopicPartition

        consumer = self._consumer()
        await consumer.start()
        try:
            tps = [TopicPartition(topic, p) for p in range(partitions)]
            earliest = {
                tp.partition: o for tp, o in (await consumer.beginning_offsets(tps)).items()
            }
            latest = {tp.partition: o for tp, o in (await consumer.end_offsets(tps)).items()}
            by_time: dict[tuple[int, int], tuple[int, int] | None] = {}
            for p, stamps in lookups.items():
                for ts in stamps:
                    tp = TopicPartition(topic, p)
                    answer = (await consumer.offsets_for_times({tp: ts}))[tp]
                    by_time[p, ts] = None if answer is None else (answer.offset, answer.timestamp)
            return earliest, latest, by_time
        finally:
            await consumer.stop()


ADAPTERS: dict[str, type[ClientAdapter]] = {
    "kafka-python": KafkaPythonClient,
    "confluent-kafka": ConfluentClient,
    "aiokafka": AioKafkaClient,
}


# ------------------------------------------------------------------- checks


def mismatches(expected: list[list[Rec]], got: list[Got], limit: int = 10) -> list[str]:
    """Human-readable differences (first `limit`); empty when everything matches."""
    problems: list[str] = []
    per_partition: dict[int, list[Got]] = {p: [] for p in range(len(expected))}
    for g in got:
        per_partition.setdefault(g.partition, []).append(g)
    for p, records in per_partition.items():
        offsets = [g.offset for g in records]
        want = list(range(len(expected[p]) if p < len(expected) else 0))
        if offsets != want:
            problems.append(
                f"partition {p}: offsets not dense from 0 in order: got {len(offsets)} "
                f"offsets, first differences "
                f"{[(i, o) for i, o in enumerate(offsets) if i >= len(want) or o != want[i]][:5]}"
                f", expected 0..{len(want) - 1}"
            )
        for g in records:
            if p >= len(expected) or not 0 <= g.offset < len(expected[p]):
                continue
            r = expected[p][g.offset]
            want_headers = tuple((k, v) for k, v in r.headers)
            diffs = []
            if g.key != r.key:
                diffs.append(f"key {g.key!r} != {r.key!r}")
            if g.value != r.value:
                diffs.append(f"value {_short(g.value)} != {_short(r.value)}")
            if g.headers != want_headers:
                diffs.append(f"headers {g.headers!r} != {want_headers!r}")
            if g.timestamp != r.timestamp:
                diffs.append(f"timestamp {g.timestamp} != {r.timestamp}")
            if not g.create_time:
                diffs.append("timestamp type is not CreateTime")
            if diffs:
                problems.append(f"partition {p} offset {g.offset}: " + "; ".join(diffs))
            if len(problems) >= limit:
                return problems
    return problems


def _short(data: bytes | None) -> str:
    if data is None:
        return "None"
    return repr(data[:24]) + (f"...({len(data)} bytes)" if len(data) > 24 else "")


def expected_by_time(
    parts: list[list[Rec]], base_timestamp: int
) -> dict[int, dict[int, tuple[int, int] | None]]:
    """Per partition, timestamps to look up and Kafka's answer: the first offset whose
    timestamp is >= T, with that record's timestamp (None when no record qualifies)."""
    out: dict[int, dict[int, tuple[int, int] | None]] = {}
    for p, recs in enumerate(parts):
        n = len(recs)
        answers: dict[int, tuple[int, int] | None] = {
            base_timestamp - 60_000: (0, recs[0].timestamp)
        }
        for k in sorted({1, 2, n // 3, n // 2, n - 2, n - 1}):
            answers[recs[k].timestamp] = (k, recs[k].timestamp)  # exact hit
            answers[recs[k].timestamp - 1] = (k, recs[k].timestamp)  # between two records
        answers[recs[-1].timestamp + 1] = None
        out[p] = answers
    return out


# ------------------------------------------------------------------- the test


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("client", "codec", "acks"), _cases())
def test_produce_consume(
    shared_broker: BrokerProcess, topic_name: str, client: str, codec: str, acks: str
) -> None:
    create_topic(shared_broker.bootstrap, topic_name, PARTITIONS)
    base_ts = now_ms() - 3_600_000  # an hour ago: clearly a CreateTime, not the broker's clock
    records = make_records(N_RECORDS, PARTITIONS, base_ts, tag=f"{client}-{codec}-{acks}")
    parts = by_partition(records, PARTITIONS)
    adapter = ADAPTERS[client](shared_broker.bootstrap)

    offsets = adapter.produce(topic_name, records, codec, acks)

    if acks != "0":
        # Acknowledged offsets: each partition's records got 0, 1, 2, ... in send order.
        position = [0] * PARTITIONS
        wrong = []
        for r, offset in zip(records, offsets, strict=True):
            if offset != position[r.partition]:
                wrong.append((r.partition, position[r.partition], offset))
            position[r.partition] += 1
        assert not wrong, f"acked offsets differ from send order (p, want, got): {wrong[:10]}"
    else:
        # No acks: give the broker time to commit what it received, then expect it all.
        deadline = time.monotonic() + 30
        while True:
            _, latest, _ = adapter.offsets(topic_name, PARTITIONS, {})
            if sum(latest.values()) >= N_RECORDS or time.monotonic() > deadline:
                break
            time.sleep(0.3)

    got = adapter.consume(topic_name, PARTITIONS, N_RECORDS)
    problems = mismatches(parts, got)
    assert not problems, "\n".join(problems)
    assert len(got) == N_RECORDS

    lookups = expected_by_time(parts, base_ts)
    earliest, latest, by_time = adapter.offsets(
        topic_name, PARTITIONS, {p: list(answers) for p, answers in lookups.items()}
    )
    assert earliest == dict.fromkeys(range(PARTITIONS), 0)
    assert latest == {p: len(parts[p]) for p in range(PARTITIONS)}
    wrong_times = []
    for p, answers in lookups.items():
        for ts, want in answers.items():
            answer = by_time[p, ts]
            if client == "confluent-kafka" and want is not None:
                want = (want[0], -1)  # librdkafka does not return the record's timestamp
            if answer != want:
                wrong_times.append(f"p{p} T={ts - base_ts:+d}: got {answer}, want {want}")
    assert not wrong_times, "ListOffsets by timestamp (T relative to base):\n" + "\n".join(
        wrong_times
    )
