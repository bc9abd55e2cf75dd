"""A table topic's table, written by `lakelog pipeline tables` (a real process), read by
engines through the broker's built-in Iceberg REST catalog, per mode, on the test's backend
(embedded, or PostgreSQL + S3 with LAKELOG_TEST_BACKEND=scaleout): DuckDB with pip's iceberg
extension and pyiceberg's RestCatalog see exactly the committed records, aborted ones
absent."""

from __future__ import annotations

import json
from pathlib import Path

from e2e_fixtures import BrokerFactory
from e2e_harness import Rec, make_records
from iceberg_support import duckdb_connection
from pipeline_clients import consume, produce, produce_transactions
from pyiceberg.catalog import load_catalog
from tables_support import MIDNIGHT, PARTITIONS, new_table_topic, run_job_process

ORDER = {
    "type": "object",
    "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
    "required": ["id", "name"],
}


def _bytes(value: object) -> bytes | None:
    return None if value is None else bytes(value)  # type: ignore[call-overload]


def test_engines_read_job_written_tables_through_the_rest_catalog(
    broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    broker = broker_factory(registry=True)
    endpoint = broker.registry_url + "/iceberg"

    kv = new_table_topic(broker, "duck-kv", {"lakelog.iceberg.mode": "key_value"})
    records = make_records(60, PARTITIONS, MIDNIGHT, tag="duck")
    produce(kv.bootstrap, kv.name, records)
    aborted = [Rec(i % PARTITIONS, b"t", b"aborted", (), MIDNIGHT) for i in range(4)]
    kept = [Rec(i % PARTITIONS, b"t", b"kept", (), MIDNIGHT) for i in range(4)]
    produce_transactions(kv.bootstrap, kv.name, [(aborted, False), (kept, True)])

    typed = new_table_topic(
        broker,
        "duck-typed",
        {
            "lakelog.iceberg.mode": "value_schema",
            "lakelog.iceberg.value.schema": json.dumps(ORDER),
        },
    )
    orders = [json.dumps({"id": i, "name": f"o{i}"}).encode() for i in range(10)]
    produce(
        typed.bootstrap,
        typed.name,
        [Rec(i % PARTITIONS, None, v, (), MIDNIGHT + i) for i, v in enumerate(orders)],
    )
    run_job_process(kv, tmp_path)
    run_job_process(typed, tmp_path)

    expected = consume(kv.bootstrap, kv.name, PARTITIONS, len(records) + len(kept))
    want = sorted((r.partition, r.offset, r.key, r.value) for r in expected)
    con = duckdb_connection()
    try:
        con.execute(
            f"ATTACH 'lakelog' AS lake (TYPE iceberg, ENDPOINT '{endpoint}', "
            "AUTHORIZATION_TYPE 'none')"
        )
        got = con.execute(
            f'SELECT "partition", "offset", key, value FROM lake.lakelog."{kv.name}"'
        ).fetchall()
        assert sorted((p, o, _bytes(k), _bytes(v)) for p, o, k, v in got) == want
        typed_rows = con.execute(
            f'SELECT id, name FROM lake.lakelog."{typed.name}" ORDER BY id'
        ).fetchall()
        assert typed_rows == [(i, f"o{i}") for i in range(10)]
    finally:
        con.close()

    rest = load_catalog("lakelog-rest", type="rest", uri=endpoint)
    frame = rest.load_table(("lakelog", kv.name)).scan().to_pandas()
    columns = (frame["partition"], frame["offset"], frame["key"], frame["value"])
    assert sorted(zip(*columns, strict=True)) == want
    assert b"aborted" not in set(frame["value"])
