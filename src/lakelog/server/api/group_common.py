"""What the classic group APIs (`groups`, `group_offsets`, `group_admin`) share: their
API keys and the checks every group request passes first."""

from __future__ import annotations

import datetime

from lakelog.security.acl import Operation
from lakelog.server.api import authz
from lakelog.server.api.context import RequestContext
from lakelog.util.errors import ErrorCode

OFFSET_COMMIT, OFFSET_FETCH, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 8, 9, 11, 12, 13, 14
DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS, OFFSET_DELETE = 15, 16, 42, 47
NO_THROTTLE = datetime.timedelta(0)
UNKNOWN_AUTHORIZED_OPERATIONS = -2147483648


async def group_error(
    ctx: RequestContext, group_id: str, operation: Operation = Operation.READ
) -> ErrorCode | None:
    """The error every group request gets before reaching the group, if any: first, as
    Kafka, whether the caller may do `operation` on the group."""
    if not authz.group_allowed(ctx, group_id, operation):
        return ErrorCode.group_authorization_failed
    if not group_id:
        return ErrorCode.invalid_group_id
    if not await ctx.broker.groups.owns(group_id):
        return ErrorCode.not_coordinator
    return None


async def has_consumer_group(ctx: RequestContext, group_id: str) -> bool:
    """The id is a consumer group with members: classic requests go to `groups.mixed`."""
    group = await ctx.broker.groups.consumer.get(group_id)
    return group is not None and not group.is_empty


def client_host(ctx: RequestContext) -> str:
    return "/" + ctx.peer.rsplit(":", 1)[0] if ctx.peer else ""
