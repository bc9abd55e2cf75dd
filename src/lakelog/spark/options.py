"""The data source's options, named as Spark's Kafka source names them, parsed once.

Kafka source names: `subscribe`, `startingOffsets`, `endingOffsets`, `startingTimestamp`,
`endingTimestamp`, `startingOffsetsByTimestampStrategy`, `maxOffsetsPerTrigger`,
`failOnDataLoss`, `kafka.isolation.level`. Lakelog's own: `lakelog.data.dir` or
`lakelog.storage.url` + `lakelog.coordinator.url` (resolved exactly as `lakelog serve`
resolves them), and `lakelog.fetch.max.bytes`, the batch bytes a task holds at once.
Option names are case-insensitive, as in Spark. Bad options raise ValueError naming the
option, which Spark reports as the query's error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from lakelog.spark.offsets import OffsetSpec, parse_offset_spec

__all__ = ["Connection", "SourceOptions", "parse_options"]

DEFAULT_FETCH_MAX_BYTES = 8 * 1024 * 1024
_ISOLATION = "kafka.isolation.level"


@dataclass(frozen=True, slots=True)
class Connection:
    """Where the log lives; plain strings so it pickles to Spark executors."""

    storage_url: str
    coordinator_url: str


@dataclass(frozen=True, slots=True)
class SourceOptions:
    connection: Connection
    topics: tuple[str, ...]
    starting: OffsetSpec | None
    """None: the default (earliest for batch reads, latest for streams)."""
    ending: OffsetSpec | None
    starting_timestamp: int | None
    ending_timestamp: int | None
    timestamp_strategy_latest: bool
    """startingOffsetsByTimestampStrategy=latest: no record at or after the timestamp means
    the latest offset instead of an error."""
    max_offsets_per_trigger: int | None
    read_committed: bool
    fail_on_data_loss: bool
    fetch_max_bytes: int


def _connection(opts: Mapping[str, str]) -> Connection:
    from lakelog.config import Settings

    data_dir = opts.get("lakelog.data.dir")
    storage = opts.get("lakelog.storage.url")
    coordinator = opts.get("lakelog.coordinator.url")
    if data_dir is None and (storage is None or coordinator is None):
        raise ValueError(
            "set option lakelog.data.dir, or both lakelog.storage.url and lakelog.coordinator.url"
        )
    given = {"storage_url": storage, "coordinator_url": coordinator}
    if data_dir is not None:
        given["data_dir"] = str(Path(data_dir).expanduser().resolve())
    settings = Settings(**{k: v for k, v in given.items() if v is not None})
    return Connection(settings.resolved_storage_url, settings.resolved_coordinator_url)


def _int(opts: Mapping[str, str], name: str, minimum: int) -> int | None:
    raw = opts.get(name.lower())
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"option {name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise ValueError(f"option {name} must be >= {minimum}, got {value}")
    return value


def _bool(opts: Mapping[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise ValueError(f"option {name} must be true or false, got {raw!r}")


def parse_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    opts = {str(k).lower(): str(v) for k, v in options.items()}
    topics = tuple(t.strip() for t in opts.get("subscribe", "").split(",") if t.strip())
    if not topics:
        unsupported = [k for k in ("assign", "subscribepattern") if k in opts]
        if unsupported:
            raise ValueError(f"option {unsupported[0]} is not supported; use subscribe")
        raise ValueError("option subscribe (comma-separated topic names) is required")
    if len(set(topics)) != len(topics):
        raise ValueError("option subscribe names a topic twice")
    starting = opts.get("startingoffsets")
    ending = opts.get("endingoffsets")
    if streaming and ending is not None:
        raise ValueError("option endingOffsets is for batch queries only")
    if streaming and "endingtimestamp" in opts:
        raise ValueError("option endingTimestamp is for batch queries only")
    if not streaming and "maxoffsetspertrigger" in opts:
        raise ValueError("option maxOffsetsPerTrigger is for streaming queries only")
    start_spec = parse_offset_spec(starting, "startingOffsets", topics) if starting else None
    end_spec = parse_offset_spec(ending, "endingOffsets", topics) if ending else None
    if start_spec is not None and start_spec.kind == "latest" and not streaming:
        raise ValueError("startingOffsets=latest is for streaming queries only")
    if end_spec is not None and end_spec.kind == "earliest":
        raise ValueError("endingOffsets=earliest is not allowed")
    if end_spec is not None and any(v == -2 for v in end_spec.offsets.values()):
        raise ValueError("endingOffsets: -2 (earliest) is not allowed")
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise ValueError("option startingOffsetsByTimestampStrategy must be error or latest")
    isolation = opts.get(_ISOLATION, "read_committed").strip().lower()
    if isolation not in ("read_committed", "read_uncommitted"):
        raise ValueError(f"option {_ISOLATION} must be read_committed or read_uncommitted")
    return SourceOptions(
        connection=_connection(opts),
        topics=topics,
        starting=start_spec,
        ending=end_spec,
        starting_timestamp=_int(opts, "startingTimestamp", 0),
        ending_timestamp=_int(opts, "endingTimestamp", 0),
        timestamp_strategy_latest=strategy == "latest",
        max_offsets_per_trigger=_int(opts, "maxOffsetsPerTrigger", 1),
        read_committed=isolation == "read_committed",
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        fetch_max_bytes=_int(opts, "lakelog.fetch.max.bytes", 1) or DEFAULT_FETCH_MAX_BYTES,
    )
