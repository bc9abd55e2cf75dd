"""What every `lakelog` command shares: where the cluster is (`-b` before or after the
subcommand, the whole bootstrap list tried in turn), one-line errors, and output that stays
whole when piped (plain padded lines off a terminal, `--json` everywhere a table is printed).

Commands raise `UserError` for a mistake the user can fix; `run_cli` turns it, a click usage
error, or any other exception into one `error: ...` line on stderr and a non-zero exit code.
A traceback is printed only with `lakelog --debug ...`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import traceback
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from lakelog.security.client_config import (
    ClientSecurity,
    SecurityConfigError,
    command_config_security,
    read_properties,
)

try:  # typer >= 0.2x vendors click; older ones use the click package
    from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError
except ImportError:  # pragma: no cover
    from click.exceptions import ClickException, NoArgsIsHelpError, UsageError  # type: ignore

if TYPE_CHECKING:
    from lakelog.admin.client import AdminClient

T = TypeVar("T")
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


class UserError(Exception):
    """A mistake the user can fix; its message is printed as one line (exit code 1)."""

    def __init__(self, message: object, exit_code: int = 1) -> None:
        super().__init__(str(message))
        self.exit_code = exit_code


# --- where the cluster is -------------------------------------------------------------------

BootstrapOption = Annotated[
    str | None,
    typer.Option(
        "--bootstrap-server",
        "-b",
        help="Brokers to contact, HOST:PORT[,HOST:PORT...] (tried in turn). "
        "Also accepted before the subcommand.",
        show_default=False,
    ),
]


CommandConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--command-config",
        help="Client security settings, a properties file as Kafka's tools take: "
        "security.protocol, sasl.mechanism, sasl.jaas.config (PlainLoginModule or "
        "ScramLoginModule username/password) or sasl.username/sasl.password, "
        "ssl.ca.location or ssl.truststore.location (PEM), ssl.certificate.location and "
        "ssl.key.location. Also accepted before the subcommand.",
        show_default=False,
        dir_okay=False,
    ),
]


@dataclass
class CliState:
    """What a command group's callback saw before the subcommand (`lakelog topics -b X list`)."""

    bootstrap: str | None = None
    command_config: Path | None = None


def group_callback(
    ctx: typer.Context,
    bootstrap_server: BootstrapOption = None,
    command_config: CommandConfigOption = None,
) -> None:
    """Callback for a command group: remembers a `-b` (and `--command-config`) given
    before the subcommand."""
    ctx.obj = CliState(bootstrap=bootstrap_server, command_config=command_config)


_security: ClientSecurity | None = None


def use_command_config(ctx: typer.Context | None, given: Path | None) -> None:
    """Read the command's `--command-config` (after the subcommand, else before it): the
    security every connection of this command then uses (`command_security()`)."""
    global _security
    state = ctx.find_object(CliState) if ctx is not None else None
    path = given or (state.command_config if state is not None else None)
    _security = None if path is None else read_command_config(path)


def read_command_config(path: Path) -> ClientSecurity:
    """The security settings of a `--command-config` file; a mistake is one UserError."""
    try:
        configs = read_properties(path)
    except (OSError, ValueError) as exc:
        raise UserError(f"--command-config: {describe(exc)}") from exc
    try:
        security = command_config_security(configs, warn=warn)
        _ = security.ssl_context  # reads the files now: a bad path is one clear error
    except SecurityConfigError as exc:
        raise UserError(f"--command-config {path}: {exc}") from exc
    return security


def command_security() -> ClientSecurity | None:
    """TLS/SASL settings of this command's connections (None: PLAINTEXT)."""
    return _security


def bootstrap_of(ctx: typer.Context | None, given: str | None) -> str:
    """The bootstrap list to use: after the subcommand, else before it, else
    LAKELOG_BOOTSTRAP_SERVERS, else 127.0.0.1:9092."""
    if given:
        return given
    state = ctx.find_object(CliState) if ctx is not None else None
    if state is not None and state.bootstrap:
        return state.bootstrap
    return os.environ.get("LAKELOG_BOOTSTRAP_SERVERS") or DEFAULT_BOOTSTRAP


def bootstrap_addresses(bootstrap: str) -> list[tuple[str, int]]:
    """`a:1,b:2` as [(host, port)]; UserError on an entry that is not HOST:PORT."""
    addresses = []
    for entry in bootstrap.split(","):
        entry = entry.strip()
        if not entry:
            continue
        host, sep, port = entry.rpartition(":")
        host = host.strip("[]")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise UserError(f"bad --bootstrap-server entry {entry!r}: expected HOST:PORT")
        addresses.append((host, int(port)))
    if not addresses:
        raise UserError("--bootstrap-server is empty: expected HOST:PORT[,HOST:PORT...]")
    return addresses


