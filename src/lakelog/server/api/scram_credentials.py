"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), KIP-554: SCRAM
users kept in the batch coordinator, so every broker's SASL listener knows them.

Validation follows Kafka's controller: an empty user name or a bad iteration count is
UNACCEPTABLE_CREDENTIAL, an unknown mechanism UNSUPPORTED_SASL_MECHANISM, a user changed
twice in one request (whatever the mechanisms) DUPLICATE_RESOURCE, deleting a credential
that does not exist RESOURCE_NOT_FOUND; each user gets one result row. The client sends
the salted password; the stored and server keys are derived here, and only they are kept.
"""

from __future__ import annotations

import datetime
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lakelog.coordinator.scram_types import ScramCredentialInfo, StoredScramCredential
from lakelog.security.acl import Operation
from lakelog.security.scram import MAX_ITERATIONS, MIN_ITERATIONS, keys_from_salted
from lakelog.server.api import authz
from lakelog.server.api.context import RequestContext, build
from lakelog.server.api.registry import handles
from lakelog.util.errors import ErrorCode

MECHANISMS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
MECHANISM_IDS = {name: key for key, name in MECHANISMS.items()}
ALTERED_TWICE = "A user credential cannot be altered twice in the same request"
DESCRIBED_TWICE = "Cannot describe SCRAM credentials for the same user twice in a single request: "
NOT_DESCRIBED = "Attempt to describe a user credential that does not exist: "
NOT_DELETED = "Attempt to delete a user credential that does not exist"

Failure = tuple[ErrorCode, str]


@dataclass(frozen=True, slots=True)
class AlterationPlan:
    deletions: dict[str, tuple[str, str]]
    """user -> (user, mechanism name)."""
    upsertions: dict[str, StoredScramCredential]
    errors: dict[str, Failure]


def _check_name_and_mechanism(name: str, mechanism: int) -> Failure | None:
    if not name:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    if mechanism not in MECHANISMS:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    return None


def _check_upsertion(upsertion: Any) -> Failure | None:
    failure = _check_name_and_mechanism(upsertion.name, upsertion.mechanism)
    if failure is not None:
        return failure
    if upsertion.iterations < MIN_ITERATIONS:
        return ErrorCode.unacceptable_credential, "Too few iterations"
    if upsertion.iterations > MAX_ITERATIONS:
        return ErrorCode.unacceptable_credential, "Too many iterations"
    return None


def plan_alterations(
    deletions: Sequence[Any], upsertions: Sequence[Any], existing: set[tuple[str, str]]
) -> AlterationPlan:
    """Kafka's order: deletions, then upsertions; a user keeps its first error, and a
    second change of a user still accepted turns it into DUPLICATE_RESOURCE.
    `existing` holds the (user, mechanism) credentials there are now."""
    to_delete: dict[str, tuple[str, str]] = {}
    to_upsert: dict[str, Any] = {}
    errors: dict[str, Failure] = {}
    for d in deletions:
        if d.name in errors:
            continue
        if to_delete.pop(d.name, None) is not None:
            errors[d.name] = (ErrorCode.duplicate_resource, ALTERED_TWICE)
            continue
        failure = _check_name_and_mechanism(d.name, d.mechanism)
        key = (d.name, MECHANISMS.get(d.mechanism, ""))
        if failure is None and key not in existing:
            failure = (ErrorCode.resource_not_found, NOT_DELETED)
        if failure is not None:
            errors[d.name] = failure
        else:
            to_delete[d.name] = key
    for u in upsertions:
        if u.name in errors:
            continue
        if to_delete.pop(u.name, None) is not None or to_upsert.pop(u.name, None) is not None:
            errors[u.name] = (ErrorCode.duplicate_resource, ALTERED_TWICE)
            continue
        failure = _check_upsertion(u)
        if failure is not None:
            errors[u.name] = failure
        else:
            to_upsert[u.name] = u
    stored = {name: _stored(u) for name, u in to_upsert.items()}
    return AlterationPlan(to_delete, stored, errors)


def _stored(upsertion: Any) -> StoredScramCredential:
    mechanism = MECHANISMS[upsertion.mechanism]
    stored_key, server_key = keys_from_salted(mechanism, bytes(upsertion.salted_password))
    return StoredScramCredential(
        upsertion.name,
        mechanism,
        int(upsertion.iterations),
        bytes(upsertion.salt),
        stored_key,
        server_key,
    )


CLUSTER_REFUSED = "Cluster authorization failed."
"""Kafka's message; librdkafka 2.16 also crashes on a top-level error without one."""


