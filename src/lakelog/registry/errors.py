"""Confluent Schema Registry's errors: an HTTP status and a body
{"error_code": N, "message": ...} that clients turn into their own exceptions."""

from __future__ import annotations

SUBJECT_NOT_FOUND = 40401
VERSION_NOT_FOUND = 40402
SCHEMA_NOT_FOUND = 40403
SUBJECT_SOFT_DELETED = 40404
SUBJECT_NOT_SOFT_DELETED = 40405
VERSION_SOFT_DELETED = 40406
VERSION_NOT_SOFT_DELETED = 40407
SUBJECT_COMPATIBILITY_NOT_CONFIGURED = 40408
SUBJECT_MODE_NOT_CONFIGURED = 40409
INCOMPATIBLE_SCHEMA = 409
INVALID_SCHEMA = 42201
INVALID_VERSION = 42202
INVALID_COMPATIBILITY_LEVEL = 42203
INVALID_MODE = 42204
OPERATION_NOT_PERMITTED = 42205
REFERENCE_EXISTS = 42206
ID_DOES_NOT_MATCH = 42207
INVALID_SUBJECT = 42208
SCHEMA_TOO_LARGE = 42209
STORE_ERROR = 50001


class RegistryError(Exception):
    """An answer other than success; `status` is derived from the code as Confluent does
    (the first three digits), unless given."""

    def __init__(self, code: int, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status if status is not None else int(str(code)[:3])

    def body(self) -> dict[str, object]:
        return {"error_code": self.code, "message": self.message}


class InvalidSchema(RegistryError):
    def __init__(self, message: str) -> None:
        super().__init__(INVALID_SCHEMA, f"Invalid schema: {message}")
