"""A property test: random commit_file sequences (plain batches, idempotent producers with
retries and gaps) and log-start moves over a few partitions, checked against a plain
Python model: every answer, dense offsets, and find_batches walking back exactly the live
rows that were committed (a producer's batches back to back in one object share a row)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from contract_support import batch, commit, log_info, new_key, new_topic
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakelog.coordinator import (
    BatchCoordinator,
    DeleteRecordsRequest,
    FindBatchesRequest,
)
from lakelog.coordinator.commit_plan import RUN_MAX_BYTES
from lakelog.util.errors import ErrorCode

PARTITIONS = 3
MODULUS = 2**31
START_SEQUENCE = {1: 0, 2: MODULUS - 3}  # producer 2 wraps around soon


@dataclass
class Remembered:
    base_seq: int
    last_seq: int
    base_offset: int
    last_offset: int


@dataclass
class PartitionModel:
    log_start: int = 0
    hw: int = 0
    batches: list[tuple[Any, ...]] = field(default_factory=list)
    """(object key, byte offset, size, base offset, last offset, producer id, base seq)."""
    producers: dict[int, list[Remembered]] = field(default_factory=dict)

    def append(self, row: tuple[Any, ...]) -> None:
        """An accepted batch: it joins the row before it when it follows that row's last
        batch in the same object with the same producer (the coordinator's runs)."""
        if self.batches:
            key, position, size, base, _last, pid, seq = self.batches[-1]
            if (
                key == row[0]
                and position + size == row[1]
                and pid == row[5]
                and size + row[2] <= RUN_MAX_BYTES
            ):
                self.batches[-1] = (key, position, size + row[2], base, row[4], pid, seq)
                return
        self.batches.append(row)

    def move_log_start(self, offset: int) -> None:
        self.log_start = max(self.log_start, offset)
        self.batches = [b for b in self.batches if b[4] >= self.log_start]
        self.producers = {
            pid: history
            for pid, history in self.producers.items()
            if max(r.last_offset for r in history) >= self.log_start
        }


batch_specs = st.tuples(
    st.sampled_from([0, 0, 0, 1, 2]),  # partition: mostly one, so producers build history
    st.integers(1, 4),  # records
    st.integers(1, 300),  # size
    st.sampled_from(["plain", "next", "next", "next", "dup", "gap"]),
    st.sampled_from([1, 2]),  # producer id
    st.integers(0, 4),  # which remembered batch a retry repeats
)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("commit"), st.lists(batch_specs, max_size=8)),
        st.tuples(st.just("trim"), st.integers(0, PARTITIONS - 1), st.integers(0, 100)),
    ),
    min_size=1,
    max_size=15,
)


async def _apply_commit(
    coordinator: BatchCoordinator, t: UUID, model: list[PartitionModel], specs: list[Any]
) -> None:
    key = new_key()
    batches, expected = [], []
    position = 0
    for partition, records, size, kind, pid, pick in specs:
        part = model[partition]
        history = part.producers.get(pid, [])
        if kind == "plain":
            b = batch(t, partition, records=records, size=size)
        elif kind == "dup" and history:
            old = history[pick % len(history)]
            records = old.last_offset - old.base_offset + 1
            b = batch(t, partition, records=records, size=size, pid=pid, epoch=0, seq=old.base_seq)
            expected.append((ErrorCode.none, old.base_offset, True))
            batches.append(b)
            position += size
            continue
        else:
            seq = (history[-1].last_seq + 1) % MODULUS if history else START_SEQUENCE[pid]
            if kind == "gap" and history:
                b = batch(
                    t,
                    partition,
                    records=records,
                    size=size,
                    pid=pid,
                    epoch=0,
                    seq=(seq + 1) % MODULUS,
                )
                expected.append((ErrorCode.out_of_order_sequence_number, -1, False))
                batches.append(b)
                position += size
                continue
            b = batch(t, partition, records=records, size=size, pid=pid, epoch=0, seq=seq)
            remembered = Remembered(seq, b.last_sequence, part.hw, part.hw + records - 1)
            part.producers[pid] = [*history, remembered][-5:]
        expected.append((ErrorCode.none, part.hw, False))
        part.append(
            (key, position, size, part.hw, part.hw + records - 1, b.producer_id, b.base_sequence)
        )
        part.hw += records
        batches.append(b)
        position += size
    results = await commit(coordinator, batches, key=key)
    assert [(r.error, r.base_offset, r.is_duplicate) for r in results] == expected


async def _walk(coordinator: BatchCoordinator, t: UUID, partition: int, step: int) -> list[Any]:
    """Read the partition from its log start to the end, `step` bytes per request."""
    info = await log_info(coordinator, t, partition)
    offset, seen = info.log_start_offset, []
    while True:
        [found] = await coordinator.find_batches([FindBatchesRequest(t, partition, offset, step)])
        assert found.error == ErrorCode.none
        if offset == found.high_watermark:
            assert list(found.batches) == []
            return seen
        assert found.batches, "a read below the high watermark returns at least one batch"
        assert found.batches[0].base_offset <= offset <= found.batches[0].last_offset
        seen += [
            (
                b.object_key,
                b.byte_offset,
                b.byte_size,
                b.base_offset,
                b.last_offset,
                b.producer_id,
                b.base_sequence,
            )
            for b in found.batches
        ]
        offset = found.batches[-1].last_offset + 1


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=operations, step=st.integers(1, 700))
async def test_random_commits_match_the_model(
    coordinator: BatchCoordinator, ops: list[Any], step: int
) -> None:
    t = await new_topic(coordinator, partitions=PARTITIONS)  # a fresh log per example
    model = [PartitionModel() for _ in range(PARTITIONS)]
    for op in ops:
        if op[0] == "commit":
            await _apply_commit(coordinator, t, model, op[1])
        else:
            _, partition, percent = op
            part = model[partition]
            target = part.log_start + (part.hw - part.log_start) * percent // 100
            part.move_log_start(target)
            [result] = await coordinator.delete_records(
                [DeleteRecordsRequest(t, partition, target)]
            )
            assert (result.error, result.low_watermark) == (ErrorCode.none, part.log_start)

    for partition, part in enumerate(model):
        info = await log_info(coordinator, t, partition)
        assert (info.log_start_offset, info.high_watermark) == (part.log_start, part.hw)
        assert info.byte_size == sum(b[2] for b in part.batches)
        walked = await _walk(coordinator, t, partition, step)
        assert walked == part.batches
        # Dense: each batch starts where the previous ended.
        for before, after in itertools.pairwise(walked):
            assert after[3] == before[4] + 1
        if walked:
            assert walked[-1][4] + 1 == part.hw
