"""The client side of mirror administration (see mirror/admin.py for the protocol): what
`lakelog mirror` sends to a destination broker."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from lakelog.admin.wire import DESCRIBE_CONFIGS, KafkaError
from lakelog.log.config_specs import MIRROR_RESOURCE
from lakelog.mirror.resource import MirrorResourceClient, request_module
from lakelog.util.errors import ErrorCode

INCREMENTAL_ALTER_CONFIGS = 44
SET = 0


class MirrorClient(MirrorResourceClient):
    def _version(self, api_key: int, ours: tuple[int, int]) -> int:
        theirs = self._versions.get(api_key)
        if theirs is None or max(ours[0], theirs[0]) > min(ours[1], theirs[1]):
            raise KafkaError(ErrorCode.unsupported_version, f"the broker lacks API {api_key}")
        return min(ours[1], theirs[1])

    async def command(self, name: str, entries: Mapping[str, str]) -> str | None:
        """One IncrementalAlterConfigs on the mirror resource; the broker's message."""
        version = self._version(INCREMENTAL_ALTER_CONFIGS, (0, 1))
        m = request_module(INCREMENTAL_ALTER_CONFIGS, version)
        resource = m.AlterConfigsResource(
            resource_type=MIRROR_RESOURCE,
            resource_name=name,
            configs=tuple(
                m.AlterableConfig(name=k, config_operation=SET, value=v) for k, v in entries.items()
            ),
        )
        request = m.IncrementalAlterConfigsRequest(resources=(resource,), validate_only=False)
        response = await self._roundtrip(INCREMENTAL_ALTER_CONFIGS, version, request)
        [result] = response.responses
        if result.error_code != ErrorCode.none:
            raise KafkaError(result.error_code, result.error_message)
        return result.error_message

    async def entries(self, name: str, keys: Sequence[str] = ()) -> dict[str, str]:
        """DescribeConfigs on the mirror resource, as name -> value."""
        version = self._version(DESCRIBE_CONFIGS, (1, 4))
        result = await self.describe_mirror_resource(version, name, tuple(keys) or None)
        if result.error_code != ErrorCode.none:
            raise KafkaError(result.error_code, result.error_message)
        return {c.name: c.value or "" for c in result.configs}

    # -- the commands
    async def create(
        self,
        name: str,
        source: str,
        source_configs: Mapping[str, str],
        topics: Sequence[str] = (),
        patterns: Sequence[str] = (),
    ) -> str | None:
        entries = {"mirror.action": "create", "source.bootstrap.servers": source}
        entries |= {f"source.{k}": v for k, v in source_configs.items()}
        if topics:
            entries["topics"] = json.dumps(list(topics))
        if patterns:
            entries["topic.patterns"] = json.dumps(list(patterns))
        return await self.command(name, entries)

    async def add_topics(
        self, name: str, topics: Sequence[str], patterns: Sequence[str] = ()
    ) -> str | None:
        entries = {"mirror.action": "add-topics"}
        if topics:
            entries["topics"] = json.dumps(list(topics))
        if patterns:
            entries["topic.patterns"] = json.dumps(list(patterns))
        return await self.command(name, entries)

    async def remove_topics(self, name: str, topics: Sequence[str]) -> str | None:
        return await self.command(
            name, {"mirror.action": "remove-topics", "topics": json.dumps(list(topics))}
        )

    async def delete(self, name: str) -> str | None:
        return await self.command(name, {"mirror.action": "delete"})

    async def describe(self, name: str) -> tuple[dict[str, str], list[dict[str, Any]]]:
        """(settings, partitions) of a mirror."""
        found = await self.entries(name)
        partitions = [json.loads(v) for k, v in found.items() if k.startswith("partition.")]
        settings = {k: v for k, v in found.items() if not k.startswith("partition.")}
        return settings, partitions

    async def validate(self, name: str) -> tuple[bool, list[dict[str, str]]]:
        found = await self.entries(name, ["validate"])
        findings = [
            json.loads(v)
            for k, v in sorted(found.items(), key=lambda kv: _index(kv[0]))
            if k.startswith("validate.") and k != "validate.ok"
        ]
        return found.get("validate.ok") == "true", findings

    async def list_mirrors(self) -> dict[str, dict[str, Any]]:
        return {
            k.removeprefix("mirror."): json.loads(v)
            for k, v in (await self.entries("")).items()
            if k.startswith("mirror.")
        }


def _index(key: str) -> int:
    tail = key.rpartition(".")[2]
    return int(tail) if tail.isdigit() else -1
