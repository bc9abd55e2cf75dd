"""`lakelog share-groups`: share groups (KIP-932) in kafka-share-groups.sh's words:
--list, --describe [--members|--state|--offsets], --reset-offsets (--to-earliest,
--to-latest, --to-datetime; --dry-run or --execute), --delete, --delete-offsets. Over the
Kafka protocol, so it works against any broker of the cluster (or Apache Kafka)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from lakelog.admin.client import AdminClient
from lakelog.admin.group_offsets import PlanError, parse_datetime
from lakelog.admin.share_client import (
    alter_share_offsets,
    delete_share_offsets,
    describe_share_group,
    share_offsets,
)
from lakelog.admin.wire import EARLIEST, LATEST, KafkaError
from lakelog.cli.common import (
    BootstrapOption,
    UserError,
    bootstrap_of,
    print_json,
    print_table,
    run_admin,
    say,
)
from lakelog.util.errors import ErrorCode

Flag = Annotated[bool, typer.Option()]


def share_groups(
    ctx: typer.Context,
    bootstrap: BootstrapOption = None,
    list_: Annotated[bool, typer.Option("--list", help="List share groups.")] = False,
    describe: Annotated[bool, typer.Option("--describe", help="Describe a group.")] = False,
    reset_offsets: Annotated[
        bool, typer.Option("--reset-offsets", help="Set the group's start offsets.")
    ] = False,
    delete: Annotated[bool, typer.Option("--delete", help="Delete the group.")] = False,
    delete_offsets: Annotated[
        bool, typer.Option("--delete-offsets", help="Forget the group's state on topics.")
    ] = False,
    group: Annotated[str | None, typer.Option("--group", help="The share group.")] = None,
    topic: Annotated[
        list[str] | None, typer.Option("--topic", help="A topic (repeatable).")
    ] = None,
    members: Annotated[bool, typer.Option("--members", help="With --describe.")] = False,
    state: Annotated[bool, typer.Option("--state", help="With --describe.")] = False,
    offsets: Annotated[bool, typer.Option("--offsets", help="With --describe (default).")] = False,
    to_earliest: Annotated[bool, typer.Option("--to-earliest")] = False,
    to_latest: Annotated[bool, typer.Option("--to-latest")] = False,
    to_datetime: Annotated[
        str | None, typer.Option("--to-datetime", help="ISO 8601, e.g. 2026-11-24T10:00:00")
    ] = None,
    execute: Annotated[bool, typer.Option("--execute", help="Apply the reset.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only show the reset.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List, describe and delete share groups; reset or delete their start offsets."""
    actions = [list_, describe, reset_offsets, delete, delete_offsets]
    if sum(actions) != 1:
        raise UserError(
            "give exactly one of --list, --describe, --reset-offsets, --delete, --delete-offsets"
        )
    servers = bootstrap_of(ctx, bootstrap)
    if list_:
        _list(servers, json_out)
        return
    if not group:
        raise UserError("--group is required")
    if describe:
        _describe(servers, group, members, state, json_out)
    elif delete:
        _delete(servers, group)
    elif delete_offsets:
        if not topic:
            raise UserError("--delete-offsets needs --topic")
        _delete_offsets(servers, group, topic)
    else:
        if sum([to_earliest, to_latest, to_datetime is not None]) != 1:
            raise UserError("give one of --to-earliest, --to-latest, --to-datetime")
        if execute == dry_run:
            raise UserError("give one of --execute or --dry-run")
        if not topic:
            raise UserError("--reset-offsets needs --topic")
        try:
            spec = EARLIEST if to_earliest else LATEST
            if to_datetime is not None:
                spec = parse_datetime(to_datetime)
        except PlanError as exc:
            raise UserError(exc) from exc
        _reset(servers, group, topic, spec, execute, json_out)


def _list(servers: str, json_out: bool) -> None:
    async def action(client: AdminClient) -> list[Any]:
        return [g for g in await client.list_groups() if g.protocol_type == "share"]

    groups = run_admin(servers, action)
    if json_out:
        print_json([{"group": g.group_id, "state": g.state} for g in groups])
        return
    for g in groups:
        say(g.group_id)


