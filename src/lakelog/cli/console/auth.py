"""What guards the console's HTTP side: optional basic auth in front of every URL (pages,
/api, /static), and browser security headers on every answer.

Basic auth sends the password with every request: it protects the console only as well as
the channel does, so the console binds to 127.0.0.1 unless told otherwise. The headers
keep other sites from framing the console or running script in it (it serves no inline
script, so the policy allows only its own files)."""

from __future__ import annotations

import base64
import binascii
import hmac

from starlette.types import ASGIApp, Message, Receive, Scope, Send

REALM = "Lakelog console"


class BasicAuth:
    def __init__(self, app: ASGIApp, user: str, password: str) -> None:
        self.app = app
        self._expected = f"{user}:{password}".encode()

    def allowed(self, header: bytes | None) -> bool:
        if not header or not header.lower().startswith(b"basic "):
            return False
        try:
            given = base64.b64decode(header[6:].strip(), validate=True)
        except (binascii.Error, ValueError):
            return False
        return hmac.compare_digest(given, self._expected)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        header = dict(scope.get("headers", ())).get(b"authorization")
        if self.allowed(header):
            await self.app(scope, receive, send)
            return
        body = b"login required\n"
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"www-authenticate", f'Basic realm="{REALM}", charset="UTF-8"'.encode()),
                    (b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


HEADERS = [
    (b"content-security-policy", b"default-src 'self'; frame-ancestors 'none'"),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]


class SecurityHeaders:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *HEADERS]}
            await send(message)

        await self.app(scope, receive, with_headers)
