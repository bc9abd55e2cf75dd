"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs.

Topic configs live in the coordinator (only the ones a topic set); everything else is the
broker default, reported the way Kafka reports it so admin tools show the same picture.
Broker configs are static here (set by flags, env or lakelog.toml), so they are described
read-only; altering them is answered key by key (`broker_configs`).

This module holds the three handlers and what they share (access checks, the per-resource
describe and alter steps). The tables are in `lakelog.log.config_specs`, the entries
DescribeConfigs reports in `config_entries`, the alter plans in `config_plans`.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

from lakelog.coordinator.topic_types import AlterTopicConfigsRequest
from lakelog.groups import group_configs
from lakelog.log.config_specs import (
    BROKER_RESOURCE,
    GROUP_RESOURCE,
    MIRROR_RESOURCE,
    TOPIC_RESOURCE,
    AlterOp,
    ConfigEntry,
    ConfigSource,
    ConfigType,
)
from lakelog.mirror import admin as mirror_admin
from lakelog.security.acl import Operation
from lakelog.server.api import authz
from lakelog.server.api.broker_configs import broker_alter_problem
from lakelog.server.api.config_entries import (
    RECORDED_REPLICATION_FACTOR,
    broker_entries,
    cluster_default_entries,
    group_entries,
    recorded_replication_factor,
    topic_defaults,
    topic_entries,
)
from lakelog.server.api.config_plans import ConfigProblem, plan_incremental, plan_replace
from lakelog.server.api.context import RequestContext, build
from lakelog.server.api.registry import handles
from lakelog.server.cluster.dynamic_broker_configs import (
    CLUSTER_DEFAULT,
    DYNAMIC_KEYS,
    DynamicConfigError,
)
from lakelog.server.cluster.kafka_dynamic_keys import is_dynamic, lookup, scope_problems
from lakelog.server.internal_topics import internal_topic, is_internal
from lakelog.tables import table_config
from lakelog.util.errors import ErrorCode
from lakelog.util.pacing import paced


def _check_group_name(name: str) -> None:
    if not name:
        raise ConfigProblem(ErrorCode.invalid_request, "Group name must not be empty")


def _check_broker_name(name: str, broker_id: int) -> None:
    if name and name != str(broker_id):
        raise ConfigProblem(
            ErrorCode.invalid_request,
            f"Unexpected broker id, expected {broker_id} or empty string, but received {name}",
        )


def _refuse_broker_alter(name: str, ops: Sequence[tuple[str, int]], broker_id: int) -> None:
    """Keys not applied at runtime: sets are refused key by key (see
    `broker_configs.broker_alter_problem`), resets are no-ops."""
    _check_broker_name(name, broker_id)
    problem = broker_alter_problem(ops)
    if problem:
        error, why = problem
        raise ConfigProblem(
            error,
            f"Invalid config value for resource ConfigResource(type=BROKER, name='{name}'): {why}",
        )


def _unsupported_type(resource_type: int) -> ConfigProblem:
    return ConfigProblem(ErrorCode.invalid_request, f"Unsupported resource type {resource_type}")


def _unknown_topic(name: str) -> ConfigProblem:
    return ConfigProblem(ErrorCode.unknown_topic_or_partition, f"Topic '{name}' does not exist.")


def _check_duplicates(resources: Sequence[Any]) -> set[tuple[int, str]]:
    seen: set[tuple[int, str]] = set()
    duplicates: set[tuple[int, str]] = set()
    for r in resources:
        key = (int(r.resource_type), r.resource_name)
        (duplicates if key in seen else seen).add(key)
    return duplicates


# ---------------------------------------------------------------- DescribeConfigs


def _describe_entry(m: Any, entry: ConfigEntry, include_synonyms: bool) -> Any:
    synonyms = (
        tuple(
            build(m.DescribeConfigsSynonym, name=s.name, value=s.value, source=int(s.source))
            for s in entry.synonyms
        )
        if include_synonyms
        else ()
    )
    return build(
        m.DescribeConfigsResourceResult,
        name=entry.name,
        value=entry.value,
        read_only=entry.read_only,
        config_source=int(entry.source),
        is_sensitive=entry.sensitive,
        synonyms=synonyms,
        config_type=int(entry.config_type),
        documentation=None,
    )


