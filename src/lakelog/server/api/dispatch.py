"""From a request frame to response buffers: header, version check, handler, encoding."""

from __future__ import annotations

import logging
import time
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from kio.serial.errors import OutOfBoundValue

from lakelog.log.protocol.frames import (
    API_VERSIONS_KEY,
    ApiSchema,
    MalformedRequest,
    RequestHeader,
    api_schema,
    decode_body,
    encode_response,
    encode_response_sliced,
    frame_prefix,
    parse_header,
)
from lakelog.log.protocol.legacy_strings import clip_strings
from lakelog.log.protocol.nulls import wrong_null
from lakelog.log.protocol.sliced import has_long_array
from lakelog.security.principal import ANONYMOUS
from lakelog.server.api.context import RequestContext
from lakelog.server.api.outage import answer_outage, build_error_response
from lakelog.server.api.produce import PRODUCE_KEY
from lakelog.server.api.raw import NoResponse, RawResponse
from lakelog.server.api.registry import HANDLERS, PASSES_AT_START
from lakelog.server.api.unserved import unserved_code, unserved_response
from lakelog.server.cluster.outage import RateLimitedLog
from lakelog.server.connection import Buffers, CloseConnection, Turn
from lakelog.util import metrics
from lakelog.util.errors import ErrorCode
from lakelog.util.pacing import Pacer

if TYPE_CHECKING:
    from lakelog.server.api.services import BrokerServices

log = logging.getLogger(__name__)
_clipped = RateLimitedLog(log)
_unserved_log = RateLimitedLog(log)


