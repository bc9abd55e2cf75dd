"""Mutate the length fields of a valid request of every API and version the broker serves,
and decode each mutant the way the broker does (`parse_header`, then `decode_body`).

Every byte offset of each sample body gets each boundary value written over it and
inserted before it, and the body is cut at each offset, so every array count, string and
bytes length, tagged-field count and size is hit with huge, negative, null, too-long-varint
and off-by-a-little values. Run it in a child process (`python -m
tests.support.length_sweep`): if a mutant got past the guard and kio aborted, the process
dies (SIGABRT) instead of the test runner. Prints one JSON line of counts.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Iterator

from lakelog.log.protocol.bounded import OutOfBounds
from lakelog.log.protocol.frames import MalformedRequest, api_schema, decode_body, parse_header
from tests.support.request_samples import frame, handled_versions, sample_body

BOUNDARY_VALUES = [
    bytes.fromhex(h)
    for h in (
        # unsigned varints: 2^32-1, 2^31-1, 2^28, 2^28-1, 128, six bytes, unterminated
        "ffffffff0f",
        "ffffffff07",
        "8080808001",
        "ffffff7f",
        "8001",
        "808080808001",
        "ffffffffff",
        # int32: -1, -2, max, min, 1 Mi
        "ffffffff",
        "fffffffe",
        "7fffffff",
        "80000000",
        "00100000",
        # int16: -1, -2, max, min
        "ffff",
        "fffe",
        "7fff",
        "8000",
        # single bytes
        "00",
        "01",
        "02",
        "7f",
        "80",
        "ff",
    )
]


def mutants(body: bytes) -> Iterator[bytes]:
    for i in range(len(body) + 1):
        yield body[:i]
        for value in BOUNDARY_VALUES:
            yield body[:i] + value + body[i + len(value) :]
            yield body[:i] + value + body[i:]


def outcome(data: bytes) -> str:
    """ok, guard (rejected before kio), kio (kio's own clean error) or the exception."""
    view = memoryview(data)
    try:
        header = parse_header(view)
        schema = api_schema(header.api_key, header.api_version)
        assert schema is not None
        decode_body(schema, view, header)
    except MalformedRequest as exc:
        return "guard" if isinstance(exc.__cause__, OutOfBounds) else "kio"
    except Exception as exc:  # anything else is a failure the caller reports
        return f"unhandled {type(exc).__name__}: {exc}"
    return "ok"


def sweep(versions: list[tuple[int, int]] | None = None) -> dict[str, object]:
    counts: Counter[str] = Counter()
    unhandled: list[str] = []
    unguarded: list[str] = []
    for api_key, version in versions or handled_versions():
        guarded = 0
        for count, null in ((1, False), (2, True)):
            body = sample_body(api_key, version, count=count, null=null)
            head = frame(api_key, version, b"")
            for mutant in mutants(body):
                result = outcome(head + mutant)
                if result.startswith("unhandled"):
                    unhandled.append(f"{api_key} v{version} {mutant.hex()}: {result}")
                    result = "unhandled"
                guarded += result == "guard"
                counts[result] += 1
        if not guarded:
            unguarded.append(f"{api_key} v{version}")
    return {"counts": dict(counts), "unhandled": unhandled[:20], "unguarded": unguarded}


if __name__ == "__main__":
    versions = [tuple(int(x) for x in arg.split(":")) for arg in sys.argv[1:]]
    print(json.dumps(sweep([(k, v) for k, v in versions] or None)))
