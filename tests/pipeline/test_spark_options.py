"""The source's options and offset arithmetic, without Spark: Kafka source conventions."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakelog.spark.offsets import (
    OffsetSpec,
    PartitionBounds,
    parse_offset_spec,
    position_from_json,
    position_to_json,
    rate_limit,
    resolve,
)
from lakelog.spark.options import parse_options

BOUNDS = [
    PartitionBounds("a", "id-a", 0, log_start=5, end=50),
    PartitionBounds("a", "id-a", 1, log_start=0, end=10),
    PartitionBounds("b", "id-b", 0, log_start=2, end=2),
]


def test_earliest_and_latest() -> None:
    assert resolve(OffsetSpec("earliest"), BOUNDS, "x") == {("a", 0): 5, ("a", 1): 0, ("b", 0): 2}
    assert resolve(OffsetSpec("latest"), BOUNDS, "x") == {("a", 0): 50, ("a", 1): 10, ("b", 0): 2}


def test_json_spec_with_earliest_and_latest_markers() -> None:
    spec = parse_offset_spec('{"a":{"0":23,"1":-2},"b":{"0":-1}}', "startingOffsets", ["a", "b"])
    assert resolve(spec, BOUNDS, "startingOffsets") == {("a", 0): 23, ("a", 1): 0, ("b", 0): 2}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{oops", "startingOffsets must be earliest, latest or JSON"),
        ("[1, 2]", "JSON object"),
        ('{"a": 3}', "must map partitions"),
        ('{"a": {"x": 3}}', "bad partition"),
        ('{"a": {"0": "3"}}', "bad entry"),
        ('{"a": {"0": -3}}', "bad offset"),
        ('{"zzz": {"0": 1}}', "not subscribed: zzz"),
    ],
)
def test_bad_json_specs_name_the_option(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_offset_spec(text, "startingOffsets", ["a", "b"])


def test_json_spec_must_cover_every_partition_and_no_more() -> None:
    spec = parse_offset_spec('{"a":{"0":1,"1":1}}', "startingOffsets", ["a", "b"])
    with pytest.raises(ValueError, match="missing: b-0"):
        resolve(spec, BOUNDS, "startingOffsets")
    spec = parse_offset_spec('{"a":{"0":1,"1":1,"7":1},"b":{"0":1}}', "endingOffsets", ["a", "b"])
    with pytest.raises(ValueError, match="do not exist: a-7"):
        resolve(spec, BOUNDS, "endingOffsets")


def test_stream_position_round_trip() -> None:
    position = {("a", 0): 12, ("a", 10): 3, ("b", 1): 0}
    raw = position_to_json(position)
    assert raw == {"a": {"0": 12, "10": 3}, "b": {"1": 0}}
    assert position_from_json(raw) == position
    with pytest.raises(ValueError):
        position_from_json({"a": {"0": -1}})


def test_rate_limit_shares_by_backlog_and_never_starves() -> None:
    start = {("a", 0): 0, ("a", 1): 100, ("a", 2): 7}
    latest = {("a", 0): 900, ("a", 1): 199, ("a", 2): 8}
    end = rate_limit(start, latest, 100)
    assert end == {("a", 0): 90, ("a", 1): 109, ("a", 2): 8}
    assert rate_limit(start, latest, 10_000) == latest


def _opts(**extra: str) -> dict[str, str]:
    return {"subscribe": "a, b", "lakelog.data.dir": "/tmp/lakelog-x", **extra}


def test_options_defaults_and_data_dir(tmp_path: Path) -> None:
    opts = parse_options({"Subscribe": "a,b", "LAKELOG.DATA.DIR": str(tmp_path)}, streaming=False)
    assert opts.topics == ("a", "b")
    assert opts.read_committed and opts.fail_on_data_loss
    assert opts.starting is None and opts.ending is None
    assert opts.connection.storage_url == (tmp_path / "objects").as_uri()
    assert opts.connection.coordinator_url == f"sqlite:///{tmp_path}/coordinator.sqlite3"


def test_options_explicit_urls_and_kafka_names() -> None:
    opts = parse_options(
        {
            "subscribe": "t",
            "lakelog.storage.url": "s3://bucket/p",
            "lakelog.coordinator.url": "postgresql://u@h/db",
            "kafka.isolation.level": "read_uncommitted",
            "failOnDataLoss": "false",
            "maxOffsetsPerTrigger": "500",
            "startingTimestamp": "1700000000000",
        },
        streaming=True,
    )
    assert opts.connection.storage_url == "s3://bucket/p"
    assert opts.connection.coordinator_url == "postgresql://u@h/db"
    assert not opts.read_committed and not opts.fail_on_data_loss
    assert opts.max_offsets_per_trigger == 500
    assert opts.starting_timestamp == 1_700_000_000_000


@pytest.mark.parametrize(
    ("options", "streaming", "message"),
    [
        ({"subscribe": ""}, False, "subscribe"),
        ({"assign": '{"a":[0]}', "subscribe": ""}, False, "assign is not supported"),
        ({"subscribe": "a,a"}, False, "twice"),
        ({"endingOffsets": "latest"}, True, "batch queries only"),
        ({"maxOffsetsPerTrigger": "5"}, False, "streaming queries only"),
        ({"maxOffsetsPerTrigger": "0"}, True, ">= 1"),
        ({"maxOffsetsPerTrigger": "lots"}, True, "must be an integer"),
        ({"startingOffsets": "latest"}, False, "streaming queries only"),
        ({"endingOffsets": "earliest"}, False, "not allowed"),
        ({"endingOffsets": '{"a":{"0":-2}}'}, False, "not allowed"),
        ({"kafka.isolation.level": "dirty"}, False, "read_committed or read_uncommitted"),
        ({"failOnDataLoss": "maybe"}, False, "true or false"),
        ({"startingOffsetsByTimestampStrategy": "x"}, False, "error or latest"),
    ],
)
def test_bad_options(options: dict[str, str], streaming: bool, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_options(_opts(**options), streaming=streaming)


def test_connection_is_required() -> None:
    with pytest.raises(ValueError, match=r"lakelog\.data\.dir"):
        parse_options({"subscribe": "a", "lakelog.storage.url": "file:///x"}, streaming=False)
