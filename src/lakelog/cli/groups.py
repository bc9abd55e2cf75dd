"""`lakelog groups`: list, describe and delete consumer groups and reset their offsets, like
kafka-consumer-groups.sh, over the Kafka protocol (so it works against any broker of the
cluster, or Apache Kafka). Group requests go to the group's coordinator."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

import typer

from lakelog.admin.client import AdminClient
from lakelog.admin.group_offsets import (
    INACTIVE_STATES,
    KNOWN_STATES,
    OffsetRow,
    PartitionOffsets,
    PlanError,
    PlannedOffset,
    ResetMode,
    ResetSpec,
    canonical_state,
    offset_rows,
    parse_datetime,
    parse_topic_arg,
    plan_reset,
    select_partitions,
)
from lakelog.admin.results import GroupDescription, ListedGroup, TopicPartition
from lakelog.admin.wire import EARLIEST, LATEST, KafkaError
from lakelog.cli.common import (
    BootstrapOption,
    CommandConfigOption,
    UserError,
    bootstrap_of,
    group_callback,
    print_json,
    print_table,
    run_admin,
    run_cli,
    say,
    use_command_config,
    waiting,
    warn,
)
from lakelog.util.errors import ErrorCode

T = TypeVar("T")

groups_app = typer.Typer(
    help="List, describe and delete consumer groups; reset their offsets.", no_args_is_help=True
)
groups_app.callback()(group_callback)

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]
MEMBER_GONE = frozenset(
    {
        ErrorCode.unknown_member_id,
        ErrorCode.illegal_generation,
        ErrorCode.rebalance_in_progress,
        ErrorCode.fenced_instance_id,
    }
)
"""OffsetCommit errors that mean the group has active members."""


class GroupActiveError(Exception):
    """The group has members, so its offsets cannot be reset."""

    def __init__(self, group_id: str, reason: str) -> None:
        super().__init__(
            f"Assignments can only be reset if the group '{group_id}' is inactive, but {reason}."
        )


class GroupMissingError(Exception):
    def __init__(self, group_id: str) -> None:
        super().__init__(f"Consumer group '{group_id}' does not exist.")


def _admin(
    ctx: typer.Context,
    given: str | None,
    action: Callable[[AdminClient], Awaitable[T]],
    doing: str,
) -> T:
    """run_admin, with the group tool's own refusals as one-line user errors."""
    try:
        with waiting(doing):
            return run_admin(bootstrap_of(ctx, given), action)
    except (PlanError, GroupActiveError, GroupMissingError) as exc:
        raise UserError(exc) from exc


def parse_states(given: Sequence[str]) -> list[str]:
    """`--state` values (repeatable, comma-separated, any case) as the protocol spells them;
    UserError naming the valid states for an unknown one, as kafka-consumer-groups does."""
    states = []
    for arg in given:
        for text in arg.split(","):
            if not text.strip():
                continue
            state = canonical_state(text)
            if state not in KNOWN_STATES:
                raise UserError(
                    f"invalid --state {text.strip()!r}: valid states are {', '.join(KNOWN_STATES)}"
                )
            states.append(state)
    return states


# ---------------------------------------------------------------- list


@groups_app.command("list")
def list_groups(
    ctx: typer.Context,
    state: Annotated[
        list[str] | None,
        typer.Option(
            "--state",
            help="Only groups in this state, e.g. Stable or Empty (repeatable, or "
            "comma-separated).",
        ),
    ] = None,
    json_out: JsonFlag = False,
    bootstrap_server: BootstrapOption = None,
    command_config: CommandConfigOption = None,
) -> None:
    """List the cluster's groups with their state and protocol type."""
    use_command_config(ctx, command_config)
    states = parse_states(state or [])
    listed: list[ListedGroup] = _admin(
        ctx, bootstrap_server, lambda c: c.list_groups(states), "Listing groups"
    )
    if json_out:
        print_json(
            [
                {"group": g.group_id, "state": g.state, "protocol_type": g.protocol_type}
                for g in listed
            ]
        )
        return
    print_table(
        ["GROUP", "STATE", "PROTOCOL-TYPE"],
        [[g.group_id, g.state, g.protocol_type] for g in listed],
    )


# ---------------------------------------------------------------- describe


@dataclass(frozen=True, slots=True)
class GroupReport:
    """Everything `describe` shows about one group."""

    group: GroupDescription
    rows: list[OffsetRow]


