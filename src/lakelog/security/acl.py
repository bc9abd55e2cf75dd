"""Kafka's ACL model and the authorization decision, with no I/O.

The rules are those of Kafka's StandardAuthorizer: a DENY that matches wins; otherwise an
ALLOW that matches (directly, through ALL, or through an operation that implies the one
asked for) allows; a resource with no ACL at all falls back to
`allow.everyone.if.no.acl.found`; super users are always allowed.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"

STORED_RESOURCE_TYPES = frozenset(
    {ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID}
)
"""Resource types an ACL may name here (delegation tokens and users are not served)."""

IMPLIED_BY: dict[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset(
        {Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}
    ),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS}),
}
"""An ALLOW of any of these operations allows the key (Kafka's implied operations)."""

OPERATIONS_OF: dict[ResourceType, tuple[Operation, ...]] = {
    ResourceType.TOPIC: (
        Operation.READ,
        Operation.WRITE,
        Operation.CREATE,
        Operation.DELETE,
        Operation.ALTER,
        Operation.DESCRIBE,
        Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (Operation.READ, Operation.DESCRIBE, Operation.DELETE),
    ResourceType.CLUSTER: (
        Operation.CREATE,
        Operation.ALTER,
        Operation.DESCRIBE,
        Operation.CLUSTER_ACTION,
        Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS,
        Operation.IDEMPOTENT_WRITE,
    ),
    ResourceType.TRANSACTIONAL_ID: (Operation.DESCRIBE, Operation.WRITE),
}
"""The operations each resource type supports (KIP-430 authorized operations)."""


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One stored ACL: who may (or may not) do what, from where, on which resources."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission

    def __str__(self) -> str:
        """As kafka-acls prints one, for log lines."""
        return (
            f"{self.permission.name} {self.principal} from {self.host} to"
            f" {self.operation.name} {self.resource_type.name}"
            f" {self.pattern_type.name}:{self.resource_name}"
        )


@dataclass(frozen=True, slots=True)
class AclFilter:
    """What DescribeAcls and DeleteAcls select: None matches any name, principal, host;
    ANY matches any enum; pattern MATCH selects every ACL that applies to the name. A
    principal is compared as written, as Kafka does: `User:*` selects the ACLs for everyone,
    not every ACL."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY


class InvalidAcl(ValueError):
    """An ACL or filter Kafka refuses with INVALID_REQUEST (the message says why)."""


def parse_principal(principal: str) -> tuple[str, str]:
    """(type, name) of `Type:name`, or InvalidAcl."""
    kind, sep, name = principal.partition(":")
    if not sep or not kind:
        raise InvalidAcl(f"Could not parse principal from `{principal}` (no colon is found)")
    return kind, name


def check_binding(binding: AclBinding) -> None:
    """Raise InvalidAcl for what Kafka's controller refuses in CreateAcls."""
    if binding.resource_type not in STORED_RESOURCE_TYPES:
        raise InvalidAcl(f"Invalid resource type {binding.resource_type.name}")
    if binding.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise InvalidAcl(f"Invalid patternType {binding.pattern_type.name}")
    if binding.operation in (Operation.UNKNOWN, Operation.ANY):
        raise InvalidAcl(f"Invalid operation {binding.operation.name}")
    if binding.permission not in (Permission.ALLOW, Permission.DENY):
        raise InvalidAcl(f"Invalid permissionType {binding.permission.name}")
    if not binding.resource_name:
        raise InvalidAcl("Resource name should not be empty")
    if binding.resource_type == ResourceType.CLUSTER and binding.resource_name != CLUSTER_NAME:
        raise InvalidAcl(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if binding.operation not in (Operation.ALL, *OPERATIONS_OF[binding.resource_type]):
        raise InvalidAcl(
            f"Operation {binding.operation.name} is not valid for {binding.resource_type.name}"
        )
    parse_principal(binding.principal)
    if not binding.host:
        raise InvalidAcl("Host should not be empty")


def check_filter(acl_filter: AclFilter) -> None:
    """Raise InvalidAcl for a filter with an UNKNOWN part (Kafka: INVALID_REQUEST).

    The principal and host are not checked: Kafka's DescribeAcls and DeleteAcls compare
    them as strings with the stored ACLs' (AccessControlEntryFilter.matches), so a filter
    principal such as `*` or `nobody` is accepted and selects no ACL (no stored ACL can
    have it: CreateAcls insists on `Type:name`), and `User:*` selects the ACLs for
    everyone."""
    unknown = (
        acl_filter.resource_type == ResourceType.UNKNOWN
        or acl_filter.pattern_type == PatternType.UNKNOWN
        or acl_filter.operation == Operation.UNKNOWN
        or acl_filter.permission == Permission.UNKNOWN
    )
    if unknown:
        raise InvalidAcl("The filter contains UNKNOWN elements")


def pattern_matches(pattern_type: PatternType, pattern: str, name: str) -> bool:
    """Whether a stored resource pattern applies to the resource `name`."""
    if pattern_type == PatternType.LITERAL:
        return pattern in (WILDCARD, name)
    if pattern_type == PatternType.PREFIXED:
        return name.startswith(pattern)
    return False


def filter_matches(acl_filter: AclFilter, binding: AclBinding) -> bool:
    """Whether DescribeAcls/DeleteAcls' `acl_filter` selects `binding`."""
    f = acl_filter
    if f.resource_type != ResourceType.ANY and f.resource_type != binding.resource_type:
        return False
    if f.pattern_type == PatternType.MATCH:
        if f.resource_name is not None and not pattern_matches(
            binding.pattern_type, binding.resource_name, f.resource_name
        ):
            return False
    else:
        if f.pattern_type != PatternType.ANY and f.pattern_type != binding.pattern_type:
            return False
        if f.resource_name is not None and f.resource_name != binding.resource_name:
            return False
    if f.principal is not None and f.principal != binding.principal:
        return False
    if f.host is not None and canonical_host(f.host) != canonical_host(binding.host):
        return False
    if f.operation != Operation.ANY and f.operation != binding.operation:
        return False
    return f.permission == Permission.ANY or f.permission == binding.permission


@dataclass(frozen=True, slots=True)
class Policy:
    """The authorizer's settings."""

    super_users: frozenset[str] = frozenset()
    allow_if_no_acl: bool = False


def parse_super_users(value: str) -> frozenset[str]:
    """`super.users`: principals separated by semicolons."""
    return frozenset(p.strip() for p in value.split(";") if p.strip())


class AclIndex:
    """The ACL set arranged for decisions: literal ACLs by (type, name), prefixed ACLs by
    (type, prefix) with the prefix lengths in use, so a check costs a few dict lookups
    however many ACLs there are (Metadata checks every topic of the cluster)."""

    __slots__ = ("_literal", "_prefix_lengths", "_prefixed", "bindings")

    def __init__(self, bindings: Iterable[AclBinding] = ()) -> None:
        self.bindings: tuple[AclBinding, ...] = tuple(bindings)
        self._literal: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        self._prefixed: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        lengths: dict[ResourceType, set[int]] = {}
        for b in self.bindings:
            key = (b.resource_type, b.resource_name)
            if b.pattern_type == PatternType.LITERAL:
                self._literal.setdefault(key, []).append(b)
            elif b.pattern_type == PatternType.PREFIXED:
                self._prefixed.setdefault(key, []).append(b)
                lengths.setdefault(b.resource_type, set()).add(len(b.resource_name))
        self._prefix_lengths = {kind: sorted(found) for kind, found in lengths.items()}

    def applying(self, resource_type: ResourceType, name: str) -> list[AclBinding]:
        """The ACLs whose resource pattern applies to the resource."""
        found = list(self._literal.get((resource_type, name), ()))
        if name != WILDCARD:
            found.extend(self._literal.get((resource_type, WILDCARD), ()))
        for length in self._prefix_lengths.get(resource_type, ()):
            if length > len(name):
                break
            found.extend(self._prefixed.get((resource_type, name[:length]), ()))
        return found


@functools.lru_cache(maxsize=4096)
def canonical_host(host: str) -> str:
    """One spelling per IP address, so an ACL matches however its address was written:
    "0:0:0:0:0:0:0:1" (Java's form, in Kafka's docs and tools) is "::1", and an IPv4-mapped
    IPv6 peer (a dual-stack listener's IPv4 client) is its IPv4 address, as Kafka sees it.
    Anything that is not an address compares as written."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


def authorize(
    index: AclIndex,
    policy: Policy,
    principal: str,
    host: str,
    resource_type: ResourceType,
    name: str,
    operation: Operation,
) -> bool:
    """Kafka's decision for one action by `principal` connected from `host`."""
    if principal in policy.super_users:
        return True
    acls = index.applying(resource_type, name)
    if not acls:
        return policy.allow_if_no_acl
    implied = IMPLIED_BY.get(operation, frozenset({operation}))
    allowed = False
    for acl in acls:
        if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
            continue
        if acl.host != WILDCARD and canonical_host(acl.host) != canonical_host(host):
            continue
        if acl.permission == Permission.DENY:
            if acl.operation == operation or acl.operation == Operation.ALL:
                return False
        elif acl.operation == Operation.ALL or acl.operation in implied:
            allowed = True
    return allowed


def authorized_operations(
    index: AclIndex,
    policy: Policy,
    principal: str,
    host: str,
    resource_type: ResourceType,
    name: str,
) -> int:
    """KIP-430's bit field: bit `op` set for each operation the principal may do."""
    bits = 0
    for op in OPERATIONS_OF[resource_type]:
        if authorize(index, policy, principal, host, resource_type, name, op):
            bits |= 1 << op
    return bits


def all_operations(resource_type: ResourceType) -> int:
    """The bit field with every operation of the resource type (no authorizer)."""
    return sum(1 << op for op in OPERATIONS_OF[resource_type])
