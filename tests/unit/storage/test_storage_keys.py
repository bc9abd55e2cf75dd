"""Key layout and UUIDv7: format, order, parsing."""

from __future__ import annotations

import itertools
import threading
import time
import uuid

import pytest

from lakelog.log.storage import uuid7 as uuid7_module
from lakelog.log.storage.keys import (
    InvalidKeyError,
    KeyKind,
    key_kind,
    new_wal_key,
    parse_key,
    segment_key,
    segment_prefix,
)
from lakelog.log.storage.uuid7 import uuid7, uuid7_time_ms


def test_uuid7_fields() -> None:
    before = time.time_ns() // 1_000_000
    value = uuid7()
    after = time.time_ns() // 1_000_000
    assert value.version == 7
    assert value.variant == uuid.RFC_4122
    assert before <= uuid7_time_ms(value) <= after
    assert str(value) == str(value).lower()


def test_uuid7_strictly_increasing_as_ints_and_strings() -> None:
    values = [uuid7() for _ in range(20_000)]
    assert all(a.int < b.int for a, b in itertools.pairwise(values))
    texts = [str(v) for v in values]
    assert texts == sorted(texts)
    assert len(set(texts)) == len(texts)


def test_uuid7_unique_across_threads() -> None:
    results: list[list[uuid.UUID]] = [[] for _ in range(4)]

    def work(out: list[uuid.UUID]) -> None:
        out.extend(uuid7() for _ in range(5_000))

    threads = [threading.Thread(target=work, args=(out,)) for out in results]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    merged = [v for out in results for v in out]
    assert len(set(merged)) == len(merged)
    for out in results:
        assert out == sorted(out, key=lambda v: v.int)


@pytest.fixture
def stepping_clock(monkeypatch: pytest.MonkeyPatch) -> _SteppingClock:
    """A controllable clock for uuid7; the generator's state is restored afterwards."""
    clock = _SteppingClock(time.time_ns() // 1_000_000 + 10_000)
    monkeypatch.setattr(uuid7_module, "_last_ms", uuid7_module._last_ms)
    monkeypatch.setattr(uuid7_module, "_counter", uuid7_module._counter)
    monkeypatch.setattr(uuid7_module, "time", clock)
    return clock


class _SteppingClock:
    """A clock that can be stepped backwards: fault injection for wall-clock jumps."""

    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms

    def time_ns(self) -> int:
        return self.now_ms * 1_000_000


def test_uuid7_stays_ordered_when_clock_steps_back(stepping_clock: _SteppingClock) -> None:
    clock = stepping_clock
    first = uuid7()
    clock.now_ms -= 5_000
    second = uuid7()
    assert second.int > first.int
    assert uuid7_time_ms(second) == uuid7_time_ms(first)


def test_uuid7_counter_overflow_advances_time(stepping_clock: _SteppingClock) -> None:
    first = uuid7()
    uuid7_module._counter = (1 << 42) - 1
    second = uuid7()
    assert uuid7_time_ms(second) == uuid7_time_ms(first) + 1
    assert second.int > first.int


def test_uuid7_time_rejects_other_versions() -> None:
    with pytest.raises(ValueError):
        uuid7_time_ms(uuid.uuid4())


def test_wal_key_format_and_order() -> None:
    keys = [new_wal_key() for _ in range(100)]
    assert keys == sorted(keys)
    parsed = parse_key(keys[0])
    assert parsed.kind is KeyKind.WAL
    assert keys[0] == f"wal/{parsed.object_id}"
    assert parsed.topic_id is None and parsed.partition is None and parsed.base_offset is None
    assert abs(parsed.created_ms - time.time() * 1000) < 60_000


def test_segment_key_round_trip() -> None:
    topic = uuid.uuid4()
    key = segment_key(topic, 7, 12345)
    assert key.startswith(f"seg/{topic}/7/00000000000000012345-")
    assert key.startswith(segment_prefix(topic, 7) + "/")
    assert segment_prefix(topic) == f"seg/{topic}"
    parsed = parse_key(key)
    assert parsed.kind is KeyKind.SEGMENT
    assert (parsed.topic_id, parsed.partition, parsed.base_offset) == (topic, 7, 12345)
    assert parsed.object_id.version == 7
    assert key_kind(key) is KeyKind.SEGMENT


def test_segment_keys_list_in_offset_order() -> None:
    topic = uuid.uuid4()
    offsets = [5, 1_000_000, 42, 2**63 - 1, 0, 999]
    keys = [segment_key(topic, 0, offset) for offset in offsets]
    assert [parse_key(k).base_offset for k in sorted(keys)] == sorted(offsets)


@pytest.mark.parametrize(("partition", "offset"), [(-1, 0), (2**31, 0), (0, -1), (0, 2**63)])
def test_segment_key_rejects_out_of_range(partition: int, offset: int) -> None:
    with pytest.raises(ValueError):
        segment_key(uuid.uuid4(), partition, offset)


def _bad_keys() -> list[str]:
    topic = uuid.uuid4()
    good = segment_key(topic, 3, 10)
    wal = new_wal_key()
    object_id = wal.removeprefix("wal/")
    return [
        "",
        "wal",
        "wal/",
        f"{wal}/extra",
        f"wal/{uuid.uuid4()}",  # not a v7
        f"wal/{object_id.upper()}",  # not canonical
        f"wal/{object_id.replace('-', '')}",
        f"WAL/{object_id}",
        f"other/{object_id}",
        good.replace("/3/", "/03/"),
        good.replace("/3/", "/-3/"),
        good.replace("/3/", "/x/"),
        good.replace("/3/", "/2147483648/"),
        good.replace("00000000000000000010-", "10-"),
        good.replace("00000000000000000010-", "99999999999999999999-"),
        good.replace("00000000000000000010-", "0000000000000000001x-"),
        good.replace("00000000000000000010-", "00000000000000000010_"),
        good.replace(str(topic), "not-a-uuid"),
        f"seg/{topic}/3",
        f"{good}/more",
    ]


@pytest.mark.parametrize("key", _bad_keys())
def test_parse_rejects_foreign_keys(key: str) -> None:
    with pytest.raises(InvalidKeyError):
        parse_key(key)
    assert key_kind(key) is KeyKind.UNKNOWN
