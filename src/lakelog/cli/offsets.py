"""`lakelog get-offsets` (kafka-get-offsets.sh) and `lakelog delete-records`
(kafka-delete-records.sh)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any

import typer

from lakelog.admin.client import AdminClient
from lakelog.admin.results import TopicPartition
from lakelog.admin.tools import delete_records
from lakelog.admin.wire import EARLIEST, LATEST, KafkaError
from lakelog.cli.common import (
    BootstrapOption,
    CommandConfigOption,
    UserError,
    bootstrap_of,
    describe,
    print_json,
    run_admin,
    say,
    use_command_config,
    waiting,
    warn,
)
from lakelog.util.errors import ErrorCode

TIME_WORDS = {"latest": LATEST, "earliest": EARLIEST, "max-timestamp": -3}


def parse_time(text: str) -> int:
    """`--time`: latest (-1), earliest (-2), max-timestamp (-3) or a timestamp in ms."""
    word = text.strip().lower()
    if word in TIME_WORDS:
        return TIME_WORDS[word]
    try:
        value = int(word)
    except ValueError:
        raise UserError(
            f"bad --time {text!r}: expected -1/latest, -2/earliest, -3/max-timestamp "
            "or a timestamp in ms"
        ) from None
    if value < -3:
        raise UserError(f"bad --time {text!r}: the special values are -1, -2 and -3")
    return value


def parse_partitions(text: str | None) -> set[int] | None:
    """`--partitions 0,2,5-7`."""
    if text is None:
        return None
    out: set[int] = set()
    for part in (p.strip() for p in text.split(",")):
        low, sep, high = part.partition("-")
        if not low.isdigit() or (sep and not high.isdigit()):
            raise UserError(f"bad --partitions entry {part!r}: expected N or N-M")
        out.update(range(int(low), int(high if sep else low) + 1))
    return out


def get_offsets(
    ctx: typer.Context,
    topic: Annotated[
        str | None,
        typer.Option(
            "--topic", help="The topic (a regular expression also works); all if left out."
        ),
    ] = None,
    partitions: Annotated[
        str | None, typer.Option("--partitions", help="Partitions: 0,1,4-6 (all if left out).")
    ] = None,
    time: Annotated[
        str,
        typer.Option(
            "--time", help="-1/latest, -2/earliest, -3/max-timestamp or a timestamp in ms."
        ),
    ] = "latest",
    exclude_internal_topics: Annotated[
        bool, typer.Option("--exclude-internal-topics", help="Leave out internal topics.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    bootstrap_server: BootstrapOption = None,
    command_config: CommandConfigOption = None,
) -> None:
    """Print topic:partition:offset for each partition, as kafka-get-offsets.sh does.

    With a timestamp, the offset is that of the first record at or after it (-1: none)."""
    use_command_config(ctx, command_config)
    timestamp = parse_time(time)
    wanted = parse_partitions(partitions)
    bootstrap = bootstrap_of(ctx, bootstrap_server)

    async def action(client: AdminClient) -> dict[TopicPartition, int]:
        topics = await client.describe_topics(None)
        if exclude_internal_topics:
            topics = [t for t in topics if not t.is_internal]
        if topic is not None:
            exact = [t for t in topics if t.name == topic]
            if exact:
                topics = exact
            else:
                try:
                    pattern = re.compile(topic)
                except re.error as exc:
                    raise UserError(f"bad --topic pattern {topic!r}: {exc}") from None
                topics = [t for t in topics if pattern.fullmatch(t.name)]
            if not topics:
                raise UserError(f"no topic matches {topic!r}")
        asks = {
            (t.name, p.partition): timestamp
            for t in topics
            for p in t.partitions
            if wanted is None or p.partition in wanted
        }
        if not asks:
            raise UserError("no partition matches --partitions")
        found = await client.list_offsets(asks)
        failed = {tp: o.error for tp, o in found.items() if o.error != ErrorCode.none}
        if failed:
            (t, p), error = sorted(failed.items())[0]
            raise KafkaError(error, f"{t}:{p}")
        return {tp: o.offset for tp, o in found.items()}

    with waiting("Asking for offsets"):
        offsets = run_admin(bootstrap, action)
    rows = sorted(offsets.items())
    if as_json:
        print_json([{"topic": t, "partition": p, "offset": o} for (t, p), o in rows])
        return
    for (t, p), offset in rows:
        say(f"{t}:{p}:{offset}")


def read_offset_json(path: Path) -> dict[TopicPartition, int]:
    """kafka-delete-records.sh's file:
    {"partitions": [{"topic": "t", "partition": 0, "offset": 3}], "version": 1}."""
    try:
        raw = json.loads(path.read_text())
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or describe(exc)}") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"{path} is not JSON: {exc}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("partitions"), list):
        raise UserError(f'{path}: expected {{"partitions": [...], "version": 1}}')
    if raw.get("version", 1) != 1:
        raise UserError(f"{path}: unsupported version {raw.get('version')!r} (expected 1)")
    out: dict[TopicPartition, int] = {}
    for i, entry in enumerate(raw["partitions"]):
        if not isinstance(entry, dict):
            raise UserError(f"{path}: partitions[{i}] is not an object")
        topic, partition, offset = entry.get("topic"), entry.get("partition"), entry.get("offset")
        if not isinstance(topic, str) or not topic:
            raise UserError(f"{path}: partitions[{i}] has no topic")
        if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
            raise UserError(f"{path}: partitions[{i}] has no valid partition")
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < -1:
            raise UserError(f"{path}: partitions[{i}] has no valid offset (-1: the end)")
        if (topic, partition) in out:
            raise UserError(f"{path}: {topic}-{partition} is listed twice")
        out[(topic, partition)] = offset
    if not out:
        raise UserError(f"{path}: no partitions")
    return out


def delete_records_command(
    ctx: typer.Context,
    offset_json_file: Annotated[
        Path,
        typer.Option(
            "--offset-json-file",
            help='Where to delete up to: {"partitions":[{"topic":"t","partition":0,'
            '"offset":3}],"version":1} (offset -1: everything).',
        ),
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    bootstrap_server: BootstrapOption = None,
    command_config: CommandConfigOption = None,
) -> None:
    """Delete the records before the given offsets, as kafka-delete-records.sh does."""
    use_command_config(ctx, command_config)
    offsets = read_offset_json(offset_json_file)
    bootstrap = bootstrap_of(ctx, bootstrap_server)

    async def action(client: AdminClient) -> dict[TopicPartition, tuple[int, ErrorCode]]:
        return await delete_records(client, offsets)

    with waiting("Deleting records"):
        results = run_admin(bootstrap, action)
    rows = sorted(results.items())
    failed = [(tp, error) for tp, (_, error) in rows if error != ErrorCode.none]
    if as_json:
        out: list[dict[str, Any]] = []
        for (t, p), (low, error) in rows:
            item: dict[str, Any] = {"topic": t, "partition": p}
            if error == ErrorCode.none:
                item["low_watermark"] = low
            else:
                item["error"] = error.name.upper()
            out.append(item)
        print_json(out)
    else:
        say("Records delete operation completed:")
        for (t, p), (low, error) in rows:
            if error == ErrorCode.none:
                say(f"partition: {t}-{p}\tlow_watermark: {low}")
            else:
                say(f"partition: {t}-{p}\terror: {error.name.upper()}")
    if failed:
        (t, p), error = failed[0]
        warn(
            f"error: {len(failed)} of {len(rows)} partitions failed "
            f"(first: {t}-{p} {error.name.upper()})"
        )
        raise typer.Exit(1)
