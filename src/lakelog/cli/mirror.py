"""`lakelog mirror`: cluster mirroring (KIP-1279), administered on the destination cluster
over the Kafka protocol like Kafka's tools (see lakelog.mirror.admin for the wire form).

    lakelog mirror --bootstrap-server DEST create NAME --source SRC [--source-config K=V]
        [--source-config-file FILE]   (source client security: security.protocol, sasl.*, ssl.*)
    lakelog mirror -b DEST add-topics NAME TOPIC|PATTERN... [--pattern REGEX]
    lakelog mirror -b DEST remove-topics NAME TOPIC...     (failover)
    lakelog mirror -b DEST describe NAME | delete NAME | validate NAME | list

`-b` may also follow the subcommand (`lakelog mirror list -b DEST`).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from lakelog.cli.common import (
    BootstrapOption,
    CommandConfigOption,
    UserError,
    bootstrap_addresses,
    bootstrap_of,
    command_security,
    group_callback,
    print_json,
    print_table,
    run_async,
    say,
    use_command_config,
    waiting,
    warn,
)
from lakelog.cli.topics import parse_configs
from lakelog.mirror.client import MirrorClient
from lakelog.security.client_config import (
    ClientSecurity,
    SecurityConfigError,
    read_properties,
    security_settings,
)

T = TypeVar("T")

mirror_app = typer.Typer(
    help="Mirror topics from another Kafka-protocol cluster, offsets preserved (KIP-1279). "
    "Commands run against the destination cluster (the one that copies).",
    no_args_is_help=True,
)
mirror_app.callback()(group_callback)

Name = Annotated[str, typer.Argument(help="The mirror's name.")]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON.")]
REQUEST_TIMEOUT_S = 120.0
"""remove-topics waits for a final group offset sync and the truncation."""
PATTERN_CHARS = frozenset("*?[]()|+^$\\")
"""A topic argument with one of these is a regex: none is legal in a Kafka topic name."""


def _mirror(
    ctx: typer.Context,
    given: str | None,
    action: Callable[[MirrorClient], Awaitable[T]],
    doing: str,
) -> T:
    """Run `action` on the first destination broker of the bootstrap list that answers."""
    bootstrap = bootstrap_of(ctx, given)
    bootstrap_addresses(bootstrap)

    async def main() -> T:
        client = await MirrorClient.connect(
            bootstrap,
            "lakelog-mirror-admin",
            timeout=REQUEST_TIMEOUT_S,
            security=command_security(),
        )
        assert isinstance(client, MirrorClient)
        async with client:
            return await action(client)

    with waiting(doing):
        return run_async(bootstrap, main)


def split_topic_args(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """(literal topics, patterns): an argument with a regex character is a pattern."""
    topics: list[str] = []
    patterns: list[str] = []
    for arg in args:
        (patterns if PATTERN_CHARS & set(arg) else topics).append(arg)
    return topics, patterns


def check_patterns(patterns: Sequence[str]) -> None:
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise UserError(f"bad topic pattern {pattern!r}: {exc}") from exc


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
    bootstrap_server: BootstrapOption = None,
    command_config: CommandConfigOption = None,
) -> None:
    """Create a mirror of a source cluster (optionally with its first topics).

    The destination broker first checks that the source answers (10 s per source broker):
    a source that cannot be reached is refused. The source settings, password included,
    are stored with the mirror definition in the destination's coordinator database (as
    Kafka stores link configs); `describe` masks secrets. The paths name files on the
    destination brokers."""
    use_command_config(ctx, command_config)
    configs = _source_configs(source_config or [], source_config_file)
    try:
        bootstrap_addresses(source)
    except UserError as exc:
        raise UserError(f"--source: {exc}") from exc
    check_patterns(pattern or [])
    message = _mirror(
        ctx,
        bootstrap_server,
        lambda c: c.create(name, source, configs, topic or [], pattern or []),
        f"Creating mirror {name} (checking that {source} answers)",
    )
    say(message or f"Created mirror {name} of {source}.")


def _source_configs(entries: list[str], path: Path | None) -> dict[str, str]:
    configs: dict[str, str] = {}
    try:
        if path is not None:
            # The same properties file a Kafka tool's --command-config takes.
            configs = security_settings(read_properties(path), warn)
    except (OSError, ValueError) as exc:
        raise UserError(f"--source-config-file: {exc}") from exc
    configs |= parse_configs(entries, "--source-config")
    try:  # the files are the destination broker's to check: the paths are on its host
        ClientSecurity.from_configs(configs)
    except SecurityConfigError as exc:
        raise UserError(f"--source-config: {exc}") from exc
    return configs


@mirror_app.command("add-topics")
def add_topics(
    ctx: typer.Context,
    name: Name,
    topics: Annotated[
        list[str] | None,
        typer.Argument(
            help="Topic names; an argument with a regex character (*?[]()|+^$\\) is a "
            "pattern, like --pattern."
        ),
    ] = None,
    pattern: Annotated[
        list[str] | None,
        typer.Option("--pattern", "-p", help="A topic regex (full match; repeatable)."),
    ] = None,
    bootstrap_server: BootstrapOption = None,
    command_config: CommandConfigOption = None,
) -> None:
    """Start mirroring topics (names, or patterns that also catch topics created later).

    Everything is checked first (names, patterns, topics present on the source), then
    applied at once: a refused command changes nothing."""
    use_command_config(ctx, command_config)
    literal, patterns = split_topic_args(topics or [])
    patterns += pattern or []
    if not literal and not patterns:
        raise UserError("name topics or patterns to add (or give --pattern)")
    check_patterns(patterns)
    message = _mirror(
        ctx,
        bootstrap_server,
        lambda c: c.add_topics(name, literal, patterns),
        f"Adding topics to mirror {name}",
    )
    say(message or f"Mirror {name} now follows {', '.join([*literal, *patterns])}.")


@mirror_app.command("remove-topics")
def remove_topics(
    ctx: typer.Context,
    name: Name,
    topics: Annotated[list[str], typer.Argument(help="Topic names.")],
    bootstrap_server: BootstrapOption = None,
    command_config: CommandConfigOption = None,
) -> None:
    """Fail over: stop mirroring the topics, truncate them to their last stable offset and
    make them writable here."""
    use_command_config(ctx, command_config)
    message = _mirror(
        ctx,
        bootstrap_server,
        lambda c: c.remove_topics(name, topics),
        f"Failing over {', '.join(topics)}",
    )
    say(message or f"Stopped mirroring {', '.join(topics)}.")


@mirror_app.command()
def delete(
    ctx: typer.Context,
    name: Name,
    bootstrap_server: BootstrapOption = None,
    command_config: CommandConfigOption = None,
) -> None:
    """Delete a mirror (remove its topics first)."""
    use_command_config(ctx, command_config)
    message = _mirror(ctx, bootstrap_server, lambda c: c.delete(name), f"Deleting mirror {name}")
    say(message or f"Deleted mirror {name}.")


@mirror_app.command("list")
def list_(
    ctx: typer.Context,
    as_json: JsonFlag = False,
    bootstrap_server: BootstrapOption = None,
    command_config: CommandConfigOption = None,
) -> None:
    """The mirrors of the cluster."""
    use_command_config(ctx, command_config)
    found = _mirror(ctx, bootstrap_server, lambda c: c.list_mirrors(), "Listing mirrors")
    if as_json:
        print_json(
            [{"mirror": name, **summary} for name, summary in sorted(found.items())],
        )
        return
    rows = []
    for name, summary in sorted(found.items()):
        states = ",".join(f"{k}={v}" for k, v in sorted(summary.get("states", {}).items()))
        rows.append([name, summary.get("source", ""), ",".join(summary.get("topics", [])), states])
    print_table(["MIRROR", "SOURCE", "TOPICS", "PARTITIONS"], rows)


@mirror_app.command()
def describe(
    ctx: typer.Context,
    name: Name,
    as_json: JsonFlag = False,
    bootstrap_server: BootstrapOption = None,
    command_config: CommandConfigOption = None,
) -> None:
    """Per-partition state, lag and last mirrored offset."""
    use_command_config(ctx, command_config)
    settings, partitions = _mirror(
        ctx, bootstrap_server, lambda c: c.describe(name), f"Describing mirror {name}"
    )
    if as_json:
        print_json({"settings": settings, "partitions": partitions})
        return
    for key, value in settings.items():
        say(f"{key}: {value}")
    print_table(
        [
            "TOPIC",
            "PARTITION",
            "STATE",
            "LAST-MIRRORED",
            "LSO",
            "SOURCE-END",
            "LAG",
            "LAG-MS",
            "OWNER",
            "REASON",
        ],
        [_row(p) for p in partitions],
    )


def _row(p: dict[str, Any]) -> list[object]:
    reason = p.get("reason") or ""
    if p.get("failover_offset", -1) >= 0:
        reason = f"failed over at {p['failover_offset']}" + (f"; {reason}" if reason else "")
    return [
        p["topic"],
        p["partition"],
        p["state"],
        p["last_mirrored_offset"],
        p["last_stable_offset"],
        p["source_end_offset"],
        p["lag_records"],
        p["lag_ms"],
        p["lease_owner"],
        reason,
    ]


@mirror_app.command()
def validate(
    ctx: typer.Context,
    name: Name,
    as_json: JsonFlag = False,
    bootstrap_server: BootstrapOption = None,
    command_config: CommandConfigOption = None,
) -> None:
    """Report what would block a migration: group id collisions, partition count
    mismatches, unsupported configurations. Exit code 1 if any is an error."""
    use_command_config(ctx, command_config)
    ok, findings = _mirror(
        ctx, bootstrap_server, lambda c: c.validate(name), f"Validating mirror {name}"
    )
    if as_json:
        print_json({"ok": ok, "findings": findings})
    else:
        if findings:
            print_table(
                ["SEVERITY", "CHECK", "MESSAGE"],
                [[f["severity"], f["check"], f["message"]] for f in findings],
            )
        say("OK: nothing blocks the migration." if ok else "Problems found.")
    if not ok:
        raise UserError(f"mirror {name}: problems block the migration (see above)")
