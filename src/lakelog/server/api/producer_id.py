"""InitProducerId: a new producer id (or a KIP-360 epoch bump) for idempotent producers;
for transactional ids the batch coordinator fences the previous producer and aborts its
open transaction."""

from __future__ import annotations

import datetime
import time
from typing import Any

from lakelog.coordinator.txn_types import InitTxnProducerRequest
from lakelog.security.acl import Operation
from lakelog.server.api import authz
from lakelog.server.api.context import RequestContext, build
from lakelog.server.api.registry import handles
from lakelog.server.txn.wire_errors import for_version
from lakelog.util.errors import ErrorCode

INIT_PRODUCER_ID_KEY = 22
MAX_EPOCH = 32767


@handles(INIT_PRODUCER_ID_KEY, 0, 5)
async def init_producer_id(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    refusal = _refusal(ctx, request.transactional_id)
    if refusal is not None:
        return build(
            m.InitProducerIdResponse,
            throttle_time=datetime.timedelta(0),
            error_code=for_version(refusal, INIT_PRODUCER_ID_KEY, ctx.api_version),
            producer_id=-1,
            producer_epoch=-1,
        )
    if request.transactional_id is not None:
        error, new_id, new_epoch = await _init_transactional(ctx, request)
        return build(
            m.InitProducerIdResponse,
            throttle_time=datetime.timedelta(0),
            error_code=for_version(error, INIT_PRODUCER_ID_KEY, ctx.api_version),
            producer_id=new_id,
            producer_epoch=new_epoch,
        )
    producer_id = getattr(request, "producer_id", -1)
    epoch = getattr(request, "producer_epoch", -1)
    if producer_id >= 0 and 0 <= epoch < MAX_EPOCH - 1:
        # KIP-360: an idempotent producer bumps its epoch to reset its sequences.
        new_id, new_epoch = producer_id, epoch + 1
    else:
        new_id, new_epoch = await ctx.broker.coordinator.allocate_producer_id(), 0
    return build(
        m.InitProducerIdResponse,
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        producer_id=new_id,
        producer_epoch=new_epoch,
    )


def _refusal(ctx: RequestContext, transactional_id: str | None) -> ErrorCode | None:
    """Kafka's checks: WRITE on the transactional id, or for an idempotent producer
    IDEMPOTENT_WRITE on the cluster (or WRITE on some topic, KIP-679)."""
    if not authz.enabled(ctx):
        return None
    if transactional_id is not None:
        if authz.txn_allowed(ctx, transactional_id, Operation.WRITE):
            return None
        return ErrorCode.transactional_id_authorization_failed
    if authz.may_write_idempotently(ctx):
        return None
    return ErrorCode.cluster_authorization_failed


async def _init_transactional(ctx: RequestContext, request: Any) -> tuple[ErrorCode, int, int]:
    if not request.transactional_id:
        return ErrorCode.invalid_request, -1, -1
    timeout_ms = request.transaction_timeout // datetime.timedelta(milliseconds=1)
    if not 0 < timeout_ms <= ctx.broker.settings.transaction_max_timeout_ms:
        return ErrorCode.invalid_transaction_timeout, -1, -1
    result = await ctx.broker.coordinator.init_transactional_producer(
        InitTxnProducerRequest(
            request.transactional_id,
            timeout_ms,
            int(getattr(request, "producer_id", -1)),
            int(getattr(request, "producer_epoch", -1)),
        ),
        int(time.time() * 1000),
    )
    if result.error != ErrorCode.none:
        return result.error, -1, -1
    return ErrorCode.none, result.producer_id, result.producer_epoch
