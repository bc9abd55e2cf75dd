"""The produce/consume bench's result table: one column per run, noisy phases and errors
listed under it, so a reader sees at once which figures to trust.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from common import NOISY_PCT
from raw import RAW_PARALLEL


def fmt(v: Any, suffix: str = "") -> str:
    """A figure for a table cell: thousands separators, 2 decimals below 10, "-" for none."""
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.1f}{suffix}" if abs(v) >= 10 else f"{v:.2f}{suffix}"
    return f"{v}{suffix}"


def render(head: list[str], body: list[list[str]]) -> list[str]:
    """Aligned text rows: first column left, the others right, a rule under the head."""
    widths = [max(len(row[i]) for row in [head, *body]) for i in range(len(head))]
    lines = [
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in [head, *body]
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def get(run: dict[str, Any], *path: str | int) -> Any:
    """A nested value of a result dict (None where any key is missing)."""
    cur: Any = run
    for key in path:
        in_dict = isinstance(cur, dict) and key in cur
        in_list = isinstance(cur, list) and isinstance(key, int) and -len(cur) <= key < len(cur)
        if not (in_dict or in_list):
            return None
        cur = cur[key]
    return cur


def table(results: dict[str, Any]) -> str:
    """The figures, one column per run."""
    runs = results["runs"]

    g = get

    rows: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
        ("produce MiB/s (acks=all)", lambda r: fmt(g(r, "produce", "mib_s"))),
        ("produce latency p50 ms", lambda r: fmt(g(r, "produce", "latency", "p50_ms"))),
        ("produce latency p99 ms", lambda r: fmt(g(r, "produce", "latency", "p99_ms"))),
        ("produce broker CPU s/GiB", lambda r: fmt(g(r, "produce", "broker_cpu_s_per_gib"))),
        ("produce client CPU s", lambda r: fmt(g(r, "produce", "client_cpu_s"))),
        ("other procs' CPU % (produce)", lambda r: fmt(g(r, "produce", "other_cpu_pct"))),
        ("consume MiB/s", lambda r: fmt(g(r, "consume", "mib_s"))),
        ("consume first record after s", lambda r: fmt(g(r, "consume", "first_record_s"))),
        ("consume broker CPU s/GiB", lambda r: fmt(g(r, "consume", "broker_cpu_s_per_gib"))),
        ("other procs' CPU % (consume)", lambda r: fmt(g(r, "consume", "other_cpu_pct"))),
        ("paced MiB/s target/achieved", lambda r: f"{fmt(g(r, 'paced', 'target_mib_s'))}/"
         f"{fmt(g(r, 'paced', 'achieved_mib_s'))}"),
        ("paced e2e p50 ms", lambda r: fmt(g(r, "paced", "e2e", "p50_ms"))),
        ("paced e2e p99 ms", lambda r: fmt(g(r, "paced", "e2e", "p99_ms"))),
        ("paced produce p50 ms", lambda r: fmt(g(r, "paced", "produce_latency", "p50_ms"))),
        ("paced produce p99 ms", lambda r: fmt(g(r, "paced", "produce_latency", "p99_ms"))),
        ("paced produce p99 <= target", lambda r: (
            "-" if g(r, "paced", "produce_p99_ok") is None
            else f"{'yes' if g(r, 'paced', 'produce_p99_ok') else 'NO'} "
            f"({g(r, 'paced', 'produce_p99_target_ms')} ms)")),
        ("paced broker CPU s/GiB", lambda r: fmt(g(r, "paced", "broker_cpu_s_per_gib"))),
        ("other procs' CPU % (paced)", lambda r: fmt(g(r, "paced", "other_cpu_pct"))),
        ("broker peak RSS MiB (run)", lambda r: fmt(g(r, "memory_mib", "VmHWM"))),
        ("raw store seq MiB/s", lambda r: fmt(g(r, "raw", "store_seq", "mib_s"))),
        (f"raw store x{RAW_PARALLEL} MiB/s", lambda r: fmt(g(r, "raw", "store_par", "mib_s"))),
        ("raw files+fsync MiB/s", lambda r: fmt(g(r, "raw", "files_fsync", "mib_s"))),
        ("other procs' CPU % (raw)", lambda r: fmt(g(r, "raw", "other_cpu_pct"))),
        ("produce / best raw store", lambda r: fmt(g(r, "produce_vs_raw_store"))),
    ]  # fmt: skip
    head = ["figure"] + [f"run {r['run']} ({r['kind']})" for r in runs]
    body = [[name] + [fn(r) for r in runs] for name, fn in rows]
    lines = render(head, body)
    errors = [
        f"run {r['run']} {name}: {ph['error']}"
        for r in runs
        for name, ph in r.items()
        if isinstance(ph, dict) and "error" in ph
    ]
    if results.get("error"):
        errors.append(results["error"])
    busy = [
        f"run {r['run']} {name} {ph['other_cpu_pct']}%"
        for r in runs
        for name, ph in r.items()
        if isinstance(ph, dict)
        and (ph.get("other_cpu_pct") or 0) > NOISY_PCT
        and (ph.get("wall_s") or 0) >= 1.0
    ]
    if busy:
        lines += [
            "",
            f"warning: other processes used more than {NOISY_PCT}% of a core during: "
            + ", ".join(busy)
            + ". On 2 cores that skews the figures; rerun on a quiet machine.",
        ]
    if errors:
        lines += ["", "errors:", *(f"  {e}" for e in errors)]
    return "\n".join(lines)
