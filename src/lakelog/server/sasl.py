"""The listener's SASL gate, one per connection of a SASL listener (KIP-43, KIP-152,
KIP-368).

Before a client has authenticated it may send only ApiVersions (answered by the normal
dispatch), SaslHandshake v0-1 and SaslAuthenticate v0-2 (answered here); anything else
closes the connection, as Kafka does. After a v0 handshake (before KIP-152) the SASL
tokens travel as bare length-prefixed frames instead of SaslAuthenticate requests, and a
failure closes the connection without an answer. A refused mechanism or wrong
credentials get their error code, then the connection is closed.

Re-authentication (KIP-368): with `connections.max.reauth.ms` > 0, a successful
SaslAuthenticate v1+ tells the client its session lifetime; a SaslHandshake on an
authenticated connection starts a new login (same mechanism, same principal), and a
connection whose session expired is closed at its next other request. Answers are
computed asynchronously (a SCRAM login may read the coordinator); the connection reads
nothing more until each is ready, so frames keep their order and one answer at most is
in the works."""

from __future__ import annotations

import datetime
import logging
import time
from collections.abc import Callable
from typing import Any

from lakelog.log.protocol.frames import (
    API_VERSIONS_KEY,
    MalformedRequest,
    api_schema,
    decode_body,
    encode_response,
    parse_header,
)
from lakelog.security.credentials import LoginCredentials
from lakelog.security.principal import user_principal
from lakelog.security.scram import HASHES, ScramError, ScramServer
from lakelog.util import metrics
from lakelog.util.errors import ErrorCode

log = logging.getLogger(__name__)

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
SASL_VERSIONS = {SASL_HANDSHAKE: (0, 1), SASL_AUTHENTICATE: (0, 2)}
"""What ApiVersions advertises on a SASL listener. librdkafka 2.0 counts a broker as
supporting SaslHandshake only if v0 is in its range, and then speaks v1."""
MAX_UNAUTHENTICATED_FRAME = 512 * 1024
"""Kafka's sasl.server.max.receive.size: a stranger cannot make us allocate more."""
MIN_REAUTH_INTERVAL_S = 1.0
"""Kafka refuses a re-authentication sooner than this after the last one."""
FAILED = "Authentication failed: invalid credentials with SASL mechanism {}"


class SaslRejected(Exception):
    """The frame is not allowed before authentication: close the connection."""


def api_key_of(frame: memoryview) -> int:
    return int.from_bytes(frame[:2], "big") if len(frame) >= 2 else -1


