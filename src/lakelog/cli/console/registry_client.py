"""How the console reads the schema registry: over its REST API at a broker's registry URL
(Confluent's API, the one every client uses), not through a coordinator. The console is a
client of the cluster like any other `lakelog` command: `lakelog console` runs apart from
the brokers and has no coordinator, and going through the API keeps the registry's logins
and ACLs in force (the console logs in as its SASL user when it has one).

Only GETs; each request in a worker thread (urllib), at most a few at once, with a
timeout. Schemas by id never change, so they are cached (bounded)."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from lakelog.config import split_host_port
from lakelog.security.client_config import ClientSecurity

REGISTRY_OFFSET = 1001
"""A broker serves its registry at its listener's port + this unless told otherwise."""
TIMEOUT_S = 10.0
MAX_CONCURRENT = 4
MAX_ANSWER_BYTES = 8 * 1024 * 1024
CACHED_SCHEMAS = 500
RETRY_AFTER_S = 30.0
"""After the registry fails to answer, pages skip it this long (each would otherwise wait
for the same timeout), saying why."""


class RegistryUnavailable(Exception):
    """The registry did not answer (or answered something that is not its API)."""


class RegistryUnreachable(RegistryUnavailable):
    """No connection to the registry (refused, timed out, TLS failed)."""


class RegistryAnswered(Exception):
    """The registry answered with one of Confluent's errors."""

    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(f"{message} (error {code})")
        self.status = status
        self.code = code


def default_registry_url(bootstrap: str) -> str:
    """The registry a broker on the first bootstrap address serves by default."""
    host, port = split_host_port(bootstrap.split(",")[0].strip())
    return f"http://{host or '127.0.0.1'}:{port + REGISTRY_OFFSET}"


def quote(subject: str) -> str:
    """A subject as a path segment (`/` too, as confluent-kafka's client sends it)."""
    return urllib.parse.quote(subject, safe="")


@dataclass(frozen=True, slots=True)
class SchemaVersion:
    subject: str
    version: int
    schema_id: int
    schema_type: str
    schema: str
    references: list[dict[str, Any]]


class RegistryReader:
    def __init__(self, url: str, security: ClientSecurity | None = None) -> None:
        self.url = url.rstrip("/")
        self._headers = {"Accept": "application/vnd.schemaregistry.v1+json"}
        s = security or ClientSecurity()
        if s.uses_sasl and s.username:
            token = base64.b64encode(f"{s.username}:{s.password or ''}".encode()).decode()
            self._headers["Authorization"] = f"Basic {token}"
        self._ssl: ssl.SSLContext | None = None
        if self.url.startswith("https:"):
            self._ssl = ssl.create_default_context(cafile=s.ca_location)
            self._ssl.check_hostname = s.check_hostname
            if not s.check_hostname:
                self._ssl.verify_mode = ssl.CERT_REQUIRED
        self._gate = asyncio.Semaphore(MAX_CONCURRENT)
        self._down_until = 0.0
        self._down_reason = ""
        self._schemas: OrderedDict[int, dict[str, Any]] = OrderedDict()

    def _get(self, path: str) -> Any:
        request = urllib.request.Request(self.url + path, headers=self._headers)
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S, context=self._ssl) as answer:
                raw = answer.read(MAX_ANSWER_BYTES + 1)
        except urllib.error.HTTPError as exc:
            try:
                body = json.loads(exc.read(65536))
                raise RegistryAnswered(exc.code, int(body["error_code"]), str(body["message"]))
            except (ValueError, KeyError, TypeError):
                raise RegistryUnavailable(f"{self.url} answered HTTP {exc.code}") from exc
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise RegistryUnreachable(f"cannot reach {self.url}: {reason}") from exc
        if len(raw) > MAX_ANSWER_BYTES:
            raise RegistryUnavailable(f"{self.url}{path}: the answer is too large")
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise RegistryUnavailable(f"{self.url}{path} answered no JSON") from exc

    async def get(self, path: str) -> Any:
        if time.monotonic() < self._down_until:
            raise RegistryUnavailable(
                f"{self._down_reason} (trying again within {RETRY_AFTER_S:g} s)"
            )
        async with self._gate:
            try:
                return await asyncio.to_thread(self._get, path)
            except RegistryUnreachable as exc:
                self._down_until = time.monotonic() + RETRY_AFTER_S
                self._down_reason = str(exc)
                raise

    async def subjects(self) -> list[str]:
        return [str(s) for s in await self.get("/subjects")]

    async def versions(self, subject: str) -> list[int]:
        return [int(v) for v in await self.get(f"/subjects/{quote(subject)}/versions")]

    async def version(self, subject: str, version: int | str) -> SchemaVersion:
        body = await self.get(f"/subjects/{quote(subject)}/versions/{version}")
        return SchemaVersion(
            str(body["subject"]),
            int(body["version"]),
            int(body["id"]),
            str(body.get("schemaType", "AVRO")),
            str(body["schema"]),
            list(body.get("references") or []),
        )

    async def compatibility(self, subject: str) -> str:
        body = await self.get(f"/config/{quote(subject)}?defaultToGlobal=true")
        return str(body.get("compatibilityLevel", ""))

    async def schema(self, schema_id: int) -> dict[str, Any]:
        """`GET /schemas/ids/{id}` (cached: an id's schema never changes)."""
        found = self._schemas.get(schema_id)
        if found is None:
            found = dict(await self.get(f"/schemas/ids/{schema_id}"))
            self._schemas[schema_id] = found
            while len(self._schemas) > CACHED_SCHEMAS:
                self._schemas.popitem(last=False)
        return found

    async def usages(self, schema_id: int) -> list[tuple[str, int]]:
        body = await self.get(f"/schemas/ids/{schema_id}/versions")
        return [(str(u["subject"]), int(u["version"])) for u in body]
