"""A short-lived in-process view of topic metadata, so hot paths don't ask the database for
every request. Admin changes made through this broker invalidate it at once; changes made
by other brokers show up within `ttl_s`."""

from __future__ import annotations

import logging
import time
from uuid import UUID

from lakelog.coordinator.interface import BatchCoordinator, TopicInfo
from lakelog.outage import RateLimitedLog, is_outage

_stale = RateLimitedLog(logging.getLogger(__name__))

MISS_RELOAD_S = 0.2


class TopicCache:
    def __init__(self, coordinator: BatchCoordinator, ttl_s: float = 2.0) -> None:
        self._coordinator = coordinator
        self._ttl_s = ttl_s
        self._by_name: dict[str, TopicInfo] = {}
        self._by_id: dict[UUID, TopicInfo] = {}
        self._loaded_at = 0.0
        self._ever_loaded = False

    def invalidate(self) -> None:
        self._loaded_at = 0.0

    async def _refresh(self) -> None:
        if time.monotonic() - self._loaded_at < self._ttl_s:
            return
        try:
            topics = await self._coordinator.get_topics(None)
        except Exception as exc:
            if not self._ever_loaded or not is_outage(exc):
                raise
            # The database is down: keep serving what we knew (as Kafka brokers serve
            # their metadata cache), and ask again only after another ttl, so requests
            # during the outage do not each wait for the database.
            self._loaded_at = time.monotonic()
            _stale.warning("topic metadata unavailable, serving the cached view: %r", exc)
            return
        self._by_name = {t.name: t for t in topics}
        self._by_id = {t.topic_id: t for t in topics}
        self._loaded_at = time.monotonic()
        self._ever_loaded = True

    async def all(self) -> list[TopicInfo]:
        await self._refresh()
        return list(self._by_name.values())

    async def _refresh_on_miss(self) -> None:
        """A topic created by another broker a moment ago: look again, but at most a few
        times a second, so requests for a missing topic cannot hammer the database."""
        if time.monotonic() - self._loaded_at >= MISS_RELOAD_S:
            self.invalidate()
            await self._refresh()

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
