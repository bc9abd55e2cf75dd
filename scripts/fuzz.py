"""The long fuzz run (`make fuzz`): mutated requests from the captured corpus against a real
broker on PLAINTEXT and on a SASL listener, then a table of the figures.

    .venv/bin/python scripts/fuzz.py [--requests N] [--listener PLAINTEXT|SASL_PLAINTEXT]
        [--connections N] [--window N] [--seed N] [--max-seconds S] [--no-triage]
        [--keep DIR] [--registry-requests N]

Defaults: 1,000,000 mutated requests per listener (every API of tests/fuzz/corpus, see
scripts/capture_corpus.py), 24 connections, up to 32 frames pipelined per window (the
window halves when the broker closes the connection, doubles when all were answered).
Exits 1 if the broker crashed, logged an unhandled exception, grew its RSS past twice its
size after the warm-up, or the good client was not served (p99 of its Metadata requests
over 100 ms, or its produce and read-back failed). Crashes and unhandled exceptions are
triaged: the frames in flight are replayed one by one on a fresh broker and the one that
reproduces it is printed (or saved, with --keep, when long). The harness lives in
tests/fuzz/ (the bounded form runs in `make test`); --seed makes a run repeatable as far as
the mutations go (the interleaving of connections is the scheduler's).

Then the schema registry's HTTP mode (tests/fuzz/http_harness.py): --registry-requests
(200,000; 0 skips it) mutated registry requests against a broker's registry listener. It
fails on a 5xx without Confluent's error body, an honest request left unanswered, an
unhandled exception, or a broker that stops answering ApiVersions or GET /subjects.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.fuzz.corpus_io import API_NAMES, load_corpus  # noqa: E402
from tests.fuzz.harness import Plan, Result, run_listener, table  # noqa: E402
from tests.fuzz.http_harness import HttpPlan, HttpResult, run_registry  # noqa: E402
from tests.support.verdicts import print_verdicts  # noqa: E402

LISTENERS = ("PLAINTEXT", "SASL_PLAINTEXT")
P99_BOUND_MS = 100.0


def verdict(result: Result) -> list[str]:
    broken = []
    if result.crashes:
        broken.append(f"{result.crashes} crashes")
    if result.unhandled:
        broken.append(f"{result.unhandled} unhandled exceptions")
    if result.rss_end_mib > 2 * result.rss_start_mib:
        broken.append(f"RSS {result.rss_start_mib:.0f} -> {result.rss_end_mib:.0f} MiB")
    if result.good.get("produce_fetch") != "ok":
        broken.append(f"good client produce+fetch: {result.good.get('produce_fetch')}")
    if not result.good.get("p99_ms", float("inf")) < P99_BOUND_MS:
        broken.append(f"good client p99 {result.good.get('p99_ms')} ms")
    return broken


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--listener", choices=LISTENERS, action="append")
    parser.add_argument("--connections", type=int, default=24)
    parser.add_argument("--window", type=int, default=32)
    parser.add_argument("--seed", type=int, default=int(time.time()) % 100_000)
    parser.add_argument("--max-seconds", type=float, default=3600.0)
    parser.add_argument("--no-triage", action="store_true")
    parser.add_argument("--keep", type=Path, help="keep data dirs, logs and crash candidates")
    parser.add_argument("--registry-requests", type=int, default=200_000)
    args = parser.parse_args()

    seeds = load_corpus()
    apis = sorted({s.api_key for s in seeds})
    print(
        f"corpus: {len(seeds)} frames, {len(apis)} APIs "
        f"({', '.join(API_NAMES.get(a, str(a)) for a in apis)}); seed {args.seed}",
        flush=True,
    )
    root = args.keep or Path(tempfile.mkdtemp(prefix="lakelog-fuzz."))
    results: list[Result] = []
    registry: HttpResult | None = None
    try:
        for listener in args.listener or LISTENERS:
            plan = Plan(
                listener=listener,
                requests=args.requests,
                connections=args.connections,
                window=args.window,
                seed=args.seed,
                max_seconds=args.max_seconds,
                triage=not args.no_triage,
                triage_stalls=not args.no_triage,
                progress_every_s=60.0,
            )
            print(f"== {listener}: {plan}", flush=True)
            result = run_listener(plan, root / listener.lower(), seeds)
            results.append(result)
            print(result.report(), flush=True)
        if args.registry_requests > 0:
            http_plan = HttpPlan(
                requests=args.registry_requests,
                connections=16,
                seed=args.seed,
                max_seconds=args.max_seconds,
                progress_every_s=60.0,
            )
            print(f"== schema registry (HTTP): {http_plan}", flush=True)
            registry = run_registry(http_plan, root / "registry")
            print(registry.report(), flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"data dirs, broker logs and crash candidates kept in {root}")
    print()
    print(table(results))
    verdicts = [(result.listener, verdict(result)) for result in results]
    if registry is not None:
        verdicts.append(("schema registry", registry_verdict(registry, args.registry_requests)))
    return print_verdicts(verdicts, "no crash, no unhandled exception, served throughout")


def registry_verdict(result: HttpResult, requests: int) -> list[str]:
    broken = [f"setup: {e}" for e in result.setup_errors[:3]]
    if result.delivered < requests:
        broken.append(f"only {result.delivered} of {requests} requests in the time allowed")
    if result.crashed:
        broken.append("the broker crashed")
    broken += result.unhealthy[:3]
    if result.bad_answers:
        broken.append(f"{len(result.bad_answers)} bad answers")
    if result.unanswered:
        broken.append(f"{len(result.unanswered)} honest requests unanswered")
    if result.unhandled:
        broken.append(f"{result.unhandled} unhandled exceptions")
    if result.rss_end_mib > 2 * result.rss_start_mib + 100:
        broken.append(f"RSS {result.rss_start_mib:.0f} -> {result.rss_end_mib:.0f} MiB")
    return broken


if __name__ == "__main__":
    sys.exit(main())
