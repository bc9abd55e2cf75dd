"""The bounded fuzz run (the long one is `make fuzz`, scripts/fuzz.py): mutated requests
from the captured corpus (every API and version kafka-python, confluent-kafka and aiokafka
send) on 24 connections against a real broker, on PLAINTEXT and on a SASL_PLAINTEXT
listener (before, during and after login), while a well-behaved client keeps sending
Metadata requests and at the end produces and reads back records.

No mutated request may crash the broker or make it log an unhandled exception; its RSS
stays within twice its start; the good client is served throughout. On failure the report
lists the exception kinds (type and innermost lakelog frame) and, for a crash, the frame
that reproduces it (found by replaying the frames in flight on a fresh broker).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fuzz.corpus_io import load_corpus
from tests.fuzz.harness import Plan, run_listener

pytestmark = pytest.mark.e2e

REQUESTS = 25_000
GOOD_P99_BOUND_MS = 2000.0
"""Generous: the machine running `make test` is shared; speed is the long run's figure."""


@pytest.mark.timeout(400)
@pytest.mark.parametrize("listener", ["PLAINTEXT", "SASL_PLAINTEXT"])
def test_bounded_fuzz_run(listener: str, tmp_path: Path) -> None:
    seeds = load_corpus()
    if not seeds:
        pytest.skip("no corpus in tests/fuzz/corpus (scripts/capture_corpus.py writes it)")
    plan = Plan(listener=listener, requests=REQUESTS, seed=12, max_seconds=240)
    result = run_listener(plan, tmp_path, seeds)
    report = result.report()
    print(report)

    assert not result.harness_errors, report
    assert result.delivered >= REQUESTS, report
    assert result.crashes == 0, report
    assert result.unhandled == 0, report
    assert result.rss_end_mib <= 2 * result.rss_start_mib, report
    good = result.good
    assert good.get("requests", 0) > 0, report
    assert good.get("produce_fetch") == "ok", report
    assert good["p99_ms"] < GOOD_P99_BOUND_MS, report
