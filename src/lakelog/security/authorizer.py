"""The broker's authorizer: the cluster's ACLs cached in memory, kept fresh by polling the
coordinator's change counter, and the decisions of `lakelog.security.acl` over them."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from lakelog.security.acl import (
    AclIndex,
    Operation,
    Policy,
    ResourceType,
    all_operations,
    authorize,
    authorized_operations,
    parse_super_users,
)
from lakelog.server.cluster.outage import log_failure

if TYPE_CHECKING:
    from lakelog.config import Settings
    from lakelog.coordinator.interface import BatchCoordinator

log = logging.getLogger(__name__)


class Authorizer:
    """Decides whether a principal may do an operation on a resource. With `enabled`
    False every check passes without looking at anything (the hot paths test only that
    attribute)."""

    def __init__(self, coordinator: BatchCoordinator, settings: Settings) -> None:
        self.enabled = settings.authorizer_enabled
        self.policy = Policy(
            parse_super_users(settings.super_users), settings.allow_everyone_if_no_acl_found
        )
        self.limit = settings.acl_max_bindings
        self._coordinator = coordinator
        self._interval = settings.acl_refresh_interval_ms / 1000
        self._index = AclIndex()
        self._version = -1
        self._refreshing = asyncio.Lock()

    @property
    def index(self) -> AclIndex:
        return self._index

    async def refresh(self) -> None:
        """Reload the ACLs if the coordinator's change counter moved since the last load."""
        async with self._refreshing:
            version = await self._coordinator.acl_version()
            if version == self._version:
                return
            version, bindings = await self._coordinator.load_acls(self.limit)
            self._index = AclIndex(bindings)
            self._version = version
            log.info("loaded %d ACLs (version %d)", len(bindings), version)

    async def refresh_after_change(self) -> None:
        """After an ACL change made here: enforce it at once; should the reload fail, the
        change is stored all the same and the poll picks it up."""
        try:
            await self.refresh()
        except Exception:
            log_failure(log, "ACL reload after a change failed; the next poll retries")

    async def run(self) -> None:
        """Poll for changes made through any broker. On a coordinator outage the last set
        stays in force (as Kafka's brokers keep theirs while the controller is away)."""
        while True:
            await asyncio.sleep(self._interval)
            try:
                await self.refresh()
            except Exception:
                log_failure(log, "ACL refresh failed")

    def allowed(
        self, principal: str, host: str, kind: ResourceType, name: str, operation: Operation
    ) -> bool:
        if not self.enabled:
            return True
        return authorize(self._index, self.policy, principal, host, kind, name, operation)

    def operations(self, principal: str, host: str, kind: ResourceType, name: str) -> int:
        """KIP-430's authorized operations bit field (every operation when disabled)."""
        if not self.enabled:
            return all_operations(kind)
        return authorized_operations(self._index, self.policy, principal, host, kind, name)
