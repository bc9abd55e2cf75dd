import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakelog.log.protocol.varint import (
    VarintError,
    read_uvarint,
    read_varint,
    skip_tagged_fields,
    write_uvarint,
    write_varint,
)


@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_uvarint_round_trip(value: int) -> None:
    data = write_uvarint(value) + b"rest"
    assert read_uvarint(data, 0) == (value, len(data) - 4)


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_zigzag_round_trip(value: int) -> None:
    data = write_varint(value)
    assert read_varint(data, 0) == (value, len(data))


def test_errors() -> None:
    with pytest.raises(VarintError):
        read_uvarint(b"\x80", 0)
    with pytest.raises(VarintError):
        read_uvarint(b"\xff" * 6, 0)
    with pytest.raises(VarintError):
        skip_tagged_fields(b"\x01\x00\x05ab", 0)
    assert skip_tagged_fields(b"\x01\x00\x02ab!", 0) == 5
