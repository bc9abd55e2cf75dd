"""SCRAM users through the Kafka API (KIP-554), for `lakelog configs --entity-type users`:
describe and alter in kafka-configs.sh's vocabulary (`SCRAM-SHA-256=[iterations=8192,
password=secret]`). The password is salted here; only the salted password travels."""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from lakelog.admin.client import AdminClient
from lakelog.admin.tools import call
from lakelog.admin.wire import KafkaError
from lakelog.security.scram import DEFAULT_ITERATIONS, HASHES, salted_password
from lakelog.util.errors import ErrorCode

DESCRIBE, ALTER = 50, 51
MECHANISM_IDS = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
MECHANISM_NAMES = {v: k for k, v in MECHANISM_IDS.items()}


@dataclass(frozen=True, slots=True)
class ScramUpsert:
    mechanism: str
    password: str
    iterations: int = DEFAULT_ITERATIONS

    def __repr__(self) -> str:  # the password stays out of tracebacks
        return f"ScramUpsert({self.mechanism}, iterations={self.iterations})"


def parse_scram_config(mechanism: str, value: str) -> ScramUpsert:
    """`iterations=8192,password=secret` (kafka-configs' bracketed value) for a mechanism;
    ValueError names what is wrong, never the password."""
    if mechanism not in HASHES:
        raise ValueError(f"{mechanism}: expected one of {', '.join(HASHES)}")
    fields: dict[str, str] = {}
    for part in value.split(","):
        key, sep, item = part.partition("=")
        if not sep or key.strip() not in ("iterations", "password"):
            raise ValueError(f"{mechanism}: expected [iterations=N,]password=SECRET")
        fields[key.strip()] = item
    if "password" not in fields:
        raise ValueError(f"{mechanism}: a password is required")
    iterations = fields.get("iterations", str(DEFAULT_ITERATIONS)).strip()
    if not iterations.isdigit():
        raise ValueError(f"{mechanism}: iterations must be a number")
    return ScramUpsert(mechanism, fields["password"], int(iterations))


async def describe_scram_users(
    client: AdminClient, users: Sequence[str] | None
) -> dict[str, list[tuple[str, int]]]:
    """{user: [(mechanism, iterations)]}; KafkaError for an unknown user."""

    def make(m: ModuleType, _version: int) -> Any:
        names = None if users is None else tuple(m.UserName(name=u) for u in users)
        return m.DescribeUserScramCredentialsRequest(users=names)

    response, _ = await call(client, DESCRIBE, make)
    if response.error_code != ErrorCode.none:
        raise KafkaError(response.error_code, response.error_message)
    out: dict[str, list[tuple[str, int]]] = {}
    for result in response.results:
        if result.error_code != ErrorCode.none:
            raise KafkaError(result.error_code, result.error_message or result.user)
        out[result.user] = [
            (MECHANISM_NAMES.get(i.mechanism, str(i.mechanism)), i.iterations)
            for i in result.credential_infos
        ]
    return out


async def alter_scram_users(
    client: AdminClient,
    upserts: Mapping[str, Sequence[ScramUpsert]],
    deletes: Mapping[str, Sequence[str]],
) -> None:
    """One AlterUserScramCredentials request, as kafka-configs.sh sends it; KafkaError
    with the first user's error (the broker refuses two changes of one user at once)."""

    def make(m: ModuleType, _version: int) -> Any:
        ups = []
        for user, items in upserts.items():
            for item in items:
                salt = secrets.token_bytes(32)
                ups.append(
                    m.ScramCredentialUpsertion(
                        name=user,
                        mechanism=MECHANISM_IDS[item.mechanism],
                        iterations=item.iterations,
                        salt=salt,
                        salted_password=salted_password(
                            item.mechanism, item.password, salt, item.iterations
                        ),
                    )
                )
        dels = [
            m.ScramCredentialDeletion(name=user, mechanism=MECHANISM_IDS.get(mech, 0))
            for user, mechanisms in deletes.items()
            for mech in mechanisms
        ]
        return m.AlterUserScramCredentialsRequest(deletions=tuple(dels), upsertions=tuple(ups))

    response, _ = await call(client, ALTER, make)
    for result in response.results:
        if result.error_code != ErrorCode.none:
            raise KafkaError(result.error_code, f"user {result.user}: {result.error_message}")
