"""Migration 0020: the coordinator's database holds the Iceberg SQL catalog of table
topics, in exactly the layout pyiceberg's SqlCatalog uses (it is told not to create its
own), on both engines: namespaces, tables and commits work through it."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.exceptions import CommitFailedException

from lakelog.coordinator import BatchCoordinator
from lakelog.tables.catalog import sql_uri


async def test_pyiceberg_sql_catalog_works_on_the_migrated_tables(
    coordinator: BatchCoordinator, coordinator_url: str, tmp_path: Path
) -> None:
    from pyiceberg.catalog.sql import SqlCatalog

    def catalog() -> SqlCatalog:
        return SqlCatalog(
            "lakelog",
            uri=sql_uri(coordinator_url),
            warehouse=f"file://{tmp_path}/tables",
            init_catalog_tables="false",
        )

    first = catalog()
    assert first._schema_version == "v1"  # the migration's layout, not pyiceberg's v0
    first.create_namespace("lakelog")
    schema = pa.schema([pa.field("offset", pa.int64()), pa.field("value", pa.binary())])
    # As the tables job makes them: a commit that lost a race fails instead of rebasing.
    table = first.create_table(
        ("lakelog", "orders.v1"), schema=schema, properties={"commit.retry.num-retries": "0"}
    )
    table.append(pa.table({"offset": [0, 1], "value": [b"a", None]}, schema=schema))

    # Another catalog on the same database sees the commit, and a stale writer is refused.
    second = catalog()
    assert second.list_tables("lakelog") == [("lakelog", "orders.v1")]
    seen = second.load_table(("lakelog", "orders.v1"))
    assert seen.scan().to_arrow().column("offset").to_pylist() == [0, 1]
    seen.append(pa.table({"offset": [2], "value": [b"c"]}, schema=schema))
    with pytest.raises(CommitFailedException):
        table.append(pa.table({"offset": [2], "value": [b"stale"]}, schema=schema))
    assert len(first.load_table(("lakelog", "orders.v1")).scan().to_arrow()) == 3
