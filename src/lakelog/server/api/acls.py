"""CreateAcls, DescribeAcls, DeleteAcls (KIP-140, KIP-290 prefixed patterns): the
cluster's ACLs, stored in the coordinator and enforced by every broker's authorizer.

As Kafka: SECURITY_DISABLED when no authorizer is on, CLUSTER_AUTHORIZATION_FAILED
without ALTER (create, delete) or DESCRIBE (describe) on the cluster, INVALID_REQUEST
for an ACL or filter Kafka refuses (the others of the request still proceed)."""

from __future__ import annotations

import datetime
import logging
from collections import defaultdict
from typing import Any

from lakelog.security.acl import (
    AclBinding,
    AclFilter,
    InvalidAcl,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    check_binding,
    check_filter,
    filter_matches,
)
from lakelog.server.api import authz
from lakelog.server.api.context import RequestContext, build
from lakelog.server.api.registry import handles
from lakelog.util.errors import ErrorCode

log = logging.getLogger(__name__)

DESCRIBE_ACLS_KEY = 29
CREATE_ACLS_KEY = 30
DELETE_ACLS_KEY = 31
NO_AUTHORIZER = "No Authorizer is configured."
NO_CLUSTER_ACCESS = "Cluster authorization failed."
NO_TIME = datetime.timedelta(0)


def _enum(cls: Any, value: int) -> Any:
    """The enum member for a wire code; codes Kafka does not know are UNKNOWN."""
    try:
        return cls(int(value))
    except ValueError:
        return cls.UNKNOWN


def _filter(f: Any, version: int) -> AclFilter:
    return AclFilter(
        _enum(ResourceType, f.resource_type_filter),
        f.resource_name_filter,
        _enum(PatternType, getattr(f, "pattern_type_filter", PatternType.LITERAL)),
        f.principal_filter,
        f.host_filter,
        _enum(Operation, f.operation),
        _enum(Permission, f.permission_type),
    )


