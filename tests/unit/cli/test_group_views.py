"""Decoding members' assignments and building the describe rows."""

from __future__ import annotations

import io

import pytest
from kio.index import load_entity_module
from kio.serial import entity_writer
from kio.static.constants import EntityType

from lakelog.admin.group_offsets import offset_rows
from lakelog.admin.groups import _safe_assignment
from lakelog.admin.results import (
    GroupDescription,
    GroupMember,
    Node,
    decode_assignment,
)


def encode_assignment(
    version: int,
    assignment: dict[str, list[int]],
    user_data: bytes | None = None,
    prefix: int | None = None,
) -> bytes:
    """ConsumerProtocolAssignment as a consumer leader writes it: version, then the body."""
    m = load_entity_module("consumer_protocol_assignment", version, EntityType.data)
    value = m.ConsumerProtocolAssignment(
        assigned_partitions=tuple(
            m.TopicPartition(topic=t, partitions=tuple(ps)) for t, ps in assignment.items()
        ),
        user_data=user_data,
    )
    out = io.BytesIO()
    out.write((version if prefix is None else prefix).to_bytes(2, "big", signed=True))
    entity_writer(type(value))(out, value)
    return out.getvalue()


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_decode_every_version(version: int) -> None:
    data = encode_assignment(version, {"orders": [2, 0], "audit": [1]}, user_data=b"\x01\x02")
    assert decode_assignment(data) == {"orders": (0, 2), "audit": (1,)}


def test_decode_a_newer_version_with_the_newest_schema() -> None:
    data = encode_assignment(3, {"t": [0]}, prefix=7)
    assert decode_assignment(data) == {"t": (0,)}


def test_decode_empty_and_bad_input() -> None:
    assert decode_assignment(b"") == {}
    assert decode_assignment(None) == {}
    with pytest.raises(ValueError):
        decode_assignment(b"\x00")
    with pytest.raises(ValueError):
        decode_assignment(b"\xff\xff")
    truncated = encode_assignment(1, {"orders": [0, 1]})[:-3]
    assert _safe_assignment(truncated) == {}


def test_a_topic_listed_twice_is_merged() -> None:
    data = encode_assignment(0, {"t": [1]})
    m = load_entity_module("consumer_protocol_assignment", 0, EntityType.data)
    value = m.ConsumerProtocolAssignment(
        assigned_partitions=(
            m.TopicPartition(topic="t", partitions=(3,)),
            m.TopicPartition(topic="t", partitions=(1,)),
        )
    )
    out = io.BytesIO(b"\x00\x00")
    out.seek(2)
    entity_writer(type(value))(out, value)
    assert decode_assignment(data) == {"t": (1,)}
    assert decode_assignment(out.getvalue()) == {"t": (1, 3)}


def _member(member_id: str, client_id: str, assignment: dict[str, tuple[int, ...]]) -> GroupMember:
    return GroupMember(member_id, None, client_id, "/10.0.0.1", assignment)


def test_offset_rows_members_first_then_unowned_commits() -> None:
    group = GroupDescription(
        "g",
        "Stable",
        "consumer",
        "range",
        (_member("m2", "c2", {"t": (1,)}), _member("m1", "c1", {"t": (0,), "u": (0,)})),
        Node(0, "h", 9092),
    )
    committed = {("t", 0): 4, ("t", 2): 9, ("u", 0): 1}
    log_ends = {("t", 0): 10, ("t", 1): 3, ("t", 2): 9, ("u", 0): None}
    rows = offset_rows(group, committed, log_ends)
    assert [
        (r.topic, r.partition, r.current_offset, r.log_end_offset, r.lag, r.consumer_id)
        for r in rows
    ] == [
        ("t", 0, 4, 10, 6, "m1"),
        ("u", 0, 1, None, None, "m1"),
        ("t", 1, None, 3, None, "m2"),
        ("t", 2, 9, 9, 0, None),
    ]
    assert rows[0].host == "/10.0.0.1" and rows[0].client_id == "c1"
    assert rows[-1].host is None and rows[-1].client_id is None
