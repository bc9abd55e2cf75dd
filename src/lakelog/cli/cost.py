"""`lakelog cost`: scrape brokers' /metrics and show the projected monthly bill.

The model is in `lakelog.cli.cost_model`; this module only scrapes, validates flags and prints.
"""

from __future__ import annotations

import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from lakelog.admin.client import AdminClient
from lakelog.admin.wire import KafkaError
from lakelog.cli import cost_model as cost
from lakelog.cli.common import (
    BootstrapOption,
    CommandConfigOption,
    UserError,
    bootstrap_of,
    print_json,
    print_table,
    run_admin,
    run_cli,
    say,
    use_command_config,
    waiting,
)
from lakelog.cli.cost_model import LineItem, Prices, Projection, Usage

cost_app = typer.Typer(
    help="Project the monthly cost of the cluster from its /metrics.",
    add_completion=False,
    subcommand_metavar="",
)

DEFAULT_WINDOW_S = 60.0
SCRAPE_TIMEOUT_S = 10.0
METRICS_LISTEN = "lakelog.metrics.listen"
"""The broker config (DescribeConfigs, read-only) naming where a broker serves /metrics."""


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
        reason = getattr(exc, "reason", None) or exc
        raise UserError(f"cannot scrape {url}: {reason}") from exc
    return Scrape(url, text, (started + time.monotonic()) / 2, time.time())


def scrape_all(urls: list[str]) -> list[Scrape]:
    """Scrape every broker at once, so a window means the same seconds on each."""
    with ThreadPoolExecutor(max_workers=min(16, len(urls))) as pool:
        return list(pool.map(scrape, urls))


def observe_window(urls: list[str], window_s: float) -> tuple[Usage, dict[str, float]]:
    """Rates from two scrapes `window_s` apart, each broker timed on its own clock."""
    with waiting(f"Scraping {len(urls)} broker(s)"):
        first = scrape_all(urls)
    countdown(window_s, f"Observing {len(urls)} broker(s)")
    with waiting(f"Scraping {len(urls)} broker(s) again"):
        second = scrape_all(urls)
    usages, seconds = [], {}
    for a, b in zip(first, second, strict=True):
        elapsed = b.monotonic - a.monotonic
        delta = cost.counter_delta(cost.parse_metrics(a.text), cost.parse_metrics(b.text))
        usages.append(cost.usage_from_series(delta, elapsed))
        seconds[a.url] = elapsed
    return cost.sum_usage(usages), seconds


def countdown(seconds: float, what: str) -> None:
    """Sleep `seconds`; on a terminal, a spinner shows the seconds left."""
    if not sys.stderr.isatty():
        time.sleep(seconds)
        return
    from rich.console import Console

    deadline = time.monotonic() + seconds
    with Console(stderr=True).status(what) as status:
        while (left := deadline - time.monotonic()) > 0:
            status.update(f"{what}: second scrape in {left:.0f} s")
            time.sleep(min(1.0, left))


async def metrics_endpoints(client: AdminClient) -> tuple[list[str], list[str]]:
    """(/metrics URLs, brokers serving none) of every broker of the cluster, from each
    broker's `lakelog.metrics.listen` config (a wildcard host becomes the broker's own host).
    Shared with the web console, which scrapes the same endpoints."""
    urls: list[str] = []
    silent: list[str] = []
    for node in await client.brokers():
        try:
            configs = {c.name: c.value for c in await client.describe_broker_configs(node)}
        except (KafkaError, OSError, TimeoutError) as exc:
            raise UserError(f"broker {node.node_id} ({node.address}): {exc}") from exc
        listen = configs.get(METRICS_LISTEN)
        if not listen:
            silent.append(f"{node.node_id} ({node.address})")
            continue
        host, _, port = listen.rpartition(":")
        if host in ("", "0.0.0.0", "::", "[::]"):
            host = node.host
        url = metrics_url(f"{host}:{port}")
        if url not in urls:  # brokers of one process may share one endpoint
            urls.append(url)
    return urls, silent


