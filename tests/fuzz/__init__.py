"""The protocol fuzzer (corpus, mutation engine, harness). It reuses the e2e suite's
broker-process helpers, which are top-level modules in tests/e2e, so that folder goes on the
import path here, once for every module of the package."""

import sys
from pathlib import Path

_E2E = str(Path(__file__).resolve().parents[1] / "e2e")
if _E2E not in sys.path:
    sys.path.insert(0, _E2E)
