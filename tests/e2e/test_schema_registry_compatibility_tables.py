"""The compatibility tables of tests/unit/registry (at least 20 pairs per type, from each
format's specification and Confluent's rules) through the HTTP API of a real broker, for
every level: the registration of the second schema is accepted with 200 and its id, or
refused with Confluent's 409 and error code 409, and `POST /compatibility/...` says the
same first.

Each table lists (first, second, accepted under BACKWARD). FORWARD is BACKWARD with the
order turned round, so it registers the second schema first; FULL needs both directions;
the _TRANSITIVE levels answer as their plain levels with two versions; NONE takes all."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from e2e_fixtures import FAST_COMMITS, warn_tracebacks
from e2e_harness import BrokerProcess
from registry_support import post_json

from tests.unit.registry import (
    test_avro_compatibility,
    test_json_compatibility,
    test_protobuf_compatibility,
)

TABLES: dict[str, list[tuple[str, Any, Any, bool]]] = {
    "AVRO": test_avro_compatibility.PAIRS,
    "JSON": test_json_compatibility.PAIRS,
    "PROTOBUF": test_protobuf_compatibility.PAIRS,
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(
        tmp_path_factory.mktemp("registry-compat") / "data",
        env=FAST_COMMITS,
        registry=True,
        name="registry-compat",
    )
    proc.start()
    yield proc
    proc.close()
    assert proc.tracebacks() == []
    warn_tracebacks(proc)


def _text(schema: Any) -> str:
    return (
        schema
        if isinstance(schema, str) and schema.lstrip().startswith("syntax")
        else (json.dumps(schema))
    )


def attempt(url: str, kind: str, level: str, first: Any, second: Any) -> tuple[bool, int, Any]:
    """Register `first` then `second` under `level` on a fresh subject: (what the
    compatibility endpoint said, the second registration's status, its answer)."""
    subject = f"compat-{uuid.uuid4().hex[:10]}"
    assert post_json(f"{url}/config/{subject}", {"compatibility": level}, "PUT")[0] == 200
    status, body = post_json(
        f"{url}/subjects/{subject}/versions", {"schema": _text(first), "schemaType": kind}
    )
    assert status == 200, body
    status, check = post_json(
        f"{url}/compatibility/subjects/{subject}/versions/latest",
        {"schema": _text(second), "schemaType": kind},
    )
    assert status == 200, check
    status, body = post_json(
        f"{url}/subjects/{subject}/versions", {"schema": _text(second), "schemaType": kind}
    )
    return bool(check["is_compatible"]), status, body


def outcome(url: str, kind: str, level: str, first: Any, second: Any) -> bool:
    """Whether the second registration was accepted; a refusal must be Confluent's 409."""
    said, status, body = attempt(url, kind, level, first, second)
    if status == 200:
        assert isinstance(body["id"], int) and said, (level, body, said)
        return True
    assert (status, body["error_code"]) == (409, 409), (level, status, body)
    assert "incompatible" in body["message"] and not said, (level, body, said)
    return False


@pytest.mark.parametrize("kind", sorted(TABLES))
def test_table_through_http(broker: BrokerProcess, kind: str) -> None:
    table = TABLES[kind]
    assert len(table) >= 20
    url = broker.registry_url

    def check(row: tuple[str, Any, Any, bool]) -> list[str]:
        name, first, second, backward = row
        wrong: list[str] = []

        def expect(level: str, a: Any, b: Any, wanted: bool) -> bool:
            got = outcome(url, kind, level, a, b)
            if got != wanted:
                wrong.append(f"{name}: {level} accepted={got}, expected {wanted}")
            return got

        expect("BACKWARD", first, second, backward)
        expect("BACKWARD_TRANSITIVE", first, second, backward)
        expect("FORWARD", second, first, backward)
        expect("FORWARD_TRANSITIVE", second, first, backward)
        expect("NONE", first, second, True)
        forward_same_order = outcome(url, kind, "FORWARD", first, second)
        expect("FULL", first, second, backward and forward_same_order)
        expect("FULL_TRANSITIVE", first, second, backward and forward_same_order)
        return wrong

    with ThreadPoolExecutor(4) as pool:
        wrong = [w for found in pool.map(check, table) for w in found]
    assert wrong == []
