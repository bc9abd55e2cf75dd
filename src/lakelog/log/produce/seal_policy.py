"""When the WAL writer seals its active buffer before the size or interval limit: the
adaptive part of the trade between produce latency and PUT cost.

An object costs one PUT whatever its size, so small objects are cheap only while they are
few. While no upload is in progress, the buffer is sealed as soon as the PUT budget allows:
one budget interval after the last seal. The budget is `produce_max_puts_per_second` at
light load and shrinks as load grows (it halves at `produce_put_budget_halving_rate` bytes
per second, a third at twice that, ...), so:

- at light load a request waits at most one upload, one commit and one budget interval
  (10 ms by default), not the commit interval;
- as load grows, objects grow faster than the load, so PUTs per GiB fall;
- at full speed they fill to `produce_buffer_max_bytes`, as before.

While an upload is in progress, batches gather; the buffer is sealed when it ends. The
commit interval stays the longest a batch waits. Pure and clock-driven (the caller passes
`now`), so tests need no event loop."""

from __future__ import annotations

from dataclasses import dataclass, field

WINDOW_S = 1.0
"""How far back the byte rate looks: long enough to smooth bursts of requests, short
enough that objects shrink again within a second of load dropping."""


@dataclass(slots=True)
class ByteRate:
    """Bytes appended per second over about the last `WINDOW_S`: two half-window buckets,
    the older one weighted by how much of it still lies in the window."""

    bucket_s: float = WINDOW_S / 2
    _start: float = 0.0
    _current: int = 0
    _previous: int = 0

    def add(self, now: float, size: int) -> None:
        self._roll(now)
        self._current += size

    def per_second(self, now: float) -> float:
        self._roll(now)
        elapsed = now - self._start
        older = self._previous * max(0.0, 1.0 - elapsed / self.bucket_s)
        return (older + self._current) / self.bucket_s

    def _roll(self, now: float) -> None:
        elapsed = now - self._start
        if elapsed < self.bucket_s:
            return
        self._previous = self._current if elapsed < 2 * self.bucket_s else 0
        self._current = 0
        self._start = now if elapsed >= 2 * self.bucket_s else self._start + self.bucket_s


@dataclass(slots=True)
class SealPolicy:
    max_puts_per_second: float
    """The PUT budget at light load; 0 turns early sealing off (size and interval only)."""
    halving_rate: float
    """Bytes per second at which the budget is half of `max_puts_per_second`."""
    rate: ByteRate = field(default_factory=ByteRate)
    _last_seal: float = float("-inf")

    def appended(self, now: float, size: int) -> None:
        self.rate.add(now, size)

    def sealed(self, now: float) -> None:
        """A buffer was sealed (for any reason): one PUT spent."""
        self._last_seal = now

    def puts_per_second(self, rate: float) -> float:
        """The PUT budget at a byte rate."""
        return self.max_puts_per_second / (1.0 + rate / self.halving_rate)

    def early_at(self, now: float) -> float | None:
        """The earliest time the active buffer may be sealed early (None: never): one
        budget interval after the last seal, the interval growing with load."""
        if self.max_puts_per_second <= 0:
            return None
        return self._last_seal + 1.0 / self.puts_per_second(self.rate.per_second(now))
