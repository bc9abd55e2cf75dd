"""The long fault run (`make faults`): both backends under broker SIGKILLs and SIGSTOPs, a
PostgreSQL stop and S3 faults, then a table of what the history checker found.

    .venv/bin/python scripts/faults.py [--backend sqlite-files|postgres-s3] [--short]
        [--duration S] [--kills N] [--stops N] [--seed N] [--keep DIR]

Exits 1 if any invariant broke on any backend: lost acknowledged records, duplicated or
reordered records of any producer, idempotent or plain, offset gaps, fatal producer errors,
client connections closed for a failed request, or orphan objects left behind that no
SIGKILL between upload and commit explains.
The harness itself lives in tests/faults/ (harness.py runs it) (the short form runs in `make test`).
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.faults.harness import (  # noqa: E402
    BACKENDS,
    BROKER_ENV,
    LONG_PLAN,
    SHORT_PLAN,
    Result,
    run_backend,
    table,
)
from tests.faults.servers import postgres_missing  # noqa: E402
from tests.support.verdicts import print_verdicts  # noqa: E402


def what_broke(result: Result) -> list[str]:
    broken = result.broken()
    if result.orphans_unexplained:
        broken.append(f"orphans not explained by a SIGKILL: {result.orphans_unexplained}")
    return broken


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=BACKENDS, action="append")
    parser.add_argument("--short", action="store_true", help="the plan of the short test")
    parser.add_argument("--duration", type=float, help="seconds of load and faults")
    parser.add_argument("--kills", type=int)
    parser.add_argument("--stops", type=int)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--keep", type=Path, help="keep data dirs and broker logs here")
    parser.add_argument(
        "--inline",
        action="store_true",
        help="brokers run the small-write path (produce_inline; moves every 5 s)",
    )
    args = parser.parse_args()
    if args.inline:
        BROKER_ENV.update({"PRODUCE_INLINE": True, "PRODUCE_INLINE_MOVE_AGE_MS": 5000})

    plan = SHORT_PLAN if args.short else LONG_PLAN
    changes = {
        name: value
        for name, value in (
            ("duration_s", args.duration),
            ("kills", args.kills),
            ("stops", args.stops),
            ("seed", args.seed),
        )
        if value is not None
    }
    plan = dataclasses.replace(plan, **changes)
    backends = args.backend or list(BACKENDS)
    if "postgres-s3" in backends and (missing := postgres_missing()):
        print(f"cannot run postgres-s3: {missing}", file=sys.stderr)
        return 2

    root = args.keep or Path(tempfile.mkdtemp(prefix="lakelog-faults."))
    results: list[Result] = []
    try:
        for backend in backends:
            print(f"== {backend}: {plan}", flush=True)
            started = time.monotonic()
            result = run_backend(backend, plan, root / backend)
            results.append(result)
            print(result.report(), flush=True)
            print("events:", *result.events[-400:], sep="\n  ", flush=True)
            print(f"({time.monotonic() - started:.0f}s)\n", flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"data dirs and broker logs kept in {root}")

    print(table(results))
    return print_verdicts(
        ((result.backend, what_broke(result)) for result in results), "every invariant held"
    )


if __name__ == "__main__":
    sys.exit(main())
