"""`lakelog schemas`: the schema registry from the command line (list, describe, register,
delete, compatibility), over its REST API, so it works against any broker's registry (or
Confluent's). The registry's URL is `--registry-url`, else the one a broker on the
bootstrap address serves by default (its port + 1001)."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Annotated, Any

import typer

from lakelog.cli.common import (
    BootstrapOption,
    UserError,
    bootstrap_of,
    describe,
    print_json,
    print_table,
    say,
)
from lakelog.config import split_host_port

schemas_app = typer.Typer(no_args_is_help=True)

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
REGISTRY_OFFSET = 1001
RegistryOption = Annotated[
    str | None,
    typer.Option(
        "--registry-url",
        envvar="LAKELOG_SCHEMA_REGISTRY_URL",
        help="The schema registry, http://HOST:PORT (default: the bootstrap broker's port + 1001).",
    ),
]
TypeOption = Annotated[str, typer.Option("--type", help="AVRO, JSON or PROTOBUF.")]
VersionOption = Annotated[str, typer.Option("--version", help="A version number or latest.")]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def registry_url(ctx: typer.Context, given: str | None, bootstrap: str | None) -> str:
    if given:
        return given.rstrip("/")
    host, port = split_host_port(bootstrap_of(ctx, bootstrap).split(",")[0])
    return f"http://{host or '127.0.0.1'}:{port + REGISTRY_OFFSET}"


def call(base: str, method: str, path: str, body: Any = None) -> Any:
    """The registry's JSON answer; its error as a UserError naming Confluent's code."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data, method=method)
    request.add_header("Content-Type", CONTENT_TYPE)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        try:
            answer = json.loads(exc.read())
            reason = f"{answer['message']} (error {answer['error_code']})"
        except (ValueError, KeyError, TypeError):
            reason = f"HTTP {exc.code}"
        raise UserError(reason) from exc
    except (urllib.error.URLError, OSError) as exc:
        raise UserError(f"cannot reach the schema registry at {base}: {describe(exc)}") from exc


def _subject(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")


def _read_schema(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        raise UserError(f"cannot read {path}: {describe(exc)}") from exc


@schemas_app.command("list", help="List subjects with their latest version and schema id.")
def list_(
    ctx: typer.Context,
    bootstrap: BootstrapOption = None,
    registry: RegistryOption = None,
    deleted: Annotated[bool, typer.Option("--deleted", help="Also soft-deleted.")] = False,
    as_json: JsonFlag = False,
) -> None:
    base = registry_url(ctx, registry, bootstrap)
    suffix = "?deleted=true" if deleted else ""
    rows = []
    for subject in call(base, "GET", f"/subjects{suffix}"):
        latest = call(base, "GET", f"/subjects/{_subject(subject)}/versions/latest{suffix}")
        rows.append(
            {
                "subject": subject,
                "version": latest["version"],
                "id": latest["id"],
                "type": latest.get("schemaType", "AVRO"),
            }
        )
    if as_json:
        print_json(rows)
    else:
        print_table(["SUBJECT", "VERSION", "ID", "TYPE"], [list(r.values()) for r in rows])


@schemas_app.command(
    "describe", help="Show a subject's version (latest by default) and its schema."
)
def describe_(
    ctx: typer.Context,
    subject: Annotated[str, typer.Argument(help="The subject.")],
    bootstrap: BootstrapOption = None,
    registry: RegistryOption = None,
    version: VersionOption = "latest",
    as_json: JsonFlag = False,
) -> None:
    base = registry_url(ctx, registry, bootstrap)
    answer = call(base, "GET", f"/subjects/{_subject(subject)}/versions/{version}")
    if as_json:
        print_json(answer)
        return
    kind = answer.get("schemaType", "AVRO")
    say(f"subject {subject} version {answer['version']} id {answer['id']} type {kind}")
    try:
        say(json.dumps(json.loads(answer["schema"]), indent=2))
    except ValueError:
        say(answer["schema"])


@schemas_app.command(help="Register a schema file under a subject; prints its id.")
def register(
    ctx: typer.Context,
    subject: Annotated[str, typer.Argument(help="The subject.")],
    schema_file: Annotated[Path, typer.Argument(help="The schema (.avsc, .json, .proto).")],
    bootstrap: BootstrapOption = None,
    registry: RegistryOption = None,
    kind: TypeOption = "AVRO",
) -> None:
    base = registry_url(ctx, registry, bootstrap)
    body = {"schema": _read_schema(schema_file), "schemaType": kind.upper()}
    answer = call(base, "POST", f"/subjects/{_subject(subject)}/versions", body)
    say(f"registered under {subject}: id {answer['id']}")


@schemas_app.command(help="Delete a subject or one version (soft; --permanent after a soft one).")
def delete(
    ctx: typer.Context,
    subject: Annotated[str, typer.Argument(help="The subject.")],
    bootstrap: BootstrapOption = None,
    registry: RegistryOption = None,
    version: Annotated[
        str | None, typer.Option("--version", help="Only this version (or latest).")
    ] = None,
    permanent: Annotated[bool, typer.Option("--permanent", help="Remove for good.")] = False,
) -> None:
    base = registry_url(ctx, registry, bootstrap)
    path = f"/subjects/{_subject(subject)}"
    if version is not None:
        path += f"/versions/{version}"
    answer = call(base, "DELETE", path + ("?permanent=true" if permanent else ""))
    versions = answer if isinstance(answer, list) else [answer]
    how = "permanently deleted" if permanent else "deleted"
    say(f"{how} {subject} version(s) {', '.join(str(v) for v in versions)}")


@schemas_app.command(help="Would this schema file be accepted under the subject? Exit 1 if not.")
def compatibility(
    ctx: typer.Context,
    subject: Annotated[str, typer.Argument(help="The subject.")],
    schema_file: Annotated[Path, typer.Argument(help="The schema (.avsc, .json, .proto).")],
    bootstrap: BootstrapOption = None,
    registry: RegistryOption = None,
    kind: TypeOption = "AVRO",
    version: VersionOption = "latest",
) -> None:
    base = registry_url(ctx, registry, bootstrap)
    body = {"schema": _read_schema(schema_file), "schemaType": kind.upper()}
    path = f"/compatibility/subjects/{_subject(subject)}/versions/{version}?verbose=true"
    answer = call(base, "POST", path, body)
    if answer["is_compatible"]:
        say(f"compatible with {subject} version {version}")
        return
    for message in answer.get("messages", []):
        say(message)
    raise UserError(f"incompatible with {subject} version {version}")
