"""The SASL gate beyond a plain login: SaslHandshake v0's bare tokens (before KIP-152),
SCRAM users kept in a real SQLite coordinator (found at once, gone after a delete), the
session lifetime and re-authentication of KIP-368 on a controlled clock, and hostile
tokens (garbage after a v0 handshake, a SCRAM proof with the wrong nonce)."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader

from lakelog.admin.wire import encode_request
from lakelog.config import Settings
from lakelog.coordinator import BatchCoordinator, open_coordinator
from lakelog.coordinator.scram_types import StoredScramCredential
from lakelog.log.protocol.varint import skip_tagged_fields
from lakelog.security.client_config import ClientSecurity
from lakelog.security.credentials import CACHE_TTL_S, LoginCredentials
from lakelog.security.listener import ListenerSecurity
from lakelog.security.sasl_client import SaslFailed, authenticate
from lakelog.security.scram import ScramClient, keys_from_salted, salted_password
from lakelog.server.sasl import SaslRejected, SaslSession
from lakelog.util.errors import ErrorCode


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def coordinator(tmp_path: Path) -> AsyncIterator[BatchCoordinator]:
    instance = open_coordinator(f"sqlite://{tmp_path / 'coordinator.sqlite3'}")
    await instance.start()
    yield instance
    await instance.close()


def _credentials(
    tmp_path: Path, coordinator: BatchCoordinator | None, clock: Clock
) -> LoginCredentials:
    users = tmp_path / "users"
    users.write_text("alice:wonder\n")
    security = ListenerSecurity.from_settings(
        Settings(listener_security_protocol="SASL_PLAINTEXT", sasl_users=users)
    )
    assert security.sasl is not None
    lookup = coordinator.scram_credential if coordinator is not None else None
    return LoginCredentials(security.sasl, lookup, clock=clock)


def _roundtrip(session: SaslSession, version_of_authenticate: int = 2) -> Any:
    correlation = [0]

    async def call(api_key: int, version: int, request: Any) -> Any:
        if api_key == 36:
            version = version_of_authenticate
            request = load_request_schema(36, version)(auth_bytes=request.auth_bytes)
        correlation[0] += 1
        frame = encode_request(api_key, version, correlation[0], "t", request)
        answer = await session.answer(memoryview(frame)[4:])
        cls = load_response_schema(api_key, version)
        pos = skip_tagged_fields(answer, 8) if cls.__flexible__ else 8
        response = entity_reader(cls)(answer, pos)[0]
        call.last = response  # type: ignore[attr-defined]
        return response

    return call


def _client(mechanism: str, user: str, password: str) -> ClientSecurity:
    return ClientSecurity.from_configs(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": password,
        }
    )


def _handshake_v0(mechanism: str) -> memoryview:
    request = load_request_schema(17, 0)(mechanism=mechanism)
    return memoryview(encode_request(17, 0, 7, "t", request))[4:]


async def test_v0_handshake_then_bare_plain_token(tmp_path: Path) -> None:
    session = SaslSession(_credentials(tmp_path, None, Clock()), "peer")
    answer = await session.answer(_handshake_v0("PLAIN"))
    response = entity_reader(load_response_schema(17, 0))(answer, 8)[0]
    assert response.error_code == ErrorCode.none
    assert not session.accepts_without_login(memoryview(b"\x00\x12\x00\x00"))
    assert await session.answer(memoryview(b"\0alice\0wonder")) == b"\0\0\0\0"
    assert session.authenticated and session.principal == "User:alice"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_v0_handshake_then_bare_scram_tokens(tmp_path: Path, mechanism: str) -> None:
    session = SaslSession(_credentials(tmp_path, None, Clock()), "peer")
    await session.answer(_handshake_v0(mechanism))
    client = ScramClient(mechanism, "alice", "wonder")
    server_first = await session.answer(memoryview(client.first()))
    final = client.final(server_first[4:])
    server_final = await session.answer(memoryview(final))
    client.verify(server_final[4:])
    assert session.authenticated


@pytest.mark.parametrize("garbage", [b"", b"\xff" * 100, b"alice:wonder", b"\0alice\0wrong"])
async def test_garbage_after_a_v0_handshake_closes(tmp_path: Path, garbage: bytes) -> None:
    session = SaslSession(_credentials(tmp_path, None, Clock()), "peer")
    await session.answer(_handshake_v0("PLAIN"))
    with pytest.raises(SaslRejected):
        await session.answer(memoryview(garbage))
    assert not session.authenticated


async def test_scram_with_a_bad_nonce_fails(tmp_path: Path) -> None:
    session = SaslSession(_credentials(tmp_path, None, Clock()), "peer")
    call = _roundtrip(session)
    await call(17, 1, load_request_schema(17, 1)(mechanism="SCRAM-SHA-256"))
    client = ScramClient("SCRAM-SHA-256", "alice", "wonder")
    first = await call(36, 2, load_request_schema(36, 2)(auth_bytes=client.first()))
    final = client.final(bytes(first.auth_bytes)).replace(b",p=", b"x,p=", 1)
    response = await call(36, 2, load_request_schema(36, 2)(auth_bytes=final))
    assert response.error_code == ErrorCode.sasl_authentication_failed
    assert session.close_after_reply and not session.authenticated


async def _store(
    coordinator: BatchCoordinator, user: str, password: str, mechanism: str = "SCRAM-SHA-256"
) -> None:
    salt = secrets.token_bytes(16)
    stored, server = keys_from_salted(mechanism, salted_password(mechanism, password, salt, 8192))
    await coordinator.alter_scram_credentials(
        [], [StoredScramCredential(user, mechanism, 8192, salt, stored, server)]
    )


async def test_scram_users_in_the_coordinator_log_in_until_deleted(
    tmp_path: Path, coordinator: BatchCoordinator
) -> None:
    clock = Clock()
    credentials = _credentials(tmp_path, coordinator, clock)

    async def login(mechanism: str, user: str, password: str) -> None:
        session = SaslSession(credentials, "peer", clock=clock)
        await authenticate(_roundtrip(session), _client(mechanism, user, password))

    with pytest.raises(SaslFailed):
        await login("SCRAM-SHA-256", "bob", "builder")
    await _store(coordinator, "bob", "builder")
    clock.now += CACHE_TTL_S  # the negative answer above is cached this long at most
    await login("SCRAM-SHA-256", "bob", "builder")
    with pytest.raises(SaslFailed):
        await login("SCRAM-SHA-512", "bob", "builder")  # no credential for that mechanism
    with pytest.raises(SaslFailed):
        await login("PLAIN", "bob", "builder")  # PLAIN knows the users file only, as Kafka
    await login("SCRAM-SHA-256", "alice", "wonder")  # the file still works
    await coordinator.alter_scram_credentials([("bob", "SCRAM-SHA-256")], [])
    clock.now += CACHE_TTL_S
    with pytest.raises(SaslFailed):
        await login("SCRAM-SHA-256", "bob", "builder")


async def test_sessions_expire_and_reauthenticate(tmp_path: Path) -> None:
    clock = Clock()
    session = SaslSession(_credentials(tmp_path, None, clock), "peer", reauth_ms=5000, clock=clock)
    call = _roundtrip(session)
    await authenticate(call, _client("SCRAM-SHA-256", "alice", "wonder"))
    assert call.last.session_lifetime.total_seconds() == 5.0
    assert not session.expired()
    assert not session.begin_reauthentication()  # not within a second of the last login
    clock.now += 5.0
    assert session.expired()
    assert session.begin_reauthentication()
    assert session.principal == "User:alice" and not session.authenticated
    await authenticate(call, _client("SCRAM-SHA-256", "alice", "wonder"))
    assert session.authenticated and not session.expired()
    assert session.expires_at == clock.now + 5.0


async def test_reauthentication_cannot_change_principal_or_mechanism(tmp_path: Path) -> None:
    clock = Clock()
    users = tmp_path / "users"
    users.write_text("alice:wonder\nbob:builder\n")
    listener = ListenerSecurity.from_settings(
        Settings(listener_security_protocol="SASL_PLAINTEXT", sasl_users=users)
    )
    assert listener.sasl is not None
    credentials = LoginCredentials(listener.sasl, clock=clock)
    for mechanism, user, password in [
        ("PLAIN", "bob", "builder"),
        ("SCRAM-SHA-256", "alice", "wonder"),
    ]:
        session = SaslSession(credentials, "peer", reauth_ms=5000, clock=clock)
        call = _roundtrip(session)
        await authenticate(call, _client("PLAIN", "alice", "wonder"))
        clock.now += 2
        assert session.begin_reauthentication()
        with pytest.raises(SaslFailed):
            await authenticate(call, _client(mechanism, user, password))
        assert session.close_after_reply and session.principal == "User:alice"


async def test_without_reauth_sessions_never_expire(tmp_path: Path) -> None:
    clock = Clock()
    session = SaslSession(_credentials(tmp_path, None, clock), "peer", clock=clock)
    call = _roundtrip(session)
    await authenticate(call, _client("PLAIN", "alice", "wonder"))
    assert call.last.session_lifetime.total_seconds() == 0
    clock.now += 1e9
    assert not session.expired()


@settings(max_examples=200, deadline=None)
@given(
    mechanism=st.sampled_from(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]),
    tokens=st.lists(st.binary(max_size=300), min_size=1, max_size=3),
    v0=st.booleans(),
)
async def test_any_tokens_get_an_answer_or_a_refusal(
    tmp_path_factory: pytest.TempPathFactory, mechanism: str, tokens: list[bytes], v0: bool
) -> None:
    """Whatever bytes follow a handshake, the gate answers or refuses (SaslRejected, the
    connection closes); it never raises anything else."""
    session = SaslSession(_credentials(tmp_path_factory.mktemp("u"), None, Clock()), "peer")
    if v0:
        await session.answer(_handshake_v0(mechanism))
    else:
        request = load_request_schema(17, 1)(mechanism=mechanism)
        await session.answer(memoryview(encode_request(17, 1, 1, "t", request))[4:])
    for token in tokens:
        if session.close_after_reply:
            break
        frame = (
            token
            if v0
            else encode_request(36, 2, 2, "t", load_request_schema(36, 2)(auth_bytes=token))[4:]
        )
        try:
            await session.answer(memoryview(frame))
        except SaslRejected:
            break
    assert not session.authenticated
