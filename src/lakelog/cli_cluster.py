"""`lakelog cluster status`: the brokers that form the cluster, their zones and epochs."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from lakelog.admin_client import AdminClient, KafkaError

cluster_app = typer.Typer(help="Inspect the cluster.", no_args_is_help=True)
_state: dict[str, str] = {}


@cluster_app.callback()
def _options(
    bootstrap_server: Annotated[
        str, typer.Option("--bootstrap-server", "-b", help="HOST:PORT of any broker.")
    ] = "127.0.0.1:9092",
) -> None:
    _state["bootstrap"] = bootstrap_server


async def _status(bootstrap: str) -> list[dict[str, object]]:
    async with await AdminClient.connect(bootstrap) as client:
        controller = await client.controller_id()
        rows = []
        for node in await client.brokers():
            epoch: object = "?"
            try:
                configs = {c.name: c.value for c in await client.describe_broker_configs(node)}
                epoch = int(configs.get("broker.epoch") or -1)
            except (KafkaError, OSError) as exc:
                epoch = f"unreachable: {exc}"
            rows.append(
                {
                    "broker_id": node.node_id,
                    "endpoint": node.address,
                    "rack": node.rack,
                    "epoch": epoch,
                    "controller": node.node_id == controller,
                }
            )
        return rows


@cluster_app.command()
def status(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List the live brokers with their zone (rack) and broker epoch."""
    rows = asyncio.run(_status(_state["bootstrap"]))
    if as_json:
        typer.echo(json.dumps(rows))
        return
    table = Table("BROKER", "ENDPOINT", "ZONE", "EPOCH", "CONTROLLER")
    for row in rows:
        table.add_row(
            str(row["broker_id"]),
            str(row["endpoint"]),
            str(row["rack"] or "-"),
            str(row["epoch"]),
            "yes" if row["controller"] else "",
        )
    Console().print(table)