async def _describe_one(client: AdminClient, group_id: str, offsets: bool) -> GroupReport:
    try:
        group = await client.describe_group(group_id)
    except KafkaError as exc:
        if exc.error == ErrorCode.group_id_not_found:
            raise GroupMissingError(group_id) from exc
        raise
    if group.state.lower() == "dead":
        raise GroupMissingError(group_id)
    if not offsets:
        return GroupReport(group, [])
    committed = await client.committed_offsets(group_id)
    partitions = set(committed) | {tp for m in group.members for tp in m.partitions()}
    ends = await client.list_offsets({tp: LATEST for tp in partitions})
    log_ends = {tp: (r.offset if r.error == ErrorCode.none else None) for tp, r in ends.items()}
    return GroupReport(group, offset_rows(group, committed, log_ends))


@groups_app.command()
def describe(
    ctx: typer.Context,
    group: Annotated[list[str], typer.Argument(help="One or more group ids.")],
    members: Annotated[
        bool, typer.Option("--members", help="List the members and their assignments.")
    ] = False,
    state: Annotated[
        bool, typer.Option("--state", help="Show the state, protocol and coordinator.")
    ] = False,
    json_out: JsonFlag = False,
    bootstrap_server: BootstrapOption = None,
    command_config: CommandConfigOption = None,
) -> None:
    """Per partition: committed offset, log end, lag and the member consuming it."""
    use_command_config(ctx, command_config)
    if members and state:
        raise typer.BadParameter("--members and --state are exclusive", param_hint="--state")
    offsets = not (members or state)

    async def action(client: AdminClient) -> list[GroupReport]:
        return [await _describe_one(client, g, offsets) for g in group]

    reports = _admin(ctx, bootstrap_server, action, "Describing groups")
    if json_out:
        print_json([_report_json(r, members=members, state=state) for r in reports])
        return
    for report in reports:
        if members:
            _print_members(report.group)
        elif state:
            _print_state(report.group)
        else:
            _warn_group_state(report.group)
            _print_offsets(report)


def _warn_group_state(group: GroupDescription) -> None:
    if group.state.lower() == "empty":
        warn(f"Consumer group '{group.group_id}' has no active members.")
    elif group.state.lower() in ("preparingrebalance", "completingrebalance"):
        warn(f"Warning: consumer group '{group.group_id}' is rebalancing.")


def _print_offsets(report: GroupReport) -> None:
    columns = [
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    ]
    rows = [
        [
            report.group.group_id,
            r.topic,
            r.partition,
            r.current_offset,
            r.log_end_offset,
            r.lag,
            r.consumer_id,
            r.host,
            r.client_id,
        ]
        for r in report.rows
    ]
    print_table(columns, rows)


def _assignment_text(assignment: dict[str, tuple[int, ...]]) -> str:
    return ",".join(f"{t}({','.join(map(str, ps))})" for t, ps in sorted(assignment.items()))


def _print_members(group: GroupDescription) -> None:
    columns = [
        "GROUP",
        "CONSUMER-ID",
        "GROUP-INSTANCE-ID",
        "HOST",
        "CLIENT-ID",
        "#PARTITIONS",
        "ASSIGNMENT",
    ]
    rows = [
        [
            group.group_id,
            m.member_id,
            m.group_instance_id,
            m.client_host,
            m.client_id,
            len(m.partitions()),
            _assignment_text(m.assignment),
        ]
        for m in sorted(group.members, key=lambda m: (m.client_id, m.member_id))
    ]
    print_table(columns, rows)


def _print_state(group: GroupDescription) -> None:
    c = group.coordinator
    print_table(
        ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
        [
            [
                group.group_id,
                f"{c.address} ({c.node_id})",
                group.protocol,
                group.state,
                len(group.members),
            ]
        ],
    )


def _report_json(report: GroupReport, *, members: bool, state: bool) -> dict[str, Any]:
    g = report.group
    out: dict[str, Any] = {"group": g.group_id, "state": g.state}
    if state:
        out |= {
            "protocol_type": g.protocol_type,
            "protocol": g.protocol,
            "member_count": len(g.members),
            "coordinator": {
                "id": g.coordinator.node_id,
                "host": g.coordinator.host,
                "port": g.coordinator.port,
            },
        }
    elif members:
        out["members"] = [
            {
                "consumer_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "host": m.client_host,
                "client_id": m.client_id,
                "assignment": [{"topic": t, "partition": p} for t, p in m.partitions()],
            }
            for m in g.members
        ]
    else:
        out["offsets"] = [
            {
                "topic": r.topic,
                "partition": r.partition,
                "current_offset": r.current_offset,
                "log_end_offset": r.log_end_offset,
                "lag": r.lag,
                "consumer_id": r.consumer_id,
                "host": r.host,
                "client_id": r.client_id,
            }
            for r in report.rows
        ]
    return out


