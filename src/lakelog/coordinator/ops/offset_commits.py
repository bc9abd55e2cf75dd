"""Offset commits written together: the OffsetCommit and TxnOffsetCommit requests that
queued while the previous write was in flight, in one transaction (the broker's
`groups.offset_commits.OffsetCommitQueue` gathers them).

Each request keeps its own answer: a TxnOffsetCommit is checked against its transaction
as if it ran alone (the checks read rows no request of the batch writes), and a partition
committed twice in the batch keeps the later offset, the arrival order being the order of
`items`. Locks are taken as every transaction does: transactions (by id), then staged
offsets, then committed offsets (as `txn.end_txn` does), each in key order."""

from __future__ import annotations

from collections.abc import Sequence

from lakelog.coordinator import txn_rules
from lakelog.coordinator.engine import Session
from lakelog.coordinator.group_types import GroupOffsetCommit, OffsetCommit
from lakelog.coordinator.ops.groups import write_offsets
from lakelog.coordinator.ops.txn import stage_txn_offsets
from lakelog.coordinator.txn_rules import TXN_COLUMNS, TxnRow
from lakelog.coordinator.txn_types import TxnOffsetCommitRequest, TxnState
from lakelog.util.errors import ErrorCode

OffsetCommitItem = GroupOffsetCommit | TxnOffsetCommitRequest


async def commit_offset_batch(
    s: Session, items: Sequence[OffsetCommitItem], now_ms: int
) -> list[list[ErrorCode]]:
    """One answer per item: an error per offset, in the item's order."""
    answers: list[list[ErrorCode]] = [[ErrorCode.none] * len(item.offsets) for item in items]
    txn_items = [
        (i, item) for i, item in enumerate(items) if isinstance(item, TxnOffsetCommitRequest)
    ]
    if txn_items:
        errors = await _check_txn_commits(s, [item for _, item in txn_items])
        staged: list[tuple[str, str, OffsetCommit]] = []
        for (i, item), error in zip(txn_items, errors, strict=True):
            if error != ErrorCode.none:
                answers[i] = [error] * len(item.offsets)
                continue
            staged.extend((item.txn.transactional_id, item.group_id, o) for o in item.offsets)
        await stage_txn_offsets(s, staged)
    await write_offsets(
        s,
        [
            (item.group_id, o)
            for item in items
            if isinstance(item, GroupOffsetCommit)
            for o in item.offsets
        ],
        now_ms,
    )
    return answers


async def _check_txn_commits(
    s: Session, requests: Sequence[TxnOffsetCommitRequest]
) -> list[ErrorCode]:
    """Each request's producer check and whether its group was added to its ongoing
    transaction, with every transaction row locked (in id order) first: one round trip."""
    tids = sorted({r.txn.transactional_id for r in requests})
    locked = [
        await s.send(
            f"SELECT {TXN_COLUMNS} FROM transactions WHERE transactional_id = ?"
            + s.dialect.for_update,
            (tid,),
        )
        for tid in tids
    ]
    pairs = sorted({(r.txn.transactional_id, r.group_id) for r in requests})
    keys, params = s.dialect.keyset("k", (("t", "text"), ("g", "text")), pairs)
    added_rows = await s.send(
        "SELECT transactional_id, group_id FROM txn_groups"
        f" WHERE (transactional_id, group_id) IN (SELECT k.t, k.g FROM {keys})",
        params,
    )
    rows: dict[str, TxnRow] = {}
    for pending in locked:
        for values in await pending.fetchall():
            row = TxnRow.from_values(values)
            rows[row.transactional_id] = row
    added = {(tid, group_id) for tid, group_id in await added_rows.fetchall()}
    errors = []
    for r in requests:
        row = rows.get(r.txn.transactional_id)
        error = txn_rules.check_producer(row, r.txn)
        if error == ErrorCode.none and (
            row is None
            or row.state != TxnState.ONGOING
            or (r.txn.transactional_id, r.group_id) not in added
        ):
            error = ErrorCode.invalid_txn_state
        errors.append(error)
    return errors
