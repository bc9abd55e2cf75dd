"""The broker's read-only Iceberg REST catalog (docs/iceberg-rest.md) on a real broker, on
whichever backend the pass runs (embedded SQLite + files, or PostgreSQL + S3 on moto): a
table made with pyiceberg in the coordinator's catalog reads the same through pyiceberg's
RestCatalog and through DuckDB's pip iceberg extension; bad requests get the spec's error
body and leave the broker serving."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import http.client
import json
import random
import socket
from collections.abc import Iterator

import pytest
from e2e_fixtures import FAST_COMMITS, warn_tracebacks
from e2e_harness import BrokerProcess
from iceberg_support import (
    call,
    duckdb_connection,
    duckdb_rows,
    make_table,
    sorted_rows,
    sql_catalog,
)
from pyiceberg.catalog import load_catalog
from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError
from sqlalchemy import text

from lakelog.log.storage.store import ObjectStorage
from lakelog.tables.locations import StoreLocations
from lakelog.tables.rest_catalog import MAX_METADATA_BYTES

TABLES = ("orders", "payments", "refunds")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, dict]]:
    proc = BrokerProcess(
        tmp_path_factory.mktemp("iceberg-rest") / "data",
        env=FAST_COMMITS,
        registry=True,
        name="iceberg-rest",
    )
    proc.start()
    catalog = sql_catalog(proc)
    rows = {
        name: make_table(catalog, name, [[0, 1, 2], [3, 4]] if name == "orders" else [[10 + i]])
        for i, name in enumerate(TABLES)
    }
    try:
        yield proc, rows
    finally:
        proc.close()
        warn_tracebacks(proc)


def base(proc: BrokerProcess) -> str:
    return proc.registry_url + "/iceberg"


def test_the_serve_log_names_the_catalog(served: tuple[BrokerProcess, dict]) -> None:
    proc, _ = served
    assert f"Iceberg REST catalog at {base(proc)}" in proc.log_text()


def test_pyiceberg_reads_the_table_through_the_rest_catalog(
    served: tuple[BrokerProcess, dict],
) -> None:
    proc, rows = served
    rest = load_catalog("lakelog-rest", type="rest", uri=base(proc))
    assert rest.list_namespaces() == [("lakelog",)]
    assert sorted(rest.list_tables("lakelog")) == [("lakelog", t) for t in sorted(TABLES)]
    table = rest.load_table("lakelog.orders")
    assert len(table.metadata.snapshots) == 2
    assert sorted_rows(table.scan().to_arrow().to_pylist()) == sorted_rows(rows["orders"])
    assert rest.table_exists("lakelog.orders")
    assert not rest.table_exists("lakelog.nothing")
    with pytest.raises(NoSuchTableError):
        rest.load_table("lakelog.nothing")
    with pytest.raises(NoSuchNamespaceError):
        rest.list_tables("nowhere")


def test_duckdb_reads_the_table_through_the_rest_catalog(
    served: tuple[BrokerProcess, dict],
) -> None:
    proc, rows = served
    con = duckdb_connection()
    con.execute(
        f"ATTACH 'lakelog' AS lake (TYPE iceberg, ENDPOINT '{base(proc)}', "
        "AUTHORIZATION_TYPE 'none')"
    )
    for name in TABLES:
        assert sorted_rows(duckdb_rows(con, "lake", name)) == sorted_rows(rows[name])
    con.close()


def test_listings_page_and_existence_answers(served: tuple[BrokerProcess, dict]) -> None:
    proc, _ = served
    url = base(proc) + "/v1"
    status, config, _ = call(url + "/config?warehouse=lakelog")
    assert status == 200 and config["overrides"]["prefix"] == "lakelog"
    assert "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}" in config["endpoints"]
    # Without pageToken: everything at once; with it, pages of pageSize.
    status, listed, _ = call(url + "/lakelog/namespaces/lakelog/tables")
    assert status == 200 and listed["next-page-token"] is None
    assert sorted(i["name"] for i in listed["identifiers"]) == sorted(TABLES)
    seen: list[str] = []
    token = ""
    for _ in range(10):
        status, page, _ = call(
            url + f"/lakelog/namespaces/lakelog/tables?pageSize=1&pageToken={token}"
        )
        assert status == 200 and len(page["identifiers"]) <= 1
        seen += [i["name"] for i in page["identifiers"]]
        token = page["next-page-token"]
        if not token:
            break
    assert seen == sorted(TABLES)
    assert call(url + "/lakelog/namespaces/lakelog")[:2] == (
        200,
        {"namespace": ["lakelog"], "properties": {"exists": "true"}},
    )
    assert call(url + "/lakelog/namespaces/lakelog", "HEAD")[0] == 204
    assert call(url + "/lakelog/namespaces/nowhere", "HEAD")[0] == 404
    assert call(url + "/lakelog/namespaces/lakelog/tables/orders", "HEAD")[0] == 204
    assert call(url + "/lakelog/namespaces/lakelog/tables/nothing", "HEAD")[0] == 404
    status, loaded, _ = call(url + "/lakelog/namespaces/lakelog/tables/orders?snapshots=refs")
    assert status == 200 and len(loaded["metadata"]["snapshots"]) == 1
    assert loaded["metadata-location"].endswith(".metadata.json")
    locations = StoreLocations.from_storage_url(proc.backend.storage_url)
    assert loaded["metadata-location"].startswith(locations.warehouse + "/")
    assert loaded["config"] == locations.properties
    if locations.scheme == "s3":  # engines get what they need to read the data files
        assert {"s3.endpoint", "s3.access-key-id", "s3.secret-access-key"} <= set(loaded["config"])


NS = "/v1/lakelog/namespaces"
T = f"{NS}/lakelog/tables"
RO = "UnsupportedOperationException"
BAD = "BadRequestException"
HOSTILE: list[tuple[str, str, int, str]] = [
    # (method, path below /iceberg, status, error type)
    ("GET", f"{T}/nothing", 404, "NoSuchTableException"),
    ("GET", f"{NS}/nowhere/tables/orders", 404, "NoSuchNamespaceException"),
    ("GET", f"{NS}/nowhere", 404, "NoSuchNamespaceException"),
    ("GET", f"{NS}/nowhere/tables", 404, "NoSuchNamespaceException"),
    ("GET", f"{NS}?parent=nowhere", 404, "NoSuchNamespaceException"),
    ("GET", f"{NS}/lakelog/views/v", 404, "NoSuchViewException"),
    ("POST", f"{NS}", 406, RO),
    ("DELETE", f"{NS}/lakelog", 406, RO),
    ("POST", f"{NS}/lakelog/properties", 406, RO),
    ("POST", f"{T}", 406, RO),
    ("POST", f"{T}/orders", 406, RO),
    ("DELETE", f"{T}/orders", 406, RO),
    ("PUT", f"{T}/orders", 406, RO),
    ("POST", f"{NS}/lakelog/register", 406, RO),
    ("POST", f"{T}/orders/metrics", 406, RO),
    ("POST", "/v1/lakelog/tables/rename", 406, RO),
    ("POST", "/v1/lakelog/transactions/commit", 406, RO),
    ("POST", "/v1/config", 406, RO),
    ("GET", "", 400, BAD),
    ("GET", "/", 400, BAD),
    ("GET", "/v1/lakelog/namespaces/lakelog/tables/%0d%0aX:%20y", 400, BAD),
    ("GET", "/v2/config", 400, BAD),
    ("GET", "/v1/other/namespaces", 400, BAD),
    ("GET", "/v1/lakelog/nonsense", 400, BAD),
    ("GET", f"{NS}/%00bad/tables", 400, BAD),
    ("GET", f"{T}/" + "x" * 300, 400, BAD),
    ("GET", f"{NS}/" + "%1Fa" * 40 + "/tables", 400, BAD),
    ("GET", f"{T}?pageToken=%%%", 400, BAD),
    ("GET", f"{T}?pageSize=-1", 400, BAD),
    ("GET", f"{T}?pageSize=abc", 400, BAD),
    ("GET", f"{NS}/%2E%2E/tables/%2E%2E", 404, "NoSuchNamespaceException"),
    ("GET", f"{T}/..%2F..%2Fetc", 400, BAD),
    ("GET", f"{T}/" + "a/" * 2000, 400, BAD),
]


@pytest.mark.parametrize(("method", "path", "status", "kind"), HOSTILE)
def test_bad_requests_get_the_error_model(
    served: tuple[BrokerProcess, dict], method: str, path: str, status: int, kind: str
) -> None:
    proc, _ = served
    got, body, headers = call(base(proc) + path, method, b"{}" if method != "GET" else None)
    assert (got, body["error"]["type"], body["error"]["code"]) == (status, kind, status)
    assert headers["content-type"] == "application/json"
    assert "Traceback" not in body["error"]["message"]


def test_oversize_bodies_and_raw_garbage_leave_the_broker_serving(
    served: tuple[BrokerProcess, dict],
) -> None:
    proc, rows = served
    url = base(proc) + "/v1/lakelog/namespaces/lakelog/tables/orders"
    status, body, _ = call(url, "POST", b"x" * (8 * 1024 * 1024))
    assert (status, body["error"]["type"]) == (406, "UnsupportedOperationException")
    status, body, _ = call(base(proc) + "/v1/oauth/tokens", "POST", b"a" * 100_000)
    assert (status, body["error"]) == (400, "invalid_request")
    for garbage in (b"\x00" * 64 + b"\r\n\r\n", b"GET /iceberg/v1/config HTTP/9.9\r\n\r\n"):
        with socket.create_connection(("127.0.0.1", proc.registry_port), timeout=30) as sock:
            sock.sendall(garbage)
            with contextlib.suppress(OSError):
                sock.recv(4096)  # whatever uvicorn says, or a close
    conn = http.client.HTTPConnection("127.0.0.1", proc.registry_port, timeout=30)
    with contextlib.suppress(http.client.HTTPException, OSError):  # a 400 or a close
        conn.request("GET", f"/iceberg{T}/orders", headers={"X": "y" * 60_000})
        conn.getresponse().read()
    conn.close()
    assert proc.alive()
    rest = load_catalog("after-garbage", type="rest", uri=base(proc))
    table = rest.load_table("lakelog.orders")
    assert sorted_rows(table.scan().to_arrow().to_pylist()) == sorted_rows(rows["orders"])


def _point(proc: BrokerProcess, name: str, location: str) -> None:
    """A catalog row for table `name` whose metadata is at `location` (as a broken or
    hostile catalog could hold)."""
    catalog = sql_catalog(proc)
    with catalog.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, "
                "metadata_location) VALUES ('lakelog', 'lakelog', :name, :location)"
            ),
            {"name": name, "location": location},
        )


def test_metadata_that_is_huge_outside_or_missing_is_refused(
    served: tuple[BrokerProcess, dict],
) -> None:
    proc, _ = served
    locations = StoreLocations.from_storage_url(proc.backend.storage_url)
    # A gzip bomb: 80 KiB stored, past the cap once inflated.
    bomb = gzip.compress(b" " * (MAX_METADATA_BYTES + 1024), 9)
    storage = ObjectStorage.from_url(proc.backend.storage_url)
    asyncio.run(storage.put("tables/lakelog.db/bomb/metadata/00000-x.gz.metadata.json", [bomb]))
    asyncio.run(storage.put("tables/lakelog.db/notjson/metadata/00000-x.metadata.json", [b"[1,"]))
    cases: dict[str, str] = {
        "bomb": f"{locations.warehouse}/lakelog.db/bomb/metadata/00000-x.gz.metadata.json",
        "notjson": f"{locations.warehouse}/lakelog.db/notjson/metadata/00000-x.metadata.json",
        "outside": "file:///etc/passwd",
        "climbing": f"{locations.warehouse}/../../../../etc/passwd",
        "missing": f"{locations.warehouse}/lakelog.db/missing/metadata/1.metadata.json",
    }
    for name, location in cases.items():
        _point(proc, name, location)
    for name in cases:
        status, body, _ = call(base(proc) + f"/v1/lakelog/namespaces/lakelog/tables/{name}")
        assert status == 500 and body["error"]["type"] == "ServerErrorException", (name, body)
        assert "root:" not in json.dumps(body)
    assert proc.alive()
    assert call(base(proc) + "/v1/lakelog/namespaces/lakelog/tables/orders")[0] == 200


PIECES = [
    "v1", "lakelog", "namespaces", "tables", "views", "orders", "config", "oauth", "tokens",
    "metrics", "rename", "..", ".", "%00", "%1F", "%2F", "%ff%fe", "%", "%c0%af", "%c3%a9",
    "x" * 300, "", "lakelog%1Flakelog", "%1F%1F", "a;b", "orders?x", "%0d%0aX:y",
]  # fmt: skip
QUERIES = [
    "", "?pageToken=", "?pageToken=zz", "?pageToken=%ff%fe", "?pageSize=0", "?pageSize=1",
    "?pageSize=99999999999999999999", "?parent=%1F%1F", "?parent=lakelog", "?snapshots=refs",
    "?pageToken=&pageToken=b3JkZXJz", "?" + "a=b&" * 500,
]  # fmt: skip
METHODS = ["GET", "GET", "GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]


def test_random_hostile_requests_get_json_answers_and_no_tracebacks(
    served: tuple[BrokerProcess, dict],
) -> None:
    """A small seeded fuzzer for the HTTP side (tests/fuzz speaks only Kafka): paths made of
    the catalog's words and hostile pieces, every method, odd query strings and bodies."""
    proc, rows = served
    rng = random.Random(33)
    statuses: set[int] = set()
    for _ in range(400):
        path = "/iceberg/" + "/".join(rng.choice(PIECES) for _ in range(rng.randint(0, 8)))
        if rng.random() < 0.5:
            path = "/iceberg/v1/" + "/".join(rng.choice(PIECES) for _ in range(rng.randint(0, 6)))
        method = rng.choice(METHODS)
        body = rng.choice([None, b"", b"{", b"grant_type=client_credentials", b"\xff" * 2000])
        conn = http.client.HTTPConnection("127.0.0.1", proc.registry_port, timeout=60)
        try:
            conn.request(method, path + rng.choice(QUERIES), body=body)
            response = conn.getresponse()
            raw = response.read()
        finally:
            conn.close()
        statuses.add(response.status)
        assert response.status in (200, 204, 400, 401, 404, 406, 413), (method, path)
        if method == "HEAD" or response.status == 204:
            assert raw == b""
            continue
        answer = json.loads(raw)
        if response.status >= 400 and not path.endswith("/oauth/tokens"):
            assert answer["error"]["code"] == response.status, (method, path, answer)
    assert {400, 406} <= statuses
    assert proc.alive()
    assert proc.tracebacks() == []
    rest = load_catalog("after-fuzz", type="rest", uri=base(proc))
    table = rest.load_table("lakelog.orders")
    assert sorted_rows(table.scan().to_arrow().to_pylist()) == sorted_rows(rows["orders"])


def test_view_rows_of_the_sql_catalog_are_not_tables(served: tuple[BrokerProcess, dict]) -> None:
    """SqlCatalog (v1 schema) marks views written by other engines `iceberg_type = 'VIEW'`."""
    proc, _ = served
    with sql_catalog(proc).engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, "
                "metadata_location, iceberg_type) VALUES ('lakelog', 'lakelog', 'aview', "
                "'file:///nowhere/v.metadata.json', 'VIEW')"
            )
        )
    status, listed, _ = call(base(proc) + f"{T}")
    assert status == 200 and "aview" not in {i["name"] for i in listed["identifiers"]}
    status, body, _ = call(base(proc) + f"{T}/aview")
    assert (status, body["error"]["type"]) == (404, "NoSuchTableException")
