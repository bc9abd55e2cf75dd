"""DescribeConfigs on the mirror resource, asked by `lakelog mirror` (`MirrorClient`) of
the destination and by a mirror (`SourceAdmin`) of a source that is itself a Lakelog."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from lakelog.admin.client import AdminClient
from lakelog.admin.wire import DESCRIBE_CONFIGS
from lakelog.log.config_specs import MIRROR_RESOURCE
from lakelog.log.protocol.kio_build import build


def request_module(api_key: int, version: int) -> ModuleType:
    """kio's request classes of one API version (imported on first use)."""
    from kio.index import load_payload_module
    from kio.static.constants import EntityType

    return load_payload_module(api_key, version, EntityType.request)


class MirrorResourceClient(AdminClient):
    async def describe_mirror_resource(
        self, version: int, name: str, keys: tuple[str, ...] | None
    ) -> Any:
        """The one result of a DescribeConfigs v`version` on mirror `name` (None keys: all);
        its error code is the caller's to judge."""
        m = request_module(DESCRIBE_CONFIGS, version)
        resource = m.DescribeConfigsResource(
            resource_type=MIRROR_RESOURCE, resource_name=name, configuration_keys=keys
        )
        request = build(
            m.DescribeConfigsRequest,
            resources=(resource,),
            include_synonyms=False,
            include_documentation=False,
        )
        response = await self._roundtrip(DESCRIBE_CONFIGS, version, request)
        [result] = response.results
        return result
