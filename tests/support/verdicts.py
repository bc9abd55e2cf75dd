"""The closing lines of the fuzz and fault scripts: one verdict line per run."""

from __future__ import annotations

from collections.abc import Iterable


def print_verdicts(verdicts: Iterable[tuple[str, list[str]]], good: str) -> int:
    """Print "<name>: BROKEN: <what>" or "<name>: <good>" for each (name, what broke) pair;
    the exit code: 1 if anything broke, else 0."""
    failed = False
    for name, broken in verdicts:
        if broken:
            failed = True
            print(f"{name}: BROKEN: {'; '.join(broken)}")
        else:
            print(f"{name}: {good}")
    return 1 if failed else 0
