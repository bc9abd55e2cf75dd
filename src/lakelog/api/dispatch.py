"""From a request frame to response buffers: header, version check, handler, encoding."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from lakelog import metrics
from lakelog.api.context import RequestContext
from lakelog.api.raw import NoResponse, RawResponse
from lakelog.api.registry import HANDLERS
from lakelog.net.server import Buffers, CloseConnection
from lakelog.protocol.frames import (
    API_VERSIONS_KEY,
    MalformedRequest,
    api_schema,
    decode_body,
    encode_response,
    frame_prefix,
    parse_header,
)

if TYPE_CHECKING:
    from lakelog.broker import Broker

log = logging.getLogger(__name__)


class Dispatcher:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    async def __call__(self, frame: memoryview, peer: str) -> Buffers | None:
        try:
            header = parse_header(frame)
        except MalformedRequest as exc:
            metrics.request_errors_total.labels(api="frame").inc()
            raise CloseConnection(str(exc)) from exc
        spec = HANDLERS.get(header.api_key)
        if (
            header.api_key == API_VERSIONS_KEY
            and spec is not None
            and (header.api_version > spec.max_version)
        ):
            # KIP-511: a client newer than us learns our versions from a v0 answer.
            from lakelog.api.api_versions import sasl_enabled, unsupported_version_response

            sasl = sasl_enabled(self._broker)
            return [unsupported_version_response(header.correlation_id, sasl)]
        if spec is None or not spec.min_version <= header.api_version <= spec.max_version:
            metrics.request_errors_total.labels(api=str(header.api_key)).inc()
            raise CloseConnection(
                f"unsupported API key {header.api_key} version {header.api_version}"
            )
        schema = api_schema(header.api_key, header.api_version)
        if schema is None:
            raise CloseConnection(f"no schema for API {header.api_key} v{header.api_version}")
        api_name = spec.handler.__name__
        started = time.perf_counter()
        try:
            request = (
                frame[header.body_offset :] if spec.raw else decode_body(schema, frame, header)
            )
        except MalformedRequest as exc:
            metrics.request_errors_total.labels(api=api_name).inc()
            raise CloseConnection(str(exc)) from exc
        ctx = RequestContext(
            header.api_key,
            header.api_version,
            header.correlation_id,
            header.client_id,
            self._broker,
            peer,
        )
        response = await spec.handler(ctx, request)
        metrics.requests_total.labels(api=api_name, version=str(header.api_version)).inc()
        metrics.request_latency_seconds.labels(api=api_name).observe(time.perf_counter() - started)
        if isinstance(response, NoResponse):
            return None
        header_flexible = schema.flexible and header.api_key != API_VERSIONS_KEY
        if isinstance(response, RawResponse):
            return [
                frame_prefix(header.correlation_id, response.size, header_flexible),
                *response.parts,
            ]
        return [
            encode_response(
                schema, header.correlation_id, response, header_flexible=header_flexible
            )
        ]
