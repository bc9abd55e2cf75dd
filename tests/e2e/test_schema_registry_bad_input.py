"""Hostile input to the schema registry: every answer is Confluent's error JSON with its
code (never a 500 or a traceback), and the broker keeps serving clients and the registry."""

from __future__ import annotations

import json
import random
import socket
from collections.abc import Iterator

import pytest
from e2e_fixtures import FAST_COMMITS, warn_tracebacks
from e2e_harness import BrokerProcess, api_versions_roundtrip
from registry_support import CONTENT_TYPE, http, post_json

AVRO = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(
        tmp_path_factory.mktemp("registry-bad") / "data",
        env={**FAST_COMMITS, "SCHEMA_REGISTRY_MAX_SUBJECTS": 50, "SCHEMA_REGISTRY_MAX_VERSIONS": 3},
        registry=True,
        name="registry",
    )
    proc.start()
    yield proc
    proc.close()
    assert proc.tracebacks() == []
    warn_tracebacks(proc)


def still_serving(broker: BrokerProcess) -> None:
    assert api_versions_roundtrip(broker.port)
    assert http(f"{broker.registry_url}/schemas/types")[0] == 200


CASES: list[tuple[str, str, object, int, int]] = [
    # (method, path, body (str: raw), status, error_code)
    ("POST", "/subjects/s/versions", "{not json", 400, 400),
    ("POST", "/subjects/s/versions", [1, 2], 422, 422),
    ("POST", "/subjects/s/versions", {"schema": "{"}, 422, 42201),
    ("POST", "/subjects/s/versions", {"schema": '{"type":"nope"}'}, 422, 42201),
    ("POST", "/subjects/s/versions", {"schema": "", "schemaType": "AVRO"}, 422, 42201),
    ("POST", "/subjects/s/versions", {"schema": "{}", "schemaType": "XML"}, 422, 42201),
    ("POST", "/subjects/s/versions", {"schema": "message {", "schemaType": "PROTOBUF"}, 422, 42201),
    ("POST", "/subjects/s/versions", {"schema": '{"type": 5}', "schemaType": "JSON"}, 422, 42201),
    ("POST", "/subjects/s/versions", {"schema": AVRO, "references": "x"}, 422, 42201),
    (
        "POST",
        "/subjects/s/versions",
        {"schema": AVRO, "references": [{"name": "x", "subject": "none", "version": 1}]},
        422,
        42201,
    ),
    ("POST", "/subjects/s/versions", {"schema": AVRO, "id": 5}, 422, 42205),
    ("GET", "/subjects/unknown/versions", None, 404, 40401),
    ("GET", "/subjects/unknown/versions/1", None, 404, 40401),
    ("GET", "/subjects/known/versions/0", None, 422, 42202),
    ("GET", "/subjects/known/versions/abc", None, 422, 42202),
    ("GET", "/subjects/known/versions/99", None, 404, 40402),
    ("GET", "/schemas/ids/999999", None, 404, 40403),
    ("GET", "/schemas/ids/-1", None, 404, 40403),
    ("GET", "/schemas/ids/notanumber/subjects", None, 404, 40403),
    ("DELETE", "/subjects/unknown", None, 404, 40401),
    ("DELETE", "/subjects/known?permanent=true", None, 404, 40405),
    ("DELETE", "/subjects/known/versions/1?permanent=true", None, 404, 40407),
    ("PUT", "/config", {"compatibility": "SIDEWAYS"}, 422, 42203),
    ("PUT", "/mode", {"mode": "WRITEONLY"}, 422, 42204),
    ("GET", "/config/known", None, 404, 40408),
    ("GET", "/mode/known", None, 404, 40409),
    ("POST", "/compatibility/subjects/unknown/versions/1", {"schema": AVRO}, 404, 40401),
    # Found by the HTTP fuzzer (tests/fuzz/http_harness.py): each was a 500 and a traceback.
    ("POST", "/subjects/s/versions", {"schema": "[" * 5000 + "]" * 5000}, 422, 42201),
    ("POST", "/subjects/s/versions", {"schema": '{"a":' * 3000, "schemaType": "JSON"}, 422, 42201),
    ("POST", "/subjects/s/versions", '{"schema": "\\ud800"}', 400, 400),
    ("POST", "/subjects/s/versions", "[" * 100_000, 400, 400),
    (
        "POST",
        "/subjects/s/versions",
        {"schema": 'syntax = "proto3"; message M { int32 \u2603 = 1; }', "schemaType": "PROTOBUF"},
        422,
        42201,
    ),
    (
        "POST",
        "/subjects/s/versions",
        {
            "schema": 'syntax = "proto3"; import "k.proto"; message M {}',
            "schemaType": "PROTOBUF",
            "references": [{"name": "k.proto", "subject": "known", "version": 1}],
        },
        422,
        42201,
    ),
    ("GET", "/no/such/route", None, 404, 404),
    ("PATCH", "/subjects", None, 405, 405),
]


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code"),
    CASES,
    ids=[f"{c[0]} {c[1]} {str(c[2])[:30]}" for c in CASES],
)
def test_errors_are_confluents(
    broker: BrokerProcess, method: str, path: str, body: object, status: int, code: int
) -> None:
    post_json(f"{broker.registry_url}/subjects/known/versions", {"schema": AVRO})
    raw = (
        None
        if body is None
        else body.encode()
        if isinstance(body, str)
        else json.dumps(body).encode()
    )
    got_status, answer, ctype = http(broker.registry_url + path, method, raw)
    assert (got_status, answer["error_code"]) == (status, code), answer
    assert isinstance(answer["message"], str) and answer["message"]
    assert ctype.startswith(CONTENT_TYPE)