def run_async(bootstrap: str, main: Callable[[], Awaitable[T]]) -> T:
    """Run `main` and turn Kafka errors and unreachable brokers into `UserError`."""
    from lakelog.admin.wire import KafkaError

    try:
        return asyncio.run(_as_coroutine(main))
    except KafkaError as exc:
        raise UserError(exc) from exc
    except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
        raise UserError(f"cannot reach {bootstrap}: {describe(exc)}") from exc


async def _as_coroutine(main: Callable[[], Awaitable[T]]) -> T:
    return await main()


def run_admin(bootstrap: str, action: Callable[[AdminClient], Awaitable[T]], **connect: Any) -> T:
    """Connect an AdminClient to the first reachable broker of `bootstrap`, run `action`."""
    from lakelog.admin.client import AdminClient

    bootstrap_addresses(bootstrap)

    async def main() -> T:
        connect.setdefault("security", command_security())
        async with await AdminClient.connect(bootstrap, **connect) as client:
            return await action(client)

    return run_async(bootstrap, main)


# --- output -----------------------------------------------------------------------------------


def on_terminal() -> bool:
    return sys.stdout.isatty()


def print_json(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2, default=str))


def cell(value: object) -> str:
    """A table cell: '-' for nothing, so every row has the same number of fields for awk."""
    return "-" if value is None or value == "" else str(value)


def print_table(
    columns: Sequence[str],
    rows: Sequence[Sequence[object]],
    *,
    title: str | None = None,
) -> None:
    """A rich table on a terminal; off one, padded plain lines that are never cut or wrapped."""
    cells = [[cell(value) for value in row] for row in rows]
    if on_terminal():
        from rich.console import Console
        from rich.table import Table

        table = Table(title=title)
        for column in columns:
            table.add_column(column, overflow="fold")
        for row in cells:
            table.add_row(*row)
        Console().print(table)
        return
    widths = [len(column) for column in columns]
    for row in cells:
        widths = [max(width, len(value)) for width, value in zip(widths, row, strict=False)]
    if title:
        typer.echo(title)
    for row in [list(columns), *cells]:
        typer.echo("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=False)).rstrip())


def say(message: str) -> None:
    """A line on stdout (never wrapped)."""
    typer.echo(message)


def warn(message: str) -> None:
    """A line on stderr (never wrapped)."""
    typer.echo(message, err=True)


@contextlib.contextmanager
def waiting(description: str) -> Iterator[None]:
    """A spinner on stderr while a command waits, only when stderr is a terminal."""
    if not sys.stderr.isatty():
        yield
        return
    from rich.console import Console

    with Console(stderr=True).status(description):
        yield


# --- errors and the entry point ---------------------------------------------------------------

_debug = False


def set_debug(enabled: bool) -> None:
    global _debug
    _debug = enabled


def debug_enabled() -> bool:
    """Whether `lakelog --debug` was given: tracebacks, and client libraries' own logs."""
    return _debug


def describe(exc: BaseException) -> str:
    """One line for an exception: its message's first line, else its type."""
    text = str(exc).strip()
    if isinstance(exc, OSError) and exc.strerror:
        text = exc.strerror if not exc.filename else f"{exc.filename}: {exc.strerror}"
    first = text.splitlines()[0] if text else ""
    return first or type(exc).__name__


def run_cli(app: typer.Typer, argv: list[str] | None = None) -> int:
    """Run `app` and return its exit code; every failure is one `error:` line on stderr."""
    args = list(sys.argv[1:] if argv is None else argv)
    set_debug("--debug" in args[: _first_command_index(args)])
    try:
        result = app(args=args, prog_name="lakelog", standalone_mode=False)
    except NoArgsIsHelpError as exc:
        typer.echo(exc.ctx.get_help() if exc.ctx else str(exc))
        return 2
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        warn("error: aborted")
        return 130
    except ClickException as exc:
        warn(f"error: {_usage_message(exc)}")
        return exc.exit_code
    except UserError as exc:
        if _debug:
            traceback.print_exc()
        warn(f"error: {exc}")
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # the last line of defence: one line, no traceback
        if _debug:
            traceback.print_exc()
        warn(f"error: {describe(exc)}" + ("" if _debug else " (run with --debug for details)"))
        return 1
    return result if isinstance(result, int) else 0


def _first_command_index(args: list[str]) -> int:
    for index, arg in enumerate(args):
        if not arg.startswith("-"):
            return index
    return len(args)


def _usage_message(exc: ClickException) -> str:
    message = exc.format_message().replace("\n", " ")
    ctx = getattr(exc, "ctx", None)
    if isinstance(exc, UsageError) and ctx is not None:
        return f"{message} (see '{ctx.command_path} --help')"
    return message
