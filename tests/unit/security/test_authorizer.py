"""The broker's authorizer over a real SQLite coordinator: it loads the ACLs at a refresh,
reloads only when the change counter moved, and when off allows everything without
looking; and the client host is taken from the peer address as ACL hosts name it."""

from __future__ import annotations

from pathlib import Path

from lakelog.config import Settings
from lakelog.coordinator import open_coordinator
from lakelog.security.acl import (
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    all_operations,
)
from lakelog.security.authorizer import Authorizer
from lakelog.server.api.authz import peer_host

READ_ORDERS = AclBinding(
    ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:alice", "*", Operation.READ,
    Permission.ALLOW,
)  # fmt: skip


def settings(tmp_path: Path, **given: object) -> Settings:
    url = f"sqlite://{tmp_path / 'coordinator.sqlite3'}"
    return Settings(data_dir=tmp_path, coordinator_url=url, **given)  # type: ignore[arg-type]


async def test_refresh_follows_the_coordinator(tmp_path: Path) -> None:
    config = settings(tmp_path, authorizer_enabled=True, super_users="User:admin")
    coordinator = open_coordinator(config.resolved_coordinator_url)
    await coordinator.start()
    try:
        authorizer = Authorizer(coordinator, config)
        await authorizer.refresh()

        def alice_reads() -> bool:
            return authorizer.allowed(
                "User:alice", "10.0.0.1", ResourceType.TOPIC, "orders", Operation.READ
            )

        assert not alice_reads()
        assert authorizer.allowed("User:admin", "h", ResourceType.CLUSTER, "x", Operation.ALTER)
        await coordinator.create_acls([READ_ORDERS], 10)
        assert not alice_reads()  # not yet refreshed
        await authorizer.refresh()
        assert alice_reads()
        index = authorizer.index
        await authorizer.refresh()  # nothing changed: the same index
        assert authorizer.index is index
        await coordinator.delete_acls([AclFilter(principal="User:alice")], 10)
        await authorizer.refresh()
        assert not alice_reads()
    finally:
        await coordinator.close()


def test_off_allows_everything(tmp_path: Path) -> None:
    authorizer = Authorizer(None, settings(tmp_path))  # type: ignore[arg-type]
    assert not authorizer.enabled
    assert authorizer.allowed("User:x", "h", ResourceType.TOPIC, "t", Operation.DELETE)
    assert authorizer.operations("User:x", "h", ResourceType.TOPIC, "t") == all_operations(
        ResourceType.TOPIC
    )


def test_peer_host() -> None:
    assert peer_host("10.1.2.3:5555") == "10.1.2.3"
    assert peer_host("[::1]:5555") == "::1"
    assert peer_host("::1:5555") == "::1"
    assert peer_host("") == ""
