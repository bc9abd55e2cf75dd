"""Who may use the registry: HTTP basic auth against the SCRAM users stored in the
coordinator (`schema_registry_auth = "basic"`), and, when the broker's authorizer is on,
its ACLs. Kafka has no registry resources, so a subject maps to a TOPIC resource, as
Confluent's RBAC maps its roles to a Subject resource:

- subject `<t>-key` / `<t>-value` is topic `<t>`; any other subject (record name
  strategies) is the topic of its own name;
- reading a subject (versions, lookup, compatibility checks) needs DESCRIBE on it (READ,
  WRITE, DELETE and ALTER imply DESCRIBE, as in Kafka); registering needs WRITE (what a
  producer that registers its schema has); deleting needs DELETE; a subject's
  compatibility or mode needs ALTER_CONFIGS on it; the global ones ALTER_CONFIGS on the
  CLUSTER; a schema by id needs DESCRIBE on one of the subjects that use it.

A checked password is remembered (by a hash of user and password) for CACHE_TTL_S, so a
client's keep-alive requests cost one PBKDF2 per interval, not one each."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from collections import OrderedDict
from collections.abc import Iterable

from lakelog.coordinator.interface import BatchCoordinator
from lakelog.registry.errors import RegistryError
from lakelog.security.acl import CLUSTER_NAME, Operation, ResourceType
from lakelog.security.authorizer import Authorizer
from lakelog.security.scram import HASHES, keys_from_salted, salted_password

CACHE_TTL_S = 60.0
MAX_CACHED = 10_000
MAX_HEADER = 4096
ANONYMOUS = "User:ANONYMOUS"


def subject_topic(subject: str) -> str:
    for suffix in ("-key", "-value"):
        if subject.endswith(suffix) and len(subject) > len(suffix):
            return subject[: -len(suffix)]
    return subject


def _unauthorized(message: str) -> RegistryError:
    return RegistryError(40101, message, 401)


def _forbidden(message: str) -> RegistryError:
    return RegistryError(40301, message, 403)


class Access:
    def __init__(
        self, coordinator: BatchCoordinator, authorizer: Authorizer | None, basic_auth: bool
    ) -> None:
        self._coordinator = coordinator
        self._authorizer = authorizer
        self.basic_auth = basic_auth
        self._verified: OrderedDict[bytes, float] = OrderedDict()

    async def principal(self, authorization: str | None) -> str:
        """`User:<name>` of a request's basic auth (ANONYMOUS when auth is off)."""
        if not self.basic_auth:
            return ANONYMOUS
        if not authorization or not authorization.lower().startswith("basic "):
            raise _unauthorized("Unauthorized: HTTP basic auth required")
        if len(authorization) > MAX_HEADER:
            raise _unauthorized("Unauthorized: credentials too long")
        try:
            user, sep, password = (
                base64.b64decode(authorization[6:].strip()).decode().partition(":")
            )
        except (binascii.Error, UnicodeDecodeError, ValueError):
            raise _unauthorized("Unauthorized: malformed basic auth") from None
        if not sep or not user:
            raise _unauthorized("Unauthorized: malformed basic auth")
        key = hashlib.sha256(f"{user}\0{password}".encode()).digest()
        seen = self._verified.get(key)
        if seen is None or time.monotonic() - seen > CACHE_TTL_S:
            if not await self._check(user, password):
                raise _unauthorized("Unauthorized: bad user or password")
            self._verified[key] = time.monotonic()
            self._verified.move_to_end(key)
            while len(self._verified) > MAX_CACHED:
                self._verified.popitem(last=False)
        return f"User:{user}"

    async def _check(self, user: str, password: str) -> bool:
        for mechanism in HASHES:
            stored = await self._coordinator.scram_credential(user, mechanism)
            if stored is None:
                continue
            salted = salted_password(mechanism, password, stored.salt, stored.iterations)
            stored_key, _ = keys_from_salted(mechanism, salted)
            return hmac.compare_digest(stored_key, stored.stored_key)
        return False

    def _allowed(
        self, principal: str, host: str, kind: ResourceType, name: str, op: Operation
    ) -> bool:
        if self._authorizer is None:
            return True
        return self._authorizer.allowed(principal, host, kind, name, op)

    def may(self, principal: str, host: str, subject: str, op: Operation) -> bool:
        return self._allowed(principal, host, ResourceType.TOPIC, subject_topic(subject), op)

    def require(self, principal: str, host: str, subject: str, op: Operation) -> None:
        if not self.may(principal, host, subject, op):
            raise _forbidden(f"User is denied operation {op.name} on subject {subject}")

    def require_global(self, principal: str, host: str, op: Operation) -> None:
        if not self._allowed(principal, host, ResourceType.CLUSTER, CLUSTER_NAME, op):
            raise _forbidden(f"User is denied operation {op.name} on the registry's settings")

    def any_subject(self, principal: str, host: str, subjects: Iterable[str]) -> bool:
        return any(self.may(principal, host, s, Operation.DESCRIBE) for s in subjects)
