"""Time-ordered UUIDv7 (RFC 9562), because Python 3.11's `uuid` module has none.

Object keys embed these ids so that a plain lexicographic listing is also a time-ordered
listing, and so that an object's age can be read from its key without a HEAD request.

Layout (128 bits, most significant first): 48-bit Unix time in ms, 4-bit version (7),
12 + 30 bits of a per-millisecond counter (RFC 9562 section 6.2, method 1, seeded randomly
each millisecond with its top bit clear so it has room to grow), 2-bit variant (0b10),
32 random bits drawn fresh for every id (from the kernel, so forked processes that share
the counter state still produce different ids).
"""

from __future__ import annotations

import os
import threading
import time
import uuid

__all__ = ["uuid7", "uuid7_time_ms"]

_COUNTER_BITS = 42
_COUNTER_LIMIT = 1 << _COUNTER_BITS
_RAND_B_COUNTER_BITS = 30
_RAND_B_COUNTER_MASK = (1 << _RAND_B_COUNTER_BITS) - 1
_VERSION_BITS = 0x7 << 76
_VARIANT_BITS = 0b10 << 62

_lock = threading.Lock()
_last_ms = 0
_counter = 0


def _seed() -> int:
    """A random counter start with its top bit clear, leaving 2**41 increments of room."""
    return int.from_bytes(os.urandom(6), "big") >> (48 - _COUNTER_BITS + 1)


def uuid7() -> uuid.UUID:
    """Return a new UUIDv7, strictly greater than any earlier one from this process.

    If the clock steps back, or 2**41 ids are asked for within one millisecond, the
    timestamp is held or advanced by 1 ms instead of breaking the order (RFC 9562 6.2).
    """
    global _last_ms, _counter
    now_ms = time.time_ns() // 1_000_000
    with _lock:
        if now_ms > _last_ms:
            _last_ms = now_ms
            _counter = _seed()
        else:
            _counter += 1
            if _counter >= _COUNTER_LIMIT:
                _last_ms += 1
                _counter = _seed()
        ms, counter = _last_ms, _counter
    rand_a = counter >> _RAND_B_COUNTER_BITS
    rand_b = ((counter & _RAND_B_COUNTER_MASK) << 32) | int.from_bytes(os.urandom(4), "big")
    value = (ms & 0xFFFF_FFFF_FFFF) << 80 | _VERSION_BITS | rand_a << 64 | _VARIANT_BITS | rand_b
    return uuid.UUID(int=value)


def uuid7_time_ms(value: uuid.UUID) -> int:
    """The Unix time in ms stored in a UUIDv7; `ValueError` for any other version."""
    if value.version != 7 or value.variant != uuid.RFC_4122:
        raise ValueError(f"not a UUIDv7: {value}")
    return value.int >> 80