class SaslSession:
    def __init__(
        self,
        credentials: LoginCredentials,
        peer: str,
        reauth_ms: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._credentials = credentials
        self._peer = peer
        self._reauth_ms = reauth_ms
        self._clock = clock
        self._mechanism: str | None = None
        self._scram: ScramServer | None = None
        self._raw_tokens = False
        """After a v0 handshake: the next frames are bare SASL tokens."""
        self._authenticate_version = 0
        self._previous: tuple[str, str] | None = None
        """(mechanism, principal) of the session being re-authenticated."""
        self._authenticated_at = 0.0
        self.authenticated = False
        self.principal: str | None = None
        """`User:<name>` once authenticated (kept while re-authenticating)."""
        self.expires_at: float | None = None
        """Clock time after which the session must re-authenticate (None: never)."""
        self.close_after_reply = False
        """Set with a failure answer: the connection closes once it is written."""

    def accepts_without_login(self, frame: memoryview) -> bool:
        """ApiVersions goes to the normal dispatch; SASL frames come here (`answer`)."""
        return not self._raw_tokens and api_key_of(frame) == API_VERSIONS_KEY

    def expired(self) -> bool:
        return self.expires_at is not None and self._clock() >= self.expires_at

    def begin_reauthentication(self) -> bool:
        """A SaslHandshake on an authenticated connection: start a new login, or False
        (answered as a request not allowed now) if the last one was under a second ago."""
        if self._clock() - self._authenticated_at < MIN_REAUTH_INTERVAL_S:
            return False
        assert self._mechanism is not None and self.principal is not None
        self._previous = (self._mechanism, self.principal)
        self._mechanism, self._scram, self._raw_tokens = None, None, False
        self.authenticated = False
        return True

    async def answer(self, frame: memoryview) -> bytes:
        """The response frame to a SaslHandshake/SaslAuthenticate (or a bare token after
        a v0 handshake); SaslRejected for anything else."""
        if self._raw_tokens:
            return await self._raw_token(bytes(frame))
        try:
            header = parse_header(frame)
        except MalformedRequest as exc:
            raise SaslRejected(f"malformed request before authentication: {exc}") from exc
        versions = SASL_VERSIONS.get(header.api_key)
        if versions is None or not versions[0] <= header.api_version <= versions[1]:
            raise SaslRejected(
                f"API {header.api_key} v{header.api_version} before SASL authentication"
            )
        schema = api_schema(header.api_key, header.api_version)
        if schema is None:
            raise SaslRejected(f"no schema for API {header.api_key} v{header.api_version}")
        try:
            request = decode_body(schema, frame, header)
        except MalformedRequest as exc:
            raise SaslRejected(str(exc)) from exc
        m = schema.response_cls
        if header.api_key == SASL_HANDSHAKE:
            response = self._handshake(m, request, header.api_version)
        else:
            self._authenticate_version = header.api_version
            response = await self._authenticate(m, request)
        return encode_response(
            schema, header.correlation_id, response, header_flexible=schema.flexible
        )

    def _handshake(self, cls: type, request: Any, version: int) -> Any:
        mechanisms = tuple(self._credentials.mechanisms)
        if self._mechanism is not None:
            self.close_after_reply = True
            return cls(error_code=ErrorCode.illegal_sasl_state, mechanisms=mechanisms)
        wanted = str(request.mechanism).upper()
        if wanted not in mechanisms:
            log.warning("closing %s: SASL mechanism %r not enabled", self._peer, wanted[:64])
            self.close_after_reply = True
            return cls(error_code=ErrorCode.unsupported_sasl_mechanism, mechanisms=mechanisms)
        if self._previous is not None and (wanted != self._previous[0] or version == 0):
            log.warning(
                "closing %s: re-authentication must use SaslHandshake v1 and mechanism %s",
                self._peer,
                self._previous[0],
            )
            self.close_after_reply = True
            return cls(error_code=ErrorCode.illegal_sasl_state, mechanisms=mechanisms)
        self._mechanism = wanted
        self._raw_tokens = version == 0
        if wanted in HASHES:
            self._scram = ScramServer(wanted)
        return cls(error_code=ErrorCode.none, mechanisms=mechanisms)

    async def _raw_token(self, token: bytes) -> bytes:
        """A bare token after a v0 handshake: the bare answer token, size-prefixed; a
        failure closes the connection without an answer, as Kafka does."""
        error, _message, answer = await self._step(token)
        if error != ErrorCode.none:
            raise SaslRejected(f"SASL {self._mechanism} authentication failed (v0 handshake)")
        if self.authenticated:
            self._raw_tokens = False
        return len(answer).to_bytes(4, "big") + answer

    async def _authenticate(self, cls: type, request: Any) -> Any:
        if self._mechanism is None:
            self.close_after_reply = True
            return self._reply(cls, ErrorCode.illegal_sasl_state, "SaslHandshake first")
        error, message, token = await self._step(bytes(request.auth_bytes))
        return self._reply(cls, error, message, token)

    async def _step(self, token: bytes) -> tuple[ErrorCode, str | None, bytes]:
        """One token of the login: (error, message, answer token)."""
        mechanism = self._mechanism
        assert mechanism is not None
        if mechanism == "PLAIN":
            parts = token.split(b"\0")
            if len(parts) == 3:
                authzid, user, password = (p.decode("utf-8", "replace") for p in parts)
                if authzid in ("", user) and self._credentials.check_plain(user, password):
                    return self._ok(mechanism, user, b"")
                return self._fail(mechanism, user)
            return self._fail(mechanism, "?")
        scram = self._scram
        assert scram is not None
        try:
            if not scram.username:
                user = scram.read_first(token)
                try:
                    cred = await self._credentials.scram(mechanism, user)
                except Exception as exc:  # the coordinator is down: the client retries
                    raise SaslRejected(f"SCRAM credential lookup failed: {exc!r}") from exc
                return ErrorCode.none, None, scram.answer_first(cred)
            return self._ok(mechanism, scram.username, scram.final(token))
        except ScramError as exc:
            log.info("%s: SCRAM exchange refused: %s", self._peer, exc)
            return self._fail(mechanism, scram.username or "?")

    def _ok(self, mechanism: str, user: str, token: bytes) -> tuple[ErrorCode, str | None, bytes]:
        principal = user_principal(user)
        if self._previous is not None and principal != self._previous[1]:
            self.close_after_reply = True
            log.warning(
                "closing %s: re-authentication as %r, not %r",
                self._peer,
                principal,
                self._previous[1],
            )
            return (
                ErrorCode.sasl_authentication_failed,
                "Cannot change principals during re-authentication",
                b"",
            )
        self.authenticated = True
        self.principal = principal
        self._previous = None
        self._authenticated_at = self._clock()
        self.expires_at = (
            self._authenticated_at + self._reauth_ms / 1000 if self._reauth_ms > 0 else None
        )
        metrics.sasl_authentications_total.labels(mechanism=mechanism, result="ok").inc()
        log.debug("%s authenticated as %r with %s", self._peer, user, mechanism)
        return ErrorCode.none, None, token

    def _fail(self, mechanism: str, user: str) -> tuple[ErrorCode, str | None, bytes]:
        self.close_after_reply = True
        metrics.sasl_authentications_total.labels(mechanism=mechanism, result="failed").inc()
        log.warning(
            "closing %s: SASL %s authentication failed for user %r", self._peer, mechanism, user
        )
        return ErrorCode.sasl_authentication_failed, FAILED.format(mechanism), b""

    def _reply(self, cls: type, error: ErrorCode, message: str | None, token: bytes = b"") -> Any:
        lifetime = 0
        if self.authenticated and error == ErrorCode.none and self._reauth_ms > 0:
            lifetime = self._reauth_ms
        fields: dict[str, Any] = {
            "error_code": error,
            "error_message": message,
            "auth_bytes": token,
            "session_lifetime": datetime.timedelta(milliseconds=lifetime),
        }
        names = cls.__dataclass_fields__  # type: ignore[attr-defined]
        return cls(**{k: v for k, v in fields.items() if k in names})
