"""The pipeline's job history for the console: the runs the coordinator recorded, read
from any broker's `/pipeline-runs` (beside its `/metrics`), since the console reaches the
cluster only as a client does."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

MAX_BODY = 1 << 20
TIMEOUT_S = 5.0
CLASS_PREFIX = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Warning|Exit)\s*:\s*")
"""A Python class name before an error's message (`ValueError: unknown topics: ...`), as
older runs recorded it: the page shows the message only."""
FLAGS = {"dry_run": "dry run", "nothing_to_do": "nothing to do"}
"""Boolean figures every run records, and their labels."""

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RunRow:
    job: str
    started_at: int
    seconds: float
    outcome: str
    figures: list[tuple[str, str]]
    """(label, value) of each figure, flags as yes/no, numbers with thousands separators."""
    error: str | None = None
    """Why a failed run failed, as a user can act on it (no Python class names)."""


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
    if not isinstance(figures, dict):
        figures = {}
    error = figures.pop("error", None)
    if error is not None:
        log.info("pipeline run %s (%s) failed: %s", run.get("id", "?"), run.get("job"), error)
    return RunRow(
        str(run.get("job", "?")),
        int(run.get("started_at", -1)),
        float(run.get("seconds", 0.0)),
        str(run.get("outcome", "?")),
        [(FLAGS.get(str(k), str(k)), _figure(v)) for k, v in figures.items()],
        None if error is None else user_message(str(error)),
    )


def _figure(value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.0f}" if value.is_integer() or abs(value) >= 100 else f"{value:,.2f}"
    return str(value)


def user_message(error: str) -> str:
    """The error's message without a leading Python class name."""
    return CLASS_PREFIX.sub("", error.strip(), count=1) or error


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
