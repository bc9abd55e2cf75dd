"""`lakelog serve`'s schema registry: on by default on loopback at the listener's port +
1001 (next to /metrics at + 1000), moved to a free port with a warning when that one is
taken (nobody asked for it, so it never keeps the broker from starting), an error when a
chosen address is taken, and announced in the log with its URL. The same listener serves
the read-only Iceberg REST catalog at `/iceberg` (docs/iceberg-rest.md), sharing its TLS
and its logins."""

from __future__ import annotations

import logging
import ssl

from starlette.types import ASGIApp, Receive, Scope, Send

from lakelog.cli.common import UserError, describe
from lakelog.cli.console.server import EmbeddedConsole, bind
from lakelog.config import Settings, split_host_port
from lakelog.coordinator.interface import BatchCoordinator
from lakelog.log.storage.store import ObjectStorage
from lakelog.registry.access import Access
from lakelog.registry.app import build_app
from lakelog.registry.service import RegistryLimits, SchemaRegistry
from lakelog.security.authorizer import Authorizer
from lakelog.tables.catalog_rows import CatalogRows
from lakelog.tables.locations import StoreLocations
from lakelog.tables.rest_auth import RestAuth
from lakelog.tables.rest_catalog import CATALOG_NAME, IcebergRestCatalog

log = logging.getLogger("lakelog.serve")

DEFAULT_REGISTRY_OFFSET = 1001
"""An unset `schema_registry_listen` serves on 127.0.0.1 at the listener's port + this
(10093 for 9092), beside /metrics at + 1000."""
BODY_SLACK = 65_536
ICEBERG_PATH = "/iceberg"


def default_registry_listen(listen: str) -> str:
    _, port = split_host_port(listen)
    wanted = port + DEFAULT_REGISTRY_OFFSET if port else 0
    return f"127.0.0.1:{wanted if wanted <= 65535 else 0}"


def registry_app_for(
    settings: Settings,
    coordinator: BatchCoordinator,
    authorizer: Authorizer | None,
    storage: ObjectStorage | None = None,
) -> object:
    """The registry's app; given the broker's object store, with the Iceberg REST catalog
    mounted at /iceberg (sharing the registry's logins)."""
    limits = RegistryLimits(
        max_schema_bytes=settings.schema_registry_max_schema_bytes,
        max_subjects=settings.schema_registry_max_subjects,
        max_versions=settings.schema_registry_max_versions,
    )
    max_body = 2 * settings.schema_registry_max_schema_bytes + BODY_SLACK
    basic = settings.schema_registry_auth == "basic"
    # Without logins every request is ANONYMOUS: ACLs apply only to logged-in users.
    access = Access(coordinator, authorizer if basic else None, basic)
    registry = build_app(SchemaRegistry(coordinator, limits), max_body, access)
    if storage is None:
        return registry
    iceberg = IcebergRestCatalog(
        CatalogRows(settings.resolved_coordinator_url, CATALOG_NAME),
        storage,
        StoreLocations.from_storage_url(settings.resolved_storage_url),
        RestAuth(access),
        authorizer,
    )
    return _with_iceberg(registry, iceberg.app(ICEBERG_PATH))


def _with_iceberg(registry: ASGIApp, iceberg: ASGIApp) -> ASGIApp:
    """Requests under /iceberg go to the catalog, the rest (and lifespan) to the registry."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and (
            path == ICEBERG_PATH or path.startswith(ICEBERG_PATH + "/")
        ):
            await iceberg(scope, receive, send)
        else:
            await registry(scope, receive, send)

    return app


async def start_registry(
    settings: Settings,
    coordinator: BatchCoordinator,
    authorizer: Authorizer | None = None,
    storage: ObjectStorage | None = None,
) -> EmbeddedConsole | None:
    """The registry serving inside the broker's loop (None when turned off)."""
    wanted = settings.schema_registry_listen
    if wanted == "":
        log.info("no schema registry (--schema-registry-listen is empty)")
        return None
    if wanted is None:
        default = default_registry_listen(settings.listen)
        try:
            sock = bind(default)
        except OSError as exc:
            sock = bind("127.0.0.1:0")
            log.warning(
                "cannot serve the schema registry on %s (%s): serving it on port %d instead "
                "(--schema-registry-listen HOST:PORT chooses, '' turns it off)",
                default,
                describe(exc),
                sock.getsockname()[1],
            )
    else:
        try:
            sock = bind(wanted)
        except OSError as exc:
            raise UserError(
                f"cannot listen on {wanted} (--schema-registry-listen): {describe(exc)}"
            ) from exc
    options: dict[str, object] = {}
    if settings.schema_registry_tls:
        if settings.ssl_certificate_location is None or settings.ssl_key_location is None:
            sock.close()
            raise UserError(
                "schema_registry_tls needs ssl_certificate_location and ssl_key_location"
            )
        try:  # a bad file is one clear error here, not a failed task later
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(
                settings.ssl_certificate_location,
                settings.ssl_key_location,
                settings.ssl_key_password,
            )
        except (OSError, ssl.SSLError) as exc:
            sock.close()
            raise UserError(f"schema_registry_tls: {describe(exc)}") from exc
        options = {
            "ssl_certfile": str(settings.ssl_certificate_location),
            "ssl_keyfile": str(settings.ssl_key_location),
            "ssl_keyfile_password": settings.ssl_key_password,
        }
    scheme = "https" if options else "http"
    host, port = sock.getsockname()[:2]
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    shown = f"[{host}]" if ":" in host else host
    app = registry_app_for(settings, coordinator, authorizer, storage)
    server = EmbeddedConsole(app, sock, **options)  # type: ignore[arg-type]
    if storage is None:
        log.info("schema registry at %s://%s:%d", scheme, shown, port)
    else:
        log.info(
            "schema registry at %s://%s:%d, Iceberg REST catalog at %s://%s:%d%s",
            scheme, shown, port, scheme, shown, port, ICEBERG_PATH,
        )  # fmt: skip
    return server
