"""`lakelog serve`'s /metrics endpoint: on by default (loopback, the listener's port + 1000),
started before the broker so the broker reports where it really is (DescribeConfigs
`lakelog.metrics.listen`, which `lakelog console` and `lakelog cost` read), and announced in
the log with the command that opens the web console."""

from __future__ import annotations

import asyncio
import logging

from lakelog.cli.common import UserError, describe
from lakelog.config import Settings, split_host_port
from lakelog.server.metrics_server import (
    PipelineRuns,
    bound_address,
    start_default_metrics_server,
    start_metrics_server,
)

log = logging.getLogger("lakelog.serve")

WILDCARDS = ("", "0.0.0.0", "::")


async def start_metrics(
    settings: Settings, pipeline_runs: PipelineRuns
) -> tuple[asyncio.base_events.Server | None, Settings]:
    """The endpoint (None when `metrics_listen` is empty) and the settings that name its
    real address. A taken default port moves elsewhere; a taken chosen one is an error."""
    wanted = settings.metrics_listen
    if wanted == "":
        return None, settings
    if wanted is None:
        server = await start_default_metrics_server(settings.listen, pipeline_runs)
    else:
        try:
            server = await start_metrics_server(wanted, pipeline_runs)
        except OSError as exc:
            raise UserError(
                f"cannot listen on {wanted} (--metrics-listen): {describe(exc)}"
            ) from exc
        if split_host_port(wanted)[1] != 0:
            return server, settings
    return server, settings.model_copy(update={"metrics_listen": bound_address(server)})


def announce(settings: Settings, bootstrap: str) -> None:
    """One line an operator can act on: where to scrape, how to open the console."""
    console = f"web console: lakelog console -b {bootstrap}"
    if not settings.metrics_listen:
        log.info("no /metrics endpoint (--metrics-listen is empty); %s", console)
        return
    host, port = split_host_port(settings.metrics_listen)
    if host in WILDCARDS:
        host = "127.0.0.1"
    shown = f"[{host}]" if ":" in host else host
    log.info("metrics at http://%s:%d/metrics; %s", shown, port, console)
