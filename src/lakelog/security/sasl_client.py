"""The client side of Kafka's SASL exchange: SaslHandshake v1 names the mechanism, then
SaslAuthenticate carries each token (KIP-152); the same exchange again on the connection
re-authenticates it (KIP-368). Works over any request/response function, so the admin
client and the mirror's Fetch connections share it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from kio.index import load_request_schema

from lakelog.security.client_config import ClientSecurity
from lakelog.security.scram import ScramClient, ScramError
from lakelog.util.errors import ErrorCode

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
HANDSHAKE_VERSION = 1
AUTHENTICATE_VERSION = 1
"""v1 (not flexible) is served by every Kafka since 2.2 and by Lakelog."""

Roundtrip = Callable[[int, int, Any], Awaitable[Any]]
"""(api key, version, kio request) -> kio response."""


class SaslFailed(Exception):
    """The server refused the mechanism or the credentials."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(f"{error.name.upper()}: {message}")
        self.error = error


async def authenticate(roundtrip: Roundtrip, security: ClientSecurity) -> int:
    """Run the whole exchange; SaslFailed when the server says no. Returns the session
    lifetime the server gave (KIP-368, ms; 0: none): log in again before it ends."""
    mechanism = security.mechanism or "PLAIN"
    handshake = load_request_schema(SASL_HANDSHAKE, HANDSHAKE_VERSION)
    response = await roundtrip(SASL_HANDSHAKE, HANDSHAKE_VERSION, handshake(mechanism=mechanism))
    if response.error_code != ErrorCode.none:
        offered = ", ".join(response.mechanisms) or "none"
        raise SaslFailed(response.error_code, f"{mechanism} refused (server offers {offered})")
    username, password = security.username or "", security.password or ""
    if mechanism == "PLAIN":
        _, lifetime = await _step(roundtrip, f"\0{username}\0{password}".encode())
        return lifetime
    scram = ScramClient(mechanism, username, password)
    server_first, _ = await _step(roundtrip, scram.first())
    try:
        final = scram.final(server_first)
    except ScramError as exc:
        raise SaslFailed(ErrorCode.sasl_authentication_failed, str(exc)) from exc
    server_final, lifetime = await _step(roundtrip, final)
    try:
        scram.verify(server_final)
    except ScramError as exc:
        raise SaslFailed(ErrorCode.sasl_authentication_failed, str(exc)) from exc
    return lifetime


async def _step(roundtrip: Roundtrip, token: bytes) -> tuple[bytes, int]:
    """(the server's token, its session lifetime in ms)."""
    request = load_request_schema(SASL_AUTHENTICATE, AUTHENTICATE_VERSION)(auth_bytes=token)
    response = await roundtrip(SASL_AUTHENTICATE, AUTHENTICATE_VERSION, request)
    if response.error_code != ErrorCode.none:
        raise SaslFailed(response.error_code, response.error_message or "authentication failed")
    lifetime = int(response.session_lifetime.total_seconds() * 1000)
    return bytes(response.auth_bytes), max(0, lifetime)
