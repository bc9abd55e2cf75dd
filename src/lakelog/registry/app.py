"""Confluent Schema Registry's REST API as a Starlette app. Every answer is JSON of
content type application/vnd.schemaregistry.v1+json; every failure is Confluent's error
body, including bad JSON, a body over the size cap, unknown routes and a coordinator that
does not answer (never a traceback)."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from lakelog.registry import errors as e
from lakelog.registry.access import Access
from lakelog.registry.errors import RegistryError
from lakelog.registry.service import FORMATS, SchemaRegistry, check_subject, parse_version
from lakelog.security.acl import Operation

log = logging.getLogger(__name__)

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
Handler = Callable[[Request], Awaitable[Any]]


def _json(body: Any, status: int = 200) -> Response:
    return Response(json.dumps(body), status, media_type=CONTENT_TYPE)


def _error(exc: RegistryError) -> Response:
    return _json(exc.body(), exc.status)


def _flag(request: Request, name: str) -> bool:
    return request.query_params.get(name, "false").lower() == "true"


def _schema_id(request: Request) -> int:
    text = request.path_params["id"]
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 < value < 2**31:
        raise RegistryError(e.SCHEMA_NOT_FOUND, f"Schema {text[:40]} not found")
    return value


def build_app(
    registry: SchemaRegistry, max_body_bytes: int, access: Access | None = None
) -> Starlette:
    guard = access or Access(registry.coordinator, None, basic_auth=False)

    def who(request: Request) -> tuple[str, str]:
        return request.state.principal, request.client.host if request.client else ""

    def need(request: Request, op: Operation) -> None:
        """The request's subject needs `op`; without a subject, the global settings."""
        principal, host = who(request)
        subject = request.path_params.get("subject")
        if subject is None:
            guard.require_global(principal, host, op)
        else:
            guard.require(principal, host, subject, op)

    async def need_schema(request: Request, schema_id: int) -> None:
        principal, host = who(request)
        usages = await registry.schema_usages(schema_id, True)
        if not guard.any_subject(principal, host, {u.subject for u in usages}):
            raise RegistryError(40301, f"User is denied access to schema {schema_id}", 403)

    async def body(request: Request) -> Any:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > max_body_bytes:
            raise RegistryError(413, f"Request body larger than {max_body_bytes} bytes", 413)
        chunks: list[bytes] = []
        size = 0
        try:
            async for chunk in request.stream():
                size += len(chunk)
                if size > max_body_bytes:
                    raise RegistryError(
                        413, f"Request body larger than {max_body_bytes} bytes", 413
                    )
                chunks.append(chunk)
        except ClientDisconnect as exc:
            raise RegistryError(400, "The request body ended early", 400) from exc
        try:
            value = json.loads(b"".join(chunks) or b"null")
            # JSON may spell a lone UTF-16 surrogate ("\ud800"), which no UTF-8 text, file
            # or database column can hold: refused here, not wherever it would break.
            json.dumps(value, ensure_ascii=False).encode()
        except ValueError as exc:  # UnicodeError is a ValueError
            raise RegistryError(400, f"Unexpected request body: {exc}", 400) from exc
        except RecursionError as exc:
            raise RegistryError(400, "Unexpected request body: nested too deep", 400) from exc
        return value

    def route(path: str, method: str, handler: Handler) -> Route:
        async def endpoint(request: Request) -> Response:
            try:
                request.state.principal = await guard.principal(
                    request.headers.get("authorization")
                )
                if "subject" in request.path_params:
                    check_subject(request.path_params["subject"])
                answer = await handler(request)
            except RegistryError as exc:
                return _error(exc)
            except Exception:
                log.exception("schema registry: %s %s failed", request.method, request.url.path)
                return _error(RegistryError(e.STORE_ERROR, "Error in the backend data store", 500))
            if isinstance(answer, Response):
                return answer
            return _json(answer)

        async def challenged(request: Request) -> Response:
            response = await endpoint(request)
            if response.status_code == 401:
                response.headers["WWW-Authenticate"] = 'Basic realm="lakelog schema registry"'
            return response

        return Route(path, challenged if guard.basic_auth else endpoint, methods=[method])

    async def subject_versions(request: Request) -> Any:
        need(request, Operation.DESCRIBE)
        return await registry.versions(request.path_params["subject"], _flag(request, "deleted"))

    async def register(request: Request) -> Any:
        need(request, Operation.WRITE)
        return await registry.register(
            request.path_params["subject"], await body(request), _flag(request, "normalize")
        )

    async def get_version(request: Request) -> Any:
        need(request, Operation.DESCRIBE)
        return await registry.get_version(
            request.path_params["subject"],
            parse_version(request.path_params["version"]),
            _flag(request, "deleted"),
            request.query_params.get("format"),
        )

    async def get_version_schema(request: Request) -> Any:
        answer = await get_version(request)
        return Response(answer["schema"], media_type=CONTENT_TYPE)

    async def referenced_by(request: Request) -> Any:
        need(request, Operation.DESCRIBE)
        return await registry.referenced_by(
            request.path_params["subject"], parse_version(request.path_params["version"])
        )

    async def lookup(request: Request) -> Any:
        need(request, Operation.DESCRIBE)
        return await registry.lookup(
            request.path_params["subject"],
            await body(request),
            _flag(request, "deleted"),
            _flag(request, "normalize"),
        )

    async def delete_subject(request: Request) -> Any:
        need(request, Operation.DELETE)
        return await registry.delete_subject(
            request.path_params["subject"], _flag(request, "permanent")
        )

    async def delete_version(request: Request) -> Any:
        need(request, Operation.DELETE)
        return await registry.delete_version(
            request.path_params["subject"],
            parse_version(request.path_params["version"]),
            _flag(request, "permanent"),
        )

    async def subjects(request: Request) -> Any:
        principal, host = who(request)
        found = await registry.subjects(
            _flag(request, "deleted"), request.query_params.get("subjectPrefix", "")
        )
        return [s for s in found if guard.may(principal, host, s, Operation.DESCRIBE)]

    async def schema_by_id(request: Request) -> Any:
        await need_schema(request, _schema_id(request))
        return await registry.schema_by_id(_schema_id(request), request.query_params.get("format"))

    async def schema_text(request: Request) -> Any:
        await need_schema(request, _schema_id(request))
        answer = await registry.schema_by_id(_schema_id(request), None)
        return Response(answer["schema"], media_type=CONTENT_TYPE)

    async def schema_subjects(request: Request) -> Any:
        await need_schema(request, _schema_id(request))
        usages = await registry.schema_usages(_schema_id(request), _flag(request, "deleted"))
        return sorted({u.subject for u in usages})

    async def schema_versions(request: Request) -> Any:
        await need_schema(request, _schema_id(request))
        usages = await registry.schema_usages(_schema_id(request), _flag(request, "deleted"))
        return [{"subject": u.subject, "version": u.version} for u in usages]

    async def schema_types(request: Request) -> Any:
        return sorted(FORMATS)

    def subject_of(request: Request) -> str:
        return request.path_params.get("subject", "")

    async def get_config(request: Request) -> Any:
        return await registry.get_config(subject_of(request), _flag(request, "defaultToGlobal"))

    async def put_config(request: Request) -> Any:
        need(request, Operation.ALTER_CONFIGS)
        return await registry.set_config(subject_of(request), await body(request))

    async def delete_config(request: Request) -> Any:
        need(request, Operation.ALTER_CONFIGS)
        return await registry.delete_config(subject_of(request))

    async def get_mode(request: Request) -> Any:
        return await registry.get_mode(subject_of(request), _flag(request, "defaultToGlobal"))

    async def put_mode(request: Request) -> Any:
        need(request, Operation.ALTER_CONFIGS)
        return await registry.set_mode(
            subject_of(request), await body(request), _flag(request, "force")
        )

    async def delete_mode(request: Request) -> Any:
        need(request, Operation.ALTER_CONFIGS)
        return await registry.delete_mode(subject_of(request))

    async def compatibility(request: Request) -> Any:
        need(request, Operation.DESCRIBE)
        raw = request.path_params.get("version")
        return await registry.check_compatibility(
            request.path_params["subject"],
            None if raw is None else parse_version(raw),
            await body(request),
            _flag(request, "verbose"),
        )

    async def root(request: Request) -> Any:
        return {}

    # A subject may hold "/" (sent as %2F, as confluent-kafka's client sends every subject,
    # and decoded before routing), hence the path converter. Starlette takes the first route
    # that matches path and method, so the longer routes of a subject come before the
    # shorter ones ("/subjects/a/versions" is not the lookup of subject "a/versions").
    routes = [
        route("/", "GET", root),
        route("/subjects", "GET", subjects),
        route("/subjects/{subject:path}/versions", "GET", subject_versions),
        route("/subjects/{subject:path}/versions", "POST", register),
        route("/subjects/{subject:path}/versions/{version}", "GET", get_version),
        route("/subjects/{subject:path}/versions/{version}", "DELETE", delete_version),
        route("/subjects/{subject:path}/versions/{version}/schema", "GET", get_version_schema),
        route("/subjects/{subject:path}/versions/{version}/referencedby", "GET", referenced_by),
        route("/subjects/{subject:path}", "POST", lookup),
        route("/subjects/{subject:path}", "DELETE", delete_subject),
        route("/schemas/types", "GET", schema_types),
        route("/schemas/ids/{id}", "GET", schema_by_id),
        route("/schemas/ids/{id}/schema", "GET", schema_text),
        route("/schemas/ids/{id}/subjects", "GET", schema_subjects),
        route("/schemas/ids/{id}/versions", "GET", schema_versions),
        route("/config", "GET", get_config),
        route("/config", "PUT", put_config),
        route("/config", "DELETE", delete_config),
        route("/config/{subject:path}", "GET", get_config),
        route("/config/{subject:path}", "PUT", put_config),
        route("/config/{subject:path}", "DELETE", delete_config),
        route("/mode", "GET", get_mode),
        route("/mode", "PUT", put_mode),
        route("/mode/{subject:path}", "GET", get_mode),
        route("/mode/{subject:path}", "PUT", put_mode),
        route("/mode/{subject:path}", "DELETE", delete_mode),
        route("/compatibility/subjects/{subject:path}/versions", "POST", compatibility),
        route("/compatibility/subjects/{subject:path}/versions/{version}", "POST", compatibility),
    ]

    async def http_error(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        detail = exc.detail if isinstance(exc, HTTPException) else "Internal Server Error"
        return _json({"error_code": status, "message": f"HTTP {status} {detail}"}, status)

    return Starlette(
        routes=routes,
        exception_handlers={HTTPException: http_error},
        middleware=[Middleware(DropUndeliverable)],
    )


class DropUndeliverable:
    """An answer the connection can no longer carry is dropped, not raised: a client that
    sends garbage after a request (or a body shorter than it said) gets HTTP's 400 from the
    server before the app answers, and the app's answer then has nowhere to go. Raised, it
    would be logged as an exception of the app."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        gone = False

        async def guarded(message: Message) -> None:
            nonlocal gone
            if gone:
                return
            try:
                await send(message)
            except Exception as exc:  # h11's LocalProtocolError, a closed transport
                gone = True
                log.debug("schema registry: answer dropped (%r)", exc)

        await self.app(scope, receive, guarded)
