"""The rows of a table topic's tables, as Arrow: schemas per mode, and a batch of decoded
records turned into table rows and dead-letter rows (executor side).

key_value columns: partition, offset, timestamp (timestamptz), timestamp_type, key, value,
headers, producer_id, producer_epoch (null for a non-idempotent producer's records).
value_schema columns: _partition, _offset, _timestamp, then the value schema's
fields, then either the key schema's fields as `_key_<name>` or the raw key as `_key`.
Dead-letter rows: partition, offset, timestamp, key, value, reason.

Every column is optional in Iceberg (schema evolution only ever adds optional columns);
required-ness is enforced when decoding instead.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.pipeline.records import HEADER_TYPE
from lakelog.tables.decode import DecodeFailure, Decoder, RegistryWriters
from lakelog.tables.table_config import TableSpec

TIMESTAMP = pa.timestamp("us", tz="UTC")
ARROW_TYPES = {
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(),
    "binary": pa.binary(),
    "timestamp": TIMESTAMP,
    "json": pa.string(),
}
TIMESTAMP_TYPES = pa.array(["CreateTime", "LogAppendTime"], pa.string())

KEY_VALUE_SCHEMA = pa.schema(
    [
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", TIMESTAMP),
        pa.field("timestamp_type", pa.string()),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("headers", HEADER_TYPE),
        pa.field("producer_id", pa.int64()),
        pa.field("producer_epoch", pa.int32()),
    ]
)
DLQ_SCHEMA = pa.schema(
    [
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", TIMESTAMP),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("reason", pa.string()),
    ]
)


def table_schema(spec: TableSpec) -> pa.Schema:
    if spec.mode == "key_value":
        return KEY_VALUE_SCHEMA
    assert spec.value is not None
    fields = [
        pa.field("_partition", pa.int32()),
        pa.field("_offset", pa.int64()),
        pa.field("_timestamp", TIMESTAMP),
    ]
    fields += [pa.field(c.name, ARROW_TYPES[c.type]) for c in spec.value.columns]
    if spec.key is not None:
        fields += [pa.field(f"_key_{c.name}", ARROW_TYPES[c.type]) for c in spec.key.columns]
    else:
        fields.append(pa.field("_key", pa.binary()))
    return pa.schema(fields)


def timestamp_column(spec: TableSpec) -> str:
    """The column `lakelog.iceberg.partition`'s `timestamp` means in this mode."""
    return "timestamp" if spec.mode == "key_value" else "_timestamp"


class RowBuilder:
    """Turns the reader's record batches (lakelog.pipeline.records.RECORD_SCHEMA) into
    table rows and dead-letter rows, for one partition."""

    def __init__(
        self, spec: TableSpec, partition: int, writers: RegistryWriters | None = None
    ) -> None:
        self.spec = spec
        self.partition = partition
        self.schema = table_schema(spec)
        typed = spec.mode == "value_schema"
        value_writers, key_writers = writers or RegistryWriters()
        self.value = (
            Decoder(spec.value, value_writers.by_id, value_writers.subject)
            if spec.value and typed
            else None
        )
        self.key = (
            Decoder(spec.key, key_writers.by_id, key_writers.subject)
            if spec.key and typed
            else None
        )

    def build(self, rec: pa.RecordBatch) -> tuple[pa.RecordBatch, pa.RecordBatch]:
        """(table rows, dead-letter rows) of the records in `rec`."""
        rows = rec.num_rows
        micros = pc.multiply(rec.column("timestamp"), pa.scalar(1000, pa.int64())).cast(TIMESTAMP)
        partitions = pa.array([self.partition] * rows, pa.int32())
        if self.spec.mode == "key_value":
            batch = pa.RecordBatch.from_arrays(
                [
                    partitions,
                    rec.column("offset"),
                    micros,
                    pc.take(TIMESTAMP_TYPES, rec.column("timestampType")),
                    rec.column("key"),
                    rec.column("value"),
                    rec.column("headers"),
                    _or_null(rec.column("producerId")),
                    _or_null(rec.column("producerEpoch")),
                ],
                schema=self.schema,
            )
            return batch, _empty_dlq()
        return self._decode(rec, micros, partitions)

    def _decode(
        self, rec: pa.RecordBatch, micros: pa.Array, partitions: pa.Array
    ) -> tuple[pa.RecordBatch, pa.RecordBatch]:
        assert self.value is not None
        keys = rec.column("key").to_pylist()
        values = rec.column("value").to_pylist()
        good: list[int] = []
        decoded: list[dict[str, object]] = []
        bad: list[int] = []
        reasons: list[str] = []
        for i, (key, value) in enumerate(zip(keys, values, strict=True)):
            try:
                fields = self.value.decode(value)
                if self.key is not None:
                    try:
                        key_fields = self.key.decode(key)
                    except DecodeFailure as exc:
                        raise DecodeFailure(f"key: {exc}") from None
                    fields.update({f"_key_{k}": v for k, v in key_fields.items()})
            except DecodeFailure as exc:
                bad.append(i)
                reasons.append(str(exc) if str(exc).startswith("key: ") else f"value: {exc}")
                continue
            good.append(i)
            decoded.append(fields)
        picked = pa.array(good, pa.int64())
        arrays = [
            pc.take(partitions, picked),
            pc.take(rec.column("offset"), picked),
            pc.take(micros, picked),
        ]
        for field in self.schema:
            if field.name in ("_partition", "_offset", "_timestamp"):
                continue
            if field.name == "_key":
                arrays.append(pc.take(rec.column("key"), picked))
            else:
                arrays.append(pa.array([d[field.name] for d in decoded], field.type))
        table_rows = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
        rejected = pa.array(bad, pa.int64())
        dlq = pa.RecordBatch.from_arrays(
            [
                pc.take(partitions, rejected),
                pc.take(rec.column("offset"), rejected),
                pc.take(micros, rejected),
                pc.take(rec.column("key"), rejected),
                pc.take(rec.column("value"), rejected),
                pa.array(reasons, pa.string()),
            ],
            schema=DLQ_SCHEMA,
        )
        return table_rows, dlq


def _or_null(ids: pa.Array) -> pa.Array:
    """-1 (no producer id or epoch, a plain producer's batch) as null."""
    return pc.if_else(pc.equal(ids, -1), pa.scalar(None, ids.type), ids)


def _empty_dlq() -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([], schema=DLQ_SCHEMA)