def _answer_status(sock: socket.socket) -> bytes:
    sock.settimeout(30)
    head = b""
    while b"\r\n" not in head:
        more = sock.recv(4096)
        if not more:
            break
        head += more
    return head.split(b"\r\n", 1)[0]


def test_a_10_mib_body_is_refused_unread(broker: BrokerProcess) -> None:
    # Declared: answered from the headers, before a byte of the body.
    with socket.create_connection(("127.0.0.1", broker.registry_port), timeout=30) as sock:
        sock.sendall(
            b"POST /subjects/big/versions HTTP/1.1\r\nHost: x\r\n"
            b"Content-Length: %d\r\nContent-Type: application/json\r\n\r\n" % (10 << 20)
        )
        assert b" 413 " in _answer_status(sock)
    # Sent in chunks without a length: refused once past the cap (2 MiB + 64 KiB).
    with socket.create_connection(("127.0.0.1", broker.registry_port), timeout=30) as sock:
        sock.sendall(
            b"POST /subjects/big/versions HTTP/1.1\r\nHost: x\r\n"
            b"Transfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n"
        )
        chunk = b"a" * 65536
        for _ in range(40):
            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        assert b" 413 " in _answer_status(sock)
    still_serving(broker)


def test_a_schema_over_the_cap_is_42209(broker: BrokerProcess) -> None:
    fields = [{"name": f"f{i}", "type": "string", "doc": "d" * 1000} for i in range(1100)]
    schema = json.dumps({"type": "record", "name": "Big", "fields": fields})
    status, answer = post_json(f"{broker.registry_url}/subjects/big/versions", {"schema": schema})
    assert (status, answer["error_code"]) == (422, 42209)


