"""InitProducerId for idempotent producers (transactional ids come with transactions)."""

from __future__ import annotations

import datetime
from typing import Any

from lakelog.api.context import RequestContext, build
from lakelog.api.registry import handles
from lakelog.errors import ErrorCode

INIT_PRODUCER_ID_KEY = 22
MAX_EPOCH = 32767


@handles(INIT_PRODUCER_ID_KEY, 0, 5)
async def init_producer_id(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    if request.transactional_id is not None:
        return build(
            m.InitProducerIdResponse,
            throttle_time=datetime.timedelta(0),
            error_code=ErrorCode.transactional_id_authorization_failed,
            producer_id=-1,
            producer_epoch=-1,
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
