"""`lakelog console-producer` and `lakelog console-consumer`, Kafka's
kafka-console-producer.sh and kafka-console-consumer.sh, on confluent-kafka (librdkafka).

Lakelog has no Kafka client of its own for records (its admin client speaks only admin
requests), so these two commands need the `confluent-kafka` package; they say so in one line
when it is missing. Keys are partitioned with murmur2, as Kafka's Java producer does.
Kafka's Java property names that librdkafka shares (acks, linger.ms, batch.size,
compression.type, enable.idempotence, client.id, ...) pass straight through
`--producer-property` / `--consumer-property`.

Both ask the cluster for its metadata before reading stdin or a topic, and give up with one
`error:` line as soon as librdkafka reports every bootstrap server down (connection refused,
authentication failed) or, at the latest, after `--timeout-ms`: librdkafka alone would retry
for as long as it is let, printing a log line per attempt. Its log is silenced unless
`lakelog --debug` (or a `debug` client property) asks for it.
"""

from __future__ import annotations

import re
import sys
import time
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any

import typer

from lakelog.cli.common import (
    BootstrapOption,
    CommandConfigOption,
    UserError,
    bootstrap_addresses,
    bootstrap_of,
    command_security,
    debug_enabled,
    use_command_config,
    warn,
)
from lakelog.security.client_config import librdkafka_config

if TYPE_CHECKING:
    import confluent_kafka

PropertyOption = Annotated[
    list[str] | None,
    typer.Option("--property", help="A formatter property, NAME=VALUE (repeatable)."),
]
DEFAULT_TIMEOUT_MS = 30_000
"""Without --timeout-ms: how long a record may wait for its acknowledgement (Kafka's
delivery.timeout.ms default is 120 s; a terminal tool should not hang that long), and how long
either tool waits for the cluster to answer at start."""
POLL_S = 0.1
FIRST_ATTEMPT_S = 0.2
"""The start-up check's first metadata request waits this long before librdkafka's error
callback is looked at (are all bootstrap servers down?); each retry waits twice as long,
up to a second, so a refused connection fails at once and a slow broker is not hurried."""


def _kafka() -> Any:
    try:
        import confluent_kafka
    except ImportError:
        raise UserError(
            "this command needs the confluent-kafka package: pip install confluent-kafka"
        ) from None
    return confluent_kafka


