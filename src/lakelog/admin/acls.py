"""ACL operations of the admin client: create, describe and delete ACL bindings."""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

from lakelog.admin.connection import AdminConnection
from lakelog.admin.wire import CREATE_ACLS, DELETE_ACLS, DESCRIBE_ACLS, KafkaError
from lakelog.log.protocol.kio_build import build
from lakelog.security.acl import (
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from lakelog.util.errors import ErrorCode


class AclOperations(AdminConnection):
    async def create_acls(self, bindings: Sequence[AclBinding]) -> list[KafkaError | None]:
        """Create the ACLs: per binding, None or the error it was refused with."""

        def make(m: ModuleType, _version: int) -> Any:
            return m.CreateAclsRequest(
                creations=tuple(
                    build(
                        m.AclCreation,
                        resource_type=int(b.resource_type),
                        resource_name=b.resource_name,
                        resource_pattern_type=int(b.pattern_type),
                        principal=b.principal,
                        host=b.host,
                        operation=int(b.operation),
                        permission_type=int(b.permission),
                    )
                    for b in bindings
                )
            )

        response, _ = await self._call(CREATE_ACLS, make)
        return [
            None if r.error_code == ErrorCode.none else KafkaError(r.error_code, r.error_message)
            for r in response.results
        ]

    async def describe_acls(self, acl_filter: AclFilter) -> list[AclBinding]:
        """The ACLs `acl_filter` selects (KafkaError if the broker refuses)."""

        def make(m: ModuleType, _version: int) -> Any:
            return build(m.DescribeAclsRequest, **_filter_fields(acl_filter))

        response, _ = await self._call(DESCRIBE_ACLS, make)
        if response.error_code != ErrorCode.none:
            raise KafkaError(response.error_code, response.error_message)
        return [
            AclBinding(
                ResourceType(int(r.resource_type)),
                r.resource_name,
                PatternType(int(r.pattern_type)),
                a.principal,
                a.host,
                Operation(int(a.operation)),
                Permission(int(a.permission_type)),
            )
            for r in response.resources
            for a in r.acls
        ]

    async def delete_acls(self, filters: Sequence[AclFilter]) -> list[list[AclBinding]]:
        """Delete what each filter selects; answer i lists what filter i deleted."""

        def make(m: ModuleType, _version: int) -> Any:
            return m.DeleteAclsRequest(
                filters=tuple(build(m.DeleteAclsFilter, **_filter_fields(f)) for f in filters)
            )

        response, _ = await self._call(DELETE_ACLS, make)
        out = []
        for result in response.filter_results:
            if result.error_code != ErrorCode.none:
                raise KafkaError(result.error_code, result.error_message)
            out.append(
                [
                    AclBinding(
                        ResourceType(int(a.resource_type)),
                        a.resource_name,
                        PatternType(int(a.pattern_type)),
                        a.principal,
                        a.host,
                        Operation(int(a.operation)),
                        Permission(int(a.permission_type)),
                    )
                    for a in result.matching_acls
                ]
            )
        return out


def _filter_fields(f: AclFilter) -> dict[str, Any]:
    """An ACL filter as DescribeAcls/DeleteAcls fields."""
    return {
        "resource_type_filter": int(f.resource_type),
        "resource_name_filter": f.resource_name,
        "pattern_type_filter": int(f.pattern_type),
        "principal_filter": f.principal,
        "host_filter": f.host,
        "operation": int(f.operation),
        "permission_type": int(f.permission),
    }
