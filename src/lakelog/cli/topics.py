"""`lakelog topics`: create, list, describe and delete topics, like kafka-topics.sh, over the
Kafka protocol (so it works against any broker of the cluster, or Apache Kafka)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any

import typer

from lakelog.admin.client import AdminClient
from lakelog.admin.results import TopicDescription
from lakelog.admin.wire import DESCRIBE_CONFIGS, TOPIC_RESOURCE, KafkaError
from lakelog.cli.common import (
    BootstrapOption,
    CommandConfigOption,
    UserError,
    bootstrap_of,
    group_callback,
    print_json,
    print_table,
    run_admin,
    say,
    use_command_config,
    waiting,
)
from lakelog.cli.common import (
    describe as describe_error,
)
from lakelog.cli.options import (
    CoordinatorUrlOption,
    DataDirOption,
    StorageUrlOption,
    build_settings,
)
from lakelog.log.protocol.kio_build import build
from lakelog.server.api.config_entries import RECORDED_REPLICATION_FACTOR
from lakelog.util.errors import ErrorCode

topics_app = typer.Typer(help="Create, list, describe and delete topics.", no_args_is_help=True)
topics_app.callback()(group_callback)

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def parse_configs(pairs: list[str], param: str = "--config") -> dict[str, str]:
    """`k=v` strings into a dict; UserError on a pair without '='."""
    configs = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise UserError(f"{param}: expected NAME=VALUE, got {pair!r}", exit_code=2)
        configs[name.strip()] = value.strip()
    return configs


@topics_app.command()
def create(
    ctx: typer.Context,
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
    bootstrap_server: BootstrapOption = None,
    command_config: CommandConfigOption = None,
) -> None:
    """Create a topic."""
    use_command_config(ctx, command_config)
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

    with waiting(f"Creating topic {topic}"):
        created = run_admin(bootstrap_of(ctx, bootstrap_server), action)
    if validate_only:
        say(f"Topic {topic} can be created.")
    elif created:
        say(f"Created topic {topic}.")


@topics_app.command("list")
def list_topics(
    ctx: typer.Context,
    as_json: JsonFlag = False,
    bootstrap_server: BootstrapOption = None,
    command_config: CommandConfigOption = None,
) -> None:
    """List topic names, one per line."""
    use_command_config(ctx, command_config)
    with waiting("Listing topics"):
        names = run_admin(bootstrap_of(ctx, bootstrap_server), lambda c: c.list_topics())
    if as_json:
        print_json(names)
        return
    for name in names:
        say(name)


@dataclass(frozen=True, slots=True)
class TopicReport:
    """Everything `describe` shows about one topic."""

    topic: TopicDescription
    requested_replication_factor: int | None
    """The factor given at create time (None from Apache Kafka, which has no such key)."""
    overrides: dict[str, str]

    @property
    def replication_factor(self) -> int:
        """As kafka-topics.sh counts it: the replicas Metadata lists for a partition."""
        return self.topic.replication_factor


async def recorded_replication_factors(
    client: AdminClient, names: list[str]
) -> dict[str, int | None]:
    """The replication factor each topic was created with, from DescribeConfigs asked for
    `lakelog.replication.factor` by name (None where the broker has none: Apache Kafka)."""
    if not names:
        return {}

    def make(m: ModuleType, _version: int) -> Any:
        return build(
            m.DescribeConfigsRequest,
            resources=tuple(
                m.DescribeConfigsResource(
                    resource_type=TOPIC_RESOURCE,
                    resource_name=name,
                    configuration_keys=(RECORDED_REPLICATION_FACTOR,),
                )
                for name in names
            ),
            include_synonyms=False,
            include_documentation=False,
        )

    response, _ = await client._call(DESCRIBE_CONFIGS, make)
    found: dict[str, int | None] = dict.fromkeys(names)
    for result in response.results:
        if result.error_code != ErrorCode.none:
            continue
        for c in result.configs:
            if c.name == RECORDED_REPLICATION_FACTOR and (c.value or "").isdigit():
                found[result.resource_name] = int(c.value)
    return found


async def _describe(client: AdminClient, topic: str | None) -> list[TopicReport]:
    try:
        described = await client.describe_topics([topic] if topic else None)
    except KafkaError as exc:
        if topic and exc.error == ErrorCode.unknown_topic_or_partition:
            raise UserError(f"topic '{topic}' does not exist") from exc
        raise
    recorded = await recorded_replication_factors(client, [t.name for t in described])
    reports = []
    for t in described:
        configs = await client.describe_topic_configs(t.name)
        overrides = {c.name: c.value or "" for c in configs if c.is_topic_override}
        overrides.pop(RECORDED_REPLICATION_FACTOR, None)
        reports.append(TopicReport(t, recorded.get(t.name), overrides))
    return reports


@topics_app.command()
def describe(
    ctx: typer.Context,
    topic: Annotated[str | None, typer.Argument(help="One topic (default: all).")] = None,
    as_json: JsonFlag = False,
    bootstrap_server: BootstrapOption = None,
    command_config: CommandConfigOption = None,
    data_dir: DataDirOption = None,
    storage_url: StorageUrlOption = None,
    coordinator_url: CoordinatorUrlOption = None,
) -> None:
    """Partitions, leaders, replicas and the configs set on each topic; for a table topic
    (lakelog.iceberg.mode), its Iceberg table: snapshots, rows and lag, read from the
    cluster's catalog (--data-dir, or --storage-url and --coordinator-url).

    Replicas are the live brokers that serve the partition, and ReplicationFactor counts
    them, as kafka-topics.sh does: data is not copied between brokers but kept in object
    storage. The factor asked for at create time is in --json
    (requested_replication_factor)."""
    use_command_config(ctx, command_config)
    with waiting("Describing topics"):
        reports = run_admin(bootstrap_of(ctx, bootstrap_server), lambda c: _describe(c, topic))
    tables = _table_lines(reports, data_dir, storage_url, coordinator_url)
    if as_json:
        print_json([{**_report_json(r), **tables.get(r.topic.name, {})} for r in reports])
        return
    for report in reports:
        say(_topic_line(report))
        if report.topic.name in tables:
            say(tables[report.topic.name]["table_line"])
        print_table(
            ["Partition", "Leader", "Replicas", "Isr"],
            [
                [
                    p.partition,
                    p.leader,
                    ",".join(map(str, p.replicas)),
                    ",".join(map(str, p.isr)),
                ]
                for p in report.topic.partitions
            ],
        )


def _table_lines(
    reports: list[TopicReport],
    data_dir: Path | None,
    storage_url: str | None,
    coordinator_url: str | None,
) -> dict[str, dict[str, Any]]:
    """Per table topic: {"table_line": text, "table": figures or None} (lakelog.tables.status;
    a catalog this command cannot reach is said on the line, not an error)."""
    wanted = [
        r.topic.name
        for r in reports
        if r.overrides.get("lakelog.iceberg.mode", "disabled") != "disabled"
    ]
    if not wanted:
        return {}
    out: dict[str, dict[str, Any]] = {}
    for name in wanted:
        try:
            from lakelog.cli.preflight import check_existing_cluster
            from lakelog.tables.status import table_status

            settings = build_settings(
                data_dir=data_dir, storage_url=storage_url, coordinator_url=coordinator_url
            )
            check_existing_cluster(settings)  # never creates an empty one here
            status = table_status(settings, name)
        except Exception as exc:
            why = describe_error(exc)
            out[name] = {"table_line": f"Table: lakelog.{name}\t(not readable here: {why})"}
            out[name]["table"] = None
            continue
        out[name] = {"table_line": status.line(), "table": dataclasses.asdict(status)}
    return out


def _topic_line(report: TopicReport) -> str:
    topic = report.topic
    configs = ",".join(f"{k}={v}" for k, v in sorted(report.overrides.items()))
    return (
        f"Topic: {topic.name}\tTopicId: {topic.topic_id or '-'}\t"
        f"PartitionCount: {len(topic.partitions)}\t"
        f"ReplicationFactor: {report.replication_factor}\tConfigs: {configs}"
    )


def _report_json(report: TopicReport) -> dict[str, Any]:
    t = report.topic
    return {
        "topic": t.name,
        "topic_id": str(t.topic_id) if t.topic_id else None,
        "partition_count": len(t.partitions),
        "replication_factor": report.replication_factor,
        "requested_replication_factor": report.requested_replication_factor,
        "configs": report.overrides,
        "partitions": [
            {
                "partition": p.partition,
                "leader": p.leader,
                "replicas": list(p.replicas),
                "isr": list(p.isr),
            }
            for p in t.partitions
        ],
    }


@topics_app.command()
def delete(
    ctx: typer.Context,
    topic: Annotated[str, typer.Argument(help="The topic name.")],
    if_exists: Annotated[bool, typer.Option(help="Succeed if the topic is missing.")] = False,
    bootstrap_server: BootstrapOption = None,
    command_config: CommandConfigOption = None,
) -> None:
    """Delete a topic and its data."""
    use_command_config(ctx, command_config)

    async def action(client: AdminClient) -> bool:
        try:
            await client.delete_topic(topic)
        except KafkaError as exc:
            if exc.error == ErrorCode.unknown_topic_or_partition:
                if if_exists:
                    return False
                raise UserError(f"topic '{topic}' does not exist") from exc
            raise
        return True

    with waiting(f"Deleting topic {topic}"):
        deleted = run_admin(bootstrap_of(ctx, bootstrap_server), action)
    if deleted:
        say(f"Deleted topic {topic}.")


@topics_app.command()
def alter(
    ctx: typer.Context,
    topic: Annotated[str, typer.Argument(help="The topic name.")],
    partitions: Annotated[int, typer.Option(help="The new, larger partition count.")],
    bootstrap_server: BootstrapOption = None,
    command_config: CommandConfigOption = None,
) -> None:
    """Add partitions to a topic."""
    use_command_config(ctx, command_config)
    with waiting(f"Adding partitions to {topic}"):
        run_admin(
            bootstrap_of(ctx, bootstrap_server),
            lambda client: client.create_partitions(topic, partitions),
        )
    say(f"Topic {topic} now has {partitions} partitions.")
