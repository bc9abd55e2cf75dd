"""Topic operations of the admin client: create, delete, add partitions, describe topics
and their configs, and list a partition's offsets at its leader."""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

from lakelog.admin.connection import AdminConnection
from lakelog.admin.results import (
    ConfigValue,
    CreatedTopic,
    ListedOffset,
    Node,
    PartitionDescription,
    TopicDescription,
    TopicPartition,
)
from lakelog.admin.wire import (
    BROKER_RESOURCE,
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    DELETE_TOPICS,
    DESCRIBE_CONFIGS,
    LIST_OFFSETS,
    TOPIC_RESOURCE,
    KafkaError,
)
from lakelog.log.protocol.kio_build import build
from lakelog.util.errors import ErrorCode


class TopicOperations(AdminConnection):
    async def create_topic(
        self,
        name: str,
        partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str] | None = None,
        validate_only: bool = False,
    ) -> CreatedTopic:
        def make(m: ModuleType, _version: int) -> Any:
            topic = m.CreatableTopic(
                name=name,
                num_partitions=partitions,
                replication_factor=replication_factor,
                assignments=(),
                configs=tuple(
                    m.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()
                ),
            )
            return build(
                m.CreateTopicsRequest,
                topics=(topic,),
                timeout=_ms(30_000),
                validate_only=validate_only,
            )

        response, _ = await self._call(CREATE_TOPICS, make)
        [result] = response.topics
        if result.error_code != ErrorCode.none:
            raise KafkaError(result.error_code, result.error_message)
        returned = getattr(result, "configs", None) or ()
        return CreatedTopic(
            name=result.name,
            topic_id=getattr(result, "topic_id", None),
            num_partitions=int(getattr(result, "num_partitions", partitions)),
            replication_factor=int(getattr(result, "replication_factor", replication_factor)),
            configs={c.name: c.value for c in returned if c.value is not None},
        )

    async def delete_topic(self, name: str) -> None:
        def make(m: ModuleType, version: int) -> Any:
            if version >= 6:
                topics = (m.DeleteTopicState(name=name, topic_id=None),)
                return m.DeleteTopicsRequest(topics=topics, timeout=_ms(30_000))
            return m.DeleteTopicsRequest(topic_names=(name,), timeout=_ms(30_000))

        response, _ = await self._call(DELETE_TOPICS, make)
        [result] = response.responses
        if result.error_code != ErrorCode.none:
            raise KafkaError(result.error_code, getattr(result, "error_message", None))

    async def create_partitions(self, name: str, total: int) -> None:
        def make(m: ModuleType, _version: int) -> Any:
            topic = m.CreatePartitionsTopic(name=name, count=total, assignments=None)
            return m.CreatePartitionsRequest(
                topics=(topic,), timeout=_ms(30_000), validate_only=False
            )

        response, _ = await self._call(CREATE_PARTITIONS, make)
        [result] = response.results
        if result.error_code != ErrorCode.none:
            raise KafkaError(result.error_code, result.error_message)

    async def describe_topics(self, names: Sequence[str] | None = None) -> list[TopicDescription]:
        """Topics from Metadata (all of them with None), sorted by name; a missing named
        topic raises UNKNOWN_TOPIC_OR_PARTITION."""
        response = await self._metadata(names)
        described = []
        for topic in response.topics:
            if topic.error_code != ErrorCode.none:
                raise KafkaError(topic.error_code, f"topic {topic.name}")
            partitions = tuple(
                sorted(
                    (
                        PartitionDescription(
                            int(p.partition_index),
                            int(p.leader_id),
                            tuple(int(r) for r in p.replica_nodes),
                            tuple(int(r) for r in p.isr_nodes),
                        )
                        for p in topic.partitions
                    ),
                    key=lambda p: p.partition,
                )
            )
            topic_id = getattr(topic, "topic_id", None)
            described.append(
                TopicDescription(
                    name=topic.name,
                    topic_id=topic_id if topic_id is not None and topic_id.int else None,
                    partitions=partitions,
                    is_internal=bool(topic.is_internal),
                )
            )
        return sorted(described, key=lambda t: t.name)

    async def list_topics(self) -> list[str]:
        return [t.name for t in await self.describe_topics(None)]

    async def describe_topic_configs(self, name: str) -> list[ConfigValue]:
        return await self._describe_configs(TOPIC_RESOURCE, name)

    async def describe_broker_configs(self, node: Node) -> list[ConfigValue]:
        """A broker's own settings (asked of that broker, as Kafka requires)."""
        client = await self.client_for(node)
        return await client._describe_configs(BROKER_RESOURCE, str(node.node_id))

    async def _describe_configs(self, resource_type: int, name: str) -> list[ConfigValue]:
        result = await self.describe_config_result(resource_type, name)
        return [
            ConfigValue(c.name, c.value, int(c.config_source), bool(c.read_only))
            for c in result.configs
        ]

    async def describe_config_result(
        self, resource_type: int, name: str, include_synonyms: bool = False
    ) -> Any:
        """DescribeConfigs for one resource, all its configs: the response's result entry
        (KafkaError if it carries an error)."""

        def make(m: ModuleType, _version: int) -> Any:
            resource = m.DescribeConfigsResource(
                resource_type=resource_type, resource_name=name, configuration_keys=None
            )
            return build(
                m.DescribeConfigsRequest,
                resources=(resource,),
                include_synonyms=include_synonyms,
                include_documentation=False,
            )

        response, _ = await self._call(DESCRIBE_CONFIGS, make)
        [result] = response.results
        if result.error_code != ErrorCode.none:
            raise KafkaError(result.error_code, result.error_message or name)
        return result

    # ---------------------------------------------------------------- log offsets

    async def list_offsets(
        self,
        timestamps: Mapping[TopicPartition, int],
    ) -> dict[TopicPartition, ListedOffset]:
        """ListOffsets per partition (EARLIEST, LATEST or a timestamp in ms), sent to each
        partition's leader. A partition that does not exist answers with its error code
        instead of raising, so one deleted topic does not hide the others."""
        if not timestamps:
            return {}
        response = await self._metadata(sorted({topic for topic, _ in timestamps}))
        nodes = {
            int(b.node_id): Node(int(b.node_id), b.host, int(b.port)) for b in response.brokers
        }
        leaders = {
            (t.name, int(p.partition_index)): int(p.leader_id)
            for t in response.topics
            if t.error_code == ErrorCode.none
            for p in t.partitions
        }
        out: dict[TopicPartition, ListedOffset] = {}
        by_node: dict[Node | None, dict[TopicPartition, int]] = {}
        for tp, timestamp in timestamps.items():
            if tp not in leaders:
                out[tp] = ListedOffset(-1, -1, ErrorCode.unknown_topic_or_partition)
            else:
                by_node.setdefault(nodes.get(leaders[tp]), {})[tp] = timestamp
        for node, asks in by_node.items():
            client = self if node is None else await self.client_for(node)
            out.update(await client._list_offsets_here(asks))
        return out

    async def _list_offsets_here(
        self,
        asks: Mapping[TopicPartition, int],
    ) -> dict[TopicPartition, ListedOffset]:
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for (topic, partition), timestamp in sorted(asks.items()):
            by_topic.setdefault(topic, []).append((partition, timestamp))

        def make(m: ModuleType, _version: int) -> Any:
            topics = tuple(
                m.ListOffsetsTopic(
                    name=topic,
                    partitions=tuple(
                        build(
                            m.ListOffsetsPartition,
                            partition_index=p,
                            current_leader_epoch=-1,
                            timestamp=ts,
                        )
                        for p, ts in parts
                    ),
                )
                for topic, parts in by_topic.items()
            )
            return build(
                m.ListOffsetsRequest,
                replica_id=-1,
                isolation_level=0,
                topics=topics,
                timeout=_ms(int(self._timeout * 1000)),
            )

        response, _ = await self._call(LIST_OFFSETS, make)
        return {
            (t.name, int(p.partition_index)): ListedOffset(
                int(p.offset), int(p.timestamp), p.error_code
            )
            for t in response.topics
            for p in t.partitions
        }


def _ms(ms: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=ms)
