"""The short fault run, on both backends: three brokers under idempotent and plain
producers (5 requests in flight, records of 1 KiB and ~500 KB) while brokers are SIGKILLed
and SIGSTOPped and, on PostgreSQL + S3, the PostgreSQL server stops for 5 s and the S3 proxy
fails 10% of requests for 15 s and adds a latency spike.

Whatever the faults, Kafka's promises hold: no acknowledged record lost, no record out of
send order per partition (plain producers' included), no idempotent producer's record
stored twice, dense offsets, no fatal producer error, and no client connection closed
because a request failed. Plain producers' duplicates are printed, not asserted
(Result.broken says why); the long run asserts them.
The long form (`make faults`, scripts/faults.py) runs the same harness for minutes with
>= 50 kills.
The backends are the harness's own (a PostgreSQL server and moto of its own), so this runs
once per `make test`, whatever LAKELOG_TEST_BACKEND says.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.harness import SHORT_PLAN, run_backend
from tests.faults.servers import postgres_missing

pytestmark = pytest.mark.e2e


@pytest.mark.timeout(420)
@pytest.mark.parametrize("backend", ["sqlite-files", "postgres-s3"])
def test_short_fault_run(backend: str, tmp_path: Path) -> None:
    if backend == "postgres-s3" and (missing := postgres_missing()):
        pytest.skip(missing)
    result = run_backend(backend, SHORT_PLAN, tmp_path / backend)
    report = result.report() + "\nevents:\n  " + "\n  ".join(result.events)
    print(report)  # shown with -s, and on failure below

    assert not result.harness_errors, report
    # The faults really happened (a run that injected nothing proves nothing).
    assert result.kills >= 2, report
    assert result.stops >= 2, report
    if backend == "postgres-s3":
        assert result.pg_stops == 1, report
        assert result.s3_faults >= 1, report
    assert result.verdict.acked > 1000, report
    # The invariants.
    assert result.broken(plain_duplicates=False) == [], report
    findings = result.plain_findings() or "none"
    print("plain producers' duplicates (asserted by the long run):", findings)
