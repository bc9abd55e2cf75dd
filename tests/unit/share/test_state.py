"""The share-partition state machine against a plain per-offset model (hypothesis), and
its rules one by one."""

from __future__ import annotations

import os
from dataclasses import dataclass

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from lakelog.groups.share.state import (
    ACCEPT,
    ACQUIRED,
    ARCHIVED,
    AVAILABLE,
    GAP,
    REJECT,
    RELEASE,
    RENEW,
    Limits,
    SharePartitionState,
)
from lakelog.util.errors import ErrorCode

LIMITS = Limits(lock_ms=100, delivery_limit=3, max_locks=12)
MEMBERS = ("a", "b", "c")


@dataclass
class M:
    """The model's view of one offset."""

    state: int = AVAILABLE
    count: int = 0
    member: str = ""
    deadline: int = 0


class ShareModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.sut = SharePartitionState(0)
        self.model: dict[int, M] = {}
        self.now = 0
        self.log_end = 0
        self.batch_starts: set[int] = set()
        self.batch_sizes: dict[int, int] = {}

    # ---- the model's own rules, written per offset
    def _expire(self) -> None:
        for m in self.model.values():
            if m.state == ACQUIRED and m.deadline <= self.now:
                self._release(m)

    def _release(self, m: M) -> None:
        m.state = ARCHIVED if m.count >= LIMITS.delivery_limit else AVAILABLE
        m.member, m.deadline = "", 0

    def _start(self) -> int:
        offset = 0
        while offset in self.model and self.model[offset].state in (2, ARCHIVED):
            offset += 1
        return offset

    @rule(records=st.integers(1, 8))
    def produce(self, records: int) -> None:
        """One producer batch of `records` records."""
        self.batch_starts.add(self.log_end)
        self.batch_sizes[self.log_end] = records
        self.log_end += records

    @rule(ms=st.integers(1, 150))
    def tick(self, ms: int) -> None:
        self.now += ms

    @rule(member=st.sampled_from(MEMBERS), max_records=st.integers(1, 10))
    def acquire(self, member: str, max_records: int) -> None:
        got = self.sut.acquire(
            member, self.now, LIMITS, max_records, (0, self.log_end), (), self.batch_starts
        )
        self._expire()
        start = self._start()
        want = []
        offset = start
        # Kafka's rule: the caps are looked at only where a producer batch starts.
        while offset < self.log_end:
            boundary = offset in self.batch_starts
            if boundary and len(want) >= max_records:
                break
            m = self.model.get(offset)
            if m is None and boundary and offset - start >= LIMITS.max_locks:
                break
            if m is None or m.state == AVAILABLE:
                want.append(offset)
            offset += 1
        for offset in want:
            m = self.model.setdefault(offset, M())
            m.state, m.member, m.deadline = ACQUIRED, member, self.now + LIMITS.lock_ms
            m.count += 1
        flat = [(o, a.count) for a in got for o in range(a.first, a.last + 1)]
        assert flat == [(o, self.model[o].count) for o in want]

    @rule(
        member=st.sampled_from(MEMBERS),
        first=st.integers(0, 40),
        length=st.integers(1, 4),
        kind=st.sampled_from([GAP, ACCEPT, RELEASE, REJECT, RENEW]),
    )
    def acknowledge(self, member: str, first: int, length: int, kind: int) -> None:
        last = first + length - 1
        error = self.sut.acknowledge(member, [(first, last, [kind])], self.now, LIMITS)
        self._expire()
        ok = all(
            (m := self.model.get(o)) is not None and m.state == ACQUIRED and m.member == member
            for o in range(first, last + 1)
        )
        assert (error == ErrorCode.none) == ok, (error, first, last)
        if not ok:
            return
        for o in range(first, last + 1):
            m = self.model[o]
            if kind == ACCEPT:
                m.state, m.member, m.deadline = 2, "", 0
            elif kind in (GAP, REJECT):
                m.state, m.member, m.deadline = ARCHIVED, "", 0
            elif kind == RELEASE:
                self._release(m)
            else:
                m.deadline = self.now + LIMITS.lock_ms

    @rule(member=st.sampled_from(MEMBERS))
    def member_leaves(self, member: str) -> None:
        self.sut.release_member(member, LIMITS)
        for m in self.model.values():
            if m.state == ACQUIRED and m.member == member:
                self._release(m)

    @rule()
    def reload(self) -> None:
        """What the coordinator stores is all there is."""
        self.sut = SharePartitionState.loads(self.sut.start, self.sut.dumps())

    @invariant()
    def same_records(self) -> None:
        self.sut.expire(self.now, LIMITS)
        self._expire()
        assert self.sut.start == self._start()
        # max_locks is soft (checked at batch starts): exceeded by at most one batch.
        assert self.sut.in_flight() < LIMITS.max_locks + max(self.batch_sizes.values(), default=1)
        for offset in range(self.sut.start, self.sut.end):
            r, m = self.sut.records[offset], self.model[offset]
            assert (r.state, r.count, r.member) == (m.state, m.count, m.member), offset
            assert r.count <= LIMITS.delivery_limit


TestShareModel = ShareModel.TestCase
TestShareModel.settings = settings(
    max_examples=int(os.environ.get("SHARE_MODEL_EXAMPLES", "300")),
    stateful_step_count=40,
    deadline=None,
)


