"""Helpers for the Iceberg REST catalog's e2e tests: Iceberg tables made with pyiceberg's
SqlCatalog in a test broker's coordinator database (what `lakelog pipeline tables` does),
DuckDB with the pip iceberg extension, and raw HTTP calls whose answers clients hide."""

from __future__ import annotations

import base64
import importlib.util
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
from e2e_harness import BrokerProcess
from pyiceberg.catalog.sql import SqlCatalog

from lakelog.tables.locations import StoreLocations
from lakelog.tables.rest_catalog import CATALOG_NAME, NAMESPACE

SCHEMA = pa.schema(
    [
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("key", pa.string()),
        pa.field("value", pa.binary()),
    ]
)


def sql_catalog(proc: BrokerProcess) -> SqlCatalog:
    """pyiceberg's SqlCatalog on the broker's coordinator database, warehouse under the
    object store's tables/ (the layout the tables job uses)."""
    backend = proc.backend
    uri = backend.coordinator_url
    for scheme in ("postgresql://", "postgres://"):
        if uri.startswith(scheme):
            uri = "postgresql+psycopg://" + uri[len(scheme) :]
    locations = StoreLocations.from_storage_url(backend.storage_url)
    return SqlCatalog(CATALOG_NAME, uri=uri, warehouse=locations.warehouse, **locations.properties)


def make_table(catalog: SqlCatalog, name: str, batches: list[list[int]]) -> list[dict[str, Any]]:
    """Table `lakelog.<name>` with one append (one snapshot) per batch of offsets; the rows."""
    if (NAMESPACE,) not in catalog.list_namespaces():
        catalog.create_namespace(NAMESPACE)
    table = catalog.create_table(f"{NAMESPACE}.{name}", schema=SCHEMA)
    rows: list[dict[str, Any]] = []
    for offsets in batches:
        batch = [{"offset": o, "key": f"k{o}", "value": f"v{o}".encode()} for o in offsets]
        table.append(pa.Table.from_pylist(batch, schema=SCHEMA))
        rows += batch
    return rows


def sorted_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(
        ({**r, "value": bytes(r["value"]) if r["value"] is not None else None} for r in rows),
        key=lambda r: r["offset"],
    )


def duckdb_connection() -> duckdb.DuckDBPyConnection:
    """DuckDB with httpfs, avro and iceberg loaded from their pip packages (never fetched
    from the network)."""
    con = duckdb.connect(
        config={"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"}
    )
    for name in ("httpfs", "avro", "iceberg"):
        spec = importlib.util.find_spec(f"duckdb_extension_{name}")
        assert spec is not None and spec.submodule_search_locations
        root = Path(next(iter(spec.submodule_search_locations)))
        path = next(root.rglob("*.duckdb_extension"))
        con.execute(f"LOAD '{path}'")
    return con


def duckdb_rows(con: duckdb.DuckDBPyConnection, alias: str, table: str) -> list[dict[str, Any]]:
    cursor = con.execute(f'SELECT "offset", key, value FROM {alias}.{NAMESPACE}."{table}"')
    return [{"offset": o, "key": k, "value": v} for o, k, v in cursor.fetchall()]


def call(
    url: str,
    method: str = "GET",
    body: bytes | None = None,
    auth: tuple[str, str] | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any, dict[str, str]]:
    """(status, JSON body or None, headers) of one request; errors are answers too."""
    request = urllib.request.Request(url, body, method=method)
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    if auth is not None:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            raw = response.read()
            status, answer_headers = response.status, dict(response.headers)
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        status, answer_headers = exc.code, dict(exc.headers)
    return status, json.loads(raw) if raw else None, answer_headers