def discover_metrics(bootstrap: str) -> list[str]:
    """The /metrics URL of every broker of the cluster (see `metrics_endpoints`)."""

    async def action(client: AdminClient) -> list[str]:
        urls, silent = await metrics_endpoints(client)
        if silent:
            raise UserError(
                f"broker(s) {', '.join(silent)} serve no /metrics (started with "
                "--metrics-listen '') or are not Lakelog; name the URLs with --metrics"
            )
        return urls

    with waiting(f"Asking {bootstrap} for the brokers' /metrics addresses"):
        return run_admin(bootstrap, action)


def observe_since_start(
    urls: list[str],
    uptime_s: float | None,
) -> tuple[Usage, dict[str, float]]:
    """Rates from one scrape: counters are totals since each broker started."""
    usages, seconds = [], {}
    with waiting(f"Scraping {len(urls)} broker(s)"):
        scraped = scrape_all(urls)
    for one in scraped:
        elapsed = uptime_s
        if elapsed is None:
            started = cost.started_at(one.text)
            if started is None:
                raise UserError(
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


def _table(title: str, items: tuple[LineItem, ...], total: float) -> None:
    rows: list[list[object]] = [
        [item.item, _quantity(item), _unit_price(item), _usd(item.usd)] for item in items
    ]
    rows.append(["Total", "", "", _usd(total)])
    print_table(["Line item", "Monthly quantity", "Unit price", "Monthly USD"], rows, title=title)


def print_report(usage: Usage, seconds: dict[str, float], projection: Projection) -> None:
    mib = 1 << 20
    say(
        f"Observed {len(seconds)} broker(s) over "
        f"{', '.join(f'{s:,.1f} s' for s in seconds.values())}: "
        f"{usage.bytes_in / mib:,.3f} MiB/s in, {usage.bytes_out / mib:,.3f} MiB/s "
        f"out, {usage.object_put_bytes / mib:,.3f} MiB/s written to the store."
    )
    _table("Lakelog, projected 30-day month", projection.lakelog, projection.lakelog_usd)
    _table(
        "Classic Kafka (RF=3, 3 zones): cross-zone transfer and replicated disks",
        projection.classic,
        projection.classic_usd,
    )
    say(
        f"Monthly total: Lakelog {_usd(projection.lakelog_usd)} vs classic Kafka "
        f"{_usd(projection.classic_usd)}."
    )
    for note in projection.notes:
        say(f"- {note}")


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
            help="A broker's /metrics URL (or HOST:PORT); repeat for each broker. "
            "Default: every broker's, asked of the cluster at --bootstrap-server.",
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
    bootstrap_server: BootstrapOption = None,
    command_config: CommandConfigOption = None,
) -> None:
    """Project a 30-day month of object-store, storage and cross-zone costs from the
    brokers' counters, next to classic Kafka's bill (cross-zone transfer and replicated
    disks) for the same traffic."""
    use_command_config(None, command_config)
    prices = load_prices(prices_file)
    if print_prices:
        typer.echo(cost.prices_to_toml(prices), nl=False)
        return
    if metrics and bootstrap_server:
        raise typer.BadParameter(
            "use either --metrics or --bootstrap-server", param_hint="--metrics"
        )
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
    if metrics:
        urls = [metrics_url(m) for m in metrics]
    else:
        urls = discover_metrics(bootstrap_of(None, bootstrap_server))
    try:
        if since_start:
            usage, seconds = observe_since_start(urls, uptime_seconds)
        else:
            usage, seconds = observe_window(urls, window)
    except ValueError as exc:
        raise UserError(exc) from exc
    projection = cost.project(usage, prices, retention_days)
    if as_json:
        mode = "since_start" if since_start else "window"
        print_json(report_dict(mode, seconds, usage, prices, retention_days, projection))
        return
    print_report(usage, seconds, projection)


if __name__ == "__main__":
    raise SystemExit(run_cli(cost_app))
