"""The broker's side of share-partition state: a cached copy of each state it serves,
changed under a per-group lock and written back to the batch coordinator with
compare-and-set before any answer leaves.

Leaderless: any broker may serve any share partition, several at once. Each keeps the
stored state epoch with its copy; a write over a changed epoch is refused, the copy is
dropped and the work is done again over the stored state, under its row lock (waiting
for the other writer, so it cannot lose twice). So records are never handed out twice at
once, and a broker that restarts or takes a partition over starts from the
stored state."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TypeVar
from uuid import UUID

from lakelog.coordinator.log_types import (
    BatchCoordinate,
    FindBatchesRequest,
    ListOffsetsRequest,
    PartitionKey,
)
from lakelog.coordinator.share_types import SharePartitionRow, SharePartitionWrite
from lakelog.coordinator.topic_types import TopicInfo
from lakelog.coordinator.txn_types import AbortedTxn
from lakelog.groups.group_configs import GroupConfig, parse_duration
from lakelog.groups.share.state import (
    ACQUIRED,
    ARCHIVED,
    AVAILABLE,
    Acquired,
    Limits,
    SharePartitionState,
)
from lakelog.util import metrics
from lakelog.util.errors import ErrorCode
from lakelog.util.keyed_locks import KeyedLocks

if TYPE_CHECKING:
    from lakelog.coordinator.interface import BatchCoordinator

T = TypeVar("T")
MAX_CACHED = 10_000
"""Share-partition states kept in memory per broker (least recently used go first)."""
CAS_ATTEMPTS = 4
"""Rounds of one change: a refused compare-and-set is redone under the row lock, which
cannot be refused; only a state deleted meanwhile (DeleteShareGroupOffsets) goes round
again."""
FIND_MAX_BYTES = 1 << 20
"""Batches looked at per partition per acquisition (the ShareFetch's max_bytes caps it)."""


def now_ms() -> int:
    return int(time.time() * 1000)


def limits_of(config: GroupConfig) -> Limits:
    return Limits(
        lock_ms=config.share_record_lock_duration_ms,
        delivery_limit=config.share_delivery_count_limit,
        max_locks=config.share_partition_max_record_locks,
        renew=config.share_renew_acknowledge_enable,
    )


@dataclass(frozen=True, slots=True)
class ShareKey:
    topic_id: str
    partition: int


@dataclass(slots=True)
class _Entry:
    epoch: int
    state: SharePartitionState


@dataclass(slots=True)
class FetchPlan:
    """What one partition of a ShareFetch needs besides its state: the batches from the
    first deliverable offset and which of their offsets are never handed out."""

    topic: TopicInfo
    partition: int
    window: tuple[int, int] = (0, 0)
    batches: Sequence[BatchCoordinate] = ()
    skip: list[tuple[int, int]] = field(default_factory=list)
    error: ErrorCode = ErrorCode.none
    log_start: int = -1
    """Set when the log starts above the share-partition start (retention, DeleteRecords)."""


AckBatches = Sequence[tuple[int, int, Sequence[int]]]


@dataclass(slots=True)
class FetchOutcome:
    error: ErrorCode = ErrorCode.none
    ack_error: ErrorCode = ErrorCode.none
    acquired: list[Acquired] = field(default_factory=list)
    batches: list[BatchCoordinate] = field(default_factory=list)


def skipped_offsets(
    batches: Sequence[BatchCoordinate], aborted: Sequence[AbortedTxn], read_committed: bool
) -> list[tuple[int, int]]:
    """Offset ranges a share consumer must never get: transaction markers always, and,
    read_committed, the batches of aborted transactions (from each one's first offset to
    its producer's next marker)."""
    starts: dict[int, list[int]] = {}
    for a in sorted(aborted, key=lambda a: a.first_offset):
        starts.setdefault(a.producer_id, []).append(a.first_offset)
    out: list[tuple[int, int]] = []
    for b in batches:
        if b.control_type >= 0:
            out.append((b.base_offset, b.last_offset))
            pending = starts.get(b.producer_id)
            if pending and pending[0] <= b.base_offset:
                pending.pop(0)
            continue
        pending = starts.get(b.producer_id)
        if read_committed and b.is_transactional and pending and pending[0] <= b.base_offset:
            out.append((b.base_offset, b.last_offset))
    return out


class SharePartitionsHost(Protocol):
    """What share-partition state uses of the broker (the Broker is one)."""

    @property
    def coordinator(self) -> BatchCoordinator: ...


class SharePartitions:
    def __init__(self, broker: SharePartitionsHost) -> None:
        self._broker = broker
        self._cache: OrderedDict[tuple[str, ShareKey], _Entry] = OrderedDict()
        self._locks = KeyedLocks()

    def forget(self, group_id: str) -> None:
        """Drop cached copies (after the group or its offsets were deleted or altered)."""
        for key in [k for k in self._cache if k[0] == group_id]:
            del self._cache[key]

    # ------------------------------------------------------------ load and store

    async def _initial_start(self, key: ShareKey, config: GroupConfig) -> int:
        coordinator = self._broker.coordinator
        pk = PartitionKey(_uuid(key.topic_id), key.partition)
        info = (await coordinator.log_info([pk]))[0]
        reset = config.share_auto_offset_reset
        if reset == "earliest":
            return max(info.log_start_offset, 0)
        if reset.startswith("by_duration:"):
            duration = parse_duration(reset.split(":", 1)[1])
            if duration is not None:
                since = now_ms() - int(duration.total_seconds() * 1000)
                found = await coordinator.list_offsets(
                    [ListOffsetsRequest(pk.topic_id, pk.partition, since)]
                )
                if found[0].error == ErrorCode.none and found[0].offset >= 0:
                    return found[0].offset
        return max(info.high_watermark, 0)

    async def _load(
        self, group_id: str, keys: Sequence[ShareKey], config: GroupConfig
    ) -> dict[ShareKey, _Entry]:
        out: dict[ShareKey, _Entry] = {}
        missing = []
        for key in keys:
            entry = self._cache.get((group_id, key))
            if entry is None:
                missing.append(key)
            else:
                self._cache.move_to_end((group_id, key))
                out[key] = entry
        if missing:
            rows = await self._broker.coordinator.load_share_partitions(
                group_id, [(k.topic_id, k.partition) for k in missing]
            )
            for key, row in zip(missing, rows, strict=True):
                if row is None:
                    entry = _Entry(0, SharePartitionState(await self._initial_start(key, config)))
                else:
                    entry = _Entry(
                        row.state_epoch, SharePartitionState.loads(row.start_offset, row.state)
                    )
                out[key] = entry
        return out

    async def _store(self, group_id: str, changed: Mapping[ShareKey, _Entry]) -> set[ShareKey]:
        """Write the changed states in one coordinator transaction; returns the keys whose
        write was refused (their copies are dropped)."""
        if not changed:
            return set()
        keys = list(changed)
        writes = [
            SharePartitionWrite(
                group_id,
                k.topic_id,
                k.partition,
                changed[k].epoch,
                changed[k].state.start,
                changed[k].state.dumps(),
            )
            for k in keys
        ]
        applied = await self._broker.coordinator.store_share_partitions(writes)
        refused = set()
        for key, ok in zip(keys, applied, strict=True):
            if ok:
                _observe(group_id, key, changed[key].state)
                changed[key].epoch += 1
                self._cache[(group_id, key)] = changed[key]
                self._cache.move_to_end((group_id, key))
            else:
                refused.add(key)
                self._cache.pop((group_id, key), None)
        while len(self._cache) > MAX_CACHED:
            self._cache.popitem(last=False)
        return refused

    async def update(
        self,
        group_id: str,
        keys: Sequence[ShareKey],
        config: GroupConfig,
        change: Callable[[ShareKey, SharePartitionState], T],
    ) -> dict[ShareKey, T]:
        """Apply `change` to each key's state and store them all with one write.

        The first try works on the cached copy and stores it with a compare-and-set (no
        read when the copy is current). A key whose write is refused (another broker wrote
        it first) is done again under its row lock, which waits for other writers instead
        of racing them, so a busy partition served by many brokers cannot starve one.

        A cached copy that `change` left untouched (nothing to acquire, an acknowledgement
        refused) may be stale: another broker may have written since. It is done again
        under the lock too, so a stale copy never answers "nothing" or "not yours" in
        place of the truth."""
        results: dict[ShareKey, T] = {}
        todo = list(dict.fromkeys(keys))
        async with self._locks.hold(group_id):
            for _ in range(CAS_ATTEMPTS):
                if not todo:
                    break
                cached = {k for k in todo if (group_id, k) in self._cache}
                entries = await self._load(group_id, todo, config)
                try:
                    for key in todo:
                        results[key] = change(key, entries[key].state)
                    dirty = {
                        k: entries[k]
                        for k in todo
                        if entries[k].state.dirty or not entries[k].epoch
                    }
                    refused = await self._store(group_id, dirty)
                    for entry in dirty.values():
                        entry.state.dirty = False
                except BaseException:
                    for key in todo:
                        self._cache.pop((group_id, key), None)
                    raise
                again = [k for k in todo if k in refused or (k in cached and k not in dirty)]
                for key in again:
                    results.pop(key, None)
                # Keys with no stored state (deleted meanwhile) go round again: loaded
                # fresh, their initial state is inserted with a compare-and-set.
                todo = await self._update_locked(group_id, again, change, results)
        return results

    async def _update_locked(
        self,
        group_id: str,
        keys: Sequence[ShareKey],
        change: Callable[[ShareKey, SharePartitionState], T],
        results: dict[ShareKey, T],
    ) -> list[ShareKey]:
        """`change` over the stored states under their row locks; returns the keys with no
        stored state (nothing done for them)."""
        if not keys:
            return []
        states: dict[ShareKey, SharePartitionState] = {}
        done: dict[ShareKey, T] = {}

        def apply(row: SharePartitionRow) -> tuple[int, str] | None:
            key = ShareKey(row.topic_id, row.partition)
            state = SharePartitionState.loads(row.start_offset, row.state)
            done[key] = change(key, state)
            states[key] = state
            return (state.start, state.dumps()) if state.dirty else None

        for key in keys:
            self._cache.pop((group_id, key), None)
        rows = await self._broker.coordinator.modify_share_partitions(
            group_id, [(k.topic_id, k.partition) for k in keys], apply
        )
        missing = []
        for key, row in zip(keys, rows, strict=True):
            if row is None:
                missing.append(key)
                continue
            state = states[key]
            if state.dirty:
                _observe(group_id, key, state)
                state.dirty = False
            results[key] = done[key]
            self._cache[(group_id, key)] = _Entry(row.state_epoch, state)
            self._cache.move_to_end((group_id, key))
        while len(self._cache) > MAX_CACHED:
            self._cache.popitem(last=False)
        return missing

    # ------------------------------------------------------------ ShareFetch

    async def plan(
        self,
        group_id: str,
        wanted: Sequence[tuple[TopicInfo, int]],
        config: GroupConfig,
        max_bytes: int,
    ) -> dict[ShareKey, FetchPlan]:
        """Find the batches each partition would hand out next."""
        keys = [ShareKey(str(t.topic_id), p) for t, p in wanted]
        limits = limits_of(config)
        now = now_ms()
        async with self._locks.hold(group_id):
            entries = await self._load(group_id, keys, config)
            firsts = {}
            for key in keys:
                state = entries[key].state
                state.expire(now, limits)
                firsts[key] = state.first_deliverable()
        read_committed = config.share_isolation_level == "read_committed"
        finds = [
            FindBatchesRequest(
                t.topic_id, p, firsts[k], min(max_bytes, FIND_MAX_BYTES), read_committed
            )
            for (t, p), k in zip(wanted, keys, strict=True)
        ]
        found = await self._broker.coordinator.find_batches(finds)
        plans: dict[ShareKey, FetchPlan] = {}
        for (topic, p), key, result in zip(wanted, keys, found, strict=True):
            plan = FetchPlan(topic, p)
            plans[key] = plan
            if result.error == ErrorCode.offset_out_of_range:
                # The share start fell below the log start: move it up and try next time.
                plan.log_start = result.log_start_offset
                continue
            if result.error != ErrorCode.none:
                plan.error = result.error
                continue
            limit = result.last_stable_offset if read_committed else result.high_watermark
            lag = max(0, limit - entries[key].state.start)
            metrics.share_partition_records.labels(
                group_id, key.topic_id, key.partition, "lag"
            ).set(lag)
            batches = [b for b in result.batches if b.base_offset < limit]
            if not batches:
                plan.window = (firsts[key], firsts[key])
                continue
            plan.batches = batches
            plan.window = (batches[0].base_offset, min(limit, batches[-1].last_offset + 1))
            plan.skip = skipped_offsets(batches, result.aborted, read_committed)
        return plans

    async def acquire(
        self,
        group_id: str,
        member_id: str,
        plans: Mapping[ShareKey, FetchPlan],
        config: GroupConfig,
        max_records: int,
        acks: Mapping[ShareKey, AckBatches],
    ) -> dict[ShareKey, FetchOutcome]:
        """Apply the piggy-backed acknowledgements, then lock records for the member: one
        coordinator write for the whole request."""
        limits = limits_of(config)
        now = now_ms()

        def take(key: ShareKey, state: SharePartitionState) -> FetchOutcome:
            ack_error = ErrorCode.none
            if key in acks:
                ack_error = state.acknowledge(member_id, acks[key], now, limits)
            plan = plans.get(key)
            if plan is None:
                return FetchOutcome(ack_error=ack_error)
            if plan.error != ErrorCode.none:
                return FetchOutcome(plan.error, ack_error)
            if plan.log_start > state.start:
                state.move_start(plan.log_start)
            if max_records <= 0:
                return FetchOutcome(ack_error=ack_error)
            # Whole producer batches, as Kafka: the cap is checked where a batch starts.
            starts = {b.base_offset for b in plan.batches} or None
            acquired = state.acquire(
                member_id, now, limits, max_records, plan.window, plan.skip, starts
            )
            return FetchOutcome(
                ack_error=ack_error, acquired=acquired, batches=_covering(plan.batches, acquired)
            )

        keys = [k for k, p in plans.items() if p.error == ErrorCode.none]
        keys += [k for k in acks if k not in plans]
        outcomes = await self.update(group_id, keys, config, take)
        for key in acks:
            if key not in outcomes:  # every try lost a compare-and-set race: nothing applied
                outcomes[key] = FetchOutcome(ack_error=ErrorCode.fenced_state_epoch)
        for key, plan in plans.items():
            if plan.error != ErrorCode.none:
                outcomes[key] = FetchOutcome(plan.error)
            outcomes.setdefault(key, FetchOutcome())
        return outcomes


def _observe(group_id: str, key: ShareKey, state: SharePartitionState) -> None:
    """Gauges of the state just stored (and the delivery-limit archives it counted)."""
    labels = (group_id, key.topic_id, key.partition)
    counts = {ACQUIRED: 0, AVAILABLE: 0, ARCHIVED: 0}
    for record in state.records.values():
        if record.state in counts:
            counts[record.state] += 1
    gauge = metrics.share_partition_records
    gauge.labels(*labels, "in_flight").set(state.in_flight())
    gauge.labels(*labels, "acquired").set(counts[ACQUIRED])
    gauge.labels(*labels, "available").set(counts[AVAILABLE])
    gauge.labels(*labels, "archived").set(counts[ARCHIVED])
    if state.archived_at_limit:
        metrics.share_archived_total.labels(group_id).inc(state.archived_at_limit)
        state.archived_at_limit = 0


def _covering(
    batches: Sequence[BatchCoordinate], acquired: Sequence[Acquired]
) -> list[BatchCoordinate]:
    """The batches holding any acquired offset (whole batches: the client keeps only the
    acquired records)."""
    return [
        b
        for b in batches
        if b.control_type < 0
        and any(a.first <= b.last_offset and b.base_offset <= a.last for a in acquired)
    ]


def _uuid(text: str) -> UUID:
    return UUID(text)


async def release_and_ack(
    partitions: SharePartitions,
    group_id: str,
    member_id: str,
    config: GroupConfig,
    acks: Mapping[ShareKey, AckBatches],
    release: Sequence[ShareKey] = (),
) -> dict[ShareKey, ErrorCode]:
    """ShareAcknowledge (and a closing ShareFetch): apply acknowledgements, then end the
    member's remaining locks on `release` (its share session is over)."""
    limits = limits_of(config)
    now = now_ms()

    def change(key: ShareKey, state: SharePartitionState) -> ErrorCode:
        error = ErrorCode.none
        if key in acks:
            error = state.acknowledge(member_id, acks[key], now, limits)
        if key in release_set:
            state.release_member(member_id, limits)
        return error

    release_set = set(release)
    keys = list(dict.fromkeys([*acks, *release]))
    done = await partitions.update(group_id, keys, config, change)
    return {k: done.get(k, ErrorCode.fenced_state_epoch) for k in acks}