# ---------------------------------------------------------------- delete


@groups_app.command()
def delete(
    ctx: typer.Context,
    group: Annotated[list[str], typer.Argument(help="One or more group ids.")],
    json_out: JsonFlag = False,
    bootstrap_server: BootstrapOption = None,
    command_config: CommandConfigOption = None,
) -> None:
    """Delete groups and their committed offsets; a group with members is refused."""
    use_command_config(ctx, command_config)
    results = _admin(ctx, bootstrap_server, lambda c: c.delete_groups(group), "Deleting groups")
    failed = {g: e for g, e in results.items() if e != ErrorCode.none}
    if json_out:
        print_json(
            [
                {"group": g, "error": None if e == ErrorCode.none else e.name.upper()}
                for g, e in results.items()
            ]
        )
    elif not failed:
        names = ", ".join(f"'{g}'" for g in results)
        say(f"Deletion of requested consumer groups ({names}) was successful.")
    else:
        for g, e in results.items():
            if e == ErrorCode.none:
                say(f"Deleted group '{g}'.")
    if failed:
        refused = ", ".join(f"'{g}' ({e.name.upper()})" for g, e in failed.items())
        raise UserError(f"could not delete group(s) {refused}")


# ---------------------------------------------------------------- reset-offsets


def reset_spec(
    to_earliest: bool,
    to_latest: bool,
    to_offset: int | None,
    to_datetime: str | None,
    shift_by: int | None,
) -> ResetSpec:
    """The one reset mode the flags name; BadParameter for none or several."""
    given = [
        to_earliest,
        to_latest,
        to_offset is not None,
        to_datetime is not None,
        shift_by is not None,
    ]
    if sum(given) != 1:
        raise typer.BadParameter(
            "give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime, --shift-by"
        )
    if to_offset is not None:
        return ResetSpec(ResetMode.OFFSET, to_offset)
    if shift_by is not None:
        return ResetSpec(ResetMode.SHIFT, shift_by)
    if to_datetime is not None:
        try:
            return ResetSpec(ResetMode.DATETIME, parse_datetime(to_datetime))
        except PlanError as exc:
            raise typer.BadParameter(str(exc), param_hint="--to-datetime") from exc
    return ResetSpec(ResetMode.EARLIEST if to_earliest else ResetMode.LATEST)


@dataclass(frozen=True, slots=True)
class ResetResult:
    plan: list[PlannedOffset]
    previous: dict[TopicPartition, int]


async def _log_offsets(
    client: AdminClient, timestamps: dict[TopicPartition, int]
) -> dict[TopicPartition, int]:
    found = await client.list_offsets(timestamps)
    for (topic, partition), r in sorted(found.items()):
        if r.error != ErrorCode.none:
            raise KafkaError(r.error, f"ListOffsets {topic}-{partition}")
    return {tp: r.offset for tp, r in found.items()}


