"""A read-only Apache Iceberg REST catalog (the REST Catalog OpenAPI spec) over the tables
`lakelog pipeline tables` commits into the SQL catalog beside the coordinator, so engines
(DuckDB, Spark, Trino, pyiceberg) connect with a URL instead of a database password.

Served by every broker at `/iceberg` on the schema registry's listener (its TLS, its
logins): GET /v1/config, the namespace and table listings, HEAD for existence and
loadTable, whose metadata is the table's current metadata JSON read from the object store
(capped at MAX_METADATA_BYTES) with the FileIO properties an engine needs to read the data
files. Every write endpoint answers 406 UnsupportedOperationException; every failure is
the spec's `{"error": {...}}` body, never a traceback.

Table `lakelog.<t>` is topic `<t>`: listing needs DESCRIBE on the topic, loading READ
(the ACL is checked before existence, so a table nobody may see does not reveal itself).
The broker never imports pyiceberg or pyarrow for this: rows come from
`catalog_rows`, files from `ObjectStorage`."""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from lakelog.log.storage.store import ObjectNotFoundError, ObjectStorage, StorageError
from lakelog.security.acl import Operation, ResourceType
from lakelog.security.authorizer import Authorizer
from lakelog.tables import rest_errors as err
from lakelog.tables.catalog_rows import CatalogRows, CatalogUnavailable
from lakelog.tables.locations import StoreLocations
from lakelog.tables.rest_auth import RestAuth
from lakelog.tables.rest_errors import IcebergError

log = logging.getLogger(__name__)

CATALOG_NAME = "lakelog"
"""The SqlCatalog name the tables job commits under (`catalog_name` in its rows)."""
NAMESPACE = "lakelog"
"""Table topics' namespace: table `lakelog.<topic>`."""
PREFIX = "lakelog"
"""The `{prefix}` path segment /v1/config tells clients to use."""
MAX_METADATA_BYTES = 16 * 1024 * 1024
"""A metadata JSON larger than this (stored or unzipped) is refused, not loaded. The tables
job's metadata, with old snapshots expired, is a few KiB to a few MiB."""
MAX_CONCURRENT_LOADS = 2
"""Metadata files read and parsed at once (each may take several times its size in
memory while parsed); further loads wait their turn."""
DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1_000
MAX_UNPAGED = 10_000
"""A listing without pageToken answers everything, up to this many (then a next-page-token)."""
MAX_NAME = 255
"""Namespace parts and table names longer than this are malformed (SqlCatalog's columns)."""
MAX_NAMESPACE_LEVELS = 16
SEPARATOR = "\x1f"
MAX_DISCARD_BYTES = 16 * 1024 * 1024
"""A request body (never used) read and dropped before the answer, at most."""

ENDPOINTS = [
    "GET /v1/{prefix}/namespaces",
    "GET /v1/{prefix}/namespaces/{namespace}",
    "HEAD /v1/{prefix}/namespaces/{namespace}",
    "GET /v1/{prefix}/namespaces/{namespace}/tables",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "GET /v1/{prefix}/namespaces/{namespace}/views",
]
"""What /v1/config says we serve: clients (Java since 1.7, pyiceberg, DuckDB) then do not
try the write endpoints, nor send scan metrics."""


def topic_of(namespace: str, table: str) -> str:
    """The topic whose ACLs decide about a table: the one of the same name, whatever the
    namespace (`lakelog.<t>` and a dead-letter table of `<t>` in another namespace)."""
    return table


@dataclass(frozen=True)
class _Page:
    after: str
    size: int
    paged: bool


