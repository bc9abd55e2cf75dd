"""`lakelog topics`: create, list, describe and delete topics, like kafka-topics.sh, over the
Kafka protocol (so it works against any broker of the cluster, or Apache Kafka)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Annotated, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from lakelog.admin_client import AdminClient, KafkaError, TopicDescription
from lakelog.errors import ErrorCode

T = TypeVar("T")

topics_app = typer.Typer(help="Create, list, describe and delete topics.", no_args_is_help=True)
console = Console()
errors = Console(stderr=True)

Bootstrap = Annotated[str, typer.Option("--bootstrap-server", "-b", help="A broker's HOST:PORT.")]
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def parse_configs(pairs: list[str]) -> dict[str, str]:
    """`k=v` strings into a dict; BadParameter on a pair without '='."""
    configs = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise typer.BadParameter(f"expected NAME=VALUE, got {pair!r}", param_hint="--config")
        configs[name.strip()] = value.strip()
    return configs


def _run(bootstrap: str, action: Callable[[AdminClient], Awaitable[T]]) -> T:
    async def main() -> T:
        async with await AdminClient.connect(bootstrap) as client:
            return await action(client)

    try:
        return asyncio.run(main())
    except KafkaError as exc:
        errors.print(f"[red]Error:[/red] {exc}")
        raise typer.Exit(1) from exc
    except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
        errors.print(f"[red]Error:[/red] cannot reach {bootstrap}: {exc}")
        raise typer.Exit(1) from exc


@topics_app.command()
def create(
    topic: Annotated[str, typer.Argument(help="The topic name.")],
    partitions: Annotated[int, typer.Option(help="Partitions (-1: broker default).")] = -1,
    replication_factor: Annotated[
        int, typer.Option(help="Replication factor (-1: broker default).")
    ] = -1,
    config: Annotated[
        list[str] | None, typer.Option("--config", help="A topic config NAME=VALUE (repeatable).")
    ] = None,
    if_not_exists: Annotated[
        bool, typer.Option(help="Succeed if the topic already exists.")
    ] = False,
    validate_only: Annotated[
        bool, typer.Option(help="Check the request without creating the topic.")
    ] = False,
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Create a topic."""
    configs = parse_configs(config or [])

    async def action(client: AdminClient) -> bool:
        try:
            await client.create_topic(
                topic, partitions, replication_factor, configs, validate_only=validate_only
            )
        except KafkaError as exc:
            if if_not_exists and exc.error == ErrorCode.topic_already_exists:
                return False
            raise
        return True

    created = _run(bootstrap_server, action)
    if validate_only:
        console.print(f"Topic {topic} can be created.")
    elif created:
        console.print(f"Created topic {topic}.")


@topics_app.command("list")
def list_topics(bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP) -> None:
    """List topic names, one per line."""
    for name in _run(bootstrap_server, lambda client: client.list_topics()):
        console.print(name, highlight=False)


@topics_app.command()
def describe(
    topic: Annotated[str | None, typer.Argument(help="One topic (default: all).")] = None,
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Partitions, leaders, replicas and the configs set on each topic."""

    async def action(client: AdminClient) -> list[tuple[TopicDescription, dict[str, str]]]:
        described = await client.describe_topics([topic] if topic else None)
        result = []
        for t in described:
            configs = await client.describe_topic_configs(t.name)
            result.append((t, {c.name: c.value or "" for c in configs if c.is_topic_override}))
        return result

    for description, overrides in _run(bootstrap_server, action):
        console.print(_topic_line(description, overrides), highlight=False, soft_wrap=True)
        console.print(_partition_table(description))


def _topic_line(topic: TopicDescription, overrides: dict[str, str]) -> str:
    configs = ",".join(f"{k}={v}" for k, v in sorted(overrides.items()))
    return (
        f"Topic: {topic.name}\tTopicId: {topic.topic_id or '-'}\t"
        f"PartitionCount: {len(topic.partitions)}\t"
        f"ReplicationFactor: {topic.replication_factor}\tConfigs: {configs}"
    )


def _partition_table(topic: TopicDescription) -> Table:
    table = Table()
    for column in ("Partition", "Leader", "Replicas", "Isr"):
        table.add_column(column)
    for p in topic.partitions:
        table.add_row(
            str(p.partition),
            str(p.leader),
            ",".join(map(str, p.replicas)),
            ",".join(map(str, p.isr)),
        )
    return table


@topics_app.command()
def delete(
    topic: Annotated[str, typer.Argument(help="The topic name.")],
    if_exists: Annotated[bool, typer.Option(help="Succeed if the topic is missing.")] = False,
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Delete a topic and its data."""

    async def action(client: AdminClient) -> bool:
        try:
            await client.delete_topic(topic)
        except KafkaError as exc:
            if if_exists and exc.error == ErrorCode.unknown_topic_or_partition:
                return False
            raise
        return True

    if _run(bootstrap_server, action):
        console.print(f"Deleted topic {topic}.")


@topics_app.command()
def alter(
    topic: Annotated[str, typer.Argument(help="The topic name.")],
    partitions: Annotated[int, typer.Option(help="The new, larger partition count.")],
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Add partitions to a topic."""
    _run(bootstrap_server, lambda client: client.create_partitions(topic, partitions))
    console.print(f"Topic {topic} now has {partitions} partitions.")
