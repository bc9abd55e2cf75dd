"""Mirror administration over the Kafka protocol, the way Kafka's tools talk to a cluster.

KIP-1279's own admin RPCs are not in kio (nor in any client library yet), so Lakelog
brokers serve mirrors as a config resource (KIP-1279 itself manages mirror settings with
IncrementalAlterConfigs on a mirror resource): resource type `MIRROR_RESOURCE` (64, private
until Kafka assigns one), resource name = mirror name.

IncrementalAlterConfigs, all entries SET; `mirror.action` says what to do:
- `create`: `source.bootstrap.servers`, other `source.<client setting>` entries, optional
  `topics` / `topic.patterns` (JSON arrays).
- `add-topics`: `topics` and/or `topic.patterns` (JSON arrays); failed or stopped
  partitions of the named topics start over.
- `remove-topics`: `topics` (JSON array): failover (final group offset sync, stop,
  truncate to the last stable offset, writable).
- `delete`.
Errors come back as the resource's error code and message.

DescribeConfigs:
- name NAME: the definition (`source.*`, `topics`, `topic.patterns`, `created.at`) and one
  `partition.<topic>.<n>` entry per partition (JSON: state, offsets, lag, owner, reason);
- name NAME, key `validate`: `validate.<i>` findings (JSON) and `validate.ok`;
- name "": `mirror.<name>` per mirror (JSON summary); with keys `topic:<T>`, the mirror
  rows of topic T (JSON array), which a failback on another cluster checks.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from lakelog.admin.wire import KafkaError
from lakelog.coordinator.mirror_types import MirrorDefinition, MirrorPartition
from lakelog.log.config_specs import MIRROR_RESOURCE
from lakelog.mirror.prepare import TOPIC_KEY_PREFIX
from lakelog.mirror.source import SourceAdmin, SourceUnavailable, unsupported_settings
from lakelog.mirror.validate import ERROR, validate
from lakelog.security.client_config import ClientSecurity, SecurityConfigError
from lakelog.server.topics import topic_name_error
from lakelog.util.errors import ErrorCode

if TYPE_CHECKING:
    from lakelog.coordinator.interface import BatchCoordinator
    from lakelog.mirror.manager import MirrorManager

log = logging.getLogger(__name__)

__all__ = ["MIRROR_RESOURCE", "MirrorAdminError", "alter", "describe"]

ACTION = "mirror.action"
SOURCE_PREFIX = "source."
BOOTSTRAP = "source.bootstrap.servers"
TOPICS = "topics"
PATTERNS = "topic.patterns"
VALIDATE = "validate"
FINAL_SYNC_TIMEOUT_S = 10.0
PROBE_TIMEOUT_S = 10.0
"""How long `create` waits for each source broker before refusing an unreachable source."""
SECRET_WORDS = ("password", "secret", "key", "jaas")
"""Setting names whose values `describe` masks (sasl.jaas.config holds a password)."""


class MirrorAdminError(Exception):
    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


@dataclass(frozen=True, slots=True)
class Entry:
    name: str
    value: str


def partition_json(p: MirrorPartition) -> dict[str, Any]:
    return {
        "mirror": p.mirror,
        "topic": p.topic,
        "partition": p.partition,
        "state": str(p.state),
        "last_mirrored_offset": p.high_watermark - 1,
        "high_watermark": p.high_watermark,
        "last_stable_offset": p.last_stable_offset,
        "log_start_offset": p.log_start_offset,
        "source_end_offset": p.source_end_offset,
        "source_high_watermark": p.source_high_watermark,
        "lag_records": p.lag_records,
        "lag_ms": p.lag_ms,
        "source_epoch": p.source_epoch,
        "lease_owner": p.lease_owner,
        "failover_offset": p.failover_offset,
        "reason": p.reason,
    }


def _masked(key: str, value: str) -> str:
    return "********" if any(w in key.lower() for w in SECRET_WORDS) else value


class MirrorAdminHost(Protocol):
    """What the mirror admin uses of the broker (the Broker is one)."""

    @property
    def coordinator(self) -> BatchCoordinator: ...
    @property
    def mirrors(self) -> MirrorManager: ...


# ---------------------------------------------------------------- DescribeConfigs


async def describe(broker: MirrorAdminHost, name: str, keys: Sequence[str] | None) -> list[Entry]:
    coordinator = broker.coordinator
    keys = list(keys or ())
    if not name:
        topics = [k.removeprefix(TOPIC_KEY_PREFIX) for k in keys if k.startswith(TOPIC_KEY_PREFIX)]
        if topics:
            return await _topic_rows(broker, topics)
        entries = []
        for d in await coordinator.list_mirrors():
            rows = await coordinator.mirror_partitions(d.name)
            states: dict[str, int] = {}
            for p in rows:
                states[str(p.state)] = states.get(str(p.state), 0) + 1
            summary = {"source": d.source_bootstrap, "topics": list(d.topics), "states": states}
            entries.append(Entry(f"mirror.{d.name}", json.dumps(summary)))
        return entries
    definition = await _existing(broker, name)
    if VALIDATE in keys:
        return await _validate(broker, definition)
    entries = [Entry(BOOTSTRAP, definition.source_bootstrap)]
    entries += [
        Entry(SOURCE_PREFIX + k, _masked(k, v))
        for k, v in sorted(definition.source_configs.items())
    ]
    entries += [
        Entry(TOPICS, json.dumps(list(definition.topics))),
        Entry(PATTERNS, json.dumps(list(definition.patterns))),
        Entry("created.at", str(definition.created_at)),
    ]
    for p in await coordinator.mirror_partitions(name):
        entries.append(Entry(f"partition.{p.topic}.{p.partition}", json.dumps(partition_json(p))))
    return entries


async def _topic_rows(broker: MirrorAdminHost, topics: Sequence[str]) -> list[Entry]:
    found = await broker.coordinator.get_topics(topics)
    by_name = {t.name: t.topic_id for t in found}
    entries = []
    for topic in topics:
        topic_id = by_name.get(topic)
        rows = (
            []
            if topic_id is None
            else await broker.coordinator.mirror_partitions(topic_ids=[topic_id])
        )
        entries.append(
            Entry(TOPIC_KEY_PREFIX + topic, json.dumps([partition_json(p) for p in rows]))
        )
    return entries


async def _validate(broker: MirrorAdminHost, definition: MirrorDefinition) -> list[Entry]:
    manager = broker.mirrors
    await manager.load_mirrors()
    findings = await validate(broker.coordinator, manager.source_for(definition), definition)
    entries = [Entry(f"{VALIDATE}.{i}", json.dumps(f.as_dict())) for i, f in enumerate(findings)]
    ok = not any(f.severity == ERROR for f in findings)
    return [*entries, Entry(f"{VALIDATE}.ok", "true" if ok else "false")]


# ---------------------------------------------------------------- IncrementalAlterConfigs


def _json_list(values: Mapping[str, str], key: str) -> list[str]:
    raw = values.get(key)
    if raw is None:
        return []
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise MirrorAdminError(
            ErrorCode.invalid_config, f"{key}: not a JSON array ({exc})"
        ) from None
    if not isinstance(parsed, list) or not all(isinstance(v, str) for v in parsed):
        raise MirrorAdminError(ErrorCode.invalid_config, f"{key}: expected a JSON array of strings")
    return parsed


def _patterns(values: Mapping[str, str]) -> list[str]:
    patterns = _json_list(values, PATTERNS)
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise MirrorAdminError(
                ErrorCode.invalid_config, f"bad pattern {pattern!r}: {exc}"
            ) from None
    return patterns


async def alter(
    broker: MirrorAdminHost,
    name: str,
    ops: Sequence[tuple[str, int, str | None]],
    validate_only: bool,
) -> str | None:
    """Apply one mirror command; returns a message for the operator (None if none).
    Raises MirrorAdminError."""
    values: dict[str, str] = {}
    for key, op, value in ops:
        if op != 0 or value is None:
            raise MirrorAdminError(
                ErrorCode.invalid_request, f"{key}: only SET with a value is supported"
            )
        values[key] = value
    action = values.get(ACTION)
    if action is None:
        raise MirrorAdminError(ErrorCode.invalid_request, f"{ACTION} is required")
    if validate_only:
        return None
    if action == "create":
        return await _create(broker, name, values)
    definition = await _existing(broker, name)
    if action == "add-topics":
        return await _add_topics(broker, definition, values)
    if action == "remove-topics":
        return await _remove_topics(broker, definition, _json_list(values, TOPICS))
    if action == "delete":
        result = await broker.coordinator.delete_mirror(name)
        if result.error != ErrorCode.none:
            raise MirrorAdminError(result.error, result.message or result.error.name)
        await broker.mirrors.load_mirrors()
        return None
    raise MirrorAdminError(ErrorCode.invalid_request, f"unknown {ACTION} {action!r}")


async def _existing(broker: MirrorAdminHost, name: str) -> MirrorDefinition:
    found = await broker.coordinator.list_mirrors([name])
    if not found:
        raise MirrorAdminError(ErrorCode.resource_not_found, f"no mirror named {name!r}")
    return found[0]


async def _create(broker: MirrorAdminHost, name: str, values: Mapping[str, str]) -> str | None:
    problem = topic_name_error(name)
    if problem:
        raise MirrorAdminError(ErrorCode.invalid_request, f"mirror name: {problem}")
    bootstrap = values.get(BOOTSTRAP, "").strip()
    if not bootstrap:
        raise MirrorAdminError(ErrorCode.invalid_config, f"{BOOTSTRAP} is required")
    configs = {
        k.removeprefix(SOURCE_PREFIX): v
        for k, v in values.items()
        if k.startswith(SOURCE_PREFIX) and k != BOOTSTRAP
    }
    bad = unsupported_settings(configs)
    if bad:
        raise MirrorAdminError(
            ErrorCode.invalid_config, f"unsupported source settings: {', '.join(bad)}"
        )
    definition = MirrorDefinition(name, bootstrap, configs, _topic_names(values), _patterns(values))
    source_topics = await _probe_source(name, bootstrap, configs)
    if source_topics is not None:
        _check_on_source(definition.topics, source_topics)
    result = await broker.coordinator.create_mirror(definition, int(time.time() * 1000))
    if result.error != ErrorCode.none:
        raise MirrorAdminError(result.error, result.message or result.error.name)
    await broker.mirrors.load_mirrors()
    if definition.topics or definition.patterns:
        return await _follow_now(broker, definition, frozenset())
    return None


def _topic_names(values: Mapping[str, str]) -> list[str]:
    """The literal topic names of a command; each must be a legal topic name (a pattern
    belongs in topic.patterns), checked before anything is stored."""
    topics = _json_list(values, TOPICS)
    for topic in topics:
        problem = topic_name_error(topic)
        if problem:
            raise MirrorAdminError(ErrorCode.invalid_topic_exception, f"topic {topic!r}: {problem}")
    return topics


def _check_on_source(topics: Sequence[str], source_topics: set[str]) -> None:
    missing = [t for t in topics if t not in source_topics]
    if missing:
        raise MirrorAdminError(
            ErrorCode.unknown_topic_or_partition,
            "; ".join(f"topic {t!r} does not exist on the source" for t in missing),
        )


async def _probe_source(name: str, bootstrap: str, configs: Mapping[str, str]) -> set[str] | None:
    """The source's topic names, asked of the first source broker that answers within
    PROBE_TIMEOUT_S. None if a broker answered but refused us (authentication, an old
    version): the mirror is saved and `validate` reports why. MirrorAdminError if no broker
    answered at all (a wrong address, nothing listening) or the security settings are
    unusable: a mirror that could never connect is not created."""
    try:
        security = ClientSecurity.from_configs(configs)
        _ = security.ssl_context  # reads the PEM files, here on the destination broker
    except SecurityConfigError as exc:
        raise MirrorAdminError(ErrorCode.invalid_config, f"source settings: {exc}") from None
    client_id = configs.get("client.id") or f"lakelog-mirror-{name}-probe"
    refused: KafkaError | None = None
    unreachable: list[str] = []
    for address in [a.strip() for a in bootstrap.split(",") if a.strip()]:
        try:
            client = await asyncio.wait_for(
                SourceAdmin.connect(address, client_id, PROBE_TIMEOUT_S, security),
                PROBE_TIMEOUT_S,
            )
        except KafkaError as exc:
            refused = exc
            continue
        except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError) as exc:
            unreachable.append(f"{address}: {_reason(exc)}")
            continue
        try:
            async with client:
                return {t.name for t in await client.describe_topics(None)}
        except KafkaError as exc:
            refused = exc
        except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
            unreachable.append(f"{address}: {_reason(exc)}")
    if refused is not None:
        return None
    raise MirrorAdminError(
        ErrorCode.invalid_config,
        f"source {bootstrap} is unreachable from the destination: {'; '.join(unreachable)}",
    )


def _reason(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return f"no answer within {PROBE_TIMEOUT_S:g} s"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc).strip() or type(exc).__name__


async def _follow_now(
    broker: MirrorAdminHost, definition: MirrorDefinition, restart: frozenset[str]
) -> str | None:
    """Follow at once after a change that is already stored: problems are reported in the
    message, never as an error (the command succeeded)."""
    try:
        report = await broker.mirrors.follow(definition, restart)
    except SourceUnavailable as exc:
        return f"saved; the source is unreachable for now, topics follow once it answers ({exc})"
    message = f"mirroring {', '.join(report.followed) or 'no topic yet'}"
    if report.problems:
        message += "; " + "; ".join(report.problems)
    return message


async def _add_topics(
    broker: MirrorAdminHost, definition: MirrorDefinition, values: Mapping[str, str]
) -> str | None:
    topics, patterns = _topic_names(values), _patterns(values)
    if not topics and not patterns:
        raise MirrorAdminError(ErrorCode.invalid_request, "name topics or patterns to add")
    if topics:
        source_topics = await _source_topics(broker, definition)
        if source_topics is not None:
            _check_on_source(topics, source_topics)
    result = await broker.coordinator.alter_mirror(definition.name, topics, patterns)
    if result.error != ErrorCode.none:
        raise MirrorAdminError(result.error, result.message or result.error.name)
    [updated] = await broker.coordinator.list_mirrors([definition.name])
    await broker.mirrors.load_mirrors()
    return await _follow_now(broker, updated, frozenset(topics))


async def _source_topics(broker: MirrorAdminHost, definition: MirrorDefinition) -> set[str] | None:
    """The source's topic names, or None while the source is unreachable (then the topics
    are saved and followed once it answers, as before)."""
    manager = broker.mirrors
    source = manager.source_for(definition)
    try:
        return set(await source.refresh(None))
    except SourceUnavailable:
        return None
    finally:
        if manager.sources.get(definition.name) is not source:
            await source.close()


async def _remove_topics(
    broker: MirrorAdminHost, definition: MirrorDefinition, topics: list[str]
) -> str:
    if not topics:
        raise MirrorAdminError(ErrorCode.invalid_request, "name the topics to fail over")
    manager = broker.mirrors
    await manager.load_mirrors()
    try:
        await asyncio.wait_for(manager.sync_groups(definition, set(topics)), FINAL_SYNC_TIMEOUT_S)
    except (SourceUnavailable, TimeoutError, OSError) as exc:
        log.warning("mirror %s: final group sync before failover skipped: %s", definition.name, exc)
    results = await broker.coordinator.stop_mirror_topics(
        definition.name, topics, int(time.time() * 1000)
    )
    done = await manager.finish_failovers()
    errors = [(t, r) for t, r in zip(topics, results, strict=True) if r.error != ErrorCode.none]
    stopped = ", ".join(f"{p.topic}-{p.partition}@{p.failover_offset}" for p in done)
    if errors:
        raise MirrorAdminError(
            errors[0][1].error,
            "; ".join(r.message or r.error.name for _, r in errors)
            + (f"; failed over {stopped}" if stopped else ""),
        )
    return f"failed over (writable from): {stopped}" if stopped else "nothing to fail over"
