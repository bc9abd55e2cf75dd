"""DescribeCluster: the live brokers, the cluster id and, on request, the cluster's
authorized operations."""

from __future__ import annotations

import datetime
from typing import Any

from lakelog.security.acl import CLUSTER_NAME, ResourceType
from lakelog.server.api import authz
from lakelog.server.api.admin import BROKER_ENDPOINTS, OPERATIONS_NOT_REQUESTED
from lakelog.server.api.context import RequestContext, build
from lakelog.server.api.registry import handles
from lakelog.util.errors import ErrorCode

_ZERO = datetime.timedelta(0)


@handles(60, 0, 2)
async def describe_cluster(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    endpoint_type = getattr(request, "endpoint_type", BROKER_ENDPOINTS)
    common = {
        "throttle_time": _ZERO,
        "cluster_id": ctx.broker.cluster_id,
        "endpoint_type": endpoint_type,
    }
    if endpoint_type != BROKER_ENDPOINTS:
        return build(
            m.DescribeClusterResponse,
            error_code=ErrorCode.unsupported_endpoint_type,
            error_message="The request was sent to an endpoint of the wrong type.",
            controller_id=-1,
            brokers=(),
            cluster_authorized_operations=OPERATIONS_NOT_REQUESTED,
            **common,
        )
    live = await ctx.broker.live_brokers()
    brokers = tuple(
        build(
            m.DescribeClusterBroker,
            broker_id=b.broker_id,
            host=b.host,
            port=b.port,
            rack=b.rack,
            is_fenced=False,
        )
        for b in sorted(live, key=lambda b: b.broker_id)
    )
    operations = (
        authz.operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME)
        if request.include_cluster_authorized_operations
        else OPERATIONS_NOT_REQUESTED
    )
    return build(
        m.DescribeClusterResponse,
        error_code=ErrorCode.none,
        error_message=None,
        controller_id=min((b.broker_id for b in live), default=ctx.broker.broker_id),
        brokers=brokers,
        cluster_authorized_operations=operations,
        **common,
    )
