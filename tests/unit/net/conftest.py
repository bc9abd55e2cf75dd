"""The listener's tests run on both loops: the broker runs on uvloop, whose
BufferedProtocol calls differ from asyncio's in when they hold a view of the buffer."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

import pytest
import uvloop


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]] | None:
    if "/unit/net/" not in str(item.path):
        return None
    return {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}
