"""`lakelog configs`, Kafka's kafka-configs.sh: describe and alter topic, broker and group
configs (IncrementalAlterConfigs: `--add-config` sets, `--delete-config` removes)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from lakelog.admin.client import AdminClient
from lakelog.admin.scram import alter_scram_users, describe_scram_users, parse_scram_config
from lakelog.admin.tools import (
    CONFIG_SOURCES,
    DYNAMIC_SOURCES,
    ConfigEntry,
    alter_configs,
    describe_configs,
)
from lakelog.admin.wire import KafkaError
from lakelog.cli.common import (
    BootstrapOption,
    CommandConfigOption,
    UserError,
    bootstrap_of,
    print_json,
    run_admin,
    say,
    use_command_config,
    waiting,
)
from lakelog.security.scram import HASHES
from lakelog.server.cluster.dynamic_broker_configs import CLUSTER_DEFAULT
from lakelog.util.errors import ErrorCode

SINGULAR = {"topics": "topic", "brokers": "broker", "groups": "group", "users": "user"}
ENTITY_TYPES = {"topics": "topics", "topic": "topics", "brokers": "brokers", "broker": "brokers"}
ENTITY_TYPES |= {"groups": "groups", "group": "groups", "users": "users", "user": "users"}


def parse_add_config(text: str) -> dict[str, str]:
    """`k=v,k2=[a,b]` as {k: v, k2: "a,b"}: a list value goes in square brackets, as in
    kafka-configs.sh."""
    out: dict[str, str] = {}
    entries: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            entries.append(text[start:i])
            start = i + 1
    entries.append(text[start:])
    for entry in entries:
        if not entry.strip():
            continue
        name, sep, value = entry.partition("=")
        name = name.strip()
        if not sep or not name:
            raise UserError(f"bad --add-config entry {entry!r}: expected NAME=VALUE")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        if name in out:
            raise UserError(f"--add-config sets {name} twice")
        out[name] = value
    return out


def parse_delete_config(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if len(set(names)) != len(names):
        raise UserError("--delete-config names a config twice")
    return names


def _entity(
    entity_type: str | None, entity_name: str | None, topic: str | None, broker: str | None
) -> tuple[str, str | None]:
    if topic is not None and broker is not None:
        raise UserError("give only one of --topic and --broker")
    if topic is not None or broker is not None:
        shortcut = "topics" if topic is not None else "brokers"
        if entity_type is not None and ENTITY_TYPES.get(entity_type) != shortcut:
            raise UserError(f"--{SINGULAR[shortcut]} contradicts --entity-type {entity_type}")
        if entity_name is not None:
            raise UserError(f"give either --{SINGULAR[shortcut]} or --entity-name, not both")
        return shortcut, topic if topic is not None else broker
    if entity_type is None:
        raise UserError(
            "--entity-type (topics, brokers, groups or users) or --topic/--broker is required"
        )
    if entity_type not in ENTITY_TYPES:
        raise UserError(
            f"unsupported --entity-type {entity_type!r}: expected topics, brokers, groups or users"
        )
    return ENTITY_TYPES[entity_type], entity_name


def _format_value(value: str | None) -> str:
    return "null" if value is None else value


def format_entry(entry: ConfigEntry) -> str:
    synonyms = ", ".join(f"{s.source}:{s.name}={_format_value(s.value)}" for s in entry.synonyms)
    value = "null" if entry.sensitive and entry.value is None else _format_value(entry.value)
    return (
        f"  {entry.name}={value} sensitive={str(entry.sensitive).lower()} synonyms={{{synonyms}}}"
    )


def entry_json(entry: ConfigEntry) -> dict[str, Any]:
    return {
        "name": entry.name,
        "value": entry.value,
        "source": entry.source,
        "sensitive": entry.sensitive,
        "read_only": entry.read_only,
        "synonyms": [
            {"name": s.name, "value": s.value, "source": s.source} for s in entry.synonyms
        ],
    }


def configs(
    ctx: typer.Context,
    describe: Annotated[bool, typer.Option("--describe", help="Show the configs.")] = False,
    alter: Annotated[bool, typer.Option("--alter", help="Change the configs.")] = False,
    entity_type: Annotated[
        str | None, typer.Option("--entity-type", help="topics, brokers, groups or users.")
    ] = None,
    entity_name: Annotated[
        str | None,
        typer.Option(
            "--entity-name", help="The topic, broker id or group (describe: all when left out)."
        ),
    ] = None,
    topic: Annotated[
        str | None, typer.Option("--topic", help="Same as --entity-type topics --entity-name.")
    ] = None,
    broker: Annotated[
        str | None, typer.Option("--broker", help="Same as --entity-type brokers --entity-name.")
    ] = None,
    add_config: Annotated[
        str | None,
        typer.Option("--add-config", help="Configs to set: k1=v1,k2=[v1,v2] (list in brackets)."),
    ] = None,
    delete_config: Annotated[
        str | None, typer.Option("--delete-config", help="Configs to remove: k1,k2.")
    ] = None,
    entity_default: Annotated[
        bool,
        typer.Option(
            "--entity-default",
            help="Brokers: the cluster-wide default every broker uses (dynamic configs).",
        ),
    ] = False,
    all_configs: Annotated[
        bool, typer.Option("--all", help="Describe: every config, defaults included.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    bootstrap_server: BootstrapOption = None,
    command_config: CommandConfigOption = None,
) -> None:
    """Describe or alter configs, as kafka-configs.sh does.

    lakelog configs --describe --entity-type topics --entity-name orders [--all]\n
    lakelog configs --alter --topic orders --add-config retention.ms=3600000\n
    lakelog configs --alter --topic orders --delete-config retention.ms\n
    lakelog configs --alter --entity-type users --entity-name alice
    --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'
    """
    use_command_config(ctx, command_config)
    if describe == alter:
        raise UserError("give exactly one of --describe and --alter")
    kind, name = _entity(entity_type, entity_name, topic, broker)
    if entity_default:
        if kind != "brokers" or name is not None:
            raise UserError("--entity-default goes with --entity-type brokers, without a name")
        name = CLUSTER_DEFAULT
    bootstrap = bootstrap_of(ctx, bootstrap_server)
    if kind == "brokers" and name and not name.lstrip("-").isdigit():
        raise UserError(f"the broker entity name must be a broker id, not {name!r}")
    if kind == "users":
        if not alter and (add_config is not None or delete_config is not None):
            raise UserError("--add-config and --delete-config go with --alter, not --describe")
        if alter:
            _alter_users(bootstrap, name, add_config, delete_config, as_json)
        else:
            _describe_users(bootstrap, name, as_json)
        return
    if alter:
        _alter(bootstrap, kind, name, add_config, delete_config, as_json)
    else:
        if add_config is not None or delete_config is not None:
            raise UserError("--add-config and --delete-config go with --alter, not --describe")
        _describe(bootstrap, kind, name, all_configs, as_json)


def _alter(
    bootstrap: str,
    kind: str,
    name: str | None,
    add_config: str | None,
    delete_config: str | None,
    as_json: bool,
) -> None:
    if name is None:
        raise UserError(f"--alter needs the {SINGULAR[kind]}: --entity-name")
    to_set = parse_add_config(add_config or "")
    to_delete = parse_delete_config(delete_config or "")
    if not to_set and not to_delete:
        raise UserError("--alter needs --add-config and/or --delete-config")
    both = sorted(set(to_set) & set(to_delete))
    if both:
        raise UserError(f"{', '.join(both)} both added and deleted")

    async def action(client: AdminClient) -> None:
        try:
            await alter_configs(client, kind, name, to_set, to_delete)
        except KafkaError as exc:
            if kind == "groups" and exc.error == ErrorCode.invalid_request:
                raise UserError(f"the broker does not serve group configs ({exc})") from None
            raise

    what = (
        "the cluster-wide broker default" if name == CLUSTER_DEFAULT else f"{SINGULAR[kind]} {name}"
    )
    with waiting(f"Altering the configs of {what}"):
        run_admin(bootstrap, action)
    if as_json:
        print_json({"entity_type": kind, "entity_name": name, "set": to_set, "deleted": to_delete})
    else:
        say(
            "Completed updating default config for brokers in the cluster."
            if name == CLUSTER_DEFAULT
            else f"Completed updating config for {SINGULAR[kind]} {name}."
        )


def _alter_users(
    bootstrap: str,
    name: str | None,
    add_config: str | None,
    delete_config: str | None,
    as_json: bool,
) -> None:
    """SCRAM credentials, as kafka-configs.sh: --add-config 'SCRAM-SHA-256=[iterations=8192,
    password=secret]', --delete-config SCRAM-SHA-256; one request."""
    if name is None:
        raise UserError("--alter needs the user: --entity-name")
    to_set = parse_add_config(add_config or "")
    to_delete = parse_delete_config(delete_config or "")
    if not to_set and not to_delete:
        raise UserError("--alter needs --add-config and/or --delete-config")
    try:
        upserts = [parse_scram_config(mechanism, value) for mechanism, value in to_set.items()]
    except ValueError as exc:
        raise UserError(f"--add-config {exc}") from None
    unknown = [m for m in to_delete if m not in HASHES]
    if unknown:
        raise UserError(f"--delete-config {unknown[0]}: expected one of {', '.join(HASHES)}")

    async def action(client: AdminClient) -> None:
        await alter_scram_users(client, {name: upserts}, {name: to_delete})

    with waiting(f"Altering the SCRAM credentials of user {name}"):
        run_admin(bootstrap, action)
    if as_json:
        print_json(
            {
                "entity_type": "users",
                "entity_name": name,
                "set": {u.mechanism: {"iterations": u.iterations} for u in upserts},
                "deleted": to_delete,
            }
        )
    else:
        say(f"Completed updating config for user {name}.")