@handles(51, 0, 0)
async def alter_user_scram_credentials(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    if not authz.cluster_allowed(ctx, Operation.ALTER):
        # Kafka: ALTER on the cluster, else every user named is refused
        named = dict.fromkeys(x.name for x in (*request.deletions, *request.upsertions))
        return build(
            m.AlterUserScramCredentialsResponse,
            throttle_time=datetime.timedelta(0),
            results=tuple(
                build(
                    m.AlterUserScramCredentialsResult,
                    user=user,
                    error_code=ErrorCode.cluster_authorization_failed,
                    error_message=CLUSTER_REFUSED,
                )
                for user in named
            ),
        )
    coordinator = ctx.broker.coordinator
    users = sorted({d.name for d in request.deletions if d.name})
    existing = {
        (info.user, info.mechanism)
        for info in (await coordinator.describe_scram_credentials(users) if users else [])
    }
    plan = plan_alterations(request.deletions, request.upsertions, existing)
    missing = await coordinator.alter_scram_credentials(
        list(plan.deletions.values()), list(plan.upsertions.values())
    )
    errors = dict(plan.errors)
    for user, _mechanism in missing:  # deleted by someone else meanwhile
        errors[user] = (ErrorCode.resource_not_found, NOT_DELETED)
    changed = [*plan.deletions, *plan.upsertions]
    credentials = getattr(ctx.broker.server, "login_credentials", None)
    if credentials is not None:
        credentials.forget(changed)
    results = [
        build(
            m.AlterUserScramCredentialsResult,
            user=user,
            error_code=ErrorCode.none,
            error_message=None,
        )
        for user in changed
        if user not in errors
    ]
    results += [
        build(m.AlterUserScramCredentialsResult, user=user, error_code=code, error_message=text)
        for user, (code, text) in errors.items()
    ]
    return build(
        m.AlterUserScramCredentialsResponse,
        throttle_time=datetime.timedelta(0),
        results=tuple(results),
    )


@handles(50, 0, 0)
async def describe_user_scram_credentials(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    if not authz.cluster_allowed(ctx, Operation.DESCRIBE):
        return build(
            m.DescribeUserScramCredentialsResponse,
            throttle_time=datetime.timedelta(0),
            error_code=ErrorCode.cluster_authorization_failed,
            error_message=CLUSTER_REFUSED,
            # and each user asked for, as Kafka's error response does
            results=tuple(
                _error(m, u.name, ErrorCode.cluster_authorization_failed, CLUSTER_REFUSED)
                for u in request.users or ()
            ),
        )
    coordinator = ctx.broker.coordinator
    asked = [u.name for u in request.users] if request.users else None
    results: list[Any] = []
    if asked is None:
        found = _by_user(await coordinator.describe_scram_credentials(None))
        results = [_described(m, user, infos) for user, infos in found.items()]
    else:
        counts = Counter(asked)
        unique = [user for user in dict.fromkeys(asked) if counts[user] == 1]
        found = _by_user(await coordinator.describe_scram_credentials(unique))
        for user in dict.fromkeys(asked):
            if counts[user] > 1:
                results.append(
                    _error(m, user, ErrorCode.duplicate_resource, DESCRIBED_TWICE + user)
                )
            elif user in found:
                results.append(_described(m, user, found[user]))
            else:
                results.append(_error(m, user, ErrorCode.resource_not_found, NOT_DESCRIBED + user))
    return build(
        m.DescribeUserScramCredentialsResponse,
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        error_message=None,
        results=tuple(results),
    )


def _by_user(infos: Sequence[ScramCredentialInfo]) -> dict[str, list[ScramCredentialInfo]]:
    out: dict[str, list[ScramCredentialInfo]] = {}
    for info in infos:
        out.setdefault(info.user, []).append(info)
    return out


def _described(m: Any, user: str, infos: Sequence[ScramCredentialInfo]) -> Any:
    return build(
        m.DescribeUserScramCredentialsResult,
        user=user,
        error_code=ErrorCode.none,
        error_message=None,
        credential_infos=tuple(
            build(m.CredentialInfo, mechanism=MECHANISM_IDS[i.mechanism], iterations=i.iterations)
            for i in infos
            if i.mechanism in MECHANISM_IDS
        ),
    )


def _error(m: Any, user: str, code: ErrorCode, message: str) -> Any:
    return build(
        m.DescribeUserScramCredentialsResult,
        user=user,
        error_code=code,
        error_message=message,
        credential_infos=(),
    )