def parse_properties(values: list[str] | None, option: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for value in values or ():
        name, sep, setting = value.partition("=")
        if not sep or not name.strip():
            raise UserError(f"bad {option} {value!r}: expected NAME=VALUE")
        out[name.strip()] = setting
    return out


def _flag(props: dict[str, str], name: str, default: bool = False) -> bool:
    value = props.get(name)
    if value is None:
        return default
    if value.lower() not in ("true", "false"):
        raise UserError(f"bad --property {name}={value}: expected true or false")
    return value.lower() == "true"


def _unescape(text: str) -> str:
    """Separators as Kafka takes them: `\\t` and `\\n` may be written escaped."""
    return text.encode("utf-8").decode("unicode_escape") if "\\" in text else text


def _config(bootstrap: str, given: dict[str, str], defaults: dict[str, str]) -> dict[str, Any]:
    """The client's settings: ours, then --command-config's security, then the user's own;
    librdkafka's log silenced unless the user debugs."""
    bootstrap_addresses(bootstrap)
    security = command_security()
    secured = librdkafka_config(security) if security is not None else {}
    quiet = {} if debug_enabled() or "debug" in given else {"log_level": "0"}
    return {**quiet, **defaults, **secured, **given, "bootstrap.servers": bootstrap}


class ClusterErrors:
    """librdkafka's error callback: what it last said about the connections, so the start-up
    check can stop at the first sign that no bootstrap server will answer."""

    def __init__(self, kafka: Any) -> None:
        self._kafka = kafka
        self.all_down = False
        self.fatal: str | None = None
        self.reason: str | None = None

    def __call__(self, error: confluent_kafka.KafkaError) -> None:
        code = error.code()
        if code == self._kafka.KafkaError._ALL_BROKERS_DOWN:
            self.all_down = True
        elif error.fatal() or code == self._kafka.KafkaError._AUTHENTICATION:
            self.fatal = _plain(error.str())
        else:
            self.reason = _plain(error.str())


def _plain(reason: str) -> str:
    """librdkafka's reason without its `host:port/id: ` prefix (the command names the host)."""
    return re.sub(r"^\S+/\S+: ", "", reason)


def reach_cluster(
    client: Any, bootstrap: str, errors: ClusterErrors, timeout_ms: int, topic: str | None = None
) -> Any:
    """The cluster's metadata (for `topic` alone, if given), or one UserError: as soon as
    every bootstrap server is down or refuses us, else once `timeout_ms` has passed."""
    kafka = _kafka()
    deadline = time.monotonic() + timeout_ms / 1000
    last = "no answer"
    attempt_s = FIRST_ATTEMPT_S
    while True:
        errors.all_down = False
        wait = max(0.01, min(attempt_s, deadline - time.monotonic()))
        attempt_s = min(1.0, attempt_s * 2)
        try:
            return client.list_topics(topic, timeout=wait)
        except kafka.KafkaException as exc:
            last = exc.args[0].str() if exc.args else str(exc)
        client.poll(0)  # serves the error callback
        if errors.fatal:
            raise UserError(f"cannot use {bootstrap}: {errors.fatal}")
        if errors.all_down:
            raise UserError(f"cannot reach {bootstrap}: {errors.reason or last}")
        if time.monotonic() >= deadline:
            reason = errors.reason or last
            raise UserError(f"cannot reach {bootstrap} within {timeout_ms} ms: {reason}")


def _timeout_ms(config: dict[str, Any]) -> int:
    """The producer's delivery timeout in ms (librdkafka's 0, no limit, checks for the
    default time)."""
    value = str(config.get("delivery.timeout.ms", ""))
    return int(value) if value.isdigit() and int(value) > 0 else DEFAULT_TIMEOUT_MS


# --------------------------------------------------------------------------- producer

PRODUCER_PROPERTIES = {"parse.key", "key.separator", "ignore.error", "null.marker"}


def _lines() -> Iterator[bytes]:
    for line in sys.stdin.buffer:
        yield line[:-1] if line.endswith(b"\n") else line


def console_producer(
    ctx: typer.Context,
    topic: Annotated[str, typer.Option("--topic", help="The topic to write to.")],
    properties: PropertyOption = None,
    producer_property: Annotated[
        list[str] | None,
        typer.Option(
            "--producer-property",
            help="A producer setting, NAME=VALUE, e.g. acks=all (repeatable).",
        ),
    ] = None,
    request_required_acks: Annotated[
        str | None,
        typer.Option("--request-required-acks", help="acks: all/-1, 1 or 0 (default all)."),
    ] = None,
    compression_codec: Annotated[
        str | None,
        typer.Option("--compression-codec", help="none, gzip, snappy, lz4 or zstd."),
    ] = None,
    sync: Annotated[
        bool, typer.Option("--sync", help="Wait for each record's acknowledgement in turn.")
    ] = False,
    timeout_ms: Annotated[
        int | None,
        typer.Option(
            "--timeout-ms",
            help="Give up when the brokers do not answer at start, or a record is not "
            "acknowledged, within this long (sets delivery.timeout.ms; default 30000).",
            min=1,
        ),
    ] = None,
    bootstrap_server: BootstrapOption = None,
    command_config: CommandConfigOption = None,
) -> None:
    """Send each line of stdin as a record, as kafka-console-producer.sh does.

    echo 'k1:hello' | lakelog console-producer --topic t --property parse.key=true
    --property key.separator=:

    The brokers are asked for metadata first: if none answers, the command fails at once
    (connection refused) or after --timeout-ms, before reading stdin."""
    use_command_config(ctx, command_config)
    props = parse_properties(properties, "--property")
    unknown = sorted(set(props) - PRODUCER_PROPERTIES)
    if unknown:
        raise UserError(
            f"unknown --property {unknown[0]}: expected {', '.join(sorted(PRODUCER_PROPERTIES))}"
        )
    parse_key = _flag(props, "parse.key")
    ignore_error = _flag(props, "ignore.error")
    separator = _unescape(props.get("key.separator", "\t")).encode()
    if not separator:
        raise UserError("--property key.separator must not be empty")
    null_marker = props["null.marker"].encode() if "null.marker" in props else None
    settings = parse_properties(producer_property, "--producer-property")
    if request_required_acks is not None:
        settings["acks"] = request_required_acks
    if compression_codec is not None:
        settings["compression.type"] = compression_codec
    if "message.timeout.ms" in settings:  # librdkafka's alias: one name, one value
        settings["delivery.timeout.ms"] = settings.pop("message.timeout.ms")
    if timeout_ms is not None:
        settings["delivery.timeout.ms"] = str(timeout_ms)
    bootstrap = bootstrap_of(ctx, bootstrap_server)
    kafka = _kafka()
    errors = ClusterErrors(kafka)
    config = _config(
        bootstrap,
        settings,
        {
            "acks": "all",
            "delivery.timeout.ms": str(DEFAULT_TIMEOUT_MS),
            "partitioner": "murmur2_random",
        },
    )
    try:
        producer = kafka.Producer({**config, "error_cb": errors})
    except (kafka.KafkaException, ValueError, TypeError) as exc:
        raise UserError(f"bad producer settings: {exc}") from None
    deadline_s = _timeout_ms(config) / 1000
    reach_cluster(producer, bootstrap, errors, _timeout_ms(config))

    sent = 0
    failures: list[str] = []

    def delivered(err: confluent_kafka.KafkaError | None, _msg: object) -> None:
        if err is not None:
            failures.append(err.str())

    for number, line in enumerate(_lines(), 1):
        key: bytes | None = None
        value: bytes | None = line
        if parse_key:
            key, sep, rest = line.partition(separator)
            if not sep:
                if not ignore_error:
                    producer.flush(deadline_s + 1)
                    raise UserError(
                        f"line {number} has no key separator {separator.decode()!r} "
                        f"({sent} records sent before it)"
                    )
                key, rest = None, line
            value = rest
            if null_marker is not None and key == null_marker:
                key = None
        if null_marker is not None and value == null_marker:
            value = None
        while True:
            try:
                producer.produce(topic, value=value, key=key, on_delivery=delivered)
                break
            except BufferError:  # the local queue is full: let batches go out first
                producer.poll(POLL_S)
            except kafka.KafkaException as exc:
                raise UserError(f"cannot send line {number}: {exc}") from None
        sent += 1
        if sync:
            producer.flush()
        else:
            producer.poll(0)
        if failures and not ignore_error:
            break
    remaining = producer.flush(deadline_s + 1)
    if remaining:
        failures.append(f"{remaining} records still unacknowledged")
    if failures:
        raise UserError(f"{len(failures)} of {sent} records failed: {failures[0]}")


# --------------------------------------------------------------------------- consumer

CONSUMER_PROPERTIES = {
    "print.key",
    "print.value",
    "print.offset",
    "print.partition",
    "print.timestamp",
    "print.headers",
    "key.separator",
    "line.separator",
    "headers.separator",
    "null.literal",
}


class Formatter:
    """Kafka's DefaultMessageFormatter: the chosen fields, separated by key.separator."""

    def __init__(self, props: dict[str, str]) -> None:
        unknown = sorted(set(props) - CONSUMER_PROPERTIES)
        if unknown:
            raise UserError(
                f"unknown --property {unknown[0]}: "
                f"expected {', '.join(sorted(CONSUMER_PROPERTIES))}"
            )
        self.timestamp = _flag(props, "print.timestamp")
        self.partition = _flag(props, "print.partition")
        self.offset = _flag(props, "print.offset")
        self.headers = _flag(props, "print.headers")
        self.key = _flag(props, "print.key")
        self.value = _flag(props, "print.value", default=True)
        self.separator = _unescape(props.get("key.separator", "\t")).encode()
        self.line = _unescape(props.get("line.separator", "\n")).encode()
        self.headers_separator = _unescape(props.get("headers.separator", ",")).encode()
        self.null = props.get("null.literal", "null").encode()

    def format(self, msg: confluent_kafka.Message) -> bytes:
        fields: list[bytes] = []
        if self.timestamp:
            kind, stamp = msg.timestamp()
            names = {1: "CreateTime", 2: "LogAppendTime"}
            fields.append(f"{names[kind]}:{stamp}".encode() if kind in names else b"NO_TIMESTAMP")
        if self.partition:
            fields.append(f"Partition:{msg.partition()}".encode())
        if self.offset:
            fields.append(f"Offset:{msg.offset()}".encode())
        if self.headers:
            headers = msg.headers() or []
            fields.append(
                self.headers_separator.join(
                    k.encode() + b":" + (self.null if v is None else v) for k, v in headers
                )
                if headers
                else b"NO_HEADERS"
            )
        if self.key:
            fields.append(self.null if msg.key() is None else msg.key())
        if self.value:
            fields.append(self.null if msg.value() is None else msg.value())
        return self.separator.join(fields) + self.line


def _start_offset(text: str) -> int:
    kafka = _kafka()
    word = text.strip().lower()
    if word == "earliest":
        return int(kafka.OFFSET_BEGINNING)
    if word == "latest":
        return int(kafka.OFFSET_END)
    if word.isdigit():
        return int(word)
    raise UserError(f"bad --offset {text!r}: expected earliest, latest or an offset >= 0")


def console_consumer(
    ctx: typer.Context,
    topic: Annotated[str, typer.Option("--topic", help="The topic to read.")],
    from_beginning: Annotated[
        bool,
        typer.Option("--from-beginning", help="Start at the earliest record, not the latest."),
    ] = False,
    max_messages: Annotated[
        int | None,
        typer.Option("--max-messages", help="Exit after this many records.", min=1),
    ] = None,
    group: Annotated[
        str | None,
        typer.Option("--group", help="Consume as a member of this group (commits offsets)."),
    ] = None,
    partition: Annotated[
        int | None, typer.Option("--partition", help="Read only this partition.", min=0)
    ] = None,
    offset: Annotated[
        str | None,
        typer.Option("--offset", help="With --partition: earliest, latest or an offset."),
    ] = None,
    timeout_ms: Annotated[
        int | None,
        typer.Option(
            "--timeout-ms",
            help="Exit when no record comes for this long; fail when the brokers do not "
            "answer at start within it (default 30000 for that check).",
            min=1,
        ),
    ] = None,
    properties: PropertyOption = None,
    consumer_property: Annotated[
        list[str] | None,
        typer.Option("--consumer-property", help="A consumer setting, NAME=VALUE (repeatable)."),
    ] = None,
    isolation_level: Annotated[
        str | None,
        typer.Option("--isolation-level", help="read_committed or read_uncommitted."),
    ] = None,
    bootstrap_server: BootstrapOption = None,
    command_config: CommandConfigOption = None,
) -> None:
    """Print the records of a topic, one value a line, as kafka-console-consumer.sh does.

    lakelog console-consumer --topic t --from-beginning --max-messages 10
    --property print.key=true

    The brokers are asked for the topic's metadata first: if none answers, the command
    fails at once (connection refused) or after --timeout-ms (default 30000)."""
    use_command_config(ctx, command_config)
    formatter = Formatter(parse_properties(properties, "--property"))
    if offset is not None and partition is None:
        raise UserError("--offset needs --partition")
    if partition is not None and group is not None:
        raise UserError("--partition and --group cannot be combined (give one)")
    if partition is not None and offset is not None and from_beginning:
        raise UserError("give --offset or --from-beginning, not both")
    if isolation_level is not None and isolation_level not in (
        "read_committed",
        "read_uncommitted",
    ):
        raise UserError(
            f"bad --isolation-level {isolation_level!r}: "
            "expected read_committed or read_uncommitted"
        )
    settings = parse_properties(consumer_property, "--consumer-property")
    if isolation_level is not None:
        settings["isolation.level"] = isolation_level
    bootstrap = bootstrap_of(ctx, bootstrap_server)
    kafka = _kafka()
    defaults = {
        "group.id": group or f"console-consumer-{uuid.uuid4().int % 100000}",
        "enable.auto.commit": "true" if group else "false",
        "auto.offset.reset": "earliest" if from_beginning else "latest",
        "enable.partition.eof": "false",
    }
    errors = ClusterErrors(kafka)
    config = _config(bootstrap, settings, defaults)
    try:
        consumer = kafka.Consumer({**config, "error_cb": errors})
    except (kafka.KafkaException, ValueError, TypeError) as exc:
        raise UserError(f"bad consumer settings: {exc}") from None
    try:
        metadata = reach_cluster(
            consumer, bootstrap, errors, timeout_ms or DEFAULT_TIMEOUT_MS, topic
        )
    except UserError:
        consumer.close()
        raise
    count = 0
    try:
        _assign(kafka, consumer, metadata, topic, group, partition, offset, from_beginning)
        out = sys.stdout.buffer
        deadline = time.monotonic() + timeout_ms / 1000 if timeout_ms else None
        while max_messages is None or count < max_messages:
            wait = (
                POLL_S if deadline is None else max(0.0, min(POLL_S, deadline - time.monotonic()))
            )
            msg = consumer.poll(wait)
            if msg is None:
                if deadline is not None and time.monotonic() >= deadline:
                    break
                continue
            error = msg.error()
            if error is not None:
                if error.code() == kafka.KafkaError._PARTITION_EOF:
                    continue
                if error.fatal() or not error.retriable():
                    raise UserError(f"consuming {topic}: {error.str()}")
                continue
            out.write(formatter.format(msg))
            out.flush()
            count += 1
            if timeout_ms:
                deadline = time.monotonic() + timeout_ms / 1000
    except KeyboardInterrupt:
        pass
    except BrokenPipeError:  # `| head`: the reader is gone
        pass
    finally:
        consumer.close()
        warn(f"Processed a total of {count} messages")


def _assign(
    kafka: Any,
    consumer: confluent_kafka.Consumer,
    metadata: Any,
    topic: str,
    group: str | None,
    partition: int | None,
    offset: str | None,
    from_beginning: bool,
) -> None:
    """Subscribe as a group member, else assign the partitions (no group joined)."""
    info = metadata.topics.get(topic)
    if info is None or info.error is not None or not info.partitions:
        reason = info.error.str() if info is not None and info.error is not None else "unknown"
        raise UserError(f"topic {topic} is not available: {reason}")
    if group is not None:
        consumer.subscribe([topic])
        return
    if partition is not None:
        if partition not in info.partitions:
            raise UserError(f"topic {topic} has no partition {partition}")
        if offset is not None:
            start = _start_offset(offset)
        else:
            start = kafka.OFFSET_BEGINNING if from_beginning else kafka.OFFSET_END
        consumer.assign([kafka.TopicPartition(topic, partition, start)])
        return
    start = kafka.OFFSET_BEGINNING if from_beginning else kafka.OFFSET_END
    consumer.assign([kafka.TopicPartition(topic, p, start) for p in sorted(info.partitions)])
