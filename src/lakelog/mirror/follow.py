"""Following the source's topics: every topic the mirror names (or a pattern matches) gets
a local topic with the same partition count and the source's topic-level configs that
Lakelog knows, partitions added on the source are added here, and each partition gets its
mirror row (PREPARING). Runs on one broker per mirror every
`mirror.metadata.refresh.interval.ms`, and at once after add-topics; every step is
idempotent, so a second runner does no harm."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from lakelog.config import Settings
from lakelog.coordinator.interface import BatchCoordinator
from lakelog.coordinator.log_types import PartitionKey
from lakelog.coordinator.mirror_types import MirrorDefinition
from lakelog.coordinator.topic_types import CreatePartitionsRequest, CreateTopicRequest
from lakelog.log.config_specs import TOPIC_SPECS
from lakelog.mirror.source import SourceCluster, SourceTopic
from lakelog.util.errors import ErrorCode

log = logging.getLogger(__name__)


@dataclass
class FollowReport:
    followed: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def matching(definition: MirrorDefinition, topics: Sequence[SourceTopic]) -> list[SourceTopic]:
    """The source topics the mirror copies: named ones and pattern matches (full match),
    never internal topics."""
    patterns = [re.compile(p) for p in definition.patterns]
    named = set(definition.topics)
    return [
        t
        for t in topics
        if not t.is_internal and (t.name in named or any(p.fullmatch(t.name) for p in patterns))
    ]


def copied_configs(overrides: dict[str, str]) -> dict[str, str]:
    """The source topic's own configs that Lakelog topics support."""
    return {k: v for k, v in overrides.items() if k in TOPIC_SPECS}


async def follow(
    coordinator: BatchCoordinator,
    settings: Settings,
    source: SourceCluster,
    definition: MirrorDefinition,
    restart: frozenset[str] = frozenset(),
) -> FollowReport:
    """Follow the source once; partitions of the `restart` topics that FAILED or STOPPED
    start over (PREPARING)."""
    report = FollowReport()
    source_topics = list((await source.refresh(None)).values())
    chosen = matching(definition, source_topics)
    known = {t.name for t in source_topics}
    for name in definition.topics:
        if name not in known:
            report.problems.append(f"topic {name!r} does not exist on the source")
    local = {t.name: t for t in await coordinator.get_topics([t.name for t in chosen])}
    for topic in chosen:
        mine = local.get(topic.name)
        if mine is None:
            overrides = {
                c.name: c.value
                for c in await source.topic_configs(topic.name)
                if c.is_topic_override and c.value is not None
            }
            [created] = await coordinator.create_topics(
                [
                    CreateTopicRequest(
                        topic.name,
                        topic.num_partitions,
                        settings.default_replication_factor,
                        copied_configs(overrides),
                    )
                ]
            )
            if created.error not in (ErrorCode.none, ErrorCode.topic_already_exists):
                report.problems.append(f"creating {topic.name!r}: {created.error.name}")
                continue
        elif mine.num_partitions < topic.num_partitions:
            [grown] = await coordinator.create_partitions(
                [CreatePartitionsRequest(topic.name, topic.num_partitions)]
            )
            if grown.error not in (ErrorCode.none, ErrorCode.invalid_partitions):
                report.problems.append(f"adding partitions to {topic.name!r}: {grown.error.name}")
        elif mine.num_partitions > topic.num_partitions:
            report.problems.append(
                f"topic {topic.name!r} has {mine.num_partitions} partitions here and "
                f"{topic.num_partitions} on the source: only the common ones are mirrored"
            )
        found = await coordinator.get_topics([topic.name])
        if not found:
            continue
        info = found[0]
        count = min(info.num_partitions, topic.num_partitions)
        results = await coordinator.add_mirror_partitions(
            definition.name,
            [PartitionKey(info.topic_id, p) for p in range(count)],
            topic.name in restart,
            int(time.time() * 1000),
        )
        refused = [r.message or r.error.name for r in results if r.error != ErrorCode.none]
        if refused:
            report.problems.append(f"topic {topic.name!r}: {refused[0]}")
        else:
            report.followed.append(topic.name)
    return report
