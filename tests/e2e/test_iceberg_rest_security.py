"""The Iceberg REST catalog behind the schema registry's logins (`schema_registry_auth =
basic`) on a broker whose authorizer is on: no login is 401, a principal without an ACL
on the table's topic is 403 (and does not see the table listed), one with READ gets the
rows, through HTTP basic auth and through the OAuth2 client-credentials token that
pyiceberg and DuckDB use."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)
from e2e_fixtures import warn_tracebacks
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
from pyiceberg.exceptions import ForbiddenError
from security_support import logins_broker, tls_registry_broker

PASSWORDS = {"admin": "admin-pw", "alice": "alice-pw", "bob": "bob-pw", "carol": "carol-pw"}
TABLES = "/v1/lakelog/namespaces/lakelog/tables"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, list]]:
    acls = [
        AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice", "*",
                   AclOperation.READ, AclPermissionType.ALLOW),
        AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:carol", "*",
                   AclOperation.DESCRIBE, AclPermissionType.ALLOW),
    ]  # fmt: skip
    proc = logins_broker(
        tmp_path_factory.mktemp("iceberg-auth") / "data", "iceberg-auth", PASSWORDS, acls
    )
    catalog = sql_catalog(proc)
    rows = make_table(catalog, "orders", [[0, 1], [2]])
    make_table(catalog, "secrets", [[7]])
    try:
        yield proc, rows
    finally:
        proc.close()
        warn_tracebacks(proc)


def url(proc: BrokerProcess) -> str:
    return proc.registry_url + "/iceberg"


def login(user: str) -> tuple[str, str]:
    return user, PASSWORDS.get(user, "wrong")


def test_no_login_or_a_bad_one_is_401(served: tuple[BrokerProcess, list]) -> None:
    proc, _ = served
    status, body, headers = call(url(proc) + "/v1/config")
    assert (status, body["error"]["type"]) == (401, "NotAuthorizedException")
    assert headers["www-authenticate"].startswith("Basic")
    assert call(url(proc) + f"{TABLES}/orders", auth=("mallory", "x"))[0] == 401
    assert call(url(proc) + f"{TABLES}/orders", auth=("alice", "not-hers"))[0] == 401
    bearer = {"Authorization": "Bearer forged.token"}
    assert call(url(proc) + f"{TABLES}/orders", headers=bearer)[0] == 401
    # The token endpoint refuses bad client credentials with OAuth2's error body.
    form = b"grant_type=client_credentials&client_id=alice&client_secret=nope"
    status, body, _ = call(url(proc) + "/v1/oauth/tokens", "POST", form)
    assert (status, body["error"]) == (401, "invalid_client")


def test_acls_decide_who_lists_and_loads(served: tuple[BrokerProcess, list]) -> None:
    proc, _ = served
    # bob has no ACL: the table is neither listed nor loadable, whether it exists or not.
    status, listed, _ = call(url(proc) + TABLES, auth=login("bob"))
    assert (status, listed["identifiers"]) == (200, [])
    for name in ("orders", "no-such-table"):
        status, body, _ = call(url(proc) + f"{TABLES}/{name}", auth=login("bob"))
        assert (status, body["error"]["type"]) == (403, "ForbiddenException")
    # carol may DESCRIBE orders: listed and HEAD-able, but loading it needs READ.
    status, listed, _ = call(url(proc) + TABLES, auth=login("carol"))
    assert [i["name"] for i in listed["identifiers"]] == ["orders"]
    assert call(url(proc) + f"{TABLES}/orders", "HEAD", auth=login("carol"))[0] == 204
    assert call(url(proc) + f"{TABLES}/orders", auth=login("carol"))[0] == 403
    # alice may READ orders (READ implies DESCRIBE) and nothing else; admin sees both.
    status, listed, _ = call(url(proc) + TABLES, auth=login("alice"))
    assert [i["name"] for i in listed["identifiers"]] == ["orders"]
    assert call(url(proc) + f"{TABLES}/orders", auth=login("alice"))[0] == 200
    assert call(url(proc) + f"{TABLES}/secrets", auth=login("alice"))[0] == 403
    status, listed, _ = call(url(proc) + TABLES, auth=login("admin"))
    assert sorted(i["name"] for i in listed["identifiers"]) == ["orders", "secrets"]


def test_pyiceberg_with_basic_auth_and_with_a_token(served: tuple[BrokerProcess, list]) -> None:
    proc, rows = served
    basic = load_catalog(
        "basic",
        type="rest",
        uri=url(proc),
        auth={"type": "basic", "basic": {"username": "alice", "password": "alice-pw"}},
    )
    table = basic.load_table("lakelog.orders")
    assert sorted_rows(table.scan().to_arrow().to_pylist()) == sorted_rows(rows)
    oauth = load_catalog(
        "oauth",
        type="rest",
        uri=url(proc),
        credential="alice:alice-pw",
        **{"oauth2-server-uri": url(proc) + "/v1/oauth/tokens"},
    )
    table = oauth.load_table("lakelog.orders")
    assert sorted_rows(table.scan().to_arrow().to_pylist()) == sorted_rows(rows)
    with pytest.raises(ForbiddenError):
        oauth.load_table("lakelog.secrets")


def test_duckdb_with_oauth_client_credentials(served: tuple[BrokerProcess, list]) -> None:
    proc, rows = served
    con = duckdb_connection()
    con.execute(
        "CREATE SECRET lakelog_login (TYPE iceberg, CLIENT_ID 'alice', CLIENT_SECRET 'alice-pw', "
        f"OAUTH2_SERVER_URI '{url(proc)}/v1/oauth/tokens')"
    )
    con.execute(
        f"ATTACH 'lakelog' AS lake (TYPE iceberg, SECRET lakelog_login, ENDPOINT '{url(proc)}')"
    )
    assert sorted_rows(duckdb_rows(con, "lake", "orders")) == sorted_rows(rows)
    con.close()


def test_https_is_the_registrys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`schema_registry_tls`: the catalog is served over HTTPS with the listener's
    certificate, as the registry is, and not over plain HTTP."""
    # requests lets these variables override a session's CA bundle (pyiceberg's `ssl`).
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
    proc, pki = tls_registry_broker(tmp_path, "iceberg-tls")
    try:
        rows = make_table(sql_catalog(proc), "orders", [[0, 1, 2]])
        uri = f"https://127.0.0.1:{proc.registry_port}/iceberg"
        rest = load_catalog("tls", type="rest", uri=uri, ssl={"cabundle": str(pki.ca)})
        table = rest.load_table("lakelog.orders")
        assert sorted_rows(table.scan().to_arrow().to_pylist()) == sorted_rows(rows)
        assert f"Iceberg REST catalog at {uri}" in proc.log_text()
        plain = f"http://127.0.0.1:{proc.registry_port}/iceberg/v1/config"
        with pytest.raises(OSError):  # plain HTTP is not served (URLError or a reset)
            urllib.request.urlopen(plain, timeout=30)
    finally:
        proc.close()
        warn_tracebacks(proc)
