"""The Broker offers every member of the narrow protocols handlers and components are typed
by (`server.api.services` and each component's `...Host`): they name what is used of it,
so a member renamed on the Broker must be renamed there too."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Protocol

import pytest

from lakelog.config import Settings
from lakelog.groups.consumer_groups import ClassicGroups, ConsumerGroupsHost
from lakelog.groups.coordinator import GroupHost
from lakelog.groups.share.partitions import SharePartitionsHost
from lakelog.groups.share.service import ShareHost
from lakelog.mirror.admin import MirrorAdminHost
from lakelog.mirror.manager import MirrorHost
from lakelog.server.api import services
from lakelog.server.background.cleaner import CleanerHost
from lakelog.server.background.retention import RetentionHost
from lakelog.server.broker import Broker
from lakelog.server.cluster.dynamic_broker_configs import DynamicConfigsHost
from lakelog.server.txn.expiry import TimeoutsHost

PROTOCOLS = [
    services.ClusterView,
    services.LogAccess,
    services.GroupAccess,
    services.Security,
    services.Listener,
    services.BrokerConfigs,
    services.BrokerServices,
    ConsumerGroupsHost,
    GroupHost,
    SharePartitionsHost,
    ShareHost,
    MirrorHost,
    MirrorAdminHost,
    TimeoutsHost,
    CleanerHost,
    RetentionHost,
    DynamicConfigsHost,
]


def _members(protocol: type) -> dict[str, object]:
    members: dict[str, object] = {}
    for cls in reversed(protocol.__mro__):
        if cls in (object, Protocol) or Protocol not in cls.__mro__[1:]:
            continue
        members.update(dict.fromkeys(getattr(cls, "__annotations__", {}), None))
        members.update(
            (name, value)
            for name, value in vars(cls).items()
            if not name.startswith("_") and (callable(value) or isinstance(value, property))
        )
    return members


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=lambda p: p.__name__)
def test_the_broker_has_every_member(protocol: type, tmp_path: Path) -> None:
    _check(Broker(Settings(data_dir=tmp_path)), protocol)


def test_the_group_coordinator_is_what_consumer_groups_use(tmp_path: Path) -> None:
    _check(Broker(Settings(data_dir=tmp_path)).groups, ClassicGroups)


def _check(broker: object, protocol: type) -> None:
    members = _members(protocol)
    assert members
    for name, declared in members.items():
        assert hasattr(broker, name), f"{protocol.__name__}.{name}"
        if inspect.isfunction(declared):
            actual = getattr(broker, name)
            assert callable(actual), f"{protocol.__name__}.{name}"
            assert inspect.iscoroutinefunction(declared) == inspect.iscoroutinefunction(actual), (
                f"{protocol.__name__}.{name}"
            )
