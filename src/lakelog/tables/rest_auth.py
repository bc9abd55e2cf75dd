"""Who is asking the REST catalog. Engines authenticate to Iceberg REST catalogs in two
ways, and both end at the schema registry's login (SCRAM users in the coordinator):

- HTTP basic auth (pyiceberg's `auth.type = basic`), checked by the registry's `Access`;
- OAuth2 client credentials (DuckDB's CLIENT_ID/CLIENT_SECRET, Spark's and pyiceberg's
  `credential = user:password`): `POST /v1/oauth/tokens` checks the pair the same way
  and answers a bearer token, an HMAC of the user and an expiry under a key this process
  drew at start. A token is therefore good on the broker that issued it, for
  TOKEN_TTL_S; clients fetch a new one when told 401.

With the registry's auth off every request is ANONYMOUS and the token endpoint hands out
an ANONYMOUS token to whoever asks (clients configured with credentials keep working)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import time
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import Response

from lakelog.registry.access import ANONYMOUS, Access
from lakelog.registry.errors import RegistryError
from lakelog.tables.rest_errors import not_authorized

TOKEN_TTL_S = 3600
MAX_FORM_BYTES = 8192
MAX_TOKEN = 2048


class RestAuth:
    def __init__(self, access: Access) -> None:
        self._access = access
        self._key = secrets.token_bytes(32)

    @property
    def enabled(self) -> bool:
        return self._access.basic_auth

    async def principal(self, request: Request) -> str:
        header = request.headers.get("authorization")
        if not self.enabled:
            return ANONYMOUS
        if header and header[:7].lower() == "bearer ":
            user = self._verify(header[7:].strip())
            if user is None:
                raise not_authorized("Unauthorized: bad or expired token")
            return f"User:{user}"
        try:
            return await self._access.principal(header)
        except RegistryError as exc:
            raise not_authorized(exc.message) from None

    def _sign(self, payload: bytes) -> str:
        return base64.urlsafe_b64encode(hmac.new(self._key, payload, hashlib.sha256).digest())[
            :43
        ].decode()

    def _issue(self, user: str) -> str:
        payload = json.dumps([user, int(time.time()) + TOKEN_TTL_S]).encode()
        body = base64.urlsafe_b64encode(payload).decode().rstrip("=")
        return f"{body}.{self._sign(payload)}"

    def _verify(self, token: str) -> str | None:
        if len(token) > MAX_TOKEN or token.count(".") != 1:
            return None
        body, signature = token.split(".")
        try:
            payload = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
            user, expiry = json.loads(payload)
        except (binascii.Error, ValueError, TypeError):
            return None
        if not hmac.compare_digest(signature, self._sign(payload)):
            return None
        if not isinstance(user, str) or not isinstance(expiry, int) or expiry < time.time():
            return None
        return user

    async def token(self, request: Request) -> Response:
        """OAuth2's token endpoint, client credentials grant (RFC 6749 section 4.4)."""
        declared = request.headers.get("content-length", "0")
        if not declared.isdigit() or int(declared) > MAX_FORM_BYTES:
            return _oauth_error(400, "invalid_request", "request body too large")
        raw = b""
        async for chunk in request.stream():
            raw += chunk
            if len(raw) > MAX_FORM_BYTES:
                return _oauth_error(400, "invalid_request", "request body too large")
        try:
            form = {k: v[0] for k, v in parse_qs(raw.decode(), max_num_fields=20).items()}
        except (UnicodeDecodeError, ValueError):
            return _oauth_error(400, "invalid_request", "malformed form body")
        if form.get("grant_type") != "client_credentials":
            return _oauth_error(400, "unsupported_grant_type", "only client_credentials")
        user, password = form.get("client_id", ""), form.get("client_secret", "")
        if not user and request.headers.get("authorization", "")[:6].lower() == "basic ":
            try:
                decoded = base64.b64decode(request.headers["authorization"][6:].strip()).decode()
            except (binascii.Error, UnicodeDecodeError, ValueError):
                decoded = ""
            user, _, password = decoded.partition(":")
        if self.enabled:
            plain = base64.b64encode(f"{user}:{password}".encode()).decode()
            try:
                await self._access.principal(f"Basic {plain}")
            except RegistryError:
                return _oauth_error(401, "invalid_client", "bad client id or secret")
        else:
            user = "ANONYMOUS"
        body = {
            "access_token": self._issue(user),
            "token_type": "bearer",
            "expires_in": TOKEN_TTL_S,
            "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
        }
        return Response(json.dumps(body), 200, media_type="application/json")


def _oauth_error(status: int, error: str, description: str) -> Response:
    body = {"error": error, "error_description": description}
    return Response(json.dumps(body), status, media_type="application/json")
