"""`lakelog groups` refuses bad flag combinations before it touches the network."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from lakelog.cli.common import run_cli
from lakelog.cli.groups import groups_app

UNREACHABLE = ["--bootstrap-server", "127.0.0.1:1"]


@pytest.mark.parametrize(
    "args",
    [
        ["g", "--topic", "t"],  # no mode
        ["g", "--topic", "t", "--to-earliest", "--to-latest"],
        ["g", "--topic", "t", "--to-offset", "1", "--shift-by", "1"],
        ["g", "--to-earliest"],  # no scope
        ["g", "--topic", "t", "--all-topics", "--to-earliest"],
        ["g", "--topic", "t", "--to-datetime", "not-a-date"],
        ["g", "--topic", "t", "--to-earliest", "--execute", "--dry-run"],
    ],
)
def test_reset_offsets_usage_errors(args: list[str]) -> None:
    result = CliRunner().invoke(groups_app, ["reset-offsets", *args, *UNREACHABLE])
    assert result.exit_code == 2, result.output


def test_describe_members_and_state_are_exclusive() -> None:
    result = CliRunner().invoke(groups_app, ["describe", "g", "--members", "--state", *UNREACHABLE])
    assert result.exit_code == 2, result.output


def test_unreachable_broker_is_a_clean_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(groups_app, ["list", *UNREACHABLE]) == 1
    assert capsys.readouterr().err.startswith("error: cannot reach 127.0.0.1:1")


def test_unknown_state_names_the_valid_ones(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(groups_app, ["list", "--state", "stable,Bogus", *UNREACHABLE]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'Bogus'" in err and "CompletingRebalance" in err, err
