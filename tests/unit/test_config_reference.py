"""docs/configuration.md is generated from `Settings` (lakelog.cli.config_reference) and must
match what the generator produces now."""

from __future__ import annotations

import difflib
import re
from pathlib import Path

from lakelog.cli.config_reference import REGENERATE, field_docs, render, serve_flags
from lakelog.config import Settings

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
SHELL_FENCES = {"", "sh", "bash", "shell", "console"}


def test_configuration_md_is_current() -> None:
    expected = render()
    actual = DOC.read_text() if DOC.exists() else ""
    if actual != expected:
        diff = "".join(
            list(
                difflib.unified_diff(
                    actual.splitlines(keepends=True),
                    expected.splitlines(keepends=True),
                    "docs/configuration.md",
                    "generated now",
                )
            )[:40]
        )
        raise AssertionError(
            f"docs/configuration.md is stale: regenerate it with `{REGENERATE}` "
            "(python -m lakelog.cli.config_reference > docs/configuration.md) and commit it.\n"
            + diff
        )


def test_every_setting_appears_with_its_env_var_and_meaning() -> None:
    text = render()
    documented = {field.name: field for field in field_docs()}
    assert set(documented) == set(Settings.model_fields)
    for name in Settings.model_fields:
        row = next((line for line in text.splitlines() if line.startswith(f"| `{name}` |")), None)
        assert row is not None, f"{name} has no row in docs/configuration.md"
        assert f"`LAKELOG_{name.upper()}`" in row
        assert documented[name].doc, f"{name} has no docstring or description in config.py"


def test_serve_flags_are_the_options_named_as_settings() -> None:
    flags = serve_flags()
    assert flags["listen"] == "--listen"
    assert flags["data_dir"] == "--data-dir"
    assert flags["coordinator_url"] == "--coordinator-url"
    assert "log_level" not in flags and "brokers" not in flags  # not settings
    assert '| `listen` | `"127.0.0.1:9092"` | `LAKELOG_LISTEN` | `--listen` |' in render()


def test_no_shell_block_runs_lakelog_or_kcat() -> None:
    """Shell blocks that run `lakelog` or `kcat` in docs are executed by another test; the
    reference must have none (its examples are `toml` or `text`)."""
    lang: str | None = None
    block: list[str] = []
    for line in render().splitlines():
        fence = re.match(r"^```(\w*)\s*$", line)
        if fence and lang is None:
            lang, block = fence.group(1), []
        elif fence:
            if lang in SHELL_FENCES:
                assert not re.search(r"\b(lakelog|kcat)\b", "\n".join(block)), block
            lang = None
        elif lang is not None:
            block.append(line)
    assert lang is None, "unclosed code block"
