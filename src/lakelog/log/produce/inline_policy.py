"""When the WAL writer commits a sealed buffer inline (its bytes in the coordinator, no
PUT) instead of uploading it: issue 32's small-write path.

A PUT costs the same whatever the object's size, so at light load most of the object
store's bill is PUTs of tiny objects; the coordinator commit that follows every PUT is
already durable, and storing a few KiB more in it is cheaper and faster. So a buffer goes
inline when it is small (`max_bytes`), the broker's append rate is low (`below_rate`, so a
busy broker keeps filling objects) and the inline bytes held, by this broker and in all,
are under their caps (past them the broker falls back to objects; it never refuses a
write). Held bytes are known from the coordinator (`set_usage`, refreshed by the mover's
passes) plus what this broker committed inline since. Pure: no I/O, no clock."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class InlinePolicy:
    max_bytes: int
    """A buffer above this many bytes is uploaded as an object."""
    below_rate: float
    """Bytes per second of appends at or above which buffers are uploaded as objects."""
    broker_max_bytes: int
    """Inline bytes this broker may hold in the coordinator."""
    total_max_bytes: int
    """Inline bytes the whole coordinator may hold."""
    broker_bytes: int = 0
    total_bytes: int = 0

    def allows(self, size: int, rate: float) -> bool:
        return (
            0 < size <= self.max_bytes
            and rate < self.below_rate
            and self.broker_bytes + size <= self.broker_max_bytes
            and self.total_bytes + size <= self.total_max_bytes
        )

    def added(self, size: int) -> None:
        """An inline commit was sent (counted whether or not it lands: the next refresh
        corrects it)."""
        self.broker_bytes += size
        self.total_bytes += size

    def set_usage(self, broker_bytes: int, total_bytes: int) -> None:
        self.broker_bytes = broker_bytes
        self.total_bytes = total_bytes
