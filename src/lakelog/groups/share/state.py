"""One share partition's in-flight records, as a pure state machine (no I/O, no clock).

Offsets below `start` are done (acknowledged or archived). Every offset in [start, end)
has a record; offsets from `end` on were never handed out. A record is AVAILABLE
(delivered before, waiting to be delivered again), ACQUIRED by one member until its lock
deadline, ACKNOWLEDGED or ARCHIVED (no more deliveries). `start` moves forward over done
records, so the state stays bounded by share.partition.max.record.locks (plus the rest
of the producer batch that reached it: acquisition is by whole batch, as in Kafka)."""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field

from lakelog.util.errors import ErrorCode

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4
"""Acknowledge types of ShareFetch/ShareAcknowledge (KIP-932; RENEW from KIP-1222)."""
DONE = (ACKNOWLEDGED, ARCHIVED)


@dataclass(slots=True)
class Record:
    state: int
    count: int = 0
    member: str = ""
    deadline: int = 0
    """Wall-clock ms when an ACQUIRED record's lock ends."""


@dataclass(frozen=True, slots=True)
class Acquired:
    first: int
    last: int
    count: int


@dataclass(frozen=True, slots=True)
class Limits:
    lock_ms: int
    delivery_limit: int
    max_locks: int
    renew: bool = True
    """share.renew.acknowledge.enable: whether RENEW is accepted."""