def _check_access(ctx: RequestContext, resource: Any, operation: Operation) -> None:
    """Kafka's check for a config resource: the operation (DESCRIBE_CONFIGS or
    ALTER_CONFIGS) on the topic, else on the cluster (brokers, loggers, and here mirrors)."""
    if not authz.enabled(ctx):
        return
    if resource.resource_type == TOPIC_RESOURCE:
        if not authz.topic_allowed(ctx, resource.resource_name, operation):
            raise ConfigProblem(ErrorCode.topic_authorization_failed, "Authorization failed.")
    elif resource.resource_type == GROUP_RESOURCE:
        if not authz.group_allowed(ctx, resource.resource_name, operation):
            raise ConfigProblem(ErrorCode.group_authorization_failed, "Authorization failed.")
    elif not authz.cluster_allowed(ctx, operation):
        raise ConfigProblem(ErrorCode.cluster_authorization_failed, "Authorization failed.")


async def _entries_for(ctx: RequestContext, resource: Any) -> list[ConfigEntry]:
    settings = ctx.broker.settings
    _check_access(ctx, resource, Operation.DESCRIBE_CONFIGS)
    if resource.resource_type == TOPIC_RESOURCE:
        topics = await ctx.broker.coordinator.get_topics([resource.resource_name])
        internal = internal_topic(resource.resource_name)
        if internal is not None:
            topics = [internal]
        if not topics:
            raise _unknown_topic(resource.resource_name)
        dynamic = ctx.broker.dynamic_configs
        entries = topic_entries(topics[0].configs, dynamic.static, dynamic.cluster, dynamic.own)
        if RECORDED_REPLICATION_FACTOR in (resource.configuration_keys or ()):
            entries.append(recorded_replication_factor(topics[0].replication_factor))
        return entries
    if resource.resource_type == BROKER_RESOURCE:
        _check_broker_name(resource.resource_name, ctx.broker.broker_id)
        dynamic = ctx.broker.dynamic_configs
        if not resource.resource_name:
            return cluster_default_entries(dynamic.cluster)
        # from the static settings: the dynamic layers are laid over them entry by entry
        return broker_entries(dynamic.static, ctx.broker.broker_epoch, dynamic.cluster, dynamic.own)
    if resource.resource_type == GROUP_RESOURCE:
        _check_group_name(resource.resource_name)
        own = await ctx.broker.group_configs.overrides(resource.resource_name)
        return group_entries(own, settings)
    if resource.resource_type == MIRROR_RESOURCE:
        return await _mirror_entries(ctx, resource)
    raise _unsupported_type(resource.resource_type)


async def _mirror_entries(ctx: RequestContext, resource: Any) -> list[ConfigEntry]:
    """Mirrors as a config resource (KIP-1279 admin, see lakelog.mirror.admin)."""
    try:
        found = await mirror_admin.describe(
            ctx.broker, resource.resource_name, resource.configuration_keys
        )
    except mirror_admin.MirrorAdminError as exc:
        raise ConfigProblem(exc.error, exc.message) from None
    source = ConfigSource.DYNAMIC_BROKER_CONFIG
    return [ConfigEntry(e.name, e.value, source, True, ConfigType.STRING, ()) for e in found]


