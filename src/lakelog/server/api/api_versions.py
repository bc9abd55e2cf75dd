"""ApiVersions: advertise exactly the handler table, with the KIP-511 fallback."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from kio.schema.api_versions.v0.response import ApiVersion as KeyV0
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ResponseV0
from kio.static.primitive import i16

from lakelog.log.protocol.frames import api_schema, encode_response
from lakelog.server.api.context import RequestContext, build
from lakelog.server.api.registry import HANDLERS, handles
from lakelog.server.sasl import SASL_VERSIONS
from lakelog.util.errors import ErrorCode

if TYPE_CHECKING:
    from lakelog.server.api.services import Listener


def _keys(cls: type, sasl: bool = False) -> tuple[Any, ...]:
    ranges = {spec.api_key: (spec.min_version, spec.max_version) for spec in HANDLERS.values()}
    if sasl:  # answered by the listener's SASL gate, advertised only where it runs
        ranges |= SASL_VERSIONS
    return tuple(
        build(cls, api_key=i16(key), min_version=i16(low), max_version=i16(high))
        for key, (low, high) in sorted(ranges.items())
    )


def sasl_enabled(broker: Listener) -> bool:
    return getattr(broker.server, "sasl_users", None) is not None


def unsupported_version_response(correlation_id: int, sasl: bool = False) -> bytes:
    schema = api_schema(18, 0)
    assert schema is not None
    response = ResponseV0(error_code=ErrorCode.unsupported_version, api_keys=_keys(KeyV0, sasl))
    return encode_response(schema, correlation_id, response, header_flexible=False)


@handles(18, 0, 4)
async def api_versions(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    return build(
        m.ApiVersionsResponse,
        error_code=ErrorCode.none,
        api_keys=_keys(m.ApiVersion, sasl_enabled(ctx.broker)),
        throttle_time=datetime.timedelta(0),
        supported_features=(),
        finalized_features_epoch=-1,
        finalized_features=(),
        zk_migration_ready=False,
    )