@handles(CREATE_ACLS_KEY, 1, 3)
async def create_acls(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    creations = request.creations or ()

    def answer(codes: list[tuple[ErrorCode, str | None]]) -> Any:
        results = tuple(
            build(m.AclCreationResult, error_code=code, error_message=message)
            for code, message in codes
        )
        return build(m.CreateAclsResponse, throttle_time=NO_TIME, results=results)

    if not authz.enabled(ctx):
        return answer([(ErrorCode.security_disabled, NO_AUTHORIZER)] * len(creations))
    if not authz.cluster_allowed(ctx, Operation.ALTER):
        refused = (ErrorCode.cluster_authorization_failed, NO_CLUSTER_ACCESS)
        return answer([refused] * len(creations))
    codes: list[tuple[ErrorCode, str | None]] = []
    valid: list[tuple[int, AclBinding]] = []
    for i, c in enumerate(creations):
        binding = AclBinding(
            _enum(ResourceType, c.resource_type),
            c.resource_name,
            _enum(PatternType, c.resource_pattern_type),
            c.principal,
            c.host,
            _enum(Operation, c.operation),
            _enum(Permission, c.permission_type),
        )
        try:
            check_binding(binding)
        except InvalidAcl as exc:
            codes.append((ErrorCode.invalid_request, str(exc)))
            log.info("refusing an ACL from %s (%s): %s", ctx.peer, ctx.principal, exc)
            continue
        codes.append((ErrorCode.none, None))
        valid.append((i, binding))
    authorizer = ctx.broker.authorizer
    stored = await ctx.broker.coordinator.create_acls([b for _, b in valid], authorizer.limit)
    for (i, binding), ok in zip(valid, stored, strict=True):
        if not ok:
            codes[i] = (
                ErrorCode.policy_violation,
                f"the cluster holds its maximum of {authorizer.limit} ACLs (acl_max_bindings)",
            )
        else:
            log.info("ACL added by %s: %s", ctx.principal, binding)
    if valid:
        await authorizer.refresh_after_change()  # this broker enforces it at once
    return answer(codes)


@handles(DESCRIBE_ACLS_KEY, 1, 3)
async def describe_acls(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema

    def answer(code: ErrorCode, message: str | None, resources: tuple[Any, ...] = ()) -> Any:
        return build(
            m.DescribeAclsResponse,
            throttle_time=NO_TIME,
            error_code=code,
            error_message=message,
            resources=resources,
        )

    if not authz.enabled(ctx):
        return answer(ErrorCode.security_disabled, NO_AUTHORIZER)
    if not authz.cluster_allowed(ctx, Operation.DESCRIBE):
        return answer(ErrorCode.cluster_authorization_failed, NO_CLUSTER_ACCESS)
    wanted = _filter(request, ctx.api_version)
    try:
        check_filter(wanted)
    except InvalidAcl as exc:
        return answer(ErrorCode.invalid_request, str(exc))
    _, stored = await ctx.broker.coordinator.load_acls(ctx.broker.authorizer.limit)
    by_resource: dict[tuple[int, str, int], list[AclBinding]] = defaultdict(list)
    for b in stored:
        if filter_matches(wanted, b):
            by_resource[(b.resource_type, b.resource_name, b.pattern_type)].append(b)
    resources = tuple(
        build(
            m.DescribeAclsResource,
            resource_type=kind,
            resource_name=name,
            pattern_type=pattern,
            acls=tuple(
                build(
                    m.AclDescription,
                    principal=b.principal,
                    host=b.host,
                    operation=int(b.operation),
                    permission_type=int(b.permission),
                )
                for b in bindings
            ),
        )
        for (kind, name, pattern), bindings in sorted(by_resource.items())
    )
    return answer(ErrorCode.none, None, resources)


@handles(DELETE_ACLS_KEY, 1, 3)
async def delete_acls(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    filters = request.filters or ()

    def result(code: ErrorCode, message: str | None, matched: list[AclBinding]) -> Any:
        return build(
            m.DeleteAclsFilterResult,
            error_code=code,
            error_message=message,
            matching_acls=tuple(
                build(
                    m.DeleteAclsMatchingAcl,
                    error_code=ErrorCode.none,
                    error_message=None,
                    resource_type=int(b.resource_type),
                    resource_name=b.resource_name,
                    pattern_type=int(b.pattern_type),
                    principal=b.principal,
                    host=b.host,
                    operation=int(b.operation),
                    permission_type=int(b.permission),
                )
                for b in matched
            ),
        )

    def answer(results: list[Any]) -> Any:
        return build(m.DeleteAclsResponse, throttle_time=NO_TIME, filter_results=tuple(results))

    if not authz.enabled(ctx):
        return answer([result(ErrorCode.security_disabled, NO_AUTHORIZER, [])] * len(filters))
    if not authz.cluster_allowed(ctx, Operation.ALTER):
        refused = result(ErrorCode.cluster_authorization_failed, NO_CLUSTER_ACCESS, [])
        return answer([refused] * len(filters))
    outcomes: list[Any] = []
    valid: list[tuple[int, AclFilter]] = []
    for i, f in enumerate(filters):
        wanted = _filter(f, ctx.api_version)
        try:
            check_filter(wanted)
        except InvalidAcl as exc:
            outcomes.append(result(ErrorCode.invalid_request, str(exc), []))
            continue
        outcomes.append(None)
        valid.append((i, wanted))
    authorizer = ctx.broker.authorizer
    matched = await ctx.broker.coordinator.delete_acls([f for _, f in valid], authorizer.limit)
    for (i, _), found in zip(valid, matched, strict=True):
        outcomes[i] = result(ErrorCode.none, None, found)
        for binding in found:
            log.info("ACL deleted by %s: %s", ctx.principal, binding)
    if valid:
        await authorizer.refresh_after_change()
    return answer(outcomes)
