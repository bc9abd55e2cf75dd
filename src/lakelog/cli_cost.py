"""`lakelog cost`: scrape brokers' /metrics and show the projected monthly bill.

The model is in `lakelog.cost`; this module only scrapes, validates flags and prints.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from lakelog import cost
from lakelog.cost import LineItem, Prices, Projection, Usage

cost_app = typer.Typer(
    help="Project the monthly cost of the cluster from its /metrics.",
    add_completion=False,
    subcommand_metavar="",
)

DEFAULT_WINDOW_S = 60.0
SCRAPE_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class Scrape:
    """One /metrics answer and when (monotonic, and Unix time) it was taken."""

    url: str
    text: str
    monotonic: float
    wall: float


def metrics_url(given: str) -> str:
    """Accept `host:port`, `http://host:port` or a full URL; default path `/metrics`."""
    url = given if "://" in given else f"http://{given}"
    scheme, _, rest = url.partition("://")
    return url if "/" in rest else f"{scheme}://{rest}/metrics"


def scrape(url: str) -> Scrape:
    started = time.monotonic()
    try:
        with urllib.request.urlopen(url, timeout=SCRAPE_TIMEOUT_S) as response:
            text = response.read().decode()
    except (OSError, urllib.error.URLError, ValueError) as exc:
        raise RuntimeError(f"cannot scrape {url}: {exc}") from exc
    return Scrape(url, text, (started + time.monotonic()) / 2, time.time())


def scrape_all(urls: list[str]) -> list[Scrape]:
    """Scrape every broker at once, so a window means the same seconds on each."""
    with ThreadPoolExecutor(max_workers=min(16, len(urls))) as pool:
        return list(pool.map(scrape, urls))


def observe_window(urls: list[str], window_s: float) -> tuple[Usage, dict[str, float]]:
    """Rates from two scrapes `window_s` apart, each broker timed on its own clock."""
    first = scrape_all(urls)
    time.sleep(window_s)
    second = scrape_all(urls)
    usages, seconds = [], {}
    for a, b in zip(first, second, strict=True):
        elapsed = b.monotonic - a.monotonic
        delta = cost.counter_delta(cost.parse_metrics(a.text), cost.parse_metrics(b.text))
        usages.append(cost.usage_from_series(delta, elapsed))
        seconds[a.url] = elapsed
    return cost.sum_usage(usages), seconds


def observe_since_start(
    urls: list[str],
    uptime_s: float | None,
) -> tuple[Usage, dict[str, float]]:
    """Rates from one scrape: counters are totals since each broker started."""
    usages, seconds = [], {}
    for one in scrape_all(urls):
        elapsed = uptime_s
        if elapsed is None:
            started = cost.started_at(one.text)
            if started is None:
                raise RuntimeError(
                    f"{one.url} does not expose lakelog_bytes_in_created; give --uptime-seconds"
                )
            elapsed = one.wall - started
        usages.append(cost.usage_from_series(cost.parse_metrics(one.text), elapsed))
        seconds[one.url] = elapsed
    return cost.sum_usage(usages), seconds


def load_prices(path: Path | None) -> Prices:
    if path is None:
        return Prices()
    try:
        return cost.prices_from_toml(path.read_text())
    except (OSError, ValueError) as exc:
        raise typer.BadParameter(str(exc), param_hint="--prices") from exc


def _usd(value: float) -> str:
    return f"${value:,.2f}" if value >= 1 or value == 0 else f"${value:,.4f}"


def _quantity(item: LineItem) -> str:
    if item.unit == "requests":
        return f"{item.quantity:,.0f} requests"
    return f"{item.quantity:,.3f} {item.unit}"


def _unit_price(item: LineItem) -> str:
    per = "1,000 req" if item.per == 1000 else item.unit
    return f"${item.unit_price:g} / {per}"


def _table(title: str, items: tuple[LineItem, ...], total: float) -> Table:
    table = Table(
        "Line item",
        "Monthly quantity",
        "Unit price",
        "Monthly USD",
        title=title,
        title_justify="left",
        show_footer=True,
    )
    for item in items:
        table.add_row(item.item, _quantity(item), _unit_price(item), _usd(item.usd))
    table.columns[0].footer = "Total"
    table.columns[3].footer = _usd(total)
    for column in table.columns[1:]:
        column.justify = "right"
    return table


def print_report(
    console: Console, usage: Usage, seconds: dict[str, float], projection: Projection
) -> None:
    mib = 1 << 20
    console.print(
        f"Observed {len(seconds)} broker(s) over "
        f"{', '.join(f'{s:,.1f} s' for s in seconds.values())}: "
        f"{usage.bytes_in / mib:,.3f} MiB/s in, {usage.bytes_out / mib:,.3f} MiB/s "
        f"out, {usage.object_put_bytes / mib:,.3f} MiB/s written to the store."
    )
    console.print(
        _table("Lakelog, projected 30-day month", projection.lakelog, projection.lakelog_usd)
    )
    console.print(
        _table(
            "Classic Kafka (RF=3, 3 zones), cross-zone transfer only",
            projection.classic,
            projection.classic_usd,
        )
    )
    lakelog_cross = sum(i.usd for i in projection.lakelog if i.key == "cross_zone")
    console.print(
        f"Cross-zone transfer: Lakelog {_usd(lakelog_cross)} vs classic Kafka "
        f"{_usd(projection.classic_usd)} a month; Lakelog's object-store requests "
        f"and storage add {_usd(projection.lakelog_usd - lakelog_cross)}.",
        highlight=False,
    )
    for note in projection.notes:
        console.print(f"- {note}", highlight=False)


def report_dict(
    mode: str,
    seconds: dict[str, float],
    usage: Usage,
    prices: Prices,
    retention_days: float,
    projection: Projection,
) -> dict[str, Any]:
    return {
        "mode": mode,
        "brokers": list(seconds),
        "observed_seconds": seconds,
        "month_days": cost.MONTH_DAYS,
        "gb_bytes": cost.GB,
        "retention_days": retention_days,
        "get_ranges_counted": cost.GET_RANGES_COUNTING,
        "rates_per_second": usage.as_dict(),
        "prices": dict(cost.prices_dict(prices)),
        **cost.projection_dict(projection),
    }


@cost_app.callback(invoke_without_command=True)
def cost_command(
    metrics: Annotated[
        list[str] | None,
        typer.Option(
            "--metrics",
            help="A broker's /metrics URL (or HOST:PORT); repeat for each broker.",
        ),
    ] = None,
    window_seconds: Annotated[
        float | None,
        typer.Option(
            help=f"Seconds between the two scrapes (default {DEFAULT_WINDOW_S:g}).",
        ),
    ] = None,
    since_start: Annotated[
        bool,
        typer.Option(
            "--since-start",
            help="Scrape once; counters are totals since each broker started.",
        ),
    ] = False,
    uptime_seconds: Annotated[
        float | None,
        typer.Option(
            help="With --since-start: the brokers' uptime (default: from lakelog_bytes_in_created "
            "and this host's clock).",
        ),
    ] = None,
    prices_file: Annotated[
        Path | None,
        typer.Option(
            "--prices",
            help="TOML price table (see --print-prices for the keys).",
        ),
    ] = None,
    retention_days: Annotated[
        float,
        typer.Option(
            help="Days the data is kept: stored GB = write rate x retention.",
        ),
    ] = cost.DEFAULT_RETENTION_DAYS,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    print_prices: Annotated[
        bool,
        typer.Option(
            "--print-prices",
            help="Print the price table (defaults, or --prices) as TOML and exit.",
        ),
    ] = False,
) -> None:
    """Project a 30-day month of object-store, storage and cross-zone costs from the
    brokers' counters, next to classic Kafka's cross-zone bill for the same traffic."""
    prices = load_prices(prices_file)
    if print_prices:
        typer.echo(cost.prices_to_toml(prices), nl=False)
        return
    if not metrics:
        raise typer.BadParameter("give at least one broker", param_hint="--metrics")
    if since_start and window_seconds is not None:
        raise typer.BadParameter(
            "use either --since-start or --window-seconds", param_hint="--window-seconds"
        )
    if uptime_seconds is not None and (not since_start or uptime_seconds <= 0):
        raise typer.BadParameter(
            "needs --since-start and a positive number", param_hint="--uptime-seconds"
        )
    window = DEFAULT_WINDOW_S if window_seconds is None else window_seconds
    if window <= 0:
        raise typer.BadParameter("must be positive", param_hint="--window-seconds")
    if not retention_days > 0 or retention_days == float("inf"):
        raise typer.BadParameter("must be a positive number of days", param_hint="--retention-days")
    urls = [metrics_url(m) for m in metrics]
    try:
        if since_start:
            usage, seconds = observe_since_start(urls, uptime_seconds)
        else:
            usage, seconds = observe_window(urls, window)
    except (RuntimeError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    projection = cost.project(usage, prices, retention_days)
    if as_json:
        mode = "since_start" if since_start else "window"
        typer.echo(
            json.dumps(
                report_dict(mode, seconds, usage, prices, retention_days, projection), indent=2
            )
        )
        return
    print_report(Console(), usage, seconds, projection)


if __name__ == "__main__":
    cost_app()
