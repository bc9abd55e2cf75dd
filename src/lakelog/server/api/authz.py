"""The checks handlers make, one per kind of resource, all through the broker's authorizer
(Kafka's AuthHelper). Each is a single attribute test when the authorizer is off."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from lakelog.security.acl import CLUSTER_NAME, Operation, ResourceType

if TYPE_CHECKING:
    from lakelog.server.api.context import RequestContext


def peer_host(peer: str) -> str:
    """The client's IP from "ip:port" (IPv6 may be bracketed), as ACL hosts name it."""
    host = peer.rpartition(":")[0] if ":" in peer else peer
    return host.strip("[]")


def enabled(ctx: RequestContext) -> bool:
    return ctx.broker.authorizer.enabled


def allowed(ctx: RequestContext, kind: ResourceType, name: str, operation: Operation) -> bool:
    authorizer = ctx.broker.authorizer
    if not authorizer.enabled:
        return True
    return authorizer.allowed(ctx.principal, peer_host(ctx.peer), kind, name, operation)


def topic_allowed(ctx: RequestContext, name: str, operation: Operation) -> bool:
    return allowed(ctx, ResourceType.TOPIC, name, operation)


def group_allowed(ctx: RequestContext, group_id: str, operation: Operation) -> bool:
    return allowed(ctx, ResourceType.GROUP, group_id, operation)


def cluster_allowed(ctx: RequestContext, operation: Operation) -> bool:
    return allowed(ctx, ResourceType.CLUSTER, CLUSTER_NAME, operation)


def txn_allowed(ctx: RequestContext, transactional_id: str, operation: Operation) -> bool:
    return allowed(ctx, ResourceType.TRANSACTIONAL_ID, transactional_id, operation)


def topics_allowed(ctx: RequestContext, names: Iterable[str], operation: Operation) -> set[str]:
    """The names among `names` the caller may do `operation` on."""
    if not enabled(ctx):
        return set(names)
    return {n for n in names if topic_allowed(ctx, n, operation)}


def may_create_topic(ctx: RequestContext, name: str) -> bool:
    """CREATE on the cluster, or on the topic (Kafka accepts either)."""
    return cluster_allowed(ctx, Operation.CREATE) or topic_allowed(ctx, name, Operation.CREATE)


def may_write_idempotently(ctx: RequestContext) -> bool:
    """IDEMPOTENT_WRITE on the cluster, or, since Kafka 3.0 (KIP-679), WRITE on any topic."""
    if cluster_allowed(ctx, Operation.IDEMPOTENT_WRITE):
        return True
    bindings = ctx.broker.authorizer.index.bindings
    names = {a.resource_name for a in bindings if a.resource_type == ResourceType.TOPIC}
    return any(topic_allowed(ctx, name, Operation.WRITE) for name in (*names, "*"))


def operations(ctx: RequestContext, kind: ResourceType, name: str) -> int:
    """KIP-430 authorized operations of the caller on the resource."""
    return ctx.broker.authorizer.operations(ctx.principal, peer_host(ctx.peer), kind, name)
