"""Which error code each transaction API version may carry.

PRODUCER_FENCED (KIP-588) reaches clients only from the request version that introduced it;
older versions get INVALID_PRODUCER_EPOCH, which those clients treat as fencing too (Kafka's
handlers translate the same way). Produce and TxnOffsetCommit never carry PRODUCER_FENCED:
Kafka's log layer answers a stale epoch there with INVALID_PRODUCER_EPOCH.
"""

from __future__ import annotations

from lakelog.util.errors import ErrorCode

PRODUCE = 0
INIT_PRODUCER_ID = 22
ADD_PARTITIONS_TO_TXN = 24
ADD_OFFSETS_TO_TXN = 25
END_TXN = 26
TXN_OFFSET_COMMIT = 28

FIRST_VERSION_WITH_PRODUCER_FENCED: dict[int, int] = {
    INIT_PRODUCER_ID: 4,
    ADD_PARTITIONS_TO_TXN: 2,
    ADD_OFFSETS_TO_TXN: 2,
    END_TXN: 2,
}

FENCING_ERRORS = frozenset(
    {ErrorCode.invalid_producer_epoch, ErrorCode.producer_fenced, ErrorCode.invalid_txn_state}
)
"""What the commit barrier answers a transactional batch that is late or from a zombie."""


def for_version(error: ErrorCode, api_key: int, api_version: int) -> ErrorCode:
    """`error` as this API version can express it."""
    if error != ErrorCode.producer_fenced:
        return error
    first = FIRST_VERSION_WITH_PRODUCER_FENCED.get(api_key)
    if first is None or api_version < first:
        return ErrorCode.invalid_producer_epoch
    return error