def test_deep_references_are_refused(broker: BrokerProcess) -> None:
    url = broker.registry_url
    previous = None
    status, answer = 200, {}
    for depth in range(20):
        name = f"e.T{depth}"
        fields = [{"name": "x", "type": "int"}]
        refs = []
        if previous:
            fields.append({"name": "prev", "type": previous})
            refs = [{"name": previous, "subject": f"deep{depth - 1}", "version": 1}]
        schema = json.dumps({"type": "record", "name": name, "fields": fields})
        status, answer = post_json(
            f"{url}/subjects/deep{depth}/versions", {"schema": schema, "references": refs}
        )
        if status != 200:
            break
        previous = name
    assert (status, answer["error_code"]) == (422, 42201), answer
    assert "deeper" in answer["message"]
    # A reference to a version that does not exist yet cannot close a cycle.
    schema = json.dumps(
        {"type": "record", "name": "e.C", "fields": [{"name": "c", "type": "e.C2"}]}
    )
    refs = [{"name": "e.C2", "subject": "cycle2", "version": 1}]
    status, answer = post_json(
        f"{url}/subjects/cycle1/versions", {"schema": schema, "references": refs}
    )
    assert (status, answer["error_code"]) == (422, 42201)


def test_caps_on_versions(broker: BrokerProcess) -> None:
    url = broker.registry_url
    post_json(f"{url}/config/capped", {"compatibility": "NONE"}, "PUT")
    answers = [
        post_json(f"{url}/subjects/capped/versions", {"schema": json.dumps(kind)})
        for kind in ("int", "long", "string", "bytes")
    ]
    assert [s for s, _ in answers[:3]] == [200, 200, 200]
    assert (answers[3][0], answers[3][1]["error_code"]) == (422, 42205)


def test_modes(broker: BrokerProcess) -> None:
    url = broker.registry_url
    assert post_json(f"{url}/mode/ro", {"mode": "READONLY"}, "PUT") == (200, {"mode": "READONLY"})
    status, answer = post_json(f"{url}/subjects/ro/versions", {"schema": AVRO})
    assert (status, answer["error_code"]) == (422, 42205)
    assert post_json(f"{url}/mode/imp", {"mode": "IMPORT"}, "PUT") == (200, {"mode": "IMPORT"})
    status, answer = post_json(
        f"{url}/subjects/imp/versions", {"schema": '"float"', "id": 4242, "version": 3}
    )
    assert (status, answer) == (200, {"id": 4242})
    status, answer, _ = http(f"{url}/subjects/imp/versions/3")
    assert (answer["id"], answer["version"]) == (4242, 3)
    status, answer = post_json(f"{url}/subjects/imp/versions", {"schema": '"bytes"', "id": 4242})
    assert (status, answer["error_code"]) == (422, 42207)


def test_mutated_requests(broker: BrokerProcess) -> None:
    """A few hundred randomly broken requests: each gets a 2xx or Confluent's 4xx JSON."""
    rng = random.Random(35)
    url = broker.registry_url
    paths = [
        "/subjects/m/versions",
        "/subjects/m",
        "/compatibility/subjects/m/versions/latest",
        "/config/m",
        "/mode/m",
    ]
    seeds = [
        {"schema": AVRO},
        {"schema": '{"type":"object"}', "schemaType": "JSON"},
        {"schema": 'syntax = "proto3"; message M { int32 a = 1; }', "schemaType": "PROTOBUF"},
        {"compatibility": "FULL"},
    ]
    junk: list[object] = [None, 0, -1, 2**63, "", "\x00", [], {}, True, 1.5, "x" * 5000]
    for _ in range(300):
        body: dict[str, object] = dict(rng.choice(seeds))
        key = rng.choice([*body, "references", "id", "version", "schemaType"])
        body[key] = rng.choice([*junk, json.dumps(rng.choice(junk))])
        raw = json.dumps(body).encode()
        if rng.random() < 0.3:
            cut = rng.randrange(len(raw))
            raw = raw[:cut] + bytes([rng.randrange(256)]) + raw[cut + 1 :]
        method = rng.choice(["POST", "PUT"])
        status, answer, _ = http(url + rng.choice(paths), method, raw)
        assert status < 500, answer
        if status >= 400:
            assert isinstance(answer["error_code"], int) and isinstance(answer["message"], str)
    still_serving(broker)