@handles(32, 1, 4)
async def describe_configs(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    results = []
    async for resource in paced(request.resources):
        error: ErrorCode = ErrorCode.none
        message: str | None = None
        configs: tuple[Any, ...] = ()
        try:
            entries = await _entries_for(ctx, resource)
        except ConfigProblem as problem:
            error, message = problem.error, problem.message
        else:
            keys = resource.configuration_keys
            if resource.resource_type == MIRROR_RESOURCE:
                keys = None  # the keys were commands (validate, topic:<T>), not a filter
            configs = tuple(
                _describe_entry(m, e, request.include_synonyms)
                for e in entries
                if not keys or e.name in keys
            )
        results.append(
            build(
                m.DescribeConfigsResult,
                error_code=error,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=configs,
            )
        )
    return build(
        m.DescribeConfigsResponse, throttle_time=datetime.timedelta(0), results=tuple(results)
    )


# ---------------------------------------------------------------- AlterConfigs


def _alter_result(m: Any, resource: Any, error: ErrorCode, message: str | None) -> Any:
    return build(
        m.AlterConfigsResourceResponse,
        error_code=error,
        error_message=message,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
    )


async def _apply(
    ctx: RequestContext, request: AlterTopicConfigsRequest, validate_only: bool
) -> tuple[ErrorCode, str | None]:
    [result] = await ctx.broker.coordinator.alter_topic_configs([request], validate_only)
    if not validate_only and result.error == ErrorCode.none:
        ctx.broker.topics.invalidate()
    if result.error == ErrorCode.unknown_topic_or_partition and not result.message:
        return result.error, _unknown_topic(request.name).message
    return result.error, result.message


async def _alter_one(
    ctx: RequestContext, resource: Any, validate_only: bool, incremental: bool
) -> tuple[ErrorCode, str | None]:
    _check_access(ctx, resource, Operation.ALTER_CONFIGS)
    if resource.resource_type == BROKER_RESOURCE:
        await _alter_broker(ctx, resource, validate_only, incremental)
        return ErrorCode.none, None
    if resource.resource_type == MIRROR_RESOURCE and incremental:
        ops = [(c.name, int(c.config_operation), c.value) for c in resource.configs]
        try:
            message = await mirror_admin.alter(
                ctx.broker, resource.resource_name, ops, validate_only
            )
        except mirror_admin.MirrorAdminError as exc:
            raise ConfigProblem(exc.error, exc.message) from None
        return ErrorCode.none, message
    if resource.resource_type == GROUP_RESOURCE:
        await _alter_group(ctx, resource, validate_only, incremental)
        return ErrorCode.none, None
    if resource.resource_type != TOPIC_RESOURCE:
        raise _unsupported_type(resource.resource_type)
    name = resource.resource_name
    if is_internal(name):
        # Its compaction and partitioning are the group coordinator's, not settings.
        raise ConfigProblem(
            ErrorCode.policy_violation, f"The configs of the internal topic {name} are fixed."
        )
    if not incremental:
        configs = plan_replace([(c.name, c.value) for c in resource.configs])
        current = await ctx.broker.coordinator.get_topics([name])
        if current:
            _check_table_change(current[0].configs, configs)
        return await _apply(
            ctx, AlterTopicConfigsRequest(name, configs, replace=True), validate_only
        )
    topics = await ctx.broker.coordinator.get_topics([name])
    if not topics:
        raise _unknown_topic(name)
    plan = plan_incremental(
        topics[0].configs,
        topic_defaults(ctx.broker.settings),
        [(c.name, c.config_operation, c.value) for c in resource.configs],
    )
    own = topics[0].configs
    after = {k: v for k, v in own.items() if k not in plan.delete_configs} | plan.set_configs
    _check_table_change(own, after)
    return await _apply(
        ctx,
        AlterTopicConfigsRequest(name, plan.set_configs, plan.delete_configs),
        validate_only,
    )


def _check_table_change(before: dict[str, str], after: dict[str, str]) -> None:
    """A table topic's configs together (mode, schemas, evolution): INVALID_CONFIG."""
    problem = table_config.check_change(before, after)
    if problem:
        raise ConfigProblem(ErrorCode.invalid_config, problem)


def _refuse_list_ops(ops: Sequence[tuple[str, int, str | None]]) -> None:
    """APPEND/SUBTRACT on a config that is not a list: Kafka's INVALID_CONFIG."""
    for name, op, _ in ops:
        if op in (AlterOp.APPEND, AlterOp.SUBTRACT):
            verb = "append" if op == AlterOp.APPEND else "subtract"
            raise ConfigProblem(
                ErrorCode.invalid_config,
                f"Config value {verb} is not allowed for config key: {name}",
            )


def _broker_list_configs(names: Sequence[str]) -> frozenset[str]:
    """The names among these that are LIST broker configs (APPEND/SUBTRACT allowed)."""
    keys = (lookup(n) for n in names)
    return frozenset(k.name for k in keys if k is not None and k.type == ConfigType.LIST)


async def _alter_broker(
    ctx: RequestContext, resource: Any, validate_only: bool, incremental: bool
) -> None:
    """Every key Kafka can change at runtime is checked as Kafka checks it and stored (this
    broker, or every broker when the resource name is empty); `DYNAMIC_KEYS` are applied
    too. Any other key is refused, and the whole resource with it (nothing is applied
    unless everything can be)."""
    broker_id = ctx.broker.broker_id
    name = resource.resource_name
    ops = [
        (c.name, int(getattr(c, "config_operation", AlterOp.SET)), c.value)
        for c in resource.configs
    ]

    def storable(key: str) -> bool:
        return key in DYNAMIC_KEYS or is_dynamic(key)

    _refuse_broker_alter(name, [(n, op) for n, op, _ in ops if not storable(n)], broker_id)
    mine = [op for op in ops if storable(op[0])]
    problems = scope_problems([n for n, op, _ in mine if op != AlterOp.DELETE], not name)
    if problems:
        raise ConfigProblem(
            ErrorCode.invalid_request,
            f"Invalid config value for resource ConfigResource(type=BROKER, name='{name}'): "
            + ". ".join(problems),
        )
    dynamic = ctx.broker.dynamic_configs
    if incremental:
        current = dynamic.cluster if not name else dynamic.own
        plan = plan_incremental(
            current,
            {},
            mine,
            validate=False,
            list_configs=_broker_list_configs([n for n, _, _ in mine]),
        )
        set_configs, delete = plan.set_configs, plan.delete_configs
    else:
        set_configs = plan_replace([(n, v) for n, _, v in mine], validate=False)
        delete = []
    if not incremental or set_configs or delete:
        try:
            await dynamic.alter(
                name or CLUSTER_DEFAULT, set_configs, delete, not incremental, validate_only
            )
        except DynamicConfigError as exc:
            # Kafka's answer too: its broker turns a failed ConfigDef check into
            # INVALID_REQUEST (ConfigAdminManager.validateBrokerConfigChange, KAFKA-13609)
            raise ConfigProblem(ErrorCode.invalid_request, str(exc)) from None


async def _alter_group(
    ctx: RequestContext, resource: Any, validate_only: bool, incremental: bool
) -> None:
    """Group configs: SET and DELETE (no list configs, so no APPEND/SUBTRACT); the legacy
    AlterConfigs replaces the group's whole set of overrides."""
    group_id = resource.resource_name
    _check_group_name(group_id)
    store = ctx.broker.group_configs
    if incremental:
        ops = [(c.name, int(c.config_operation), c.value) for c in resource.configs]
        _refuse_list_ops(ops)
        plan = plan_incremental({}, {}, ops, validate=False)
        set_configs, delete = plan.set_configs, plan.delete_configs
    else:
        set_configs = plan_replace([(c.name, c.value) for c in resource.configs], validate=False)
        delete = [n for n in await store.overrides(group_id) if n not in set_configs]
    try:
        await store.alter(group_id, set_configs, delete, validate_only)
    except group_configs.GroupConfigError as exc:
        raise ConfigProblem(ErrorCode.invalid_config, str(exc)) from None


async def _alter(ctx: RequestContext, request: Any, incremental: bool) -> Any:
    m = ctx.schema
    duplicates = _check_duplicates(request.resources)
    responses = []
    for resource in request.resources:
        if (int(resource.resource_type), resource.resource_name) in duplicates:
            error, message = ErrorCode.invalid_request, "Duplicate resource in request."
        else:
            try:
                error, message = await _alter_one(ctx, resource, request.validate_only, incremental)
            except ConfigProblem as problem:
                error, message = problem.error, problem.message
        responses.append(_alter_result(m, resource, error, message))
    response_cls = m.IncrementalAlterConfigsResponse if incremental else m.AlterConfigsResponse
    return build(response_cls, throttle_time=datetime.timedelta(0), responses=tuple(responses))


@handles(33, 0, 2)
async def alter_configs(ctx: RequestContext, request: Any) -> Any:
    return await _alter(ctx, request, incremental=False)


@handles(44, 0, 1)
async def incremental_alter_configs(ctx: RequestContext, request: Any) -> Any:
    return await _alter(ctx, request, incremental=True)
