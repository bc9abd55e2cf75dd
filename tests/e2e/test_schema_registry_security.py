"""The registry with `schema_registry_auth = basic` on a broker whose authorizer is on:
HTTP basic auth against the SCRAM users in the coordinator, and ACLs on the subject's
topic deciding who reads and who registers (docs/schema-registry.md has the mapping)."""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from e2e_fixtures import warn_tracebacks
from e2e_harness import BrokerProcess
from security_support import logins_broker, tls_registry_broker

SCHEMA = json.dumps({"type": "record", "name": "O", "fields": [{"name": "a", "type": "int"}]})
PASSWORDS = {"admin": "admin-pw", "alice": "alice-pw", "bob": "bob-pw"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    acls = [
        AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice", "*",
                   AclOperation.WRITE, AclPermissionType.ALLOW),
        AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:bob", "*",
                   AclOperation.DESCRIBE, AclPermissionType.ALLOW),
    ]  # fmt: skip
    proc = logins_broker(
        tmp_path_factory.mktemp("registry-auth") / "data", "registry-auth", PASSWORDS, acls
    )
    try:
        yield proc
    finally:
        proc.close()
        warn_tracebacks(proc)


def call(
    broker: BrokerProcess, method: str, path: str, user: str | None, body: Any = None
) -> tuple[int, Any, Any]:
    request = urllib.request.Request(
        broker.registry_url + path,
        None if body is None else json.dumps(body).encode(),
        method=method,
    )
    request.add_header("Content-Type", "application/vnd.schemaregistry.v1+json")
    if user is not None:
        token = base64.b64encode(f"{user}:{PASSWORDS.get(user, 'wrong')}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read()), response.headers
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read()), exc.headers


def test_logins(broker: BrokerProcess) -> None:
    status, answer, headers = call(broker, "GET", "/subjects", None)
    assert (status, answer["error_code"]) == (401, 40101)
    assert headers["WWW-Authenticate"].startswith("Basic")
    assert call(broker, "GET", "/subjects", "mallory")[0] == 401
    assert call(broker, "GET", "/subjects", "alice")[0] == 200


def test_acls_decide(broker: BrokerProcess) -> None:
    body = {"schema": SCHEMA}
    assert call(broker, "POST", "/subjects/orders-value/versions", "alice", body)[0] == 200
    status, answer, _ = call(broker, "POST", "/subjects/payments-value/versions", "alice", body)
    assert (status, answer["error_code"]) == (403, 40301)
    status, other, _ = call(
        broker, "POST", "/subjects/payments-value/versions", "admin", {"schema": '"string"'}
    )
    assert status == 200
    # bob reads orders (DESCRIBE) but may not register, and sees only what he may describe.
    assert call(broker, "GET", "/subjects/orders-value/versions", "bob")[1] == [1]
    assert call(broker, "POST", "/subjects/orders-value/versions", "bob", body)[0] == 403
    assert call(broker, "GET", "/subjects", "bob")[1] == ["orders-value"]
    assert call(broker, "GET", "/subjects", "admin")[1] == ["orders-value", "payments-value"]
    assert call(broker, "GET", f"/schemas/ids/{other['id']}", "bob")[0] == 403
    assert call(broker, "DELETE", "/subjects/orders-value", "bob")[0] == 403
    # Global settings: ALTER_CONFIGS on the cluster.
    assert call(broker, "PUT", "/config", "alice", {"compatibility": "NONE"})[0] == 403
    assert call(broker, "PUT", "/config", "admin", {"compatibility": "FULL"})[0] == 200


def test_confluent_client_logs_in(broker: BrokerProcess) -> None:
    client = SchemaRegistryClient(
        {"url": broker.registry_url, "basic.auth.user.info": f"alice:{PASSWORDS['alice']}"}
    )
    schema_id = client.register_schema("orders-key", Schema('"string"', "AVRO"))
    assert client.get_schema(schema_id).schema_str == '"string"'
    anonymous = SchemaRegistryClient({"url": broker.registry_url})
    with pytest.raises(SchemaRegistryError) as refused:
        anonymous.get_subjects()
    assert refused.value.http_status_code == 401


def test_https(tmp_path: Path) -> None:
    """`schema_registry_tls`: HTTPS with the listener's certificate; clients trust its CA."""
    proc, pki = tls_registry_broker(tmp_path, "registry-tls")
    try:
        url = f"https://127.0.0.1:{proc.registry_port}"
        client = SchemaRegistryClient({"url": url, "ssl.ca.location": str(pki.ca)})
        schema_id = client.register_schema("tls-value", Schema('"long"', "AVRO"))
        assert client.get_schema(schema_id).schema_str == '"long"'
        tls = ssl.create_default_context(cafile=str(pki.ca))
        with urllib.request.urlopen(f"{url}/subjects", timeout=30, context=tls) as response:
            assert json.loads(response.read()) == ["tls-value"]
        with pytest.raises(OSError):  # plain HTTP is not served (URLError or a reset)
            urllib.request.urlopen(f"http://127.0.0.1:{proc.registry_port}/subjects", timeout=30)
        assert "schema registry at https://" in proc.log_text()
    finally:
        proc.close()
        warn_tracebacks(proc)