def _describe(servers: str, group: str, members: bool, state: bool, json_out: bool) -> None:
    async def action(client: AdminClient) -> tuple[Any, Any]:
        description = await describe_share_group(client, group)
        return description, await share_offsets(client, group)

    try:
        description, rows = run_admin(servers, action)
    except KafkaError as exc:
        raise UserError(f"group {group}: {exc.error.name.upper()}") from exc
    if json_out:
        print_json(
            {
                "group": group,
                "state": description.state,
                "group_epoch": description.group_epoch,
                "coordinator": description.coordinator.node_id,
                "members": [
                    {
                        "member_id": m.member_id,
                        "client_id": m.client_id,
                        "host": m.client_host,
                        "assignment": m.assignment,
                    }
                    for m in description.members
                ],
                "offsets": [
                    {
                        "topic": r.topic,
                        "partition": r.partition,
                        "start_offset": r.start_offset,
                        "lag": r.lag,
                    }
                    for r in rows
                ],
            }
        )
        return
    if state:
        print_table(
            ["GROUP", "COORDINATOR (ID)", "STATE", "#MEMBERS"],
            [
                [
                    group,
                    f"{description.coordinator.address} ({description.coordinator.node_id})",
                    description.state,
                    len(description.members),
                ]
            ],
        )
    elif members:
        print_table(
            ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"],
            [
                [
                    group,
                    m.member_id,
                    m.client_host,
                    m.client_id,
                    sum(len(ps) for ps in m.assignment.values()),
                    ",".join(f"{t}:{','.join(map(str, ps))}" for t, ps in m.assignment.items()),
                ]
                for m in description.members
            ],
        )
    else:
        print_table(
            ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"],
            [[group, r.topic, r.partition, r.start_offset, r.lag] for r in rows],
        )


def _delete(servers: str, group: str) -> None:
    async def action(client: AdminClient) -> dict[str, ErrorCode]:
        return await client.delete_groups([group])

    error = run_admin(servers, action)[group]
    if error != ErrorCode.none:
        raise UserError(f"group {group}: {error.name.upper()}")
    say(f"Deletion of requested share groups ('{group}') was successful.")


def _delete_offsets(servers: str, group: str, topics: list[str]) -> None:
    async def action(client: AdminClient) -> dict[str, ErrorCode]:
        return await delete_share_offsets(client, group, topics)

    try:
        results = run_admin(servers, action)
    except KafkaError as exc:
        raise UserError(f"group {group}: {exc.error.name.upper()}") from exc
    print_table(
        ["TOPIC", "STATUS"],
        [[t, "Successful" if e == ErrorCode.none else e.name.upper()] for t, e in results.items()],
    )


def _reset(
    servers: str, group: str, topics: list[str], spec: int, execute: bool, json_out: bool
) -> None:
    async def action(client: AdminClient) -> list[list[Any]]:
        wanted = {}
        for description in await client.describe_topics(topics):
            for p in description.partitions:
                wanted[(description.name, p.partition)] = spec
        missing = set(topics) - {t for t, _ in wanted}
        if missing:
            raise UserError(f"unknown topics: {', '.join(sorted(missing))}")
        listed = await client.list_offsets(wanted)
        targets = {}
        for tp, found in listed.items():
            if found.error != ErrorCode.none:
                raise UserError(f"{tp[0]}:{tp[1]}: {found.error.name.upper()}")
            if found.offset < 0:  # past the last record: the log end
                found = (await client.list_offsets({tp: LATEST}))[tp]
            targets[tp] = found.offset
        errors: dict[tuple[str, int], ErrorCode] = {}
        if execute:
            errors = await alter_share_offsets(client, group, targets)
        return [
            [group, t, p, o, errors.get((t, p), ErrorCode.none).name.upper() if execute else "-"]
            for (t, p), o in sorted(targets.items())
        ]

    try:
        rows = run_admin(servers, action)
    except KafkaError as exc:
        raise UserError(f"group {group}: {exc.error.name.upper()}") from exc
    if json_out:
        print_json(
            [
                {"group": g, "topic": t, "partition": p, "new_start_offset": o, "error": e}
                for g, t, p, o, e in rows
            ]
        )
        return
    print_table(["GROUP", "TOPIC", "PARTITION", "NEW-START-OFFSET", "ERROR"], rows)
    if any(r[4] not in ("-", "NONE") for r in rows):
        raise UserError("some partitions were not reset")
