"""The `lakelog` command: serve a broker, administer topics, in Kafka's vocabulary."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from lakelog.cli.acls import acls
from lakelog.cli.cluster import cluster_app
from lakelog.cli.common import UserError, describe, run_cli, set_debug
from lakelog.cli.configs import configs
from lakelog.cli.console_clients import console_consumer, console_producer
from lakelog.cli.cost import cost_app
from lakelog.cli.groups import groups_app
from lakelog.cli.mirror import mirror_app
from lakelog.cli.offsets import delete_records_command, get_offsets
from lakelog.cli.options import (
    CoordinatorUrlOption,
    DataDirOption,
    StorageUrlOption,
    build_settings,
)
from lakelog.cli.schemas import schemas_app
from lakelog.cli.share_groups import share_groups
from lakelog.cli.topics import topics_app
from lakelog.cli.transactions import transactions_app
from lakelog.cli.web_console import web_console
from lakelog.config import Settings
from lakelog.pipeline.cli import pipeline_app
from lakelog.util import process_setup  # noqa: F401  (first: before kio imports Hypothesis)

HELP_ORDER = (
    "serve",
    "topics",
    "console-producer",
    "console-consumer",
    "get-offsets",
    "delete-records",
    "groups",
    "share-groups",
    "configs",
    "acls",
    "cluster",
    "transactions",
    "mirror",
    "pipeline",
    "console",
    "cost",
)
"""`lakelog --help` lists commands in this order: running a broker, then data, groups,
administration, and the tools around the cluster (others, if any, after these)."""


class _OrderedGroup(TyperGroup):
    def list_commands(self, ctx: Any) -> list[str]:
        names = super().list_commands(ctx)
        rank = {name: i for i, name in enumerate(HELP_ORDER)}
        return sorted(names, key=lambda name: rank.get(name, len(HELP_ORDER)))


app = typer.Typer(
    cls=_OrderedGroup,
    help="Lakelog: a diskless, Kafka-compatible streaming log.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"lakelog {version('lakelog')}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool | None,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = None,
    debug: Annotated[
        bool, typer.Option("--debug", help="Print a traceback when a command fails.")
    ] = False,
) -> None:
    """Lakelog: a diskless, Kafka-compatible streaming log."""
    set_debug(debug)


app.add_typer(topics_app, name="topics", help="Create, list, describe and delete topics.")
app.add_typer(
    groups_app,
    name="groups",
    help="List, describe and delete consumer groups; reset their offsets.",
)
app.add_typer(cluster_app, name="cluster", help="Inspect the brokers of the cluster.")
app.add_typer(
    schemas_app,
    name="schemas",
    help="List, describe, register and delete schemas in the schema registry.",
)
app.command("share-groups")(share_groups)
app.command("configs", help="Describe or alter topic, broker and group configs.")(configs)
app.command("acls", help="Add, remove and list ACLs (kafka-acls).")(acls)
app.command("console-producer", help="Send lines of stdin as records.")(console_producer)
app.command("console-consumer", help="Print a topic's records.")(console_consumer)
app.command("get-offsets", help="Print partition offsets, latest, earliest or by time.")(
    get_offsets
)
app.command("delete-records", help="Delete the records before given offsets.")(
    delete_records_command
)
app.add_typer(
    transactions_app,
    name="transactions",
    help="List and describe transactions and the producers of a partition.",
)
app.add_typer(
    mirror_app,
    name="mirror",
    help="Mirror topics from another Kafka-protocol cluster, offsets preserved (KIP-1279).",
)
app.add_typer(
    cost_app, name="cost", help="Project the monthly cost of the cluster from its /metrics."
)
app.command("console", help="Serve a read-only web console and live dashboards.")(web_console)
app.add_typer(
    pipeline_app,
    name="pipeline",
    help=(
        "Run the data pipeline's jobs (gc, merge, retention, compact, export) on Spark; "
        "pack Lakelog for Spark executors."
    ),
)


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _log_level(value: str) -> str:
    level = value.strip().upper()
    if level == "WARN":
        level = "WARNING"
    if level not in LOG_LEVELS:
        raise UserError(f"unknown --log-level {value!r}: use one of {', '.join(LOG_LEVELS)}")
    return level


def _configure_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def rack_list(rack: str | None, brokers: int) -> list[str | None]:
    """Each broker's rack from `--rack`: one zone for all, or a comma list of exactly one
    zone per broker (broker i gets the i-th)."""
    if rack is None or "," not in rack:
        return [rack] * brokers
    zones = [zone.strip() for zone in rack.split(",")]
    if any(not zone for zone in zones):
        raise UserError(f"--rack {rack!r} has an empty zone")
    if brokers == 1:
        raise UserError(
            f"--rack {rack!r} names {len(zones)} zones for one broker: give one zone, "
            f"or start {len(zones)} with --brokers {len(zones)}"
        )
    if len(zones) != brokers:
        raise UserError(
            f"--rack {rack!r} names {len(zones)} zones for --brokers {brokers}: "
            "give one zone for all, or exactly one per broker"
        )
    return list(zones)


def _check_before_start(settings: Settings, brokers: int) -> None:
    """Everything that would make a broker fail at start, checked before anything is
    created: ports, directories, the coordinator's database."""
    from lakelog.cli import preflight

    preflight.check_ports(settings, brokers)
    preflight.check_local_paths(settings)
    preflight.check_postgres(settings.resolved_coordinator_url)
    preflight.check_broker_ids(settings, brokers)


