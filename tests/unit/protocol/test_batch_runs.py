"""Splitting a coordinate's bytes into batches: real offsets from the headers (segments)
or following each other from the coordinate (a producer's run in a WAL object), in one
piece or in the pieces the fetch cache holds, and refusing bytes that are not whole
batches."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakelog.log.protocol.batch_runs import (
    batches_in_range,
    is_one_batch,
    last_offset_delta,
    run_batches,
)
from lakelog.log.protocol.records import InvalidBatch
from tests.support.batches import build_batch


def batch(records: int, base_offset: int = 0) -> bytes:
    return build_batch([(b"k", b"v")] * records, base_offset=base_offset)


def test_a_producers_run_follows_the_coordinate() -> None:
    """Producers send base offset 0 (or anything): the coordinator gave the batches dense
    offsets from the row's base."""
    run = [batch(2), batch(1, base_offset=99), batch(3)]
    got = list(batches_in_range(b"".join(run), 40, offsets_in_headers=False))
    assert [(base, bytes(b)) for base, b in got] == [(40, run[0]), (42, run[1]), (43, run[2])]


def test_a_segment_run_keeps_its_header_offsets() -> None:
    """Compaction may leave gaps between a segment row's batches."""
    run = [batch(2, 40), batch(1, 45), batch(3, 50)]
    got = list(batches_in_range(b"".join(run), 40, offsets_in_headers=True))
    assert [base for base, _ in got] == [40, 45, 50]


@pytest.mark.parametrize(
    "data",
    [
        batch(1)[:-1],  # truncated
        batch(1) + b"\x00" * 10,  # a tail shorter than a header
        b"\x00" * 8 + (5).to_bytes(4, "big") + b"\x00" * 60,  # a length below a header
        batch(1)[:23] + (-2).to_bytes(4, "big", signed=True) + batch(1)[27:],
    ],
    ids=["truncated", "short tail", "tiny length", "negative delta"],
)
def test_bytes_that_are_not_whole_batches_are_refused(data: bytes) -> None:
    with pytest.raises(InvalidBatch):
        list(batches_in_range(data, 0, offsets_in_headers=False))


def test_one_batch_is_told_apart_from_a_run() -> None:
    one, two = batch(3), batch(3) + batch(1)
    assert is_one_batch(one) and not is_one_batch(two) and not is_one_batch(one[:-1])
    assert last_offset_delta(one) == 2


@given(
    counts=st.lists(st.integers(1, 5), min_size=1, max_size=8),
    cuts=st.sets(st.integers(1, 7)),
    in_headers=st.booleans(),
    base=st.integers(0, 2**40),
)
def test_pieces_split_the_same_as_one_buffer(
    counts: list[int], cuts: set[int], in_headers: bool, base: int
) -> None:
    offsets = [base + sum(counts[:i]) for i in range(len(counts))]
    batches = [batch(n, offset) for n, offset in zip(counts, offsets, strict=True)]
    whole = list(batches_in_range(b"".join(batches), base, offsets_in_headers=in_headers))
    bounds = [0, *sorted(c for c in cuts if c < len(batches)), len(batches)]
    pieces = [b"".join(batches[a:b]) for a, b in itertools.pairwise(bounds)]
    split = list(run_batches(pieces, base, offsets_in_headers=in_headers))
    assert [(o, bytes(b)) for o, b in split] == [(o, bytes(b)) for o, b in whole]
    assert [o for o, _ in whole] == offsets
