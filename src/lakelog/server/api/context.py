"""What a handler knows about the request it serves."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING

from kio.index import load_payload_module
from kio.static.constants import EntityType

from lakelog.log.protocol.kio_build import build as build
from lakelog.security.principal import ANONYMOUS

if TYPE_CHECKING:
    from lakelog.server.api.services import BrokerServices
    from lakelog.server.connection import Turn


@dataclass(slots=True)
class RequestContext:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    broker: BrokerServices
    """The parts of the broker handlers use (`services.BrokerServices`; the Broker is one)."""
    peer: str = ""
    turn: Turn | None = None
    """The request's place in its connection's order (see `net.server.Turn`)."""
    broker_epoch: int | None = None
    """The broker's epoch when the request was read (None: not from a connection)."""
    principal: str = ANONYMOUS
    """Who sent it, as Kafka names principals (`User:alice`); ANONYMOUS before or without
    login (PLAINTEXT listeners)."""

    def pass_turn(self) -> None:
        """This request's effect is fixed: the connection's next request may act."""
        if self.turn is not None:
            self.turn.release()

    @property
    def schema(self) -> ModuleType:
        """The kio response module for this API version (holds the nested classes)."""
        return _response_module(self.api_key, self.api_version)


@cache
def _response_module(api_key: int, api_version: int) -> ModuleType:
    """kio resolves the module by name on every call (a tenth of a small request's CPU)."""
    return load_payload_module(api_key, api_version, EntityType.response)
