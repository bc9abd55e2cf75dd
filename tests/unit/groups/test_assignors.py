"""The server-side assignors: complete, balanced, sticky where promised."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from lakelog.groups.assignors import AssignorMember, range_, uniform

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


def _all(partitions: dict[uuid.UUID, int]) -> set[tuple[uuid.UUID, int]]:
    return {(t, p) for t, n in partitions.items() for p in range(n)}


def test_uniform_spreads_evenly_and_completely() -> None:
    members = {m: AssignorMember(frozenset({T1, T2})) for m in "abc"}
    out = uniform(members, {T1: 4, T2: 3}, {})
    sizes = sorted(len(a) for a in out.values())
    assert sizes == [2, 2, 3]
    assert set().union(*out.values()) == _all({T1: 4, T2: 3})


def test_uniform_is_sticky_when_a_member_joins() -> None:
    before = uniform({m: AssignorMember(frozenset({T1})) for m in "ab"}, {T1: 6}, {})
    members = {m: AssignorMember(frozenset({T1})) for m in "abc"}
    after = uniform(members, {T1: 6}, before)
    assert all(len(a) == 2 for a in after.values())
    # a and b only gave partitions up; they took none from each other
    assert after["a"] <= before["a"] and after["b"] <= before["b"]


def test_uniform_respects_subscriptions() -> None:
    members = {"a": AssignorMember(frozenset({T1})), "b": AssignorMember(frozenset({T2}))}
    out = uniform(members, {T1: 3, T2: 1}, {})
    assert out["a"] == {(T1, 0), (T1, 1), (T1, 2)}
    assert out["b"] == {(T2, 0)}


def test_range_gives_contiguous_ranges_per_topic() -> None:
    members = {m: AssignorMember(frozenset({T1, T2})) for m in "ab"}
    out = range_(members, {T1: 3, T2: 3}, {})
    assert out["a"] == {(T1, 0), (T1, 1), (T2, 0), (T2, 1)}
    assert out["b"] == {(T1, 2), (T2, 2)}


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 8),
    st.lists(st.integers(0, 12), min_size=1, max_size=3),
    st.lists(st.integers(0, 7), max_size=30),
)
def test_uniform_homogeneous_properties(
    members_n: int, counts: list[int], moves: list[int]
) -> None:
    """Any current assignment in, a balanced cover out, keeping all it can."""
    topics = {uuid.UUID(int=i + 1): n for i, n in enumerate(counts)}
    members = {f"m{i}": AssignorMember(frozenset(topics)) for i in range(members_n)}
    current: dict[str, set[tuple[uuid.UUID, int]]] = {m: set() for m in members}
    for i, tp in zip(moves, sorted(_all(topics)), strict=False):
        current[f"m{i % members_n}"].add(tp)
    out = uniform(members, topics, {m: frozenset(a) for m, a in current.items()})
    owned = [tp for a in out.values() for tp in a]
    assert len(owned) == len(set(owned)) and set(owned) == _all(topics)
    sizes = [len(a) for a in out.values()]
    assert max(sizes) - min(sizes) <= 1
    fair = -(-len(owned) // members_n)
    for m, a in current.items():
        # nobody loses a partition unless it held more than its fair share
        if len(a) <= fair - 1:
            assert a <= out[m]
