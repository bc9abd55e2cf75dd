"""What the broker leaves on disk after a produce: the coordinator's SQLite file and the
`objects/wal/<uuid7>` objects agree, and each acknowledged batch sits, whole and intact,
inside the byte range of the row the coordinator records for it (a row holds one batch or
a run of one producer's batches).

Read with the coordinator's public API and plain file reads, as an operator's tool would.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from e2e_fixtures import BrokerFactory
from e2e_harness import BrokerProcess, create_topic, now_ms
from e2e_wire import parse_batch_header, parse_records

PARTITIONS = 3


@dataclass(frozen=True, slots=True)
class Delivered:
    partition: int
    offset: int
    key: bytes
    value: bytes
    timestamp: int


def produce(bootstrap: str, topic: str, count: int, codec: str, start: int) -> list[Delivered]:
    """confluent-kafka, acks=all; returns what each delivery report acknowledged."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "compression.type": codec,
            "linger.ms": 20,
            "batch.size": 16 * 1024,
        }
    )
    out: list[Delivered] = []
    errors: list[str] = []
    base_ts = now_ms() - 10_000

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            out.append(
                Delivered(msg.partition(), msg.offset(), msg.key(), msg.value(), msg.timestamp()[1])
            )

    for i in range(start, start + count):
        producer.produce(
            topic,
            key=f"key-{i}".encode(),
            value=f"value-{i}-".encode() + bytes(i % 97),
            partition=i % PARTITIONS,
            timestamp=base_ts + i,
            on_delivery=delivered,
        )
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors, errors[:5]
    return out


async def _inspect(coordinator_url: str, topic: str) -> tuple[Any, dict[int, Any], list[str]]:
    from lakelog.coordinator import open_coordinator
    from lakelog.coordinator.log_types import FindBatchesRequest

    coordinator = open_coordinator(coordinator_url)
    await coordinator.start()
    try:
        (info,) = await coordinator.get_topics([topic])
        results = await coordinator.find_batches(
            [FindBatchesRequest(info.topic_id, p, 0, 1 << 40) for p in range(PARTITIONS)]
        )
        files = await coordinator.list_files()
        return info, dict(enumerate(results)), files
    finally:
        await coordinator.close()


def inspect(broker: BrokerProcess, topic: str) -> tuple[Any, dict[int, Any], list[str]]:
    return asyncio.run(asyncio.wait_for(_inspect(broker.backend.coordinator_url, topic), 60))


def check_layout(
    broker: BrokerProcess, topic: str, delivered: list[Delivered]
) -> dict[int, list[tuple[str, int, int, int, int]]]:
    """Every check of the module; returns each partition's coordinates for comparison."""
    from lakelog.util.errors import ErrorCode

    acked = {(d.partition, d.offset): d for d in delivered}
    assert len(acked) == len(delivered), "two records acknowledged at the same offset"
    info, results, files = inspect(broker, topic)
    assert info.name == topic and info.num_partitions == PARTITIONS

    on_disk = broker.wal_objects()
    referenced: set[str] = set()
    coordinates: dict[int, list[tuple[str, int, int, int, int]]] = {}
    for p in range(PARTITIONS):
        result = results[p]
        assert result.error == ErrorCode.none, result
        want_high = sum(1 for d in delivered if d.partition == p)
        assert (result.log_start_offset, result.high_watermark) == (0, want_high)
        batches = list(result.batches)
        assert batches, f"partition {p}: no batches"
        coordinates[p] = [
            (b.object_key, b.byte_offset, b.byte_size, b.base_offset, b.last_offset)
            for b in batches
        ]

        next_offset = 0
        for b in batches:
            where = f"partition {p} batch {b.base_offset}..{b.last_offset} in {b.object_key}"
            assert b.base_offset == next_offset, f"{where}: expected base {next_offset}"
            next_offset = b.last_offset + 1

            prefix, _, name = b.object_key.partition("/")
            assert prefix == "wal", f"{where}: produce objects live under wal/"
            assert uuid.UUID(name).version == 7, f"{where}: key is not a uuid7"
            assert b.object_key in on_disk, f"{where}: object missing from objects/wal/"
            referenced.add(b.object_key)

            data = broker.backend.read(b.object_key)[b.byte_offset : b.byte_offset + b.byte_size]
            assert len(data) == b.byte_size, f"{where}: byte range past the object's end"
            # A row holds one batch, or a run of one producer's batches back to back whose
            # offsets follow each other from the row's base offset.
            pos, offset, max_timestamp = 0, b.base_offset, -1
            while pos < len(data):
                h = parse_batch_header(data[pos:])
                at = f"{where}, batch at byte {pos}"
                assert h.magic == 2, f"{at}: magic {h.magic}"
                assert pos + h.size <= len(data), f"{at}: batchLength+12={h.size} runs past the row"
                assert h.crc_ok, f"{at}: CRC32C does not match the stored bytes"
                assert h.records_count == h.last_offset_delta + 1, at
                assert h.base_offset in (0, offset), f"{at}: stored baseOffset {h.base_offset}"
                assert h.producer_id == b.producer_id, at
                if pos == 0:
                    assert h.base_timestamp == b.base_timestamp, at
                max_timestamp = max(max_timestamp, h.max_timestamp)

                # What the client was told sits at each offset is what these bytes hold.
                for delta in range(h.records_count):
                    d = acked.get((p, offset + delta))
                    assert d is not None, f"{at}: offset {offset + delta} never acked"
                    assert h.base_timestamp <= d.timestamp <= h.max_timestamp, at
                if h.compression == 0:
                    for rec in parse_records(data[pos : pos + h.size]):
                        d = acked[p, offset + rec.offset_delta]
                        assert (rec.key, rec.value) == (d.key, d.value), f"{at}: record differs"
                        assert h.base_timestamp + rec.timestamp_delta == d.timestamp
                pos += h.size
                offset += h.records_count
            assert offset == b.last_offset + 1, f"{where}: its batches end at {offset - 1}"
            assert max_timestamp == b.max_timestamp, where
        assert next_offset == want_high

    assert referenced <= set(files), "batches point into objects the coordinator does not list"
    orphans = on_disk - set(files)
    assert not orphans, f"objects nobody knows about after a clean run: {sorted(orphans)}"
    return coordinates


@pytest.mark.timeout(180)
def test_acked_batches_are_in_wal_objects(broker_factory: BrokerFactory, topic_name: str) -> None:
    # The object path: acknowledged batches are in wal/ objects, not inline in the
    # coordinator (tests/unit/produce/test_wal_inline.py covers those).
    broker = broker_factory(env={"PRODUCE_COMMIT_INTERVAL_MS": 50, "PRODUCE_INLINE": False})
    create_topic(broker.bootstrap, topic_name, PARTITIONS)
    delivered = produce(broker.bootstrap, topic_name, 3000, "none", 0)
    delivered += produce(broker.bootstrap, topic_name, 1500, "zstd", 3000)
    compressed = delivered[3000:]
    assert {d.offset for d in compressed if d.partition == 0}, "zstd round acked nothing"

    live = check_layout(broker, topic_name, delivered)
    assert len({key for coords in live.values() for key, *_ in coords}) >= 2, (
        "two produce rounds with a flush between them should make at least two objects"
    )

    # Graceful shutdown changes nothing on disk: the same coordinates after SIGTERM.
    assert broker.terminate() == 0 and not broker.needed_sigkill
    assert check_layout(broker, topic_name, delivered) == live
