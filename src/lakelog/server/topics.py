"""A short-lived in-process view of topic metadata, so hot paths don't ask the database for
every request. Admin changes made through this broker invalidate it at once; changes made
by other brokers show up within about `ttl_s`."""

from __future__ import annotations

import logging
import time
from uuid import UUID

from lakelog.coordinator.interface import BatchCoordinator
from lakelog.coordinator.topic_types import TopicInfo
from lakelog.server.cluster.outage import RateLimitedLog, is_outage
from lakelog.util.single_flight import SingleFlight

_stale = RateLimitedLog(logging.getLogger(__name__))

MISS_RELOAD_S = 0.2
STALE_MAX_S = 10.0
"""Past its ttl, the view is still served (while one load runs in the background) for up to
this long; older than that, requests wait for the load."""


class TopicCache:
    """Loads are single-flight: however many requests find the view old, one query runs
    (under a flood of requests while the database was slow, each request queued its own
    full load behind the others, and Metadata waited 300 ms). A view past its ttl is served
    while it reloads; one invalidated by this broker's own admin change is not."""

    def __init__(self, coordinator: BatchCoordinator, ttl_s: float = 2.0) -> None:
        self._coordinator = coordinator
        self._ttl_s = ttl_s
        self._by_name: dict[str, TopicInfo] = {}
        self._by_id: dict[UUID, TopicInfo] = {}
        self._loaded_at = 0.0
        self._ever_loaded = False
        self._generation = 0
        """Bumped by `invalidate`: a view loaded before it must not be served."""
        self._loaded_generation = -1
        self._load = SingleFlight(self._do_load)

    def invalidate(self) -> None:
        self._generation += 1

    async def _do_load(self) -> None:
        generation = self._generation
        try:
            topics = await self._coordinator.get_topics(None)
        except Exception as exc:
            if not self._ever_loaded or not is_outage(exc):
                raise
            # The database is down: keep serving what we knew (as Kafka brokers serve
            # their metadata cache), and ask again only after another ttl, so requests
            # during the outage do not each wait for the database.
            self._loaded_at = time.monotonic()
            self._loaded_generation = generation
            _stale.warning("topic metadata unavailable, serving the cached view: %r", exc)
            return
        self._by_name = {t.name: t for t in topics}
        self._by_id = {t.topic_id: t for t in topics}
        self._loaded_at = time.monotonic()
        self._loaded_generation = generation
        self._ever_loaded = True

    async def _refresh(self) -> None:
        wanted = self._generation
        if self._loaded_generation >= wanted:
            age = time.monotonic() - self._loaded_at
            if age < self._ttl_s:
                return
            if self._ever_loaded and age < STALE_MAX_S:
                self._load.start()  # serve this view; the next request gets the new one
                return
        # Never loaded, too old, or invalidated since: wait for a load begun after that
        # (a load already running may have begun before the invalidation: then a second).
        while self._loaded_generation < wanted or (
            time.monotonic() - self._loaded_at >= STALE_MAX_S
        ):
            before = self._loaded_at
            await self._load.wait()
            if self._loaded_at == before:
                break  # the load failed quietly (outage, nothing loaded yet): don't spin

    async def all(self) -> list[TopicInfo]:
        await self._refresh()
        return list(self._by_name.values())

    async def _refresh_on_miss(self) -> None:
        """A topic created by another broker a moment ago: look again, but at most a few
        times a second, so requests for a missing topic cannot hammer the database. Only
        the requests that missed wait for that load."""
        if time.monotonic() - self._loaded_at >= MISS_RELOAD_S:
            await self._load.wait()

    async def get(self, name: str) -> TopicInfo | None:
        await self._refresh()
        topic = self._by_name.get(name)
        if topic is None:
            await self._refresh_on_miss()
            topic = self._by_name.get(name)
        return topic

    async def get_by_id(self, topic_id: UUID) -> TopicInfo | None:
        await self._refresh()
        topic = self._by_id.get(topic_id)
        if topic is None:
            await self._refresh_on_miss()
            topic = self._by_id.get(topic_id)
        return topic


_LEGAL = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
MAX_NAME_LENGTH = 249


def topic_name_error(name: str | None) -> str | None:
    """Kafka's topic name rules; None when the name is legal."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name cannot be {name!r}"
    if len(name) > MAX_NAME_LENGTH:
        return f"topic name is longer than {MAX_NAME_LENGTH} characters"
    if not set(name) <= _LEGAL:
        return "topic name may contain only ASCII letters, digits, '.', '_' and '-'"
    return None
