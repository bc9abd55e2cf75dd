"""Rows of table topics from the reader's record batches: key_value columns, typed
value_schema columns with a key schema, the dead-letter rows and their reasons, and the
time buckets data files are split by."""

from __future__ import annotations

import datetime
import json

import pyarrow as pa

from lakelog.pipeline.records import HEADER_TYPE, PRODUCER_SCHEMA
from lakelog.pipeline.tables import bucket_names
from lakelog.tables.rows import KEY_VALUE_SCHEMA, RowBuilder, table_schema
from lakelog.tables.table_config import table_spec

T0 = int(datetime.datetime(2026, 3, 1, 23, 30, tzinfo=datetime.UTC).timestamp() * 1000)


def records(keys: list[bytes | None], values: list[bytes | None]) -> pa.RecordBatch:
    n = len(keys)
    return pa.RecordBatch.from_arrays(
        [
            pa.array(range(10, 10 + n), pa.int64()),
            pa.array([T0 + i * 3_600_000 for i in range(n)], pa.int64()),
            pa.array([0] * (n - 1) + [1], pa.int32()),
            pa.array(keys, pa.binary()),
            pa.array(values, pa.binary()),
            pa.array([[{"key": "h", "value": b"v"}]] * n, HEADER_TYPE),
            pa.array([-1] + [7] * (n - 1), pa.int64()),
            pa.array([-1] + [2] * (n - 1), pa.int32()),
        ],
        schema=PRODUCER_SCHEMA,
    )


def test_key_value_rows() -> None:
    builder = RowBuilder(table_spec({"lakelog.iceberg.mode": "key_value"}), 3)
    rows, dead = builder.build(records([b"a", None, b"c"], [b"1", b"2", None]))
    assert rows.schema == KEY_VALUE_SCHEMA and dead.num_rows == 0
    out = rows.to_pylist()
    assert [r["partition"] for r in out] == [3, 3, 3]
    assert [r["offset"] for r in out] == [10, 11, 12]
    assert out[0]["timestamp"] == datetime.datetime.fromtimestamp(T0 / 1000, datetime.UTC)
    assert [r["timestamp_type"] for r in out] == ["CreateTime", "CreateTime", "LogAppendTime"]
    assert [(r["key"], r["value"]) for r in out] == [(b"a", b"1"), (None, b"2"), (b"c", None)]
    assert [(r["producer_id"], r["producer_epoch"]) for r in out] == [
        (None, None),
        (7, 2),
        (7, 2),
    ]


def test_value_schema_rows_with_a_key_schema_and_the_dead_letters() -> None:
    value = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    key = {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}
    spec = table_spec(
        {
            "lakelog.iceberg.mode": "value_schema",
            "lakelog.iceberg.value.schema": json.dumps(value),
            "lakelog.iceberg.key.schema": json.dumps(key),
        }
    )
    assert table_schema(spec).names == ["_partition", "_offset", "_timestamp", "n", "_key_id"]
    builder = RowBuilder(spec, 0)
    rows, dead = builder.build(
        records(
            [b'{"id": "a"}', b'{"id": "b"}', b"nope", b'{"id": "d"}'],
            [b'{"n": 1}', b'{"n": "x"}', b'{"n": 3}', None],
        )
    )
    assert rows.to_pylist()[0] | {"_timestamp": None} == {
        "_partition": 0,
        "_offset": 10,
        "_timestamp": None,
        "n": 1,
        "_key_id": "a",
    }
    assert rows.num_rows == 1
    failures = dead.to_pylist()
    assert [d["offset"] for d in failures] == [11, 12, 13]
    assert failures[0]["reason"].startswith("value: JSON Schema: n: 'x' is not of type")
    assert failures[1]["reason"].startswith("key: not UTF-8 JSON")
    assert failures[2]["reason"] == "value: null (no bytes to decode)"
    assert [(d["key"], d["value"]) for d in failures][1] == (b"nope", b'{"n": 3}')


def test_time_buckets() -> None:
    stamps = pa.array(
        [T0 * 1000, (T0 + 3_600_000) * 1000, (T0 + 40 * 86_400_000) * 1000],
        pa.timestamp("us", tz="UTC"),
    )
    assert bucket_names(stamps, "day(timestamp)").to_pylist() == [
        "2026-03-01",
        "2026-03-02",
        "2026-04-10",
    ]
    assert bucket_names(stamps, "hour(timestamp)").to_pylist()[:2] == [
        "2026-03-01-23",
        "2026-03-02-00",
    ]
    assert bucket_names(stamps, "month(timestamp)").to_pylist() == ["2026-03", "2026-03", "2026-04"]
    assert bucket_names(stamps, "none").to_pylist() == ["", "", ""]
