"""The Iceberg catalog table topics are committed to, and where their files live.

By default the catalog lives with the coordinator: pyiceberg's SqlCatalog on the same
SQLite file or PostgreSQL database (tables `iceberg_tables` and
`iceberg_namespace_properties`, created by coordinator migration 0020, so pyiceberg is told
not to create any), and the warehouse is the object store under the prefix `tables/`. One
store and one database to back up, and any engine with pyiceberg's SQL catalog (or the
REST catalog served over it) reads the tables. Setting `iceberg_catalog_uri` points the job
at an external Iceberg REST catalog instead; the data files still go to our store.

Layout under the warehouse (Kafka topic names are `[a-zA-Z0-9._-]`, so `~` never clashes):

    tables/<topic>/data/...           the topic's table, namespace `lakelog`
    tables/<topic>/metadata/...
    tables/dlq~/<topic>/...           its dead-letter table, namespace `lakelog_dlq`

The pipeline's driver and executors import this module; the broker never does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from lakelog.tables.locations import TABLES_PREFIX, StoreLocations

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.io import FileIO

    from lakelog.config import Settings

__all__ = [
    "CATALOG_NAME",
    "DLQ_NAMESPACE",
    "NAMESPACE",
    "TABLES_PREFIX",
    "Warehouse",
    "open_catalog",
    "sql_uri",
    "warehouse",
]

CATALOG_NAME = "lakelog"
NAMESPACE = "lakelog"
DLQ_NAMESPACE = "lakelog_dlq"
DLQ_DIR = "dlq~"


@dataclass(frozen=True, slots=True)
class Warehouse:
    """Where table files go (`location`, a file:// or s3:// URI ending in /tables) and the
    pyiceberg FileIO properties that reach it (S3 endpoint and credentials)."""

    location: str
    io_properties: dict[str, str]

    def table_location(self, topic: str) -> str:
        return f"{self.location}/{topic}"

    def dlq_location(self, topic: str) -> str:
        return f"{self.location}/{DLQ_DIR}/{topic}"

    def file_io(self) -> FileIO:
        from pyiceberg.io import load_file_io

        return load_file_io(self.io_properties, self.location)


def warehouse(storage_url: str) -> Warehouse:
    """The warehouse under the object store of `storage_url` (file:// or s3://), reached
    with the same S3 settings the store uses (its URL's query, else the environment):
    `StoreLocations`, which the broker's REST catalog hands to engines too."""
    locations = StoreLocations.from_storage_url(storage_url)
    if not locations.scheme:
        scheme = urlsplit(storage_url).scheme.lower()
        raise ValueError(
            f"table topics need a file:// or s3:// object store, not {scheme}:// "
            "(memory:// is per process)"
        )
    props = dict(locations.properties)
    if props.get("s3.path-style-access") == "false":
        props["s3.force-virtual-addressing"] = "true"  # pyarrow's FileIO reads this name
    return Warehouse(locations.warehouse, props)


def sql_uri(coordinator_url: str) -> str:
    """The SQLAlchemy URL of the coordinator's database: the same SQLite file
    (`sqlite:////abs/path`), or PostgreSQL through psycopg 3 (`postgresql+psycopg://`)."""
    if coordinator_url.startswith("sqlite://"):
        from lakelog.coordinator import sqlite_path

        # SQLAlchemy reads "sqlite:///a" as relative: an absolute path takes four slashes.
        return "sqlite:///" + str(sqlite_path(coordinator_url))
    for scheme in ("postgresql://", "postgres://"):
        if coordinator_url.startswith(scheme):
            return "postgresql+psycopg://" + coordinator_url.removeprefix(scheme)
    raise ValueError(f"no Iceberg SQL catalog for coordinator URL {coordinator_url.split('?')[0]}")


def open_catalog(settings: Settings) -> Catalog:
    """The catalog table topics are committed to: an external REST catalog when
    `iceberg_catalog_uri` is set, else the SQL catalog in the coordinator's database."""
    wh = warehouse(settings.resolved_storage_url)
    if settings.iceberg_catalog_uri:
        from pyiceberg.catalog.rest import RestCatalog

        props = {"uri": settings.iceberg_catalog_uri, **wh.io_properties}
        if settings.iceberg_catalog_warehouse:
            props["warehouse"] = settings.iceberg_catalog_warehouse
        return RestCatalog(CATALOG_NAME, **props)
    from pyiceberg.catalog.sql import SqlCatalog

    return SqlCatalog(
        CATALOG_NAME,
        uri=sql_uri(settings.resolved_coordinator_url),
        warehouse=wh.location,
        # Migration 0020 made the tables; pyiceberg must not create (or migrate) its own.
        init_catalog_tables="false",
        **wh.io_properties,
    )
