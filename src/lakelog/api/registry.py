"""The table of Kafka APIs this broker serves: key, version range, handler.

Handlers are registered with `@handles(ApiKey, min_version, max_version)`; ApiVersions
advertises exactly this table, so only what has a handler is ever advertised.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from lakelog.api.context import RequestContext

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


def handles(
    api_key: int, min_version: int, max_version: int, *, raw: bool = False
) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        HANDLERS[int(api_key)] = ApiSpec(int(api_key), min_version, max_version, fn, raw)
        return fn

    return register