def test_whole_batches_are_acquired_past_the_cap() -> None:
    """Kafka 4.x: acquisition is by producer batch; the cap stops it where a batch starts,
    after being reached; a batch larger than the cap goes whole."""
    roomy = Limits(lock_ms=100, delivery_limit=3, max_locks=100)
    state = SharePartitionState(0)
    starts = {0, 20, 23}  # batches 0-19, 20-22, 23-29
    got = state.acquire("a", 0, roomy, 5, (0, 30), (), starts)
    assert [(a.first, a.last) for a in got] == [(0, 19)]
    got = state.acquire("b", 0, roomy, 2, (0, 30), (), starts)
    assert [(a.first, a.last) for a in got] == [(20, 22)]
    acks = [(0, 9, [ACCEPT]), (10, 19, [RELEASE])]
    assert state.acknowledge("a", acks, 0, roomy) == ErrorCode.none
    # Redelivery from mid-batch finishes that batch; the cap is reached at 20.
    got = state.acquire("c", 0, roomy, 1, (0, 30), (), starts)
    assert [(a.first, a.last, a.count) for a in got] == [(10, 19, 2)]


def test_the_in_flight_limit_is_soft_too() -> None:
    """max_locks (12 here) is looked at where a batch starts: a 20-record batch goes
    whole, and nothing more until records are done."""
    state = SharePartitionState(0)
    got = state.acquire("a", 0, LIMITS, 100, (0, 30), (), {0, 20})
    assert [(a.first, a.last) for a in got] == [(0, 19)]
    assert state.acquire("b", 0, LIMITS, 100, (0, 30), (), {0, 20}) == []


def test_records_are_archived_at_the_delivery_limit() -> None:
    state = SharePartitionState(0)
    for expected in (1, 2, 3):
        got = state.acquire("a", 0, LIMITS, 10, (0, 1))
        assert [(a.first, a.last, a.count) for a in got] == [(0, 0, expected)]
        assert state.acknowledge("a", [(0, 0, [RELEASE])], 0, LIMITS) == ErrorCode.none
    assert state.acquire("a", 0, LIMITS, 10, (0, 1)) == []
    assert state.start == 1 and not state.records


def test_an_expired_lock_cannot_be_acknowledged() -> None:
    state = SharePartitionState(5)
    state.acquire("a", 0, LIMITS, 10, (5, 8))
    assert state.acknowledge("a", [(5, 7, [ACCEPT])], 100, LIMITS) == ErrorCode.invalid_record_state
    got = state.acquire("b", 100, LIMITS, 10, (5, 8))
    assert [(a.first, a.last, a.count) for a in got] == [(5, 7, 2)]


def test_skipped_offsets_are_archived_never_handed_out() -> None:
    state = SharePartitionState(0)
    got = state.acquire("a", 0, LIMITS, 10, (0, 6), skip=[(2, 3)])
    assert [(a.first, a.last) for a in got] == [(0, 1), (4, 5)]
    assert state.acknowledge("a", [(0, 1, [ACCEPT])], 0, LIMITS) == ErrorCode.none
    assert state.start == 4


def test_per_offset_types_and_bad_batches() -> None:
    state = SharePartitionState(0)
    state.acquire("a", 0, LIMITS, 10, (0, 3))
    assert state.acknowledge("a", [(0, 2, [1, 2])], 0, LIMITS) == ErrorCode.invalid_request
    assert state.acknowledge("a", [(2, 1, [1])], 0, LIMITS) == ErrorCode.invalid_request
    assert state.acknowledge("a", [(0, 0, [9])], 0, LIMITS) == ErrorCode.invalid_request
    assert state.acknowledge("b", [(0, 0, [1])], 0, LIMITS) == ErrorCode.invalid_record_state
    assert state.acknowledge("a", [(0, 2, [ACCEPT, RELEASE, REJECT])], 0, LIMITS) == ErrorCode.none
    assert state.start == 1 and state.records[1].state == AVAILABLE


def test_log_start_moving_up_drops_records() -> None:
    state = SharePartitionState(0)
    state.acquire("a", 0, LIMITS, 10, (0, 5))
    state.move_start(3)
    assert state.start == 3 and sorted(state.records) == [3, 4]
    state.move_start(10)
    assert state.start == state.end == 10 and not state.records


def test_renew_extends_the_lock_unless_disabled() -> None:
    state = SharePartitionState(0)
    state.acquire("a", 0, LIMITS, 10, (0, 1))
    assert state.acknowledge("a", [(0, 0, [RENEW])], 90, LIMITS) == ErrorCode.none
    assert state.acquire("b", 150, LIMITS, 10, (0, 1)) == []  # still a's until 190
    assert state.acknowledge("a", [(0, 0, [ACCEPT])], 180, LIMITS) == ErrorCode.none
    no_renew = Limits(LIMITS.lock_ms, LIMITS.delivery_limit, LIMITS.max_locks, renew=False)
    state.acquire("a", 200, no_renew, 10, (0, 2))
    assert state.acknowledge("a", [(1, 1, [RENEW])], 210, no_renew) == ErrorCode.invalid_request
