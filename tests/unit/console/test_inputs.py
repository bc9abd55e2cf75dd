"""Query-string values the console takes: checked, bounded, and named in the error."""

from __future__ import annotations

import pytest

from lakelog.cli.console.inputs import INT64_MAX, BadInput, integer, text, timestamp_ms
from lakelog.cli.console.reads import legal_topic_name
from lakelog.cli.console.records import SHOWN_BYTES, decode


def test_integer_bounds_and_defaults() -> None:
    assert integer({}, "offset", None) is None
    assert integer({"offset": " 42 "}, "offset", None) == 42
    assert integer({"offset": str(INT64_MAX)}, "offset", None) == INT64_MAX
    for bad in (str(INT64_MAX + 1), "-1", "1.5", "0x10", "ten", "\uff11\uff12"):
        with pytest.raises(BadInput, match="offset"):
            integer({"offset": bad}, "offset", None)


def test_long_values_are_refused_before_parsing() -> None:
    with pytest.raises(BadInput, match="longer than"):
        text({"q": "x" * 10_000}, "q")


def test_times_are_epoch_ms_or_iso_utc_by_default() -> None:
    assert timestamp_ms({"time": "1767225600000"}, "time") == 1_767_225_600_000
    assert timestamp_ms({"time": "2026-01-01T00:00:00"}, "time") == 1_767_225_600_000
    assert timestamp_ms({"time": "2026-01-01T01:00:00+01:00"}, "time") == 1_767_225_600_000
    assert timestamp_ms({}, "time") is None
    with pytest.raises(BadInput, match="ISO 8601"):
        timestamp_ms({"time": "last tuesday"}, "time")


def test_record_fields_are_text_base64_or_null_and_cut_when_huge() -> None:
    assert decode(None).encoding == "null"
    assert decode("héllo".encode()).text == "héllo"
    binary = decode(b"\xff\xfe\x00\x01")
    assert binary.encoding == "base64" and binary.text == "//4AAQ=="
    huge = decode(b"a" * (SHOWN_BYTES * 3))
    assert huge.cut and huge.size == SHOWN_BYTES * 3 and len(huge.text or "") == SHOWN_BYTES


def test_legal_topic_names_follow_kafka() -> None:
    assert legal_topic_name("orders.v2_eu-1")
    for bad in ("", ".", "..", "a/b", "<script>", "x" * 250, "ünicode"):
        assert not legal_topic_name(bad), bad
