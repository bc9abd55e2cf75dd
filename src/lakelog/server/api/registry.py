"""The table of Kafka APIs this broker serves: key, version range, handler.

Handlers are registered with `@handles(ApiKey, min_version, max_version)`; ApiVersions
advertises exactly this table, so only what has a handler is ever advertised.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from lakelog.server.api.context import RequestContext

Handler = Callable[[RequestContext, Any], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class ApiSpec:
    api_key: int
    min_version: int
    max_version: int
    handler: Handler
    raw: bool = False
    """True: the handler gets the raw request body (memoryview) instead of a kio object."""


HANDLERS: dict[int, ApiSpec] = {}

PASSES_AT_START = frozenset(
    {
        1,  # Fetch: a long poll must not hold up the connection's next Produce
        2,  # ListOffsets
        3,  # Metadata
        9,  # OffsetFetch
        10,  # FindCoordinator
        11,  # JoinGroup: waits for the rebalance
        12,  # Heartbeat
        14,  # SyncGroup: waits for the leader's assignment
        15,  # DescribeGroups
        16,  # ListGroups
        18,  # ApiVersions
        23,  # OffsetForLeaderEpoch
        32,  # DescribeConfigs
        60,  # DescribeCluster
        61,  # DescribeProducers
        65,  # DescribeTransactions
        66,  # ListTransactions
    }
)
"""APIs that change nothing a later request of the connection depends on, or that wait
long for other clients: they still start after the request before them has passed its
point of order (so they see its effect) but do not hold up the ones after them. Every
other API passes when it is done (Produce earlier: once its batches are in the WAL
buffer), so writes take effect in the order the client sent them."""


def handles(
    api_key: int, min_version: int, max_version: int, *, raw: bool = False
) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        HANDLERS[int(api_key)] = ApiSpec(int(api_key), min_version, max_version, fn, raw)
        return fn

    return register