class Dispatcher:
    def __init__(self, broker: BrokerServices) -> None:
        self._broker = broker

    def __call__(
        self, frame: memoryview, peer: str, turn: Turn, principal: str = ANONYMOUS
    ) -> Coroutine[Any, Any, Buffers | None]:
        # The epoch is taken now, as the frame is read: a request read before this broker
        # was fenced must not commit under the epoch it takes afterwards.
        return self._guarded(frame, peer, turn, self._broker.broker_epoch, principal)

    async def _guarded(
        self, frame: memoryview, peer: str, turn: Turn, epoch: int, principal: str
    ) -> Buffers | None:
        try:
            return await self._serve(frame, peer, turn, epoch, principal)
        finally:
            turn.release()

    async def _serve(
        self, frame: memoryview, peer: str, turn: Turn, epoch: int, principal: str
    ) -> Buffers | None:
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
            from lakelog.server.api.api_versions import sasl_enabled, unsupported_version_response

            sasl = sasl_enabled(self._broker)
            return [unsupported_version_response(header.correlation_id, sasl)]
        served = spec is not None and spec.min_version <= header.api_version <= spec.max_version
        schema = api_schema(header.api_key, header.api_version)
        if schema is None:
            metrics.request_errors_total.labels(api=str(header.api_key)).inc()
            raise CloseConnection(
                f"unsupported API key {header.api_key} version {header.api_version}"
            )
        raw = spec is not None and served and spec.raw
        api_name = spec.handler.__name__ if spec is not None else f"api_{header.api_key}"
        started = time.perf_counter()
        try:
            if (
                header.api_key != PRODUCE_KEY
                and len(frame) > self._broker.settings.non_produce_request_max_bytes
            ):
                raise MalformedRequest(
                    f"{len(frame)} bytes, over non_produce_request_max_bytes"
                    f" ({self._broker.settings.non_produce_request_max_bytes})"
                )
            request = frame[header.body_offset :] if raw else decode_body(schema, frame, header)
            field = None if raw else wrong_null(request, header.api_key, header.api_version)
            if field is not None:
                raise MalformedRequest(f"non-nullable field {field} is null")
        except MalformedRequest as exc:
            metrics.request_errors_total.labels(api=api_name).inc()
            return self._invalid_request(header, schema, api_name, peer, exc)
        if spec is None or not served:
            return self._unserved(header, schema, api_name, peer, request)
        ctx = RequestContext(
            header.api_key,
            header.api_version,
            header.correlation_id,
            header.client_id,
            self._broker,
            peer,
            turn,
            epoch,
            principal,
        )
        await turn.wait()
        if header.api_key in PASSES_AT_START:
            turn.release()
        try:
            response = await spec.handler(ctx, request)
        except Exception as exc:
            # A database or object-store outage gets the API's retriable error, not a
            # closed connection (lakelog.server.api.outage); anything else is still a failure.
            response = answer_outage(ctx, request, exc)
            if response is None:
                raise
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
        if has_long_array(response):
            return [
                await _encode_sliced(
                    schema, header.correlation_id, response, header_flexible, api_name
                )
            ]
        return [_encode(schema, header.correlation_id, response, header_flexible, api_name)]

    def _unserved(
        self, header: RequestHeader, schema: ApiSchema, api_name: str, peer: str, request: Any
    ) -> Buffers:
        """A well-formed request of an API or version this broker does not offer: its
        response with a typed error (`lakelog.server.api.unserved`), or a closed
        connection where the response has nowhere to carry one."""
        metrics.request_errors_total.labels(api=api_name).inc()
        response = unserved_response(
            header.api_key, header.api_version, request, self._broker.cluster_id
        )
        if response is None:
            raise CloseConnection(
                f"unsupported API key {header.api_key} version {header.api_version}"
            )
        _unserved_log.warning(
            "answering API %d v%d from %s with %s: not served",
            header.api_key,
            header.api_version,
            peer,
            unserved_code(header.api_key).name.upper(),
        )
        header_flexible = schema.flexible and header.api_key != API_VERSIONS_KEY
        return [_encode(schema, header.correlation_id, response, header_flexible, api_name)]

    def _invalid_request(
        self,
        header: RequestHeader,
        schema: ApiSchema,
        api_name: str,
        peer: str,
        exc: MalformedRequest,
    ) -> Buffers:
        """A request whose header parsed but whose body did not: the API's response with
        INVALID_REQUEST as its top-level error, so the client learns why (the frame size
        kept the connection in step), or a closed connection where the response has no
        top-level error to carry it. Kafka closes the connection on every body it cannot
        parse ("Error getting request for apiKey"); with nothing of the request to echo,
        per-entity errors are not an option. One log line either way."""
        response = build_error_response(
            header.api_key,
            header.api_version,
            ErrorCode.invalid_request,
            str(exc),
            self._broker.cluster_id,
        )
        if response is None:
            raise CloseConnection(f"{api_name} v{header.api_version}: {exc}") from exc
        log.warning(
            "answering %s v%d from %s with INVALID_REQUEST: %s",
            api_name,
            header.api_version,
            peer,
            exc,
        )
        header_flexible = schema.flexible and header.api_key != API_VERSIONS_KEY
        return [_encode(schema, header.correlation_id, response, header_flexible, api_name)]


async def _encode_sliced(
    schema: ApiSchema, correlation_id: int, response: Any, header_flexible: bool, api_name: str
) -> bytes:
    """`_encode` for a response with a long top-level array, yielding to the loop every few
    milliseconds: encoding 30,000 DescribeGroups entries in one piece held everyone else up
    for 150 ms (`lakelog.log.protocol.sliced`)."""
    try:
        return await encode_response_sliced(
            schema,
            correlation_id,
            response,
            header_flexible=header_flexible,
            pause=Pacer().tick,
        )
    except OutOfBoundValue as exc:
        _clipped.warning("%s: clipping strings of a response: %s", api_name, exc)
    return await encode_response_sliced(
        schema,
        correlation_id,
        clip_strings(response),
        header_flexible=header_flexible,
        pause=Pacer().tick,
    )


def _encode(
    schema: ApiSchema, correlation_id: int, response: Any, header_flexible: bool, api_name: str
) -> bytes:
    """The response frame; strings too long for the version's encoding (an error message
    quoting a 32 KB name) are clipped rather than dropping the connection."""
    try:
        return encode_response(schema, correlation_id, response, header_flexible=header_flexible)
    except OutOfBoundValue as exc:
        _clipped.warning("%s: clipping strings of a response: %s", api_name, exc)
    return encode_response(
        schema, correlation_id, clip_strings(response), header_flexible=header_flexible
    )
