"""The Iceberg REST catalog's error model: an HTTP status and a body
`{"error": {"message", "type", "code"}}` that every client turns into its own exception
(NoSuchTableException, ForbiddenException, ...)."""

from __future__ import annotations

import json

from starlette.responses import Response


class IcebergError(Exception):
    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message

    def response(self, head: bool = False) -> Response:
        if head:  # HEAD answers carry no body
            return Response(status_code=self.status)
        body = {"error": {"message": self.message, "type": self.kind, "code": self.status}}
        return Response(json.dumps(body), self.status, media_type="application/json")


def bad_request(message: str) -> IcebergError:
    return IcebergError(400, "BadRequestException", message)


def not_authorized(message: str) -> IcebergError:
    return IcebergError(401, "NotAuthorizedException", message)


def forbidden(message: str) -> IcebergError:
    return IcebergError(403, "ForbiddenException", message)


def no_such_namespace(namespace: str) -> IcebergError:
    return IcebergError(404, "NoSuchNamespaceException", f"Namespace does not exist: {namespace}")


def no_such_table(name: str) -> IcebergError:
    return IcebergError(404, "NoSuchTableException", f"Table does not exist: {name}")


def no_such_view(name: str) -> IcebergError:
    return IcebergError(404, "NoSuchViewException", f"View does not exist: {name}")


def read_only(what: str) -> IcebergError:
    return IcebergError(
        406,
        "UnsupportedOperationException",
        f"{what}: this catalog is read-only (tables are written by `lakelog pipeline tables`)",
    )


def unavailable(message: str) -> IcebergError:
    return IcebergError(503, "ServiceUnavailableException", message)


def server_error(message: str) -> IcebergError:
    return IcebergError(500, "ServerErrorException", message)
