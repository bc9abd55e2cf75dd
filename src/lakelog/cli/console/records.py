"""The message browser: read a few records of one partition from an offset or a time, with
confluent-kafka (Lakelog's admin client reads no records), in a worker thread so the
console's event loop never blocks on librdkafka."""

from __future__ import annotations

import asyncio
import base64
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MAX_RECORDS = 100
"""The most records one page shows."""
READ_TIMEOUT_S = 15.0
SHOWN_BYTES = 4096
"""A key, value or header longer than this is cut (the page says so)."""
MAX_CONCURRENT_READS = 4
"""librdkafka consumers open at once; more browse requests wait their turn."""
_reads = asyncio.Semaphore(MAX_CONCURRENT_READS)


class BrowseError(Exception):
    """The read could not be done as asked (the page answers `status`)."""

    status = 400


class PastLogEnd(BrowseError):
    """An offset beyond the partition's log end: nothing there to show."""

    status = 416


@dataclass(frozen=True, slots=True)
class Field:
    """A key, value or header value as the page shows it: text when it is UTF-8."""

    text: str | None
    encoding: str
    """'utf-8', 'base64' (not text), or 'null'."""
    size: int
    cut: bool


@dataclass(frozen=True, slots=True)
class Record:
    partition: int
    offset: int
    timestamp_ms: int
    key: Field
    value: Field
    headers: list[tuple[str, Field]]
    raw_key: bytes | None = None
    raw_value: bytes | None = None
    """The whole key and value, for decoding with the schema registry."""


@dataclass(frozen=True, slots=True)
class Page:
    records: list[Record]
    start_offset: int
    """Where reading began (the offset asked, or the one the time resolved to)."""
    log_end: int


def decode(data: bytes | None) -> Field:
    if data is None:
        return Field(None, "null", 0, False)
    shown = data[:SHOWN_BYTES]
    cut = len(data) > SHOWN_BYTES
    try:
        text = shown.decode("utf-8")
    except UnicodeDecodeError:
        if cut:  # a multi-byte character may straddle the cut
            try:
                text = shown[:-3].decode("utf-8", errors="strict")
            except UnicodeDecodeError:
                return Field(base64.b64encode(shown).decode(), "base64", len(data), cut)
            return Field(text, "utf-8", len(data), cut)
        return Field(base64.b64encode(shown).decode(), "base64", len(data), cut)
    return Field(text, "utf-8", len(data), cut)


def _read(
    config: Mapping[str, str],
    topic: str,
    partition: int,
    offset: int | None,
    timestamp_ms: int | None,
    limit: int,
) -> Page:
    from confluent_kafka import (
        OFFSET_END,
        Consumer,
        KafkaError,
        KafkaException,
        TopicPartition,
    )

    consumer = Consumer(
        {
            **config,
            "group.id": f"lakelog-console-{uuid.uuid4()}",
            "enable.auto.commit": "false",
            "enable.auto.offset.store": "false",
            "auto.offset.reset": "latest",
            "enable.partition.eof": "true",
            "socket.timeout.ms": "10000",
        }
    )
    try:
        try:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=READ_TIMEOUT_S
            )
        except KafkaException as exc:
            raise BrowseError(f"{topic}/{partition}: {exc.args[0].str()}") from exc
        if timestamp_ms is not None:
            found = consumer.offsets_for_times(
                [TopicPartition(topic, partition, timestamp_ms)], timeout=READ_TIMEOUT_S
            )[0]
            if found.error is not None:
                raise BrowseError(f"{topic}/{partition}: {found.error.str()}")
            start = high if found.offset in (OFFSET_END, -1) else found.offset
        else:
            assert offset is not None
            if offset > high:
                raise PastLogEnd(
                    f"offset {offset} is past the log end {high} of {topic}/{partition}"
                )
            start = max(offset, low)
        records: list[Record] = []
        if start < high:
            consumer.assign([TopicPartition(topic, partition, start)])
            deadline = time.monotonic() + READ_TIMEOUT_S
            while len(records) < limit and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is None:
                    continue
                if msg.error() is not None:
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        break
                    raise BrowseError(f"{topic}/{partition}: {msg.error().str()}")
                records.append(_record(msg))
                if msg.offset() + 1 >= high:
                    break
        return Page(records, start, high)
    finally:
        consumer.close()


def _record(msg: Any) -> Record:
    _, ts = msg.timestamp()
    headers = [(name, decode(value)) for name, value in (msg.headers() or [])]
    key, value = msg.key(), msg.value()
    return Record(
        msg.partition(), msg.offset(), ts, decode(key), decode(value), headers, key, value
    )


async def read(
    config: Mapping[str, str],
    topic: str,
    partition: int,
    *,
    offset: int | None = None,
    timestamp_ms: int | None = None,
    limit: int = 20,
) -> Page:
    """Up to `limit` records of `topic`/`partition` from `offset`, or from the first record
    at or after `timestamp_ms`."""
    if (offset is None) == (timestamp_ms is None):
        raise ValueError("give an offset or a timestamp")
    limit = max(1, min(limit, MAX_RECORDS))
    async with _reads:
        return await asyncio.to_thread(_read, config, topic, partition, offset, timestamp_ms, limit)
