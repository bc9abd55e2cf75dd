"""CreateTopics v5+ answers spliced from config lists encoded once are byte for byte what
kio encodes for the whole response."""

from __future__ import annotations

import datetime
import io
import uuid

import pytest
from kio.index import load_payload_module
from kio.static.constants import EntityType

from lakelog.config import Settings
from lakelog.coordinator.topic_types import CreateTopicRequest
from lakelog.log.protocol.frames import api_schema
from lakelog.server.api.admin import _create_failed, _created, splice_create_topics
from lakelog.util.errors import ErrorCode


@pytest.mark.parametrize("version", [5, 6, 7])
def test_spliced_answer_equals_kio_encoding(version: int) -> None:
    m = load_payload_module(19, version, EntityType.response)
    settings = Settings()
    described: dict[tuple[tuple[str, str], ...], tuple[object, ...]] = {}
    results = [
        _created(m, CreateTopicRequest("a", 3, 1, {}), uuid.UUID(int=1), settings, described),
        _create_failed(m, "b", ErrorCode.policy_violation, "too many"),
        _created(
            m,
            CreateTopicRequest("c", 1, 1, {"retention.ms": "1000"}),
            uuid.UUID(int=3),
            settings,
            described,
        ),
        _created(m, CreateTopicRequest("d", 2, 3, {}), uuid.UUID(int=4), settings, described),
    ]
    assert results[0].configs is results[3].configs  # one list for the same configs
    whole = io.BytesIO()
    schema = api_schema(19, version)
    assert schema is not None
    schema.write_response(
        whole,
        m.CreateTopicsResponse(throttle_time=datetime.timedelta(0), topics=tuple(results)),
    )
    assert b"".join(splice_create_topics(m, results).parts) == whole.getvalue()
    assert b"".join(splice_create_topics(m, []).parts) == _empty(m, schema)


def _empty(m: object, schema: object) -> bytes:
    out = io.BytesIO()
    schema.write_response(  # type: ignore[attr-defined]
        out,
        m.CreateTopicsResponse(throttle_time=datetime.timedelta(0), topics=()),  # type: ignore[attr-defined]
    )
    return out.getvalue()
