"""The bounded HTTP fuzz run of the schema registry (the long one is part of `make fuzz`,
scripts/fuzz.py): mutated registry requests against a real broker's registry listener; no
5xx without Confluent's error body, every honest request answered, no unhandled exception
in the broker log, and after every batch the broker still answers a Kafka ApiVersions and
`GET /subjects`. The mutator's own promises are checked without a broker."""

from __future__ import annotations

import collections
from pathlib import Path

import pytest

from tests.fuzz.http_harness import HttpPlan, parse_answer, problem_with, run_registry
from tests.fuzz.http_mutate import MAX_BODY, HttpMutator
from tests.fuzz.registry_corpus import seeds

REQUESTS = 2_000


def test_corpus_covers_every_endpoint_and_type() -> None:
    found = seeds()
    routes = {(s.method, s.path.split("/")[1]) for s in found}
    assert {
        ("POST", "subjects"),
        ("GET", "subjects"),
        ("DELETE", "subjects"),
        ("GET", "schemas"),
        ("POST", "compatibility"),
        ("GET", "config"),
        ("PUT", "config"),
        ("DELETE", "config"),
        ("GET", "mode"),
        ("PUT", "mode"),
        ("DELETE", "mode"),
    } <= routes
    bodies = b" ".join(s.body for s in found)
    for kind in (b"JSON", b"PROTOBUF", b"references", b"record"):
        assert kind in bodies
    assert any("%2F" in s.path for s in found)
    assert any("normalize=true" in s.query for s in found)


def test_mutator_is_deterministic_and_covers_its_kinds() -> None:
    first, second = HttpMutator(seeds(), 5), HttpMutator(seeds(), 5)
    a = [first.next() for _ in range(300)]
    b = [second.next() for _ in range(300)]
    assert a == b
    kinds = collections.Counter(k for r in a for k in r.what.split(" ")[-1].split("+"))
    assert set(kinds) == {
        "method",
        "path",
        "query",
        "body",
        "json",
        "schema",
        "header",
        "length",
        "huge",
    }
    assert max(len(r.data) for r in a) <= MAX_BODY + 20_000
    assert any(r.lies for r in a) and not all(r.lies for r in a)


def test_answer_checks() -> None:
    body = b'{"error_code": 50001, "message": "x"}'
    ct = {"content-type": "application/vnd.schemaregistry.v1+json"}
    assert parse_answer(
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 500 Err\r\nA: b\r\n\r\n" + body
    ) == (500, {"a": "b"}, body)
    assert problem_with(500, ct, body) is None
    assert problem_with(500, {}, b"Internal Server Error") is not None
    assert problem_with(404, ct, b"<html>") is not None
    assert problem_with(400, {"content-type": "text/plain"}, b"Invalid HTTP request") is None


@pytest.mark.e2e
@pytest.mark.timeout(600)
def test_bounded_registry_fuzz_run(tmp_path: Path) -> None:
    plan = HttpPlan(requests=REQUESTS, seed=35, max_seconds=400)
    result = run_registry(plan, tmp_path)
    report = result.report()
    print(report)
    assert not result.setup_errors, report
    assert result.delivered >= REQUESTS, report
    assert not result.unhealthy and not result.crashed, report
    assert not result.bad_answers, report
    assert not result.unanswered, report
    assert result.unhandled == 0, report
    assert result.rss_end_mib <= 2 * result.rss_start_mib + 100, report
    assert sum(n for s, n in result.statuses.items() if 200 <= s < 300) > 0, report
    assert sum(n for s, n in result.statuses.items() if 400 <= s < 500) > 0, report