def _describe_users(bootstrap: str, name: str | None, as_json: bool) -> None:
    async def action(client: AdminClient) -> dict[str, list[tuple[str, int]]]:
        return await describe_scram_users(client, None if name is None else [name])

    with waiting("Describing SCRAM users"):
        described = run_admin(bootstrap, action)
    if as_json:
        print_json(
            [
                {
                    "entity_type": "users",
                    "entity_name": user,
                    "credentials": [{"mechanism": m, "iterations": i} for m, i in infos],
                }
                for user, infos in described.items()
            ]
        )
        return
    for user, infos in described.items():
        shown = ", ".join(f"{m}=iterations={i}" for m, i in infos)
        say(f"SCRAM credential configs for user-principal '{user}' are {shown}")


def _describe(
    bootstrap: str, kind: str, name: str | None, all_configs: bool, as_json: bool
) -> None:
    async def action(client: AdminClient) -> list[tuple[str, list[ConfigEntry]]]:
        if name is not None:
            names = [name]
        elif kind == "topics":
            names = await client.list_topics()
        elif kind == "brokers":
            names = [str(node.node_id) for node in await client.brokers()]
        else:
            names = sorted(g.group_id for g in await client.list_groups())
        try:
            return [(n, await describe_configs(client, kind, n)) for n in names]
        except KafkaError as exc:
            if kind == "groups" and exc.error == ErrorCode.invalid_request:
                raise UserError(f"the broker does not serve group configs ({exc})") from None
            raise

    with waiting(f"Describing {kind} configs"):
        described = run_admin(bootstrap, action)
    dynamic = CONFIG_SOURCES[DYNAMIC_SOURCES[kind] if name != CLUSTER_DEFAULT else 3]
    shown = [
        (n, [e for e in entries if all_configs or e.source == dynamic]) for n, entries in described
    ]
    if as_json:
        print_json(
            [
                {"entity_type": kind, "entity_name": n, "configs": [entry_json(e) for e in entries]}
                for n, entries in shown
            ]
        )
        return
    for n, entries in shown:
        if n == CLUSTER_DEFAULT:
            say("Default configs for brokers in the cluster are:")
        else:
            say(f"{'All' if all_configs else 'Dynamic'} configs for {SINGULAR[kind]} {n} are:")
        for entry in entries:
            say(format_entry(entry))
