"""`lakelog mirror validate`: what would block or spoil a migration, found before it starts.

Checks (the KIP-1279 review's VK10 and the issue's list):
- group ids: a source share group whose id is a consumer group here (KIP-1279: its offset
  commits would fail with GROUP_ID_NOT_FOUND mid-failover), and a source consumer group
  whose id is a group that has run here (offset sync would overwrite its offsets). Share
  groups come from ListGroups v5's group type; a source without them reports none.
- topics on both sides with different partition counts, and local topics holding records
  the mirror did not copy (they would diverge);
- unsupported configurations: source client settings this client cannot honour, source
  topic configs Lakelog topics do not know (not copied), unclean leader election on the
  source (a KIP-1279 non-goal: divergence it causes cannot be reconciled), and a source
  that cannot serve Fetch v4+."""

from __future__ import annotations

from dataclasses import dataclass

from lakelog.admin.wire import KafkaError
from lakelog.coordinator.interface import BatchCoordinator
from lakelog.coordinator.log_types import PartitionKey
from lakelog.coordinator.mirror_types import MirrorDefinition
from lakelog.mirror.follow import copied_configs, matching
from lakelog.mirror.source import (
    ListedSourceGroup,
    SourceCluster,
    SourceTopic,
    SourceUnavailable,
    unsupported_settings,
)

ERROR = "error"
WARNING = "warning"


@dataclass(frozen=True, slots=True)
class Finding:
    severity: str
    check: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"severity": self.severity, "check": self.check, "message": self.message}


async def validate(
    coordinator: BatchCoordinator, source: SourceCluster, definition: MirrorDefinition
) -> list[Finding]:
    findings: list[Finding] = []
    bad = unsupported_settings(definition.source_configs)
    if bad:
        findings.append(
            Finding(ERROR, "unsupported_config", f"source client settings: {', '.join(bad)}")
        )
        return findings
    try:
        await source.fetch_version()
        topics = list((await source.refresh(None)).values())
        groups = await source.groups()
    except SourceUnavailable as exc:
        return [*findings, Finding(ERROR, "source_unreachable", str(exc))]
    except KafkaError as exc:
        return [*findings, Finding(ERROR, "unsupported_source", str(exc))]
    findings += await _topics(coordinator, source, definition, topics)
    findings += await _groups(coordinator, groups)
    return findings


async def _topics(
    coordinator: BatchCoordinator,
    source: SourceCluster,
    definition: MirrorDefinition,
    topics: list[SourceTopic],
) -> list[Finding]:
    findings: list[Finding] = []
    known = {t.name for t in topics}
    for name in definition.topics:
        if name not in known:
            findings.append(
                Finding(WARNING, "missing_topic", f"topic {name!r} is not on the source")
            )
    # A mirror with no topics yet: a migration would take them all.
    everything = not definition.topics and not definition.patterns
    chosen = (
        [t for t in topics if not t.is_internal] if everything else matching(definition, topics)
    )
    local = {t.name: t for t in await coordinator.get_topics([t.name for t in chosen])}
    mirrored = {
        (p.topic, p.partition) for p in await coordinator.mirror_partitions(definition.name)
    }
    for topic in chosen:
        mine = local.get(topic.name)
        if mine is not None:
            if mine.num_partitions != topic.num_partitions:
                findings.append(
                    Finding(
                        ERROR,
                        "partition_count",
                        f"topic {topic.name!r} has {topic.num_partitions} partitions on the "
                        f"source and {mine.num_partitions} here",
                    )
                )
            infos = await coordinator.log_info(
                [PartitionKey(mine.topic_id, p) for p in range(mine.num_partitions)]
            )
            own = sum(
                i.high_watermark - i.log_start_offset
                for p, i in enumerate(infos)
                if (topic.name, p) not in mirrored
            )
            if own > 0:
                findings.append(
                    Finding(
                        ERROR,
                        "existing_data",
                        f"topic {topic.name!r} already holds {own} offsets here that this "
                        "mirror did not copy: mirroring would diverge (unless it is a "
                        "failback the source recorded)",
                    )
                )
        overrides = {
            c.name: c.value or ""
            for c in await source.topic_configs(topic.name)
            if c.is_topic_override
        }
        dropped = sorted(set(overrides) - set(copied_configs(overrides)))
        if dropped:
            findings.append(
                Finding(
                    WARNING,
                    "unsupported_topic_config",
                    f"topic {topic.name!r}: source configs not copied: {', '.join(dropped)}",
                )
            )
        if overrides.get("unclean.leader.election.enable", "false").lower() == "true":
            findings.append(
                Finding(
                    WARNING,
                    "unclean_leader_election",
                    f"topic {topic.name!r} allows unclean leader election on the source: "
                    "divergence it causes cannot be reconciled by the mirror",
                )
            )
    return findings


async def _groups(coordinator: BatchCoordinator, groups: list[ListedSourceGroup]) -> list[Finding]:
    findings: list[Finding] = []
    here = {g.group_id: g for g in await coordinator.list_groups()}
    for group in groups:
        mine = here.get(group.group_id)
        if mine is None:
            continue
        if group.group_type == "share":
            findings.append(
                Finding(
                    ERROR,
                    "group_type_collision",
                    f"group id {group.group_id!r} is a share group on the source and a "
                    "consumer group here: its offset commits would fail after failover",
                )
            )
        elif mine.protocol_type:
            findings.append(
                Finding(
                    ERROR,
                    "group_id_collision",
                    f"group id {group.group_id!r} is in use on both clusters (here: "
                    f"{mine.protocol_type} group, {mine.state}): offset sync would overwrite "
                    "its offsets here",
                )
            )
    return findings