@dataclass(slots=True)
class SharePartitionState:
    start: int
    end: int = -1
    records: dict[int, Record] = field(default_factory=dict)
    dirty: bool = False
    """Set by every change (not stored): whether the state needs writing."""
    archived_at_limit: int = 0
    """Records archived for reaching the delivery count limit (not stored; for metrics)."""

    def __post_init__(self) -> None:
        if self.end < self.start:
            self.end = self.start

    # ------------------------------------------------------------ queries

    def in_flight(self) -> int:
        return self.end - self.start

    def first_deliverable(self) -> int:
        """The lowest offset the next acquisition would hand out."""
        for offset in range(self.start, self.end):
            if self.records[offset].state == AVAILABLE:
                return offset
        return self.end

    # ------------------------------------------------------------ transitions

    def expire(self, now: int, limits: Limits) -> int:
        """Locks past their deadline end: the record is delivered again, or archived when
        it reached the delivery count limit. Returns how many locks ended."""
        ended = 0
        for record in self.records.values():
            if record.state == ACQUIRED and record.deadline <= now:
                self._release(record, limits)
                ended += 1
        if ended:
            self.dirty = True
            self._advance()
        return ended

    def acquire(
        self,
        member: str,
        now: int,
        limits: Limits,
        max_records: int,
        window: tuple[int, int],
        skip: Iterable[tuple[int, int]] = (),
        batch_starts: Collection[int] | None = None,
    ) -> list[Acquired]:
        """Lock records of the offsets [first, end) of `window` (the batches the caller has
        in hand, within what the isolation level allows) for `member`: earlier deliveries
        first, then new offsets. New offsets in `skip` (inclusive ranges of control batches
        and aborted transactions) are archived, never handed out.

        As Kafka's SharePartition.acquire, by producer batch: `max_records`, and the
        in-flight limit (max_locks) for new offsets, are soft limits checked where a batch
        starts (`batch_starts`; None: at every offset), so a batch is handed out whole,
        even one larger than the cap. The state stays bounded by max_locks plus one
        batch."""
        self.expire(now, limits)
        data_start, data_end = window
        deadline = now + limits.lock_ms
        taken: list[tuple[int, int]] = []
        skipped = _merged(skip)
        for offset in range(max(self.start, data_start), data_end):
            boundary = batch_starts is None or offset in batch_starts
            if boundary and len(taken) >= max_records:
                break
            if offset < self.end:
                record = self.records[offset]
                if record.state == AVAILABLE:
                    record.state, record.member, record.deadline = ACQUIRED, member, deadline
                    record.count += 1
                    taken.append((offset, record.count))
                continue
            if offset > self.end or (boundary and self.end - self.start >= limits.max_locks):
                break
            if _within(skipped, offset):
                self.records[offset] = Record(ARCHIVED)
            else:
                self.records[offset] = Record(ACQUIRED, 1, member, deadline)
                taken.append((offset, 1))
            self.end += 1
            self.dirty = True
        if taken:
            self.dirty = True
        self._advance()
        return _ranges(taken)

    def acknowledge(
        self,
        member: str,
        batches: Sequence[tuple[int, int, Sequence[int]]],
        now: int,
        limits: Limits,
    ) -> ErrorCode:
        """Apply (first, last, types) batches; all of them or none. Each offset must be
        acquired by `member` with its lock still held; `types` is one type for the whole
        range or one per offset."""
        self.expire(now, limits)
        plan: list[tuple[Record, int]] = []
        for first, last, types in batches:
            if first > last or not types:
                return ErrorCode.invalid_request
            if len(types) != 1 and len(types) != last - first + 1:
                return ErrorCode.invalid_request
            for offset in range(first, last + 1):
                kind = types[0] if len(types) == 1 else types[offset - first]
                if kind not in (GAP, ACCEPT, RELEASE, REJECT, RENEW) or (
                    kind == RENEW and not limits.renew
                ):
                    return ErrorCode.invalid_request
                record = self.records.get(offset)
                if record is None or record.state != ACQUIRED or record.member != member:
                    return ErrorCode.invalid_record_state
                plan.append((record, kind))
        for record, kind in plan:
            if kind in (ACCEPT,):
                record.state = ACKNOWLEDGED
            elif kind in (GAP, REJECT):
                record.state = ARCHIVED
            elif kind == RELEASE:
                self._release(record, limits)
            else:
                record.deadline = now + limits.lock_ms
            if record.state != ACQUIRED:
                record.member, record.deadline = "", 0
        self.dirty = self.dirty or bool(plan)
        self._advance()
        return ErrorCode.none

    def release_member(self, member: str, limits: Limits) -> int:
        """The member left or closed its session: its locks end now."""
        released = 0
        for record in self.records.values():
            if record.state == ACQUIRED and record.member == member:
                self._release(record, limits)
                released += 1
        if released:
            self.dirty = True
            self._advance()
        return released

    def move_start(self, offset: int) -> None:
        """The log no longer holds offsets below `offset` (retention, DeleteRecords):
        their records are gone for good."""
        if offset <= self.start:
            return
        for old in range(self.start, min(offset, self.end)):
            del self.records[old]
        self.start = offset
        self.end = max(self.end, offset)
        self.dirty = True
        self._advance()

    def reset(self, start: int) -> None:
        """AlterShareGroupOffsets: forget every in-flight record and start at `start`."""
        self.start = self.end = start
        self.records.clear()
        self.dirty = True

    def _release(self, record: Record, limits: Limits) -> None:
        if record.count >= limits.delivery_limit:
            record.state = ARCHIVED
            self.archived_at_limit += 1
        else:
            record.state = AVAILABLE
        record.member, record.deadline = "", 0

    def _advance(self) -> None:
        while self.start < self.end and self.records[self.start].state in DONE:
            del self.records[self.start]
            self.start += 1

    # ------------------------------------------------------------ storage form

    def dumps(self) -> str:
        """Runs of equal neighbouring records: [first, last, state, count, member,
        deadline]; records acquired together compress to one run."""
        runs: list[list[object]] = []
        for offset in range(self.start, self.end):
            r = self.records[offset]
            if runs:
                prev = runs[-1]
                if prev[1] == offset - 1 and prev[2:] == [r.state, r.count, r.member, r.deadline]:
                    prev[1] = offset
                    continue
            runs.append([offset, offset, r.state, r.count, r.member, r.deadline])
        return json.dumps({"end": self.end, "runs": runs}, separators=(",", ":"))

    @classmethod
    def loads(cls, start: int, text: str) -> SharePartitionState:
        data = json.loads(text)
        state = cls(start, int(data["end"]))
        for first, last, kind, count, member, deadline in data["runs"]:
            for offset in range(int(first), int(last) + 1):
                state.records[offset] = Record(int(kind), int(count), str(member), int(deadline))
        return state


def _merged(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    return sorted(ranges)


def _within(ranges: Sequence[tuple[int, int]], offset: int) -> bool:
    return any(first <= offset <= last for first, last in ranges)


def _ranges(taken: Sequence[tuple[int, int]]) -> list[Acquired]:
    """Contiguous offsets with one delivery count become one AcquiredRecords entry."""
    out: list[Acquired] = []
    for offset, count in taken:
        if out and out[-1].last == offset - 1 and out[-1].count == count:
            out[-1] = Acquired(out[-1].first, offset, count)
        else:
            out.append(Acquired(offset, offset, count))
    return out
