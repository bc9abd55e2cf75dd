"""The sliced encoder writes exactly kio's bytes, with a pause point after each entry of a
long top-level array."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import importlib
import io
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.serial import entity_writer

from lakelog.log.protocol.sliced import SLICE_ITEMS, has_long_array, write_sliced

RESPONSES = [
    "describe_groups.v0",
    "describe_groups.v5",
    "delete_groups.v2",
    "describe_transactions.v0",
    "delete_topics.v6",
    "describe_configs.v1",
    "describe_configs.v4",
    "offset_fetch.v8",
    "list_offsets.v8",
    "metadata.v12",
    "list_groups.v4",
]


def response_cls(name: str) -> type:
    module = importlib.import_module(f"kio.schema.{name}.response")
    return next(
        value
        for key, value in vars(module).items()
        if key.endswith("Response") and dataclasses.is_dataclass(value)
    )


def kio_bytes(entity: Any) -> bytes:
    out = io.BytesIO()
    entity_writer(type(entity))(out, entity)
    return out.getvalue()


def sliced_bytes(entity: Any) -> tuple[bytes, int]:
    pauses = 0

    async def pause() -> None:
        nonlocal pauses
        pauses += 1

    out = io.BytesIO()
    asyncio.run(write_sliced(out, entity, pause))
    return out.getvalue(), pauses


def lengthen(entity: Any, copies: int) -> Any:
    """`entity` with each non-empty top-level array of entities repeated to `copies`."""
    changes = {}
    for field in dataclasses.fields(entity):
        value = getattr(entity, field.name)
        if isinstance(value, tuple) and value and dataclasses.is_dataclass(value[0]):
            changes[field.name] = tuple(value[i % len(value)] for i in range(copies))
    return dataclasses.replace(entity, **changes)


@pytest.mark.parametrize("name", RESPONSES)
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_sliced_bytes_are_kios(name: str, data: st.DataObject) -> None:
    entity = data.draw(st.from_type(response_cls(name)))
    long = lengthen(entity, 3 * SLICE_ITEMS + 7)
    for candidate in (entity, long):
        encoded, pauses = sliced_bytes(candidate)
        assert encoded == kio_bytes(candidate)
        if has_long_array(candidate) and pauses == 0:
            # Only a type with tagged fields is written in one piece.
            assert any("tag" in f.metadata for f in dataclasses.fields(candidate))


def test_long_describe_groups_has_a_pause_point_per_entry() -> None:
    from kio.schema.describe_groups.v5.response import DescribedGroup, DescribeGroupsResponse
    from kio.schema.errors import ErrorCode
    from kio.schema.types import GroupId
    from kio.static.primitive import i32Timedelta

    groups = tuple(
        DescribedGroup(
            error_code=ErrorCode.group_id_not_found,
            group_id=GroupId(f"g{i}"),
            group_state="Dead",
            protocol_type="",
            protocol_data="",
            members=(),
            authorized_operations=0,
        )
        for i in range(10 * SLICE_ITEMS)
    )
    response = DescribeGroupsResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)), groups=groups
    )
    encoded, pauses = sliced_bytes(response)
    assert encoded == kio_bytes(response)
    assert pauses == len(groups)
