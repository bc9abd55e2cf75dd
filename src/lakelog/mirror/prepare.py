"""PREPARING -> MIRRORING: where a newly leased partition starts copying.

- An empty partition starts at the source's log start (or its own end, if later): its
  log start and end move there, so offsets match from the first batch.
- A partition this mirror copied before (and that never failed over) resumes at its end.
- Anything else holds records of its own: a failback (mirroring back a topic that failed
  over to the source) or a pre-existing topic. Then the source's record of the partition
  decides (asked over DescribeConfigs of a Lakelog source: the offset where it took over
  and the source epoch it recorded). A local log ending at or before that offset is a
  prefix of the source's: resume there. A longer one, or one the source has no record of,
  has diverged: the partition FAILS with the offsets, instead of merging two histories."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from lakelog.coordinator.mirror_types import MirrorPartition, MirrorPartitionUpdate, MirrorState
from lakelog.mirror.source import SourceCluster

log = logging.getLogger(__name__)

TOPIC_KEY_PREFIX = "topic:"
"""DescribeConfigs key (mirror resource, empty name) answering a topic's mirror rows."""


@dataclass(frozen=True, slots=True)
class Verdict:
    start_offset: int | None
    """Where to start (moves an empty log); None: resume at the local end."""
    failure: str | None = None


def fresh(p: MirrorPartition) -> bool:
    """An empty log (nothing copied or written yet, or everything deleted)."""
    return p.high_watermark == p.log_start_offset


def resumable(p: MirrorPartition) -> bool:
    return p.failover_offset < 0 and p.source_epoch != -1


def failback_verdict(p: MirrorPartition, remote: Mapping[str, object] | None) -> Verdict:
    """Decide for a partition holding records of its own, from the source's record of it
    (None: the source knows nothing of it)."""
    if remote is None or int(str(remote.get("failover_offset", -1))) < 0:
        return Verdict(
            None,
            f"diverged: this partition holds offsets {p.log_start_offset}..."
            f"{p.high_watermark - 1} and the source has no record of taking them over; "
            "refusing to merge two histories (delete the local records first)",
        )
    took_over = int(str(remote["failover_offset"]))
    epoch = remote.get("source_epoch", -1)
    if p.high_watermark > took_over:
        return Verdict(
            None,
            f"diverged: the source took over at offset {took_over} (epoch {epoch}) but this "
            f"log continues to {p.high_watermark - 1}: offsets {took_over}.."
            f"{p.high_watermark - 1} exist only here; refusing to merge",
        )
    return Verdict(None)


async def decide(
    source: SourceCluster, partitions: Sequence[MirrorPartition]
) -> dict[tuple[str, int], Verdict]:
    """A verdict per (topic, partition)."""
    out: dict[tuple[str, int], Verdict] = {}
    empty = [p for p in partitions if fresh(p)]
    if empty:
        starts = await source.earliest_offsets([(p.topic, p.partition) for p in empty])
        for p in empty:
            out[(p.topic, p.partition)] = Verdict(
                max(starts[(p.topic, p.partition)], p.high_watermark)
            )
    for p in partitions:
        if not fresh(p) and resumable(p):
            out[(p.topic, p.partition)] = Verdict(None)
    others = [p for p in partitions if (p.topic, p.partition) not in out]
    if others:
        keys = sorted({TOPIC_KEY_PREFIX + p.topic for p in others})
        entries = await source.mirror_entries("", keys)
        records: dict[tuple[str, int], Mapping[str, object]] = {}
        for key, value in entries.items():
            topic = key.removeprefix(TOPIC_KEY_PREFIX)
            for row in json.loads(value):
                records[(topic, int(row["partition"]))] = row
        for p in others:
            out[(p.topic, p.partition)] = failback_verdict(p, records.get((p.topic, p.partition)))
    return out


def updates_for(
    broker_id: int,
    partitions: Sequence[MirrorPartition],
    verdicts: Mapping[tuple[str, int], Verdict],
) -> list[MirrorPartitionUpdate]:
    out = []
    for p in partitions:
        v = verdicts.get((p.topic, p.partition))
        if v is None:
            continue
        if v.failure is not None:
            out.append(
                MirrorPartitionUpdate(
                    p.topic_id, p.partition, broker_id, MirrorState.FAILED, v.failure
                )
            )
        else:
            out.append(
                MirrorPartitionUpdate(
                    p.topic_id,
                    p.partition,
                    broker_id,
                    MirrorState.MIRRORING,
                    start_offset=v.start_offset,
                )
            )
    return out
