"""The transaction coordinator's decisions as pure functions, shared by every batch
coordinator so SQLite and PostgreSQL fence, bump and end transactions the same way
(Kafka's TransactionCoordinator rules, with Prepare* states collapsed because an end is one
database transaction here)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lakelog.coordinator.log_types import CommitBatch, PartitionKey
from lakelog.coordinator.txn_types import (
    MAX_PRODUCER_EPOCH,
    DescribeProducersResult,
    InitTxnProducerRequest,
    ProducerStateInfo,
    TransactionInfo,
    TxnRef,
    TxnState,
)
from lakelog.util.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class TxnRow:
    """A `transactions` row."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    state: TxnState
    timeout_ms: int
    start_time: int

    @classmethod
    def from_values(cls, values: Sequence[Any]) -> TxnRow:
        """The row from the values of a `SELECT {TXN_COLUMNS}`."""
        tid, pid, epoch, last, state, timeout, start = values
        return cls(
            str(tid), int(pid), int(epoch), int(last), TxnState(state), int(timeout), int(start)
        )

    def info(self, partitions: list[PartitionKey], groups: list[str]) -> TransactionInfo:
        """DescribeTransactions' (and ListTransactions') view of the row."""
        return TransactionInfo(
            transactional_id=self.transactional_id,
            state=self.state,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            timeout_ms=self.timeout_ms,
            start_time_ms=self.start_time,
            partitions=partitions,
            groups=groups,
        )


TXN_COLUMNS = (
    "transactional_id, producer_id, producer_epoch, last_producer_epoch, state, timeout_ms,"
    " start_time"
)
"""The `transactions` columns `TxnRow.from_values` reads, in order."""


def producer_states(
    rows: Sequence[Sequence[Any]], starts: dict[int, int]
) -> DescribeProducersResult:
    """DescribeProducers' answer for one partition from its producers' newest remembered
    batches (producer id, epoch, last sequence, batch max timestamp or None) and the first
    offsets of their open transactions by producer id."""
    return DescribeProducersResult(
        ErrorCode.none,
        [
            ProducerStateInfo(pid, epoch, last_seq, -1 if ts is None else ts, starts.get(pid, -1))
            for pid, epoch, last_seq, ts in rows
        ],
    )


@dataclass(frozen=True, slots=True)
class InitPlan:
    """What InitProducerId does to a known transactional id."""

    error: ErrorCode
    abort_ongoing: bool = False
    new_producer_id: bool = False
    """The epoch is exhausted: allocate a new producer id, epoch 0."""
    producer_epoch: int = -1
    last_producer_epoch: int = -1
    unchanged: bool = False
    """A retry of a bump that already happened: answer the current id and epoch."""


def plan_init(row: TxnRow, request: InitTxnProducerRequest) -> InitPlan:
    """KIP-360: without an expected id/epoch the caller is a new instance that fences every
    older one (no way back for them: last epoch -1). With the current id/epoch it is the
    same producer bumping its epoch; with the epoch before that, a retry of that bump."""
    last = -1
    if request.producer_id >= 0:
        if request.producer_id != row.producer_id:
            return InitPlan(ErrorCode.producer_fenced)
        if (
            request.producer_epoch == row.last_producer_epoch
            and row.last_producer_epoch >= 0
            and row.state != TxnState.ONGOING
        ):
            return InitPlan(ErrorCode.none, unchanged=True)
        if request.producer_epoch != row.producer_epoch:
            return InitPlan(ErrorCode.producer_fenced)
        last = row.producer_epoch
    epoch = row.producer_epoch + 1
    if epoch > MAX_PRODUCER_EPOCH:
        return InitPlan(
            ErrorCode.none,
            abort_ongoing=row.state == TxnState.ONGOING,
            new_producer_id=True,
            producer_epoch=0,
        )
    return InitPlan(
        ErrorCode.none,
        abort_ongoing=row.state == TxnState.ONGOING,
        producer_epoch=epoch,
        last_producer_epoch=last,
    )


def check_producer(row: TxnRow | None, txn: TxnRef) -> ErrorCode:
    """The check every transactional request starts with."""
    if row is None or row.producer_id != txn.producer_id:
        return ErrorCode.invalid_producer_id_mapping
    if row.producer_epoch != txn.producer_epoch:
        return ErrorCode.producer_fenced
    return ErrorCode.none


def check_end(row: TxnRow | None, txn: TxnRef, commit: bool) -> tuple[ErrorCode, bool]:
    """(error, whether to write the end). A retried end that already happened is NONE
    with nothing to write."""
    error = check_producer(row, txn)
    if error != ErrorCode.none:
        return error, False
    assert row is not None
    if row.state == TxnState.ONGOING:
        return ErrorCode.none, True
    done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
    if row.state == done:
        return ErrorCode.none, False
    return ErrorCode.invalid_txn_state, False


@dataclass(slots=True)
class OngoingTxn:
    """What the commit barrier needs of a producer's transaction."""

    transactional_id: str
    producer_epoch: int
    state: TxnState
    first_offsets: dict[tuple[int, int], int] = field(default_factory=dict)
    """(topic row id, partition) -> first offset (-1 before the first batch)."""


def barrier(txn: OngoingTxn | None, where: tuple[int, int], batch: CommitBatch) -> ErrorCode:
    """May this transactional batch commit now? It must belong to the ongoing transaction
    of its producer, at its epoch, in a partition the transaction added."""
    if txn is None:
        return ErrorCode.invalid_txn_state
    if batch.producer_epoch < txn.producer_epoch:
        return ErrorCode.invalid_producer_epoch
    if (
        batch.producer_epoch != txn.producer_epoch
        or txn.state != TxnState.ONGOING
        or where not in txn.first_offsets
    ):
        return ErrorCode.invalid_txn_state
    return ErrorCode.none


def expired(row: TxnRow, now_ms: int) -> bool:
    return row.state == TxnState.ONGOING and row.start_time + row.timeout_ms < now_ms
