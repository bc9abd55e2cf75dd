"""`lakelog mirror`: cluster mirroring (KIP-1279), administered on the destination cluster
over the Kafka protocol like Kafka's tools (see lakelog.mirror.admin for the wire form).

    lakelog mirror --bootstrap-server DEST create NAME --source SRC [--source-config K=V]
        [--source-config-file FILE]   (source client security: security.protocol, sasl.*, ssl.*)
    lakelog mirror -b DEST add-topics NAME TOPIC... [--pattern REGEX]
    lakelog mirror -b DEST remove-topics NAME TOPIC...     (failover)
    lakelog mirror -b DEST describe NAME | delete NAME | validate NAME | list
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from lakelog.admin_client import KafkaError
from lakelog.cli_topics import parse_configs
from lakelog.mirror.client import MirrorClient
from lakelog.security.client_config import ClientSecurity, SecurityConfigError, read_properties

T = TypeVar("T")

mirror_app = typer.Typer(
    help="Mirror topics from another Kafka-protocol cluster, offsets preserved (KIP-1279).",
    no_args_is_help=True,
)
console = Console()
errors = Console(stderr=True)
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"

Name = Annotated[str, typer.Argument(help="The mirror's name.")]


@mirror_app.callback()
def main(
    ctx: typer.Context,
    bootstrap_server: Annotated[
        str,
        typer.Option("--bootstrap-server", "-b", help="A destination broker's HOST:PORT."),
    ] = DEFAULT_BOOTSTRAP,
) -> None:
    """Commands run against the destination cluster (the one that copies)."""
    ctx.obj = bootstrap_server


def _run(ctx: typer.Context, action: Callable[[MirrorClient], Awaitable[T]]) -> T:
    bootstrap = str(ctx.obj or DEFAULT_BOOTSTRAP)

    async def main() -> T:
        client = await MirrorClient.connect(bootstrap, "lakelog-mirror-admin", timeout=120.0)
        assert isinstance(client, MirrorClient)
        async with client:
            return await action(client)

    try:
        return asyncio.run(main())
    except KafkaError as exc:
        errors.print(f"[red]Error:[/red] {exc}")
        raise typer.Exit(1) from exc
    except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
        errors.print(f"[red]Error:[/red] cannot reach {bootstrap}: {exc}")
        raise typer.Exit(1) from exc


def _say(message: str | None, fallback: str) -> None:
    console.print(message or fallback)


@mirror_app.command()
def create(
    ctx: typer.Context,
    name: Name,
    source: Annotated[str, typer.Option(help="The source cluster's bootstrap servers.")],
    source_config: Annotated[
        list[str] | None,
        typer.Option(
            "--source-config",
            help="A source client setting NAME=VALUE (repeatable): security.protocol, "
            "sasl.mechanism, sasl.username, sasl.password, sasl.jaas.config, ssl.ca.location, "
            "ssl.certificate.location, ssl.key.location, ssl.endpoint.identification.algorithm.",
        ),
    ] = None,
    source_config_file: Annotated[
        Path | None,
        typer.Option(
            "--source-config-file",
            help="A properties file of source client settings (like Kafka's --command-config); "
            "--source-config entries override it.",
        ),
    ] = None,
    topic: Annotated[
        list[str] | None, typer.Option("--topic", help="A topic to mirror (repeatable).")
    ] = None,
    pattern: Annotated[
        list[str] | None, typer.Option("--pattern", help="A topic regex to mirror (repeatable).")
    ] = None,
) -> None:
    """Create a mirror of a source cluster (optionally with its first topics).

    The source settings, password included, are stored with the mirror definition in the
    destination's coordinator database (as Kafka stores link configs); `describe` masks
    secrets. The paths name files on the destination brokers."""
    configs = _source_configs(source_config or [], source_config_file)
    message = _run(ctx, lambda c: c.create(name, source, configs, topic or [], pattern or []))
    _say(message, f"Created mirror {name} of {source}.")


def _source_configs(entries: list[str], path: Path | None) -> dict[str, str]:
    configs: dict[str, str] = {}
    if path is not None:
        try:
            configs = read_properties(path)
        except (OSError, ValueError) as exc:
            raise typer.BadParameter(str(exc), param_hint="--source-config-file") from exc
    configs |= parse_configs(entries)
    try:  # the files are the destination broker's to check: the paths are on its host
        ClientSecurity.from_configs(configs)
    except SecurityConfigError as exc:
        raise typer.BadParameter(str(exc), param_hint="--source-config") from exc
    return configs


@mirror_app.command("add-topics")
def add_topics(
    ctx: typer.Context,
    name: Name,
    topics: Annotated[list[str] | None, typer.Argument(help="Topic names.")] = None,
    pattern: Annotated[
        list[str] | None,
        typer.Option("--pattern", "-p", help="A topic regex (full match; repeatable)."),
    ] = None,
) -> None:
    """Start mirroring topics (names, or patterns that also catch topics created later)."""
    if not topics and not pattern:
        raise typer.BadParameter("name topics or give --pattern")
    message = _run(ctx, lambda c: c.add_topics(name, topics or [], pattern or []))
    _say(message, f"Mirror {name} now follows {', '.join([*(topics or []), *(pattern or [])])}.")


@mirror_app.command("remove-topics")
def remove_topics(
    ctx: typer.Context,
    name: Name,
    topics: Annotated[list[str], typer.Argument(help="Topic names.")],
) -> None:
    """Fail over: stop mirroring the topics, truncate them to their last stable offset and
    make them writable here."""
    message = _run(ctx, lambda c: c.remove_topics(name, topics))
    _say(message, f"Stopped mirroring {', '.join(topics)}.")


@mirror_app.command()
def delete(ctx: typer.Context, name: Name) -> None:
    """Delete a mirror (remove its topics first)."""
    _say(_run(ctx, lambda c: c.delete(name)), f"Deleted mirror {name}.")


@mirror_app.command("list")
def list_(ctx: typer.Context) -> None:
    """The mirrors of the cluster."""
    found = _run(ctx, lambda c: c.list_mirrors())
    table = Table("MIRROR", "SOURCE", "TOPICS", "PARTITIONS")
    for name, summary in sorted(found.items()):
        states = ", ".join(f"{k} {v}" for k, v in sorted(summary.get("states", {}).items()))
        table.add_row(name, summary.get("source", ""), ", ".join(summary.get("topics", [])), states)
    console.print(table)


@mirror_app.command()
def describe(
    ctx: typer.Context,
    name: Name,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Per-partition state, lag and last mirrored offset."""
    settings, partitions = _run(ctx, lambda c: c.describe(name))
    if as_json:
        console.print_json(json.dumps({"settings": settings, "partitions": partitions}))
        return
    for key, value in settings.items():
        console.print(f"{key}: {value}")
    table = Table(
        "TOPIC",
        "PARTITION",
        "STATE",
        "LAST MIRRORED",
        "LSO",
        "SOURCE END",
        "LAG",
        "LAG MS",
        "OWNER",
        "REASON",
    )
    for p in partitions:
        table.add_row(*_row(p))
    console.print(table)


def _row(p: dict[str, Any]) -> list[str]:
    reason = p.get("reason") or ""
    if p.get("failover_offset", -1) >= 0:
        reason = f"failed over at {p['failover_offset']}" + (f"; {reason}" if reason else "")
    return [
        str(p["topic"]),
        str(p["partition"]),
        str(p["state"]),
        str(p["last_mirrored_offset"]),
        str(p["last_stable_offset"]),
        str(p["source_end_offset"]),
        str(p["lag_records"]),
        str(p["lag_ms"]),
        str(p["lease_owner"]),
        reason,
    ]


@mirror_app.command()
def validate(ctx: typer.Context, name: Name) -> None:
    """Report what would block a migration: group id collisions, partition count
    mismatches, unsupported configurations. Exit code 1 if any is an error."""
    ok, findings = _run(ctx, lambda c: c.validate(name))
    table = Table("SEVERITY", "CHECK", "MESSAGE")
    for f in findings:
        table.add_row(f["severity"], f["check"], f["message"])
    if findings:
        console.print(table)
    console.print("OK: nothing blocks the migration." if ok else "Problems found.")
    if not ok:
        raise typer.Exit(1)
