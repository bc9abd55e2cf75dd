"""`lakelog console`: serve the read-only web console (see `lakelog.cli.console`).

Not to be confused with `console-producer`/`console-consumer`, Kafka's terminal tools."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from lakelog.cli.common import (
    BootstrapOption,
    CommandConfigOption,
    UserError,
    bootstrap_addresses,
    bootstrap_of,
    describe,
    read_command_config,
    say,
    warn,
)
from lakelog.cli.cost_model import DEFAULT_RETENTION_DAYS
from lakelog.config import Settings, split_host_port
from lakelog.security.client_config import ClientSecurity

if TYPE_CHECKING:
    from lakelog.cli.console.connection import ClusterAccess
    from lakelog.cli.console.server import EmbeddedConsole

PROBE_TIMEOUT_S = 5.0
"""How long `lakelog console` waits at start for a bootstrap server to answer before it
warns (it serves either way)."""

ListenOption = Annotated[
    str,
    typer.Option(
        "--listen",
        help="HOST:PORT the console serves on (default: this host only; use 0.0.0.0:PORT "
        "to serve others, ideally with --console-user).",
    ),
]
ConsoleUserOption = Annotated[
    str | None,
    typer.Option("--console-user", help="Ask browsers for this user (HTTP basic auth)."),
]
ConsolePasswordOption = Annotated[
    Path | None,
    typer.Option(
        "--console-password-file",
        help="File whose first line is --console-user's password.",
    ),
]


def cluster_security(path: Path | None) -> ClientSecurity:
    """The principal the console connects as (`--command-config`, as every command)."""
    return ClientSecurity() if path is None else read_command_config(path)


def console_login(user: str | None, password_file: Path | None) -> tuple[str | None, str | None]:
    if (user is None) != (password_file is None):
        raise UserError("--console-user and --console-password-file go together")
    if user is None or password_file is None:
        return None, None
    if not user or ":" in user:
        raise UserError("--console-user must be non-empty and without ':'")
    try:
        lines = password_file.read_text().splitlines()
    except OSError as exc:
        raise UserError(f"--console-password-file {password_file}: {exc}") from exc
    if not lines or not lines[0]:
        raise UserError(f"--console-password-file {password_file} is empty")
    return user, lines[0]


def web_console(
    ctx: typer.Context,
    listen: ListenOption = "127.0.0.1:8080",
    command_config: CommandConfigOption = None,
    metrics: Annotated[
        list[str] | None,
        typer.Option(
            "--metrics",
            help="A broker's /metrics URL (or HOST:PORT); repeat for each. Default: every "
            "broker's, asked of the cluster (as `lakelog cost` does).",
        ),
    ] = None,
    interval_seconds: Annotated[
        float,
        typer.Option(help="Seconds between samples for the live charts.", min=1.0, max=3600.0),
    ] = 5.0,
    history_seconds: Annotated[
        float,
        typer.Option(
            help="How far back the charts go (kept in memory, at most a day).",
            min=60.0,
            max=86400.0,
        ),
    ] = 3600.0,
    prices_file: Annotated[
        Path | None, typer.Option("--prices", help="TOML price table, as for `lakelog cost`.")
    ] = None,
    retention_days: Annotated[
        float,
        typer.Option(help="Days the data is kept, for the cost page's storage line.", min=0.001),
    ] = DEFAULT_RETENTION_DAYS,
    console_user: ConsoleUserOption = None,
    console_password_file: ConsolePasswordOption = None,
    schema_registry_url: Annotated[
        str | None,
        typer.Option(
            "--schema-registry-url",
            envvar="LAKELOG_SCHEMA_REGISTRY_URL",
            help="The schema registry for the Schemas page and decoding records "
            "(default: the first bootstrap broker's port + 1001; '' for none).",
        ),
    ] = None,
    bootstrap_server: BootstrapOption = None,
) -> None:
    """Serve a read-only web console: cluster, topics and messages, consumer groups and
    lag, storage and cost, transactions, mirrors, schemas (records decoded with the schema
    registry); live charts from the brokers' /metrics."""
    from lakelog.cli.console import server
    from lakelog.cli.console.app import ConsoleConfig, create_app
    from lakelog.cli.console.connection import ClusterAccess
    from lakelog.cli.cost import load_prices

    bootstrap = bootstrap_of(ctx, bootstrap_server)
    bootstrap_addresses(bootstrap)
    if history_seconds < 2 * interval_seconds:
        raise typer.BadParameter(
            "must be at least twice --interval-seconds", param_hint="--history-seconds"
        )
    user, password = console_login(console_user, console_password_file)
    config = ConsoleConfig(
        access=ClusterAccess(bootstrap, cluster_security(command_config)),
        interval_s=interval_seconds,
        history_s=history_seconds,
        metrics=list(metrics or []),
        user=user,
        password=password,
        prices=load_prices(prices_file),
        retention_days=retention_days,
        registry_url=schema_registry_url,
    )
    try:
        sock = server.bind(listen)
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot listen on {listen}: {exc}") from exc
    host, port = sock.getsockname()[:2]
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    say(f"Lakelog console on http://{host}:{port}/ for {bootstrap} (Ctrl-C stops it)")
    unreachable = cluster_unreachable(config.access)
    if unreachable:
        warn(
            f"warning: {bootstrap} does not answer ({unreachable}); "
            "the console shows the cluster once it does"
        )
    server.run(create_app(config), sock)


def cluster_unreachable(access: ClusterAccess, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """Why no bootstrap server answers an admin connection (None when one does).

    The console starts anyway, since its pages wait for the cluster (it may be started
    first, or be restarting): the one-line warning is for the operator who mistyped -b."""
    from lakelog.admin.wire import KafkaError

    async def probe() -> None:
        client = await asyncio.wait_for(access.admin(), timeout_s)
        await client.close()

    try:
        asyncio.run(probe())
    except TimeoutError as exc:
        return describe(exc) if str(exc) else f"no answer within {timeout_s:g} s"
    except (KafkaError, OSError, asyncio.IncompleteReadError) as exc:
        return describe(exc)
    return None


def start_console(settings: Settings) -> EmbeddedConsole:
    """`serve --console-listen`: the console as a task of this broker's loop, pointed at
    this broker (it finds the others, and their /metrics, through it)."""
    from lakelog.cli.console import server
    from lakelog.cli.console.app import ConsoleConfig, create_app
    from lakelog.cli.console.connection import ClusterAccess

    assert settings.console_listen is not None
    host, port = split_host_port(settings.advertised or settings.listen)
    if host in ("", "0.0.0.0", "::", "[::]"):
        host = "127.0.0.1"
    security = cluster_security(settings.console_command_config)
    user, password = console_login(settings.console_user, settings.console_password_file)
    sock = server.bind(settings.console_listen)
    app = create_app(
        ConsoleConfig(
            access=ClusterAccess(f"{host}:{port}", security),
            user=user,
            password=password,
            registry_url=embedded_registry_url(settings),
        )
    )
    return server.EmbeddedConsole(app, sock)


def embedded_registry_url(settings: Settings) -> str | None:
    """The registry this broker serves, for its own console ("" when it serves none; None
    for the default address, the listener's port + 1001, derived from the bootstrap)."""
    listen = settings.schema_registry_listen
    if listen is None or listen == "":
        return listen
    host, port = split_host_port(listen)
    if host in ("", "0.0.0.0", "::", "[::]"):
        host = "127.0.0.1"
    scheme = "https" if settings.schema_registry_tls else "http"
    return f"{scheme}://{host}:{port}"
