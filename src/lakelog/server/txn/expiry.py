"""The transaction timeout loop: every broker asks the batch coordinator to abort the
transactions that outlived their transaction.timeout.ms (one database transaction aborts
each exactly once, whichever broker asks first), then samples the transaction metrics.

Metrics are split so that summing over brokers gives the cluster total: open transactions
are counted by the broker that coordinates their id, LSO lag by the broker Metadata names
as the partition's leader.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Protocol

from lakelog.coordinator.log_types import PartitionKey
from lakelog.coordinator.txn_types import TxnState
from lakelog.groups.coordinator import owner_of
from lakelog.server.cluster.outage import log_failure
from lakelog.server.cluster.zones import partition_broker
from lakelog.util import metrics
from lakelog.util.errors import ErrorCode

if TYPE_CHECKING:
    from lakelog.config import Settings
    from lakelog.coordinator.interface import BatchCoordinator
    from lakelog.coordinator.topic_types import BrokerInfo
    from lakelog.log.fetch.waiter import CommitWaiter
    from lakelog.server.topics import TopicCache

log = logging.getLogger(__name__)

MAX_SAMPLED_TRANSACTIONS = 1000
"""At most this many ongoing transactions are described per tick for the LSO lag gauge."""


class TimeoutsHost(Protocol):
    """What transaction timeouts use of the broker (the Broker is one)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def broker_id(self) -> int: ...
    @property
    def coordinator(self) -> BatchCoordinator: ...
    @property
    def topics(self) -> TopicCache: ...
    @property
    def waiter(self) -> CommitWaiter: ...
    async def live_brokers(self) -> list[BrokerInfo]: ...


class TransactionTimeouts:
    def __init__(self, broker: TimeoutsHost) -> None:
        self._broker = broker
        self._lag_labels: set[tuple[str, str]] = set()

    async def run(self) -> None:
        settings = self._broker.settings
        interval = settings.transaction_abort_timed_out_transaction_cleanup_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self.tick()
            except Exception:
                log_failure(log, "transaction timeout check failed")

    async def tick(self) -> list[str]:
        """Abort expired transactions, refresh the gauges; the ids this call aborted."""
        aborted = await self._broker.coordinator.abort_expired_transactions(int(time.time() * 1000))
        if aborted:
            self._broker.waiter.notify()
            log.info("aborted %d timed-out transactions: %s", len(aborted), aborted[:10])
            metrics.transaction_aborts_total.labels(reason="timeout").inc(len(aborted))
        await self.sample()
        return aborted

    async def sample(self) -> None:
        broker = self._broker
        coordinator = broker.coordinator
        brokers = await broker.live_brokers()
        me = broker.broker_id
        ongoing = [
            i.transactional_id
            for i in await coordinator.list_transactions()
            if i.state == TxnState.ONGOING
        ]
        metrics.transactions_open.set(
            sum(1 for t in ongoing if owner_of(t, brokers).broker_id == me)
        )
        keys: dict[PartitionKey, None] = {}
        if ongoing:
            for info in await coordinator.describe_transactions(ongoing[:MAX_SAMPLED_TRANSACTIONS]):
                for key in info.partitions if info is not None else ():
                    if partition_broker(brokers, key.topic_id, key.partition) == me:
                        keys[key] = None
        labels: set[tuple[str, str]] = set()
        if keys:
            for key, log_info in zip(keys, await coordinator.log_info(list(keys)), strict=True):
                topic = await broker.topics.get_by_id(key.topic_id)
                if topic is None or log_info.error != ErrorCode.none:
                    continue
                if log_info.last_stable_offset < 0:
                    continue
                label = (topic.name, str(key.partition))
                lag = max(log_info.high_watermark - log_info.last_stable_offset, 0)
                metrics.lso_lag.labels(*label).set(lag)
                labels.add(label)
        for gone in self._lag_labels - labels:
            metrics.lso_lag.remove(*gone)
        self._lag_labels = labels
