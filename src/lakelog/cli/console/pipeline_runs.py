"""The pipeline's job history for the console: the runs the coordinator recorded, read
from any broker's `/pipeline-runs` (beside its `/metrics`), since the console reaches the
cluster only as a client does."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

MAX_BODY = 1 << 20
TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True)
class RunRow:
    job: str
    started_at: int
    seconds: float
    outcome: str
    figures: list[tuple[str, str]]


def runs_url(metrics_url: str) -> str:
    base = metrics_url.rsplit("/", 1)[0] if metrics_url.endswith("/metrics") else metrics_url
    return base.rstrip("/") + "/pipeline-runs"


def _fetch(url: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
        body = response.read(MAX_BODY + 1)
    if len(body) > MAX_BODY:
        raise ValueError(f"{url} answered more than {MAX_BODY} bytes")
    runs = json.loads(body)
    if not isinstance(runs, list):
        raise ValueError(f"{url} did not answer a list")
    return runs


def _row(run: dict[str, Any]) -> RunRow:
    try:
        figures = json.loads(run.get("figures") or "{}")
    except ValueError:
        figures = {}
    shown = [(str(k), str(v)) for k, v in figures.items()] if isinstance(figures, dict) else []
    return RunRow(
        str(run.get("job", "?")),
        int(run.get("started_at", -1)),
        float(run.get("seconds", 0.0)),
        str(run.get("outcome", "?")),
        shown,
    )


async def recent_runs(metrics_urls: Sequence[str]) -> tuple[list[RunRow], str | None]:
    """(runs newest first, None), or ([], why) when no broker answered."""
    problems = []
    for url in metrics_urls:
        try:
            runs = await asyncio.to_thread(_fetch, runs_url(url))
        except (OSError, urllib.error.URLError, ValueError) as exc:
            problems.append(f"{runs_url(url)}: {getattr(exc, 'reason', None) or exc}")
            continue
        return [_row(r) for r in runs if isinstance(r, dict)], None
    if not metrics_urls:
        return [], "no broker serves /metrics (--metrics-listen), so none serves /pipeline-runs"
    return [], "; ".join(problems)
