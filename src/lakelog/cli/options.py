"""Option definitions shared by commands that open the cluster's storage and coordinator
directly (`lakelog serve`, `lakelog pipeline ...`), so they take them exactly alike."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from lakelog.cli.common import UserError
from lakelog.config import Settings, SettingsError, load_settings

DataDirOption = Annotated[Path | None, typer.Option(help="Embedded SQLite + object store.")]
StorageUrlOption = Annotated[str | None, typer.Option(help="file://, memory:// or s3://")]
CoordinatorUrlOption = Annotated[
    str | None, typer.Option(help="sqlite:///path or postgresql://user@host:port/db")
]


def build_settings(flag_names: dict[str, str] | None = None, **given: Any) -> Settings:
    """Settings from the flags that were given (None means "not given"), so flags override
    env LAKELOG_* which override lakelog.toml. A bad value, wherever it came from, or a
    misspelt key in lakelog.toml is a `UserError` naming the setting and its source."""
    try:
        return load_settings(
            {name: value for name, value in given.items() if value is not None}, flag_names
        )
    except SettingsError as exc:
        raise UserError(exc) from exc