class IcebergRestCatalog:
    def __init__(
        self,
        rows: CatalogRows,
        storage: ObjectStorage,
        locations: StoreLocations,
        auth: RestAuth,
        authorizer: Authorizer | None,
    ) -> None:
        self.rows = rows
        self.storage = storage
        self.locations = locations
        self.auth = auth
        self.authorizer = authorizer if auth.enabled else None
        self._loads = asyncio.Semaphore(MAX_CONCURRENT_LOADS)

    # -- helpers
    def _may(self, request: Request, namespace: str, table: str, op: Operation) -> bool:
        if self.authorizer is None:
            return True
        host = request.client.host if request.client else ""
        return self.authorizer.allowed(
            request.state.principal, host, ResourceType.TOPIC, topic_of(namespace, table), op
        )

    def _require(self, request: Request, namespace: str, table: str, op: Operation) -> None:
        if not self._may(request, namespace, table, op):
            raise err.forbidden(f"User is denied operation {op.name} on table {namespace}.{table}")

    async def _namespace(self, namespace: str) -> dict[str, str]:
        props = await self.rows.namespace_properties(namespace)
        if props is None:
            raise err.no_such_namespace(namespace)
        return props

    # -- endpoints
    async def config(self, request: Request) -> Any:
        return {
            "defaults": {},
            "overrides": {"prefix": PREFIX},
            "endpoints": ENDPOINTS,
        }

    async def list_namespaces(self, request: Request) -> Any:
        parent_raw = request.query_params.get("parent", "")
        parent = _namespace_parts(parent_raw) if parent_raw else []
        page = _page(request)
        known = await self.rows.namespaces()
        if (
            parent
            and ".".join(parent) not in known
            and not any(n.startswith(".".join(parent) + ".") for n in known)
        ):
            raise err.no_such_namespace(".".join(parent))
        children: set[str] = set()
        depth = len(parent)
        for name in known:
            parts = name.split(".")
            if len(parts) > depth and parts[:depth] == parent:
                children.add(".".join(parts[: depth + 1]))
        chosen = sorted(c for c in children if c > page.after)
        shown, token = _cut(chosen, page)
        return {"namespaces": [name.split(".") for name in shown], "next-page-token": token}

    async def load_namespace(self, request: Request, namespace: str) -> Any:
        props = await self._namespace(namespace)
        if request.method == "HEAD":
            return Response(status_code=204)
        return {"namespace": namespace.split("."), "properties": props}

    async def list_tables(self, request: Request, namespace: str) -> Any:
        await self._namespace(namespace)
        page = _page(request)
        names = await self.rows.tables(namespace, page.after, page.size + 1)
        shown, token = _cut(names, page)
        visible = [n for n in shown if self._may(request, namespace, n, Operation.DESCRIBE)]
        identifiers = [{"namespace": namespace.split("."), "name": n} for n in visible]
        return {"identifiers": identifiers, "next-page-token": token}

    async def list_views(self, request: Request, namespace: str) -> Any:
        await self._namespace(namespace)
        return {"identifiers": [], "next-page-token": None}

    async def load_view(self, request: Request, namespace: str, view: str) -> Any:
        raise err.no_such_view(f"{namespace}.{view}")

    async def load_table(self, request: Request, namespace: str, table: str) -> Any:
        head = request.method == "HEAD"
        self._require(request, namespace, table, Operation.DESCRIBE if head else Operation.READ)
        location = await self.rows.metadata_location(namespace, table)
        if location is None:
            # Say which is missing, as the spec's clients expect.
            await self._namespace(namespace)
            raise err.no_such_table(f"{namespace}.{table}")
        if head:
            return Response(status_code=204)
        async with self._loads:
            metadata = await self._metadata(location)
        if request.query_params.get("snapshots", "all") == "refs":
            metadata = _only_referenced(metadata)
        return {
            "metadata-location": location,
            "metadata": metadata,
            "config": dict(self.locations.properties),
        }

    async def _metadata(self, location: str) -> dict[str, Any]:
        return await read_metadata(self.storage, self.locations, location)

    # -- the app
    def app(self, mount: str) -> ASGIApp:
        """The ASGI app for requests under `mount` (e.g. "/iceberg"). Not Starlette's
        router: its patterns do not match every path a client can send (a decoded CR or LF,
        say), and every path here must get the error model."""

        async def dispatch(request: Request, path: str) -> Response:
            head = request.method == "HEAD"
            try:
                if path == "v1/oauth/tokens" and request.method == "POST":
                    return await self.auth.token(request)
                if request.method not in ("GET", "HEAD"):
                    await _discard_body(request)
                request.state.principal = await self.auth.principal(request)
                answer = await self._route(request, path)
            except IcebergError as exc:
                response = exc.response(head)
                if exc.status == 401 and self.auth.enabled:
                    response.headers["WWW-Authenticate"] = 'Basic realm="lakelog iceberg"'
                return response
            except CatalogUnavailable as exc:
                return err.unavailable(f"catalog database: {exc}").response(head)
            except Exception:
                log.exception("iceberg rest: %s %r failed", request.method, path[:200])
                return err.server_error("internal error").response(head)
            if isinstance(answer, Response):
                return answer
            return Response(json.dumps(answer), 200, media_type="application/json")

        async def asgi(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                return
            path = scope.get("path", "")[len(mount) :].removeprefix("/")
            response = await dispatch(Request(scope, receive), path)
            await response(scope, receive, send)

        return asgi

    async def _route(self, request: Request, path: str) -> Any:
        parts = path.split("/")
        if parts and parts[-1] == "" and len(parts) > 1:
            parts = parts[:-1]  # one trailing slash is tolerated
        method = request.method
        if len(path) > 4096 or not parts or parts[0] != "v1":
            raise err.bad_request("not an Iceberg REST catalog path (expected /v1/...)")
        if parts == ["v1", "config"]:
            return await self._reading(method, "getConfig", self.config, request)
        if parts[1:2] == ["oauth"]:
            raise err.bad_request("the token endpoint is POST /v1/oauth/tokens")
        if len(parts) < 3 or parts[1] != PREFIX:
            raise err.bad_request(f"unknown catalog prefix (GET /v1/config names {PREFIX!r})")
        rest = parts[2:]
        handler = self._resolve(rest, method)
        return await handler(request)

    def _resolve(self, rest: list[str], method: str) -> Callable[[Request], Awaitable[Any]]:
        reading = method in ("GET", "HEAD")

        def writing(what: str) -> Callable[[Request], Awaitable[Any]]:
            async def refuse(request: Request) -> Any:
                raise err.read_only(what)

            return refuse

        if rest == ["namespaces"]:
            if reading:
                return self.list_namespaces
            return writing("createNamespace")
        if rest in (["tables", "rename"], ["views", "rename"], ["transactions", "commit"]):
            return writing("/".join(rest))
        if len(rest) < 2 or rest[0] != "namespaces":
            raise err.bad_request("unknown Iceberg REST catalog path")
        namespace = ".".join(_namespace_parts(rest[1]))
        tail = rest[2:]
        if not tail:
            if reading:
                return lambda r: self.load_namespace(r, namespace)
            return writing("namespace changes")
        if tail == ["properties"] or tail == ["register"] or tail == ["register-view"]:
            return writing(tail[0])
        if tail[0] in ("tables", "views") and len(tail) == 1:
            if method != "GET":
                return writing(f"create {tail[0][:-1]}")
            return (
                (lambda r: self.list_tables(r, namespace))
                if tail[0] == "tables"
                else (lambda r: self.list_views(r, namespace))
            )
        if tail[0] in ("tables", "views") and len(tail) >= 2:
            name = _name(tail[1])
            if len(tail) > 2:
                if reading:
                    raise err.bad_request("unknown Iceberg REST catalog path")
                return writing(f"{tail[0][:-1]} {'/'.join(tail[2:])}")
            if not reading:
                return writing(f"{method} {tail[0][:-1]}")
            if tail[0] == "tables":
                return lambda r: self.load_table(r, namespace, name)
            return lambda r: self.load_view(r, namespace, name)
        raise err.bad_request("unknown Iceberg REST catalog path")

    async def _reading(
        self, method: str, what: str, handler: Callable[[Request], Awaitable[Any]], request: Request
    ) -> Any:
        if method not in ("GET", "HEAD"):
            raise err.read_only(what)
        return await handler(request)


async def _discard_body(request: Request) -> None:
    """Read and drop a request's body (no endpoint here takes one), so the client, still
    sending, gets our answer rather than a reset; past MAX_DISCARD_BYTES, 413."""
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_DISCARD_BYTES:
            raise IcebergError(413, "BadRequestException", "request body too large")


def _name(text: str) -> str:
    if not text or len(text) > MAX_NAME or any(ord(c) < 32 or c == "\x7f" for c in text):
        raise err.bad_request("malformed name in path")
    return text


def _namespace_parts(text: str) -> list[str]:
    parts = text.split(SEPARATOR)
    if len(parts) > MAX_NAMESPACE_LEVELS:
        raise err.bad_request("namespace has too many levels")
    return [_name(p) for p in parts]


def _page(request: Request) -> _Page:
    token = request.query_params.get("pageToken")
    size_text = request.query_params.get("pageSize")
    size = MAX_UNPAGED if token is None else DEFAULT_PAGE_SIZE
    if size_text is not None:
        if not size_text.isdigit() or not 0 < int(size_text) <= 1_000_000:
            raise err.bad_request("pageSize must be a positive integer")
        size = min(int(size_text), MAX_PAGE_SIZE if token is not None else MAX_UNPAGED)
    after = ""
    if token:
        if len(token) > 4 * MAX_NAME:
            raise err.bad_request("malformed pageToken")
        try:
            padded = token + "=" * (-len(token) % 4)
            after = base64.b64decode(padded, altchars=b"-_", validate=True).decode()
        except (binascii.Error, UnicodeDecodeError, ValueError):
            raise err.bad_request("malformed pageToken") from None
    return _Page(after, size, token is not None)


def _cut(names: list[str], page: _Page) -> tuple[list[str], str | None]:
    """The page's names and the token for the next one (None at the end)."""
    if len(names) <= page.size:
        return names, None
    shown = names[: page.size]
    return shown, base64.urlsafe_b64encode(shown[-1].encode()).decode().rstrip("=")


async def read_metadata(
    storage: ObjectStorage, locations: StoreLocations, location: str
) -> dict[str, Any]:
    """A table's metadata JSON at `location` in the broker's object store (gzipped or not,
    at most MAX_METADATA_BYTES), for loadTable and the broker's table gauges. Every
    failure is an IcebergError saying what is wrong."""
    key = locations.key_of(location)
    if key is None:
        raise err.server_error("the table's metadata is outside the broker's object store")
    try:
        raw = bytes(await storage.get(key))
    except ObjectNotFoundError:
        raise err.server_error(f"the table's metadata file is missing: {location}") from None
    except StorageError as exc:
        raise err.unavailable(f"object store: {exc}") from None
    if len(raw) > MAX_METADATA_BYTES:
        raise err.server_error(f"table metadata larger than {MAX_METADATA_BYTES} bytes")
    if raw[:2] == b"\x1f\x8b":
        raw = _gunzip(raw)
    try:
        metadata = json.loads(raw)
    except ValueError:
        raise err.server_error("the table's metadata file is not JSON") from None
    if not isinstance(metadata, dict):
        raise err.server_error("the table's metadata file is not a JSON object")
    return metadata


def _gunzip(raw: bytes) -> bytes:
    inflater = zlib.decompressobj(wbits=31)
    try:
        out = inflater.decompress(raw, MAX_METADATA_BYTES + 1)
    except zlib.error:
        raise err.server_error("the table's metadata file is corrupt") from None
    if len(out) > MAX_METADATA_BYTES:
        raise err.server_error(f"table metadata larger than {MAX_METADATA_BYTES} bytes")
    return out


def _only_referenced(metadata: dict[str, Any]) -> dict[str, Any]:
    """`snapshots=refs`: only the snapshots a branch or tag points at."""
    refs = metadata.get("refs")
    snapshots = metadata.get("snapshots")
    if not isinstance(refs, dict) or not isinstance(snapshots, list):
        return metadata
    wanted = {r.get("snapshot-id") for r in refs.values() if isinstance(r, dict)}
    current = metadata.get("current-snapshot-id")
    wanted.add(current)
    kept = [s for s in snapshots if isinstance(s, dict) and s.get("snapshot-id") in wanted]
    return {**metadata, "snapshots": kept}
