"""Helpers for the tests of the broker's own compaction: keyed writes through
confluent-kafka (one batch per record, so compaction has batches to drop), full reads,
and the broker log's compaction passes."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

Written = list[tuple[bytes, bytes | None]]
"""(key, value) by offset; a None value is a tombstone."""
Read = dict[int, tuple[bytes, bytes | None]]
"""offset -> (key, value), as a consumer reads the partition now."""

FAST_COMPACTION: dict[str, object] = {
    "COMPACTION_INTERVAL_MS": 300,
    "RETENTION_CHECK_INTERVAL_MS": 500,
}
COMPACTED_TOPIC = {
    "cleanup.policy": "compact",
    "segment.ms": "1000",
    "min.compaction.lag.ms": "1000",
    "delete.retention.ms": "4000",
    "min.cleanable.dirty.ratio": "0.01",
}


def forty_over_thirteen() -> Written:
    """40 records over 13 keys: 37 values (key i % 13), tombstones for k03 and k07, and
    a last value of k00 (the partition's last batch, which compaction never rewrites)."""
    records: Written = [(f"k{i % 13:02d}".encode(), f"v{i}".encode()) for i in range(37)]
    records += [(b"k03", None), (b"k07", None), (b"k00", b"v39")]
    return records


def produce_each(bootstrap: str, topic: str, records: Written, partition: int = 0) -> None:
    """One batch per record (a flush after each): a topic written record by record."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
    for key, value in records:
        producer.produce(topic, key=key, value=value, partition=partition)
        assert producer.flush(30) == 0
    assert producer.flush(30) == 0


def read_partition(bootstrap: str, topic: str, partition: int = 0) -> Read:
    """Every record of the partition from offset 0 to its high watermark."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "compaction-reader",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        end = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1]
        consumer.assign([TopicPartition(topic, partition, 0)])
        out: Read = {}
        deadline = time.monotonic() + 60
        while end > 0 and time.monotonic() < deadline:
            for m in consumer.consume(1000, timeout=0.2):
                if m.error() is not None:
                    raise KafkaException(m.error())
                out[m.offset()] = (m.key(), m.value())
            [position] = consumer.position([TopicPartition(topic, partition)])
            if position.offset >= end:
                return out
        assert end == 0, f"read stopped short of the high watermark {end}: {sorted(out)}"
        return out
    finally:
        consumer.close()


def latest(written: Written) -> dict[bytes, tuple[int, bytes | None]]:
    """key -> (offset, value) of its last record."""
    return {key: (offset, value) for offset, (key, value) in enumerate(written)}


def check_exact(read: Read, written: Written) -> None:
    """What a reader sees is the written log with some superseded records left out: each
    record at its own offset, each key's latest record present (tombstones may go)."""
    for offset, record in read.items():
        assert written[offset] == record, (offset, record, written[offset])
    for key, (offset, value) in latest(written).items():
        if value is not None:
            assert read.get(offset) == (key, value), f"latest {key!r} at {offset} missing"


def fully_compacted(read: Read, written: Written) -> bool:
    """One record per live key, its latest value, and no tombstone left."""
    live = {k: o for k, (o, v) in latest(written).items() if v is not None}
    return sorted(read) == sorted(live.values())


@dataclass(frozen=True)
class Pass:
    broker: str
    partition: int
    started: float
    ended: float | None


_LINE = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \S+ \S+: compaction of (.+)-(\d+) (started|done)"
)


def passes(log_paths: Sequence[tuple[str, Path]], topic: str) -> list[Pass]:
    """The compaction passes of `topic` in the brokers' logs, each with its start and end
    (None: the broker stopped before it ended)."""
    out: list[Pass] = []
    for name, path in log_paths:
        open_passes: dict[int, float] = {}
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith("===== start"):
                out.extend(Pass(name, p, t, None) for p, t in open_passes.items())
                open_passes = {}
                continue
            m = _LINE.match(line)
            if m is None or m.group(2) != topic:
                continue
            when = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            partition = int(m.group(3))
            if m.group(4) == "started":
                open_passes[partition] = when
            elif partition in open_passes:
                out.append(Pass(name, partition, open_passes.pop(partition), when))
        out.extend(Pass(name, p, t, None) for p, t in open_passes.items())
    return out


def padded(count: int, pad: int = 1000) -> Written:
    """`count` records of about `pad` bytes over 13 keys: enough bytes that a paced pass
    takes seconds."""
    filler = b"x" * pad
    return [(f"k{i % 13:02d}".encode(), b"v%d-" % i + filler) for i in range(count)]


def produce_all(bootstrap: str, topic: str, records: Written, partition: int = 0) -> None:
    """The records through one producer, batched as it likes."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    for key, value in records:
        producer.produce(topic, key=key, value=value, partition=partition)
        producer.poll(0)
    assert producer.flush(30) == 0
