"""Consumer group offset sync: the source's committed offsets, copied to the destination
capped at `min(source committed, destination last stable offset)`.

The cap is the KIP-1279 review's VK12 fix: a synced offset past what was mirrored would
make a consumer that fails over skip the records in between. The destination's last stable
offset, not its log end, is the bound, because failover truncates to it. Groups with live
members on the destination are left alone (their own commits win). The sync runs every
`mirror.group.sync.interval.ms` and once more right before a failover, so after failover a
group re-reads at most one interval's worth of records and never skips any."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence

from lakelog.coordinator.group_types import OffsetCommit
from lakelog.coordinator.interface import BatchCoordinator
from lakelog.coordinator.mirror_types import MirrorPartition, MirrorState
from lakelog.mirror.source import SourceCluster

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
ACTIVE_GROUP_STATES = frozenset({"PreparingRebalance", "CompletingRebalance", "Stable"})
SYNCED_STATES = frozenset({MirrorState.PREPARING, MirrorState.MIRRORING, MirrorState.FAILED})


def capped_offsets(
    committed: Mapping[TopicPartition, int],
    ends: Mapping[TopicPartition, int],
    current: Mapping[TopicPartition, int],
) -> dict[TopicPartition, int]:
    """The offsets to write: for each mirrored partition the group committed on the source,
    min(committed, end), where that differs from what the destination holds."""
    out: dict[TopicPartition, int] = {}
    for tp, offset in committed.items():
        end = ends.get(tp)
        if end is None or offset < 0:
            continue
        target = min(offset, end)
        if current.get(tp) != target:
            out[tp] = target
    return out


async def sync_groups(
    coordinator: BatchCoordinator,
    source: SourceCluster,
    partitions: Sequence[MirrorPartition],
    topics: set[str] | None = None,
) -> dict[str, int]:
    """One sync pass over the mirror's partitions (only `topics` when given); returns the
    offsets written per group."""
    ends = {
        (p.topic, p.partition): p.last_stable_offset
        for p in partitions
        if p.state in SYNCED_STATES and (topics is None or p.topic in topics)
    }
    if not ends:
        return {}
    written: dict[str, int] = {}
    for group in await source.groups():
        if group.group_type == "share" or group.protocol_type not in ("consumer", ""):
            continue
        committed = await source.committed(group.group_id)
        wanted = {tp: o for tp, o in committed.items() if tp in ends}
        if not wanted:
            continue
        record = await coordinator.load_group(group.group_id)
        if record is not None and record.state in ACTIVE_GROUP_STATES:
            continue
        held = await coordinator.fetch_offsets(group.group_id, sorted(wanted))
        current = {(o.topic, o.partition): o.offset for o in held}
        changes = capped_offsets(wanted, ends, current)
        if changes:
            await coordinator.commit_offsets(
                group.group_id,
                [OffsetCommit(t, p, o) for (t, p), o in sorted(changes.items())],
                int(time.time() * 1000),
            )
            written[group.group_id] = len(changes)
    return written
