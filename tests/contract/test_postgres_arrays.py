"""The binary array parameters of the PostgreSQL coordinator (coordinator/postgres/arrays.py)
against a real server: every type, the extremes of each range, empty arrays, rows as a
two-dimensional array, unnest of several columns, and pipeline mode (how the coordinator
sends them)."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from lakelog.coordinator.postgres.arrays import int4s, int8_rows, int8s, uuids


async def test_arrays_round_trip(postgres_url: str) -> None:
    ids = [uuid.uuid4() for _ in range(3)]
    longs = [0, 1, -1, 2**63 - 1, -(2**63), 1_700_000_000_123]
    ints = [0, -1, 2**31 - 1, -(2**31)]
    rows = [[1, -2, 2**63 - 1], [4, 5, -(2**63)]]
    async with await psycopg.AsyncConnection.connect(postgres_url) as conn:
        cursor = await conn.execute(
            "SELECT %s::bigint[], %s::int[], %s::uuid[], %s::bigint[], (%s::bigint[])[2][3],"
            " %s::bigint[], %s::uuid[], %s::bigint[]",
            (int8s(longs), int4s(ints), uuids(ids), int8_rows(rows), int8_rows(rows),
             int8s([]), uuids([]), int8_rows([])),
        )  # fmt: skip
        assert await cursor.fetchone() == (
            longs,
            ints,
            ids,
            rows,
            -(2**63),
            [],
            [],
            [],
        )

        async with conn.pipeline():
            cursor = await conn.execute(
                "SELECT * FROM unnest(%s::uuid[], %s::int[], %s::bigint[]) AS k (t, p, o)",
                (uuids(ids), int4s([1, 2, 3]), int8s(range(10, 13))),
            )
            found = await cursor.fetchall()
        assert found == [(ids[0], 1, 10), (ids[1], 2, 11), (ids[2], 3, 12)]


def test_values_that_do_not_fit_are_refused_before_sending() -> None:
    with pytest.raises(OverflowError):
        int4s([2**31])
    with pytest.raises(ValueError):
        int8_rows([(1, 2), (3,)])
