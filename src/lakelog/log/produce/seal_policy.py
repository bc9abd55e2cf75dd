"""When the WAL writer seals its active buffer before the size or interval limit: the
adaptive part of the trade between produce latency and PUT cost.

An object costs one PUT whatever its size, so small objects are cheap only while they are
few. While no upload is in progress, the buffer is sealed as soon as the PUT budget allows:
one budget interval after the last seal. The budget (`PutBudget`) follows throughput: it
is the PUT rate whose bill is a set fraction of what classic Kafka pays for the same byte
rate (`produce_put_cost_fraction`; priced by `lakelog cost`'s model), clamped between

- a floor of one PUT per commit interval: the interval timer seals a buffer that old
  anyway, so a lower budget would save no PUT and only make a request that arrives
  between seals wait longer;
- `produce_max_puts_per_second`, a hard cap: at high rates objects fill fast, and
  latency stays about one budget interval plus one upload and one commit.

So PUTs per GiB are constant across the middle of the range (the cost fraction) and fall
at both ends. Near full speed a buffer fills to `produce_buffer_max_bytes` within a few tens
of milliseconds anyway: when it would be full within `fill_horizon_s` at the current rate,
it is not sealed early but waits to be full. An early seal there would save little
latency and cost a PUT and a commit each, and a saturated broker spends the CPU those
commits take on throughput instead (measured: 170 PUTs per GiB and 219 MiB/s with early
seals at full speed, 124 and 234 with full objects).

A buffer that will be committed inline (issue 32's small-write path) costs a coordinator
commit, not a PUT, so no budget spaces it: it is group-committed. The writer seals it as
soon as the commit before it has ended (one inline commit in flight per broker), so a lone
request waits for one commit and a busy one for at most two, and the commit's own duration
paces the commits. While an upload is in progress, batches gather; the buffer is sealed
when it ends.
The commit interval stays the longest a batch waits. Pure and clock-driven (the caller
passes `now`), so tests need no event loop."""

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


@dataclass(frozen=True, slots=True)
class PutBudget:
    """PUTs per second the WAL may spend at a byte rate: `puts_per_byte x rate`, clamped
    to [`min_per_second`, `max_per_second`] (the cap wins should the two cross)."""

    max_per_second: float
    """The hard cap; 0 turns early sealing off (size and interval only)."""
    min_per_second: float = 0.0
    """The floor (one PUT per commit interval in the broker)."""
    puts_per_byte: float = 0.0
    """PUTs per byte appended at the cost target (0: the budget is the floor)."""

    def per_second(self, rate: float) -> float:
        """The budget at `rate` bytes per second: non-decreasing in the rate, while PUTs
        per byte (`per_second(rate) / rate`) never increase."""
        wanted = max(self.min_per_second, self.puts_per_byte * max(rate, 0.0))
        return min(self.max_per_second, wanted)


@dataclass(slots=True)
class SealPolicy:
    budget: PutBudget
    rate: ByteRate = field(default_factory=ByteRate)
    max_bytes: int = 0
    """The buffer's size limit (0: unknown, no fill horizon)."""
    fill_horizon_s: float = 0.0
    """A buffer that would be full within this long is left to fill (0: never)."""
    _last_seal: float = float("-inf")

    def appended(self, now: float, size: int) -> None:
        self.rate.add(now, size)

    def sealed(self, now: float) -> None:
        """A buffer was sealed (for any reason): one PUT (or inline commit) spent."""
        self._last_seal = now

    def puts_per_second(self, rate: float) -> float:
        """The PUT budget at a byte rate."""
        return self.budget.per_second(rate)

    def early_at(self, now: float, *, inline: bool = False, size: int = 0) -> float | None:
        """The earliest time the active buffer (`size` bytes) may be sealed early (None:
        not now): one budget interval after the last seal. `inline`: the buffer would be
        committed inline (no PUT): at once, since the writer asks only once the commit
        before it has ended (group commit)."""
        cap = self.budget.max_per_second
        if cap <= 0:
            return None
        if inline:
            return now
        rate = self.rate.per_second(now)
        if self.fills_soon(size, rate):
            return None
        per_second = self.puts_per_second(rate)
        if per_second <= 0:
            return None
        return self._last_seal + 1.0 / per_second

    def fills_soon(self, size: int, rate: float) -> bool:
        """Would a buffer of `size` bytes be full within the fill horizon at `rate`?"""
        if self.max_bytes <= 0 or self.fill_horizon_s <= 0 or rate <= 0:
            return False
        return (self.max_bytes - size) / rate <= self.fill_horizon_s
