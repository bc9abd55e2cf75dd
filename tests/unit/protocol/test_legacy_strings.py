"""Responses whose strings outgrow the legacy encoding are clipped, not refused."""

from __future__ import annotations

import datetime
import inspect

import pytest
from kio.index import load_response_schema
from kio.serial.errors import OutOfBoundValue

from lakelog.log.protocol.frames import api_schema, encode_response
from lakelog.log.protocol.legacy_strings import LEGACY_STRING_MAX_BYTES, clip_strings
from lakelog.util.errors import ErrorCode


def create_topics_v2(message: str) -> object:
    m = inspect.getmodule(load_response_schema(19, 2))
    assert m is not None
    return m.CreateTopicsResponse(
        throttle_time=datetime.timedelta(0),
        topics=(
            m.CreatableTopicResult(
                name=m.TopicName("t"), error_code=ErrorCode.invalid_request, error_message=message
            ),
        ),
    )


def test_a_message_quoting_a_32k_name_is_clipped_to_fit() -> None:
    schema = api_schema(19, 2)
    assert schema is not None
    response = create_topics_v2(f"Topic '{'n' * 32767}' already exists.")
    with pytest.raises(OutOfBoundValue):
        encode_response(schema, 1, response, header_flexible=False)
    clipped = clip_strings(response)
    (topic,) = clipped.topics  # type: ignore[attr-defined]
    assert len(topic.error_message.encode()) == LEGACY_STRING_MAX_BYTES
    assert topic.name == "t" and topic.error_code == ErrorCode.invalid_request
    encode_response(schema, 1, clipped, header_flexible=False)


def test_multibyte_characters_are_cut_whole() -> None:
    (topic,) = clip_strings(create_topics_v2("é" * 20000)).topics  # type: ignore[attr-defined]
    assert topic.error_message == "é" * (LEGACY_STRING_MAX_BYTES // 2)


def test_short_strings_leave_the_object_as_it_is() -> None:
    response = create_topics_v2("fine")
    assert clip_strings(response) is response
