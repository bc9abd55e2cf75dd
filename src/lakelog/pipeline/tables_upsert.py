"""One row per key for `cleanup.policy=compact` table topics: an upsert at every commit.

Why an upsert and not a periodic rewrite: a compacted topic is a changelog whose readers
want the latest value of each key now, not after the next rewrite; a rewrite would leave
the table holding every version in between. Why copy-on-write (pyiceberg's delete by
key, then an append) and not equality deletes: pyiceberg writes no equality delete files,
and engines read copy-on-write tables without merging deletes at read time; the price is
rewriting the data files that hold updated keys, which a table of latest values (far
smaller than its topic) pays easily.

At commit the driver reads the rows the tasks wrote (the pass's staging files), keeps each
key's latest record (highest offset; across partitions, the latest timestamp), and in one
Iceberg transaction deletes the table's rows of those keys, appends the latest rows
(tombstones, records with a null value, in key_value mode, delete only) and records the
next offsets. The staging files are deleted after the commit; left by a killed run, gc
collects them as any unreferenced file. Records with a null key are appended as they are
(Kafka refuses them on a compacted topic; they can predate the policy).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

if TYPE_CHECKING:
    from pyiceberg.table import Table

MAX_KEYS_PER_DELETE = 1000
"""Keys per delete filter: each becomes a term of the scan's filter expression."""


def key_columns(schema: pa.Schema, mode: str) -> list[str]:
    if mode == "key_value":
        return ["key"]
    keyed = [f.name for f in schema if f.name.startswith("_key_")]
    return keyed or ["_key"]


def read_staged(table: Table, files: Sequence[str]) -> pa.Table | None:
    if not files:
        return None
    io = table.io
    parts = []
    for path in files:
        with io.new_input(path).open() as stream:
            parts.append(pq.read_table(stream))
    return pa.concat_tables(parts)


def latest_per_key(
    rows: pa.Table, keys: list[str], offset: str, timestamp: str, mode: str
) -> tuple[pa.Table, pa.Table, pa.Table]:
    """(latest live row per key, keys to delete from the table, rows with a null key)."""
    columns = [rows.column(k).to_pylist() for k in keys]
    offsets = rows.column(offset).to_pylist()
    stamps = rows.column(timestamp).cast(pa.int64()).to_pylist()
    best: dict[tuple[Any, ...], int] = {}
    unkeyed: list[int] = []
    for i in range(rows.num_rows):
        key = tuple(c[i] for c in columns)
        if all(k is None for k in key):
            unkeyed.append(i)
            continue
        j = best.get(key)
        if j is None or (stamps[i], offsets[i]) > (stamps[j], offsets[j]):
            best[key] = i
    chosen = sorted(best.values())
    latest = rows.take(pa.array(chosen, pa.int64()))
    live = latest.filter(latest.column("value").is_valid()) if mode == "key_value" else latest
    return live, latest.select(keys), rows.take(pa.array(unkeyed, pa.int64()))


def upsert_commit(
    table: Table, files: Sequence[str], mode: str, properties: dict[str, str]
) -> None:
    """Delete the keys' old rows, append their latest ones and set `properties`, in one
    Iceberg commit (see the module doc)."""
    from pyiceberg.table import upsert_util

    staged = read_staged(table, files)
    prefix = "" if mode == "key_value" else "_"
    offset, timestamp = f"{prefix}offset", f"{prefix}timestamp"
    with table.transaction() as tx:
        if staged is not None and staged.num_rows:
            keys = key_columns(staged.schema, mode)
            live, touched, unkeyed = latest_per_key(staged, keys, offset, timestamp, mode)
            for start in range(0, touched.num_rows, MAX_KEYS_PER_DELETE):
                chunk = touched.slice(start, MAX_KEYS_PER_DELETE)
                with warnings.catch_warnings():  # new keys match nothing: expected
                    warnings.filterwarnings("ignore", "Delete operation did not match")
                    tx.delete(
                        upsert_util.create_match_filter(chunk, keys),
                        snapshot_properties=properties,
                    )
            appended = pa.concat_tables([live, unkeyed])
            if appended.num_rows:
                tx.append(appended, snapshot_properties=properties)
        tx.set_properties(properties)
