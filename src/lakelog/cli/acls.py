"""`lakelog acls`, Kafka's kafka-acls.sh: add, remove and list ACLs over the Kafka
protocol (CreateAcls, DeleteAcls, DescribeAcls), in kafka-acls' words."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Annotated, Any

import typer

from lakelog.admin.client import AdminClient
from lakelog.cli.common import (
    BootstrapOption,
    CommandConfigOption,
    UserError,
    bootstrap_of,
    print_json,
    run_admin,
    say,
    use_command_config,
    waiting,
)
from lakelog.security.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclFilter,
    InvalidAcl,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    check_binding,
    parse_principal,
)

PATTERN_TYPES = {
    "literal": PatternType.LITERAL,
    "prefixed": PatternType.PREFIXED,
    "match": PatternType.MATCH,
    "any": PatternType.ANY,
}
OPERATIONS = {op.name.replace("_", "").lower(): op for op in Operation if op.value >= 2}
"""kafka-acls' operation names (Read, Write, DescribeConfigs, IdempotentWrite, All...),
matched without case or underscores."""
Resource = tuple[ResourceType, str]

Repeated = list[str] | None


def parse_operation(name: str) -> Operation:
    op = OPERATIONS.get(name.replace("_", "").replace("-", "").lower())
    if op is None or op in (Operation.CREATE_TOKENS, Operation.DESCRIBE_TOKENS):
        known = ", ".join(o.name.title().replace("_", "") for o in OPERATIONS.values())
        raise UserError(f"unknown --operation {name!r}: expected one of {known}")
    return op


def parse_pattern_type(name: str) -> PatternType:
    found = PATTERN_TYPES.get(name.lower())
    if found is None:
        raise UserError(f"unknown --resource-pattern-type {name!r}: literal, prefixed, match, any")
    return found


def resources(
    topics: Sequence[str], groups: Sequence[str], cluster: bool, txn_ids: Sequence[str]
) -> list[Resource]:
    """The resources the options name, in the order given by kind."""
    found: list[Resource] = [(ResourceType.TOPIC, t) for t in topics]
    found += [(ResourceType.GROUP, g) for g in groups]
    if cluster:
        found.append((ResourceType.CLUSTER, CLUSTER_NAME))
    found += [(ResourceType.TRANSACTIONAL_ID, t) for t in txn_ids]
    return found


def _principals(values: Sequence[str]) -> list[str]:
    for value in values:
        try:
            parse_principal(value)
        except InvalidAcl as exc:
            why = f"bad principal {value!r}: expected Type:name, e.g. User:alice"
            raise UserError(why) from exc
    return list(values)


def bindings_to_add(
    targets: Sequence[Resource],
    pattern: PatternType,
    allow_principals: Sequence[str],
    deny_principals: Sequence[str],
    allow_hosts: Sequence[str],
    deny_hosts: Sequence[str],
    operations: Sequence[Operation],
) -> list[AclBinding]:
    """Every (resource, principal, host, operation) binding --add means: hosts default to
    '*', operations to All, as kafka-acls does."""
    if not targets:
        raise UserError("--add needs a resource: --topic, --group, --cluster or --transactional-id")
    if not allow_principals and not deny_principals:
        raise UserError("--add needs --allow-principal or --deny-principal")
    if pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise UserError("--add takes --resource-pattern-type literal or prefixed")
    out: list[AclBinding] = []
    for permission, principals, hosts in (
        (Permission.ALLOW, allow_principals, allow_hosts),
        (Permission.DENY, deny_principals, deny_hosts),
    ):
        for (kind, name), principal, host, op in itertools.product(
            targets, _principals(principals), hosts or ["*"], operations or [Operation.ALL]
        ):
            binding = AclBinding(kind, name, pattern, principal, host, op, permission)
            try:
                check_binding(binding)
            except InvalidAcl as exc:
                raise UserError(f"{_resource_text(kind, name, pattern)}: {exc}") from None
            out.append(binding)
    return out


def filters_for(
    targets: Sequence[Resource],
    pattern: PatternType,
    principals: Sequence[str],
    hosts: Sequence[str],
    operations: Sequence[Operation],
    permission: Permission = Permission.ANY,
) -> list[AclFilter]:
    """The filters --remove or --list mean: one per resource (every resource when none is
    named) and per principal, host and operation given (any when not given)."""
    scopes: list[tuple[ResourceType, str | None]] = list(targets) or [(ResourceType.ANY, None)]
    any_pattern = pattern if targets else PatternType.ANY
    return [
        AclFilter(kind, name, any_pattern, principal, host, op, permission)
        for (kind, name), principal, host, op in itertools.product(
            scopes,
            list(_principals(principals)) or [None],
            list(hosts) or [None],
            list(operations) or [Operation.ANY],
        )
    ]


def _resource_text(kind: ResourceType, name: str, pattern: PatternType) -> str:
    return f"ResourcePattern(resourceType={kind.name}, name={name}, patternType={pattern.name})"


def _entry_text(b: AclBinding) -> str:
    return (
        f"(principal={b.principal}, host={b.host}, operation={b.operation.name}, "
        f"permissionType={b.permission.name})"
    )


def _as_json(b: AclBinding) -> dict[str, Any]:
    return {
        "resource_type": b.resource_type.name,
        "resource_name": b.resource_name,
        "pattern_type": b.pattern_type.name,
        "principal": b.principal,
        "host": b.host,
        "operation": b.operation.name,
        "permission": b.permission.name,
    }


def print_bindings(bindings: Sequence[AclBinding], heading: str) -> None:
    by_resource: dict[tuple[ResourceType, str, PatternType], list[AclBinding]] = {}
    for b in bindings:
        by_resource.setdefault((b.resource_type, b.resource_name, b.pattern_type), []).append(b)
    for (kind, name, pattern), entries in sorted(by_resource.items()):
        say(f"{heading} `{_resource_text(kind, name, pattern)}`:")
        for b in entries:
            say(f" \t{_entry_text(b)}")
        say("")


def acls(
    ctx: typer.Context,
    add: Annotated[bool, typer.Option("--add", help="Add ACLs.")] = False,
    remove: Annotated[bool, typer.Option("--remove", help="Remove ACLs.")] = False,
    list_: Annotated[bool, typer.Option("--list", help="List ACLs.")] = False,
    allow_principal: Annotated[
        Repeated, typer.Option("--allow-principal", help="User:name (or User:*) to allow.")
    ] = None,
    deny_principal: Annotated[
        Repeated, typer.Option("--deny-principal", help="User:name (or User:*) to deny.")
    ] = None,
    allow_host: Annotated[
        Repeated, typer.Option("--allow-host", help="IP the allow applies to (default *).")
    ] = None,
    deny_host: Annotated[
        Repeated, typer.Option("--deny-host", help="IP the deny applies to (default *).")
    ] = None,
    principal: Annotated[
        Repeated, typer.Option("--principal", help="--list/--remove: only this principal's.")
    ] = None,
    operation: Annotated[
        Repeated,
        typer.Option(
            "--operation",
            help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, "
            "DescribeConfigs, AlterConfigs, IdempotentWrite, All (default All).",
        ),
    ] = None,
    topic: Annotated[Repeated, typer.Option("--topic", help="A topic (or prefix).")] = None,
    group: Annotated[Repeated, typer.Option("--group", help="A consumer group.")] = None,
    cluster: Annotated[bool, typer.Option("--cluster", help="The cluster.")] = False,
    transactional_id: Annotated[
        Repeated, typer.Option("--transactional-id", help="A transactional id.")
    ] = None,
    resource_pattern_type: Annotated[
        str,
        typer.Option(
            "--resource-pattern-type",
            help="literal, prefixed (add); also match, any (list, remove).",
        ),
    ] = "literal",
    force: Annotated[bool, typer.Option("--force", help="Remove without asking.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    bootstrap_server: BootstrapOption = None,
    command_config: CommandConfigOption = None,
) -> None:
    """Add, remove or list ACLs, as kafka-acls.sh does.

    lakelog acls --add --allow-principal User:alice --operation Read --topic orders\n
    lakelog acls --add --allow-principal User:alice --operation Read --group readers\n
    lakelog acls --list --topic orders\n
    lakelog acls --remove --allow-principal User:alice --topic orders --force
    """
    if sum((add, remove, list_)) != 1:
        raise UserError("give exactly one of --add, --remove and --list")
    use_command_config(ctx, command_config)
    targets = resources(topic or [], group or [], cluster, transactional_id or [])
    pattern = parse_pattern_type(resource_pattern_type)
    operations = [parse_operation(o) for o in operation or []]
    bootstrap = bootstrap_of(ctx, bootstrap_server)
    if add:
        bindings = bindings_to_add(
            targets,
            pattern,
            allow_principal or [],
            deny_principal or [],
            allow_host or [],
            deny_host or [],
            operations,
        )
        _add(bootstrap, bindings, as_json)
    elif remove:
        if not targets:
            raise UserError(
                "--remove needs a resource: --topic, --group, --cluster or --transactional-id"
            )
        filters = _remove_filters(
            targets,
            pattern,
            allow_principal or [],
            deny_principal or [],
            allow_host or [],
            deny_host or [],
            operations,
            principal or [],
        )
        if not force and not typer.confirm(
            f"Remove the ACLs matching {len(filters)} filter(s)?", default=False
        ):
            raise UserError("nothing removed", exit_code=1)
        _remove(bootstrap, filters, as_json)
    else:
        _list(bootstrap, filters_for(targets, pattern, principal or [], [], operations), as_json)


def _remove_filters(
    targets: Sequence[Resource],
    pattern: PatternType,
    allow_principals: Sequence[str],
    deny_principals: Sequence[str],
    allow_hosts: Sequence[str],
    deny_hosts: Sequence[str],
    operations: Sequence[Operation],
    principals: Sequence[str],
) -> list[AclFilter]:
    """kafka-acls: with --allow/--deny-principal, the ACLs those options describe; else
    every ACL of the resources (narrowed by --principal and --operation)."""
    if not allow_principals and not deny_principals:
        return filters_for(targets, pattern, principals, [], operations)
    out: list[AclFilter] = []
    if allow_principals:
        out += filters_for(
            targets, pattern, allow_principals, allow_hosts, operations, Permission.ALLOW
        )
    if deny_principals:
        out += filters_for(
            targets, pattern, deny_principals, deny_hosts, operations, Permission.DENY
        )
    return out


def _add(bootstrap: str, bindings: list[AclBinding], as_json: bool) -> None:
    async def action(client: AdminClient) -> list[Any]:
        return await client.create_acls(bindings)

    with waiting(f"Adding {len(bindings)} ACL(s)"):
        errors = run_admin(bootstrap, action)
    failed = [(b, e) for b, e in zip(bindings, errors, strict=True) if e is not None]
    if failed:
        b, e = failed[0]
        raise UserError(f"{_resource_text(b.resource_type, b.resource_name, b.pattern_type)}: {e}")
    if as_json:
        print_json([_as_json(b) for b in bindings])
    else:
        print_bindings(bindings, "Adding ACLs for resource")


def _remove(bootstrap: str, filters: list[AclFilter], as_json: bool) -> None:
    async def action(client: AdminClient) -> list[list[AclBinding]]:
        return await client.delete_acls(filters)

    with waiting("Removing ACLs"):
        removed = [b for found in run_admin(bootstrap, action) for b in found]
    unique = list(dict.fromkeys(removed))
    if as_json:
        print_json([_as_json(b) for b in unique])
    elif unique:
        print_bindings(unique, "Removed ACLs for resource")
    else:
        say("No ACL matched.")


def _list(bootstrap: str, filters: list[AclFilter], as_json: bool) -> None:
    async def action(client: AdminClient) -> list[AclBinding]:
        found: list[AclBinding] = []
        for f in filters:
            found.extend(await client.describe_acls(f))
        return list(dict.fromkeys(found))

    with waiting("Listing ACLs"):
        found = run_admin(bootstrap, action)
    if as_json:
        print_json([_as_json(b) for b in found])
    else:
        print_bindings(found, "Current ACLs for resource")