async def _reset(
    client: AdminClient,
    group_id: str,
    topics: Sequence[str],
    all_topics: bool,
    spec: ResetSpec,
    execute: bool,
) -> ResetResult:
    try:
        state = (await client.describe_group(group_id)).state
    except KafkaError as exc:
        if exc.error != ErrorCode.group_id_not_found:
            raise
        state = "Dead"
    if state.lower() not in INACTIVE_STATES:
        raise GroupActiveError(group_id, f"the current state is {state}")
    committed = await client.committed_offsets(group_id)
    names = sorted({parse_topic_arg(arg)[0] for arg in topics})
    counts = {}
    if names:
        try:
            counts = {t.name: len(t.partitions) for t in await client.describe_topics(names)}
        except KafkaError as exc:
            if exc.error != ErrorCode.unknown_topic_or_partition:
                raise
            raise PlanError(f"unknown topic ({exc.message})") from exc
    chosen = select_partitions(topics, all_topics, counts, committed)
    if not chosen:
        raise PlanError(f"group '{group_id}' has no committed offsets to reset")
    starts = await _log_offsets(client, dict.fromkeys(chosen, EARLIEST))
    ends = await _log_offsets(client, dict.fromkeys(chosen, LATEST))
    at_time: dict[TopicPartition, int] = {}
    if spec.mode == ResetMode.DATETIME:
        at_time = await _log_offsets(client, dict.fromkeys(chosen, spec.value))
    plan = plan_reset(
        spec,
        {
            tp: PartitionOffsets(starts[tp], ends[tp], committed.get(tp), at_time.get(tp))
            for tp in chosen
        },
    )
    if execute:
        results = await client.commit_offsets(
            group_id, {(p.topic, p.partition): p.offset for p in plan}
        )
        failed = {tp: e for tp, e in results.items() if e != ErrorCode.none}
        refusals = sorted({e.name.upper() for e in failed.values() if e in MEMBER_GONE})
        if refusals:
            raise GroupActiveError(
                group_id,
                f"a member joined: the coordinator refused the commit with {', '.join(refusals)}",
            )
        if failed:
            raise KafkaError(
                next(iter(failed.values())),
                "OffsetCommit "
                + ", ".join(f"{t}-{p}: {e.name.upper()}" for (t, p), e in sorted(failed.items())),
            )
    return ResetResult(plan, committed)


@groups_app.command("reset-offsets")
def reset_offsets(
    ctx: typer.Context,
    group: Annotated[str, typer.Argument(help="The group id.")],
    topic: Annotated[
        list[str] | None,
        typer.Option("--topic", help="TOPIC (all partitions) or TOPIC:P,P (repeatable)."),
    ] = None,
    all_topics: Annotated[
        bool, typer.Option("--all-topics", help="Every partition the group has committed.")
    ] = False,
    to_earliest: Annotated[
        bool, typer.Option("--to-earliest", help="Reset to the log start.")
    ] = False,
    to_latest: Annotated[bool, typer.Option("--to-latest", help="Reset to the log end.")] = False,
    to_offset: Annotated[
        int | None, typer.Option("--to-offset", help="Reset to this offset.")
    ] = None,
    to_datetime: Annotated[
        str | None,
        typer.Option(
            "--to-datetime",
            help="Reset to the first record at or after this ISO 8601 time "
            "(local time without a zone).",
        ),
    ] = None,
    shift_by: Annotated[
        int | None,
        typer.Option("--shift-by", help="Move the committed offset by N (negative: back)."),
    ] = None,
    execute: Annotated[
        bool,
        typer.Option("--execute", help="Commit the new offsets (default: only print the plan)."),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only print the plan (the default).")
    ] = False,
    json_out: JsonFlag = False,
    bootstrap_server: BootstrapOption = None,
    command_config: CommandConfigOption = None,
) -> None:
    """Move a stopped group's offsets (dry run unless --execute), within each log."""
    use_command_config(ctx, command_config)
    if bool(topic) == all_topics:
        raise typer.BadParameter(
            "give --topic (repeatable) or --all-topics, not both", param_hint="--topic"
        )
    if execute and dry_run:
        raise typer.BadParameter("--execute and --dry-run are exclusive", param_hint="--execute")
    spec = reset_spec(to_earliest, to_latest, to_offset, to_datetime, shift_by)
    result = _admin(
        ctx,
        bootstrap_server,
        lambda c: _reset(c, group, topic or [], all_topics, spec, execute),
        "Resetting offsets" if execute else "Planning the reset",
    )
    for p in result.plan:
        if p.clamped:
            where = "before the log start" if p.requested < p.offset else "past the log end"
            warn(
                f"Warning: offset {p.requested} for {p.topic}-{p.partition} is "
                f"{where}; using {p.offset}."
            )
    if json_out:
        print_json(
            {
                "group": group,
                "executed": execute,
                "offsets": [
                    {
                        "topic": p.topic,
                        "partition": p.partition,
                        "new_offset": p.offset,
                        "previous_offset": result.previous.get((p.topic, p.partition)),
                    }
                    for p in result.plan
                ],
            }
        )
    else:
        print_table(
            ["TOPIC", "PARTITION", "NEW-OFFSET"],
            [[p.topic, p.partition, p.offset] for p in result.plan],
        )
    if not execute:
        warn("Dry run: nothing was committed; add --execute to apply.")


if __name__ == "__main__":
    raise SystemExit(run_cli(groups_app))
