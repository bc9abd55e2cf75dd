"""What the broker's background loops use of the broker, as small Protocols (the Broker is
each of them): a loop sees only these properties, so it can be run and tested against
anything that has them, and none imports `server.broker`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from lakelog.config import Settings
    from lakelog.coordinator.interface import BatchCoordinator
    from lakelog.log.storage.store import ObjectStorage


class CoordinatorHost(Protocol):
    """A loop that works on the coordinator only (retention)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def coordinator(self) -> BatchCoordinator: ...


class StorageHost(CoordinatorHost, Protocol):
    """A loop that reads or deletes objects too (the cleaner)."""

    @property
    def storage(self) -> ObjectStorage: ...


class BrokerWorkHost(StorageHost, Protocol):
    """A loop whose work is this broker's own (leases, files it wrote): compaction, the
    inline mover."""

    @property
    def broker_id(self) -> int: ...
