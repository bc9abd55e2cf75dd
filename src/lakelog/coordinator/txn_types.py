"""The transaction part of the batch coordinator contract (KIP-98 on a leaderless log).

Transaction state lives in the batch coordinator, next to the batches, so that the commit
barrier is one database rule: a transactional batch commits only while its transaction is
ongoing with that producer epoch and has registered the batch's partition. `end_txn`
writes one marker row per registered partition (each takes one offset, like a control
batch) in the same database transaction that ends the transaction, so a late batch is either
before the marker or refused, never after it.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from lakelog.coordinator.group_types import OffsetCommit
from lakelog.coordinator.log_types import PartitionKey
from lakelog.util.errors import ErrorCode

NO_CONTROL = -1
"""`BatchCoordinate.control_type` of a data batch."""
CONTROL_ABORT = 0
CONTROL_COMMIT = 1
"""Control record types, as in Kafka's control record key."""

MAX_PRODUCER_EPOCH = 32766
"""Past this the producer gets a new id (Kafka keeps Short.MAX_VALUE for bumps)."""


class TxnState(enum.StrEnum):
    """Kafka's transaction states that persist here. Prepare* never persist: `end_txn`
    completes in one database transaction."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"


@dataclass(frozen=True, slots=True)
class InitTxnProducerRequest:
    transactional_id: str
    transaction_timeout_ms: int
    producer_id: int = -1
    """KIP-360: the client's current producer id and epoch, or -1 / -1."""
    producer_epoch: int = -1


@dataclass(frozen=True, slots=True)
class InitTxnProducerResult:
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True, slots=True)
class TxnRef:
    """Who is asking: a transactional id with the producer id and epoch it was given."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


@dataclass(frozen=True, slots=True)
class TxnOffsetCommitRequest:
    txn: TxnRef
    group_id: str
    offsets: Sequence[OffsetCommit]


@dataclass(frozen=True, slots=True)
class TransactionInfo:
    """What DescribeTransactions and ListTransactions report."""

    transactional_id: str
    state: TxnState
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int
    """When the current transaction began (its first AddPartitions/AddOffsets); -1 if none."""
    partitions: Sequence[PartitionKey] = ()
    groups: Sequence[str] = ()


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """An aborted transaction's range in one partition, as Fetch reports it."""

    producer_id: int
    first_offset: int


@dataclass(frozen=True, slots=True)
class ProducerStateInfo:
    """One active producer of a partition, for DescribeProducers."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    current_txn_start_offset: int
    """-1 when the producer has no ongoing transaction in the partition."""


@dataclass(frozen=True, slots=True)
class DescribeProducersResult:
    error: ErrorCode
    producers: Sequence[ProducerStateInfo] = ()