async def _serve(settings: Settings) -> None:
    import lakelog.server.api  # noqa: F401  (registers the handlers)
    from lakelog.cli.serve_metrics import announce, start_metrics
    from lakelog.cli.serve_registry import start_registry
    from lakelog.cli.web_console import start_console
    from lakelog.coordinator.migrate import SchemaTooNewError
    from lakelog.server.broker import Broker
    from lakelog.server.cluster.identity import BrokerIdInUseError
    from lakelog.server.metrics_server import PIPELINE_RUNS_SHOWN
    from lakelog.util.runtime import tune_gc

    metrics_server, settings = await start_metrics(
        settings, lambda: broker.coordinator.pipeline_runs(PIPELINE_RUNS_SHOWN)
    )
    broker = Broker(settings)
    try:
        await broker.start()
    except OSError as exc:  # a port taken since the check, a directory gone...
        if metrics_server is not None:
            metrics_server.close()
        raise UserError(f"cannot start the broker: {describe(exc)}") from exc
    except (BrokerIdInUseError, SchemaTooNewError) as exc:
        if metrics_server is not None:
            metrics_server.close()
        raise UserError(str(exc)) from exc
    tune_gc()
    announce(settings, f"{broker.host}:{broker.port}")
    try:
        registry = await start_registry(
            settings, broker.coordinator, broker.authorizer, broker.storage
        )
    except UserError:
        await broker.stop()
        if metrics_server is not None:
            metrics_server.close()
        raise
    console = None
    if settings.console_listen:
        try:
            console = start_console(settings)
        except UserError:  # its login settings cannot work
            if registry is not None:
                await registry.stop()
            await broker.stop()
            raise
        except OSError as exc:
            if registry is not None:
                await registry.stop()
            await broker.stop()
            raise UserError(
                f"cannot listen on {settings.console_listen} (--console-listen): {describe(exc)}"
            ) from exc
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    if console is not None:
        await console.stop()
    if registry is not None:
        await registry.stop()
    await broker.stop()
    if metrics_server is not None:
        metrics_server.close()


@app.command()
def serve(
    listen: Annotated[str | None, typer.Option(help="HOST:PORT to listen on.")] = None,
    data_dir: DataDirOption = None,
    advertised: Annotated[str | None, typer.Option(help="HOST:PORT clients connect to.")] = None,
    broker_id: Annotated[int | None, typer.Option(help="This broker's id.")] = None,
    rack: Annotated[
        str | None,
        typer.Option(
            help="Availability zone of this broker; with --brokers N, one zone for all or "
            "a comma list of N zones (broker i gets the i-th)."
        ),
    ] = None,
    storage_url: StorageUrlOption = None,
    coordinator_url: CoordinatorUrlOption = None,
    metrics_listen: Annotated[
        str | None,
        typer.Option(
            help="HOST:PORT for /metrics (default: 127.0.0.1 at the --listen port + 1000; "
            "'' for none)."
        ),
    ] = None,
    console_listen: Annotated[
        str | None,
        typer.Option(help="HOST:PORT for the read-only web console (as `lakelog console`)."),
    ] = None,
    schema_registry_listen: Annotated[
        str | None,
        typer.Option(
            help="HOST:PORT for the schema registry (default: 127.0.0.1 at the --listen port "
            "+ 1001; '' for none)."
        ),
    ] = None,
    log_level: Annotated[
        str, typer.Option(help="Logging level: DEBUG, INFO, WARNING, ERROR or CRITICAL.")
    ] = "INFO",
    brokers: Annotated[
        int,
        typer.Option(
            help="Start N broker processes (ids and ports counted up from the given ones).",
            min=1,
        ),
    ] = 1,
) -> None:
    """Run a broker. Flags override env LAKELOG_* which override lakelog.toml."""
    level = _log_level(log_level)
    given: dict[str, Any] = {
        "listen": listen,
        "data_dir": data_dir,
        "advertised": advertised,
        "broker_id": broker_id,
        "rack": rack,
        "storage_url": storage_url,
        "coordinator_url": coordinator_url,
        "metrics_listen": metrics_listen,
        "console_listen": console_listen,
        "schema_registry_listen": schema_registry_listen,
    }
    settings = build_settings(**given)
    racks = rack_list(settings.rack, brokers)
    _check_before_start(settings, brokers)
    _configure_logging(level)
    if brokers > 1:
        from lakelog.server.cluster.supervisor import run_brokers

        flags = {
            **given,
            "listen": settings.listen,
            "data_dir": settings.data_dir,
            "log_level": level,
        }
        raise typer.Exit(run_brokers(brokers, flags, racks, settings))
    os.environ.setdefault("MALLOC_TRIM_THRESHOLD_", "4294967296")
    try:
        import uvloop

        uvloop.run(_serve(settings))
    except ImportError:  # pragma: no cover
        asyncio.run(_serve(settings))


def main() -> None:
    sys.exit(run_cli(app))


if __name__ == "__main__":
    main()
