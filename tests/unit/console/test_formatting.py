"""The console's figures as a user reads them: counts whole, times ISO-8601 UTC with the raw
value kept, and recorded errors without Python class names."""

from __future__ import annotations

import json

from lakelog.cli.console.app import _number, setting_row
from lakelog.cli.console.pipeline_runs import _row, user_message


def test_numbers_are_whole_for_counts_and_large_figures() -> None:
    assert _number(10297072.19) == "10,297,072"
    assert _number(12.5, whole=True) == "12"
    assert _number(12.25) == "12.25"
    assert _number(3.0) == "3"
    assert _number(None) == "-"


def test_epoch_settings_read_as_iso_utc_with_the_raw_value_kept() -> None:
    assert setting_row("created.at", "1764403885123") == (
        "created.at",
        "2025-11-29T08:11:25.123Z",
        "1764403885123",
    )
    assert setting_row("source.bootstrap", "h:9092") == ("source.bootstrap", "h:9092", "")
    assert setting_row("created.at", "soon") == ("created.at", "soon", "")
    assert setting_row("created.at", "9" * 40)[2] == ""  # out of range: shown as it is


def test_recorded_errors_lose_their_class_names() -> None:
    assert user_message("ValueError: unknown topics: a, b") == "unknown topics: a, b"
    assert user_message("botocore.exceptions.ClientError: denied") == "denied"
    assert user_message("unknown topics: a") == "unknown topics: a"
    assert user_message("cannot read /x: No such file") == "cannot read /x: No such file"


def test_a_run_row_labels_its_figures() -> None:
    row = _row(
        {
            "job": "export",
            "started_at": 1,
            "seconds": 0.5,
            "outcome": "failed",
            "figures": json.dumps(
                {"error": "ValueError: unknown topics: t", "dry_run": False, "bytes": 12345}
            ),
        }
    )
    assert row.error == "unknown topics: t"
    assert row.figures == [("dry run", "no"), ("bytes", "12,345")]
    assert _row({"figures": "[1]"}).figures == []
