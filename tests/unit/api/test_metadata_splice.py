"""Metadata answers spliced from encoded topic entries are byte for byte what kio encodes
for the whole response, in every version."""

from __future__ import annotations

import datetime
import io
import uuid

import pytest
from kio.index import load_payload_module
from kio.static.constants import EntityType

from lakelog.log.protocol.frames import api_schema
from lakelog.server.api.context import build
from lakelog.server.api.metadata import EncodedTopics, encode_entity, splice_topics
from lakelog.util.errors import ErrorCode


def topics(m: object, count: int) -> list[object]:
    out = []
    for i in range(count):
        partitions = tuple(
            build(
                m.MetadataResponsePartition,  # type: ignore[attr-defined]
                error_code=ErrorCode.none,
                partition_index=p,
                leader_id=p % 3,
                leader_epoch=0,
                replica_nodes=(0, 1, 2),
                isr_nodes=(0, 1, 2),
                offline_replicas=(),
            )
            for p in range(i)
        )
        out.append(
            build(
                m.MetadataResponseTopic,  # type: ignore[attr-defined]
                error_code=ErrorCode.none if i else ErrorCode.unknown_topic_or_partition,
                name=f"topic-{i}",
                topic_id=uuid.UUID(int=i + 1),
                is_internal=False,
                partitions=partitions,
                topic_authorized_operations=-2147483648,
            )
        )
    return out


@pytest.mark.parametrize("version", range(14))
@pytest.mark.parametrize("count", [0, 1, 5])
def test_spliced_answer_equals_kio_encoding(version: int, count: int) -> None:
    m = load_payload_module(3, version, EntityType.response)
    entries = topics(m, count)
    fields = {
        "throttle_time": datetime.timedelta(milliseconds=7),
        "brokers": (build(m.MetadataResponseBroker, node_id=0, host="h", port=9092, rack="r"),),
        "cluster_id": "cluster",
        "controller_id": 0,
        "cluster_authorized_operations": 123,
        "error_code": ErrorCode.none,
    }
    whole = io.BytesIO()
    schema = api_schema(3, version)
    assert schema is not None
    schema.write_response(whole, build(m.MetadataResponse, topics=tuple(entries), **fields))
    spliced = splice_topics(
        version,
        build(m.MetadataResponse, topics=(), **fields),
        [encode_entity(m.MetadataResponseTopic, t) for t in entries],
    )
    assert b"".join(spliced.parts) == whole.getvalue()


def test_encoded_topics_are_bounded() -> None:
    cache = EncodedTopics()
    for version in range(EncodedTopics.MAX_VIEWS + 3):
        cache.view(version, (0,), 10)[(uuid.UUID(int=1), "t", 1)] = b"x"
    assert len(cache._views) == EncodedTopics.MAX_VIEWS
    view = cache.view(99, (0, 1), 10)
    for i in range(200):
        view[(uuid.UUID(int=i + 1), f"t{i}", 1)] = b"x"
    assert cache.view(99, (0, 1), 10) == {}  # more than twice the topics: emptied
