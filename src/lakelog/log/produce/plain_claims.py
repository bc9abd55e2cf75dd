"""A broker's plain-write claims: what it must hold before it accepts a plain producer's
batch (no producer id, so nothing but the broker orders it).

Each claim covers a partition for the clients of one zone and carries an epoch from the
coordinator (`BatchCoordinator.claim_plain_partitions`); the batch takes the epoch to its
commit, which refuses it if another broker has claimed since. A broker only claims what
its own view of the cluster says it leads, so a client with stale metadata cannot take a
partition from its leader; and it claims before the batch is buffered, so the claim
precedes anything the client sends it afterwards.

The claims are cached: a broker asks the coordinator only for partitions it newly leads
(or after a refusal told it that another broker took them), one call per request.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING
from uuid import UUID

from lakelog.coordinator.log_types import PlainOwnerKey

if TYPE_CHECKING:
    from lakelog.coordinator.interface import BatchCoordinator
    from lakelog.log.produce.wal_writer import AppendRequest

log = logging.getLogger(__name__)

MAX_CACHED = 65_536
"""Claims remembered; an evicted one is asked for again and comes back unchanged."""

_Key = tuple[UUID, int, str | None]


class PlainClaims:
    def __init__(
        self,
        coordinator: BatchCoordinator,
        *,
        broker_id: int,
        broker_epoch: Callable[[], int],
        still_leads: Callable[[UUID, int, str | None], Awaitable[bool]] | None = None,
        max_cached: int = MAX_CACHED,
    ) -> None:
        self._coordinator = coordinator
        self._broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._still_leads = still_leads
        self._max_cached = max_cached
        self._cache: OrderedDict[_Key, tuple[int, int]] = OrderedDict()
        """(topic id, partition, zone) -> (broker epoch it was claimed under, claim epoch)."""

    async def claim(self, requests: Sequence[AppendRequest]) -> list[AppendRequest | None]:
        """The requests, plain ones with their claim's epoch set (`owner_epoch`); None for
        a plain one this broker must refuse: its view says another broker leads the
        partition for that zone, or the claim could not be had (coordinator down, broker
        fenced). Others come back as they are."""
        out: list[AppendRequest | None] = list(requests)
        broker_epoch = self._broker_epoch()
        leads: dict[_Key, bool] = {}
        misses: dict[_Key, list[int]] = {}
        for i, r in enumerate(requests):
            if not r.check_owner:
                continue
            key = (r.topic_id, r.partition, r.owner_zone)
            led = leads.get(key)
            if led is None:
                led = leads[key] = self._still_leads is None or await self._still_leads(*key)
            if not led:
                self._cache.pop(key, None)
                out[i] = None
                continue
            held = self._cache.get(key)
            if held is not None and held[0] == broker_epoch:
                self._cache.move_to_end(key)
                out[i] = dataclasses.replace(r, owner_epoch=held[1])
            else:
                misses.setdefault(key, []).append(i)
        if misses:
            epochs = await self._ask(broker_epoch, list(misses))
            for (key, indexes), epoch in zip(misses.items(), epochs, strict=True):
                if epoch is not None:
                    self._remember(key, broker_epoch, epoch)
                for i in indexes:
                    r = requests[i]
                    out[i] = None if epoch is None else dataclasses.replace(r, owner_epoch=epoch)
        return out

    async def _ask(self, broker_epoch: int, keys: list[_Key]) -> list[int | None]:
        try:
            return await self._coordinator.claim_plain_partitions(
                self._broker_id, broker_epoch, [PlainOwnerKey(*k) for k in keys]
            )
        except Exception as exc:
            # An outage: plain batches of partitions this broker has not claimed yet are
            # refused (a counted retry for the client) until the coordinator answers.
            log.info("claiming %d partitions for plain producers failed: %r", len(keys), exc)
            return [None] * len(keys)

    def _remember(self, key: _Key, broker_epoch: int, epoch: int) -> None:
        self._cache[key] = (broker_epoch, epoch)
        self._cache.move_to_end(key)
        while len(self._cache) > self._max_cached:
            self._cache.popitem(last=False)

    def forget(self, request: AppendRequest) -> None:
        """Another broker has taken the claim this request was accepted under: the next
        plain batch for it asks the coordinator again."""
        key = (request.topic_id, request.partition, request.owner_zone)
        held = self._cache.get(key)
        if held is not None and held[1] == request.owner_epoch:
            del self._cache[key]

    def __len__(self) -> int:
        return len(self._cache)
