"""What every bench module shares: units, limits, the phase error, progress log, percentiles.

Kept apart so the broker, client, raw-store and report modules need not import each other.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence

MiB = 1 << 20
GiB = 1 << 30
STALL_S = 30.0  # no progress for this long fails a phase instead of hanging the bench
OBJECT_BYTES = 8 * MiB  # the broker's default WAL object size (produce.buffer.max.bytes)
NOISY_PCT = 20  # other processes' CPU (% of one core) above which a phase is flagged


class BenchError(Exception):
    """A phase could not finish: the broker refused, stalled or lost records."""


def percentile(sorted_values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile of an already sorted sequence (None when empty)."""
    if not sorted_values:
        return None
    rank = max(1, min(len(sorted_values), round(q / 100.0 * len(sorted_values) + 0.5)))
    return float(sorted_values[rank - 1])


def lat_summary(seconds: Sequence[float]) -> dict[str, float | None]:
    """p50/p99/p999/max in milliseconds."""
    values = sorted(seconds)
    out: dict[str, float | None] = {}
    for name, q in (("p50_ms", 50.0), ("p99_ms", 99.0), ("p999_ms", 99.9), ("max_ms", 100.0)):
        v = percentile(values, q)
        out[name] = None if v is None else round(v * 1000.0, 2)
    out["samples"] = len(values)
    return out


def log(msg: str) -> None:
    """Progress on stderr, so stdout carries only the result table."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)
