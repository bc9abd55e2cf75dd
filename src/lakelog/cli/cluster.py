"""`lakelog cluster status`: the brokers that form the cluster, their zones and epochs."""

from __future__ import annotations

from typing import Annotated

import typer

from lakelog.admin.client import AdminClient
from lakelog.admin.wire import KafkaError
from lakelog.cli.common import (
    BootstrapOption,
    CommandConfigOption,
    bootstrap_of,
    describe,
    group_callback,
    print_json,
    print_table,
    run_admin,
    use_command_config,
    waiting,
    warn,
)

cluster_app = typer.Typer(help="Inspect the cluster.", no_args_is_help=True)
cluster_app.callback()(group_callback)


async def _status(client: AdminClient) -> list[dict[str, object]]:
    controller = await client.controller_id()
    rows = []
    for node in await client.brokers():
        epoch: int | None = None
        error: str | None = None
        try:
            configs = {c.name: c.value for c in await client.describe_broker_configs(node)}
            epoch = int(configs.get("broker.epoch") or -1)
        except (KafkaError, OSError, TimeoutError) as exc:
            error = f"unreachable: {describe(exc)}"
        rows.append(
            {
                "broker_id": node.node_id,
                "endpoint": node.address,
                "rack": node.rack,
                "epoch": epoch,
                "controller": node.node_id == controller,
                "error": error,
            }
        )
    return rows


@cluster_app.command()
def status(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    bootstrap_server: BootstrapOption = None,
    command_config: CommandConfigOption = None,
) -> None:
    """List the live brokers with their zone (rack) and broker epoch.

    A broker the cluster still names but that does not answer (just stopped, say) has no
    epoch ('-'); why it did not answer is a line on stderr under the table (--json: its
    "error")."""
    use_command_config(ctx, command_config)
    with waiting("Asking the cluster for its brokers"):
        rows = run_admin(bootstrap_of(ctx, bootstrap_server), _status)
    if as_json:
        print_json(rows)
        return
    print_table(
        ["BROKER", "ENDPOINT", "ZONE", "EPOCH", "CONTROLLER"],
        [
            [
                row["broker_id"],
                row["endpoint"],
                row["rack"],
                row["epoch"],
                "yes" if row["controller"] else "",
            ]
            for row in rows
        ],
    )
    for row in rows:
        if row["error"]:
            warn(f"broker {row['broker_id']} ({row['endpoint']}) is {row['error']}")
