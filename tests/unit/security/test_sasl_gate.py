"""The listener's SASL gate (net/sasl.py) driven by the mirror's own SASL client
(security/sasl_client.py) through real Kafka frames: every mechanism logs in, wrong
credentials and unknown mechanisms are refused with Kafka's error codes and a close,
and nothing but ApiVersions/SASL gets through before login."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader

from lakelog.admin.wire import encode_request
from lakelog.config import Settings
from lakelog.log.protocol.varint import skip_tagged_fields
from lakelog.security.client_config import ClientSecurity
from lakelog.security.credentials import LoginCredentials
from lakelog.security.listener import ListenerConfigError, ListenerSecurity
from lakelog.security.sasl_client import SaslFailed, authenticate
from lakelog.server.sasl import SaslRejected, SaslSession
from lakelog.util.errors import ErrorCode


@pytest.fixture
def session(tmp_path: Path) -> SaslSession:
    users = tmp_path / "users"
    users.write_text("# users\nalice:wonder:land\nbob:builder\n")
    security = ListenerSecurity.from_settings(
        Settings(listener_security_protocol="SASL_PLAINTEXT", sasl_users=users)
    )
    assert security.sasl is not None and security.ssl_context is None
    return SaslSession(LoginCredentials(security.sasl), "test-peer")


def _roundtrip(session: SaslSession):  # type: ignore[no-untyped-def]
    correlation = [0]

    async def call(api_key: int, version: int, request: Any) -> Any:
        correlation[0] += 1
        frame = encode_request(api_key, version, correlation[0], "t", request)
        answer = await session.answer(memoryview(frame)[4:])
        cls = load_response_schema(api_key, version)
        pos = skip_tagged_fields(answer, 8) if cls.__flexible__ else 8
        assert int.from_bytes(answer[4:8], "big") == correlation[0]
        return entity_reader(cls)(answer, pos)[0]

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


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_every_mechanism_logs_in(session: SaslSession, mechanism: str) -> None:
    await authenticate(_roundtrip(session), _client(mechanism, "alice", "wonder:land"))
    assert session.authenticated and not session.close_after_reply


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
@pytest.mark.parametrize(("user", "password"), [("alice", "wrong"), ("mallory", "wonder:land")])
async def test_wrong_credentials_are_refused(
    session: SaslSession, mechanism: str, user: str, password: str
) -> None:
    with pytest.raises(SaslFailed) as info:
        await authenticate(_roundtrip(session), _client(mechanism, user, password))
    assert info.value.error == ErrorCode.sasl_authentication_failed
    assert not session.authenticated and session.close_after_reply


async def test_unknown_mechanism_is_refused(session: SaslSession) -> None:
    handshake = load_request_schema(17, 1)(mechanism="GSSAPI")
    response = await _roundtrip(session)(17, 1, handshake)
    assert response.error_code == ErrorCode.unsupported_sasl_mechanism
    assert set(response.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
    assert session.close_after_reply


async def test_authenticate_before_handshake_is_illegal(session: SaslSession) -> None:
    request = load_request_schema(36, 2)(auth_bytes=b"\0alice\0wonder:land")
    response = await _roundtrip(session)(36, 2, request)
    assert response.error_code == ErrorCode.illegal_sasl_state
    assert session.close_after_reply and not session.authenticated


async def test_only_api_versions_and_sasl_before_login(session: SaslSession) -> None:
    metadata = load_request_schema(3, 1)(topics=None)
    frame = memoryview(encode_request(3, 1, 1, "t", metadata))[4:]
    assert not session.accepts_without_login(frame)
    with pytest.raises(SaslRejected, match="API 3"):
        await session.answer(frame)
    api_versions = memoryview(encode_request(18, 0, 3, "t", load_request_schema(18, 0)()))[4:]
    assert session.accepts_without_login(api_versions)


def test_listener_settings_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ListenerConfigError, match=r"sasl\.users"):
        ListenerSecurity.from_settings(
            Settings(listener_security_protocol="SASL_PLAINTEXT", sasl_enabled_mechanisms="PLAIN")
        )
    scram_only = ListenerSecurity.from_settings(
        Settings(listener_security_protocol="SASL_PLAINTEXT")
    )
    assert scram_only.sasl is not None and not scram_only.sasl.passwords
    with pytest.raises(ListenerConfigError, match=r"ssl\.certificate\.location"):
        ListenerSecurity.from_settings(Settings(listener_security_protocol="SSL"))
    with pytest.raises(ListenerConfigError, match="expected one of"):
        ListenerSecurity.from_settings(Settings(listener_security_protocol="TLS"))
    users = tmp_path / "users"
    users.write_text("no-colon\n")
    with pytest.raises(ListenerConfigError, match="line 1"):
        ListenerSecurity.from_settings(
            Settings(listener_security_protocol="SASL_PLAINTEXT", sasl_users=users)
        )
    plain = ListenerSecurity.from_settings(Settings())
    assert (plain.protocol, plain.ssl_context, plain.sasl) == ("PLAINTEXT", None, None)
