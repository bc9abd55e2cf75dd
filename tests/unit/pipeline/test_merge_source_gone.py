"""A merge plan whose source object was deleted after planning (retention dropped its
batches and the cleaner deleted it while Spark started) drops that plan only: the task
must not fail the whole job, and the other plans in its group still get written."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from lakelog.coordinator.pipeline_types import FileBatch
from lakelog.log.storage.store import ObjectStorage
from lakelog.pipeline.merge import write_groups
from lakelog.pipeline.planning import SegmentPlan
from tests.support.batches import build_batch


def plan(key: str, topic: uuid.UUID, partition: int, size: int) -> SegmentPlan:
    row = FileBatch(key, topic, partition, 0, 1, 0, size)
    return SegmentPlan(topic, partition, (row,))


def test_a_plan_whose_source_is_gone_is_dropped_the_rest_written(tmp_path: Path) -> None:
    url = f"file://{tmp_path}/store"
    storage = ObjectStorage.from_url(url)
    batch = build_batch([(b"k1", b"v1"), (b"k2", b"v2")])
    asyncio.run(storage.put("wal/present", [batch]))
    topic = uuid.uuid4()
    plans = [plan("wal/present", topic, 0, len(batch)), plan("wal/deleted", topic, 1, 100)]

    [outcomes] = write_groups(url, 1 << 20, [plans])

    written, gone = outcomes
    assert written.commit is not None and not written.source_gone
    assert written.commit.moves[0].sources[0].base_offset == 0
    assert gone.commit is None and gone.source_gone
