"""Responses that handlers encode by hand (Produce and Fetch hot paths)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RawResponse:
    """A response body as a list of buffers, sent with `writelines` without joining."""

    parts: Sequence[bytes | bytearray | memoryview]

    @property
    def size(self) -> int:
        return sum(len(p) for p in self.parts)


class NoResponse:
    """acks=0 produce: the client expects nothing back."""


NO_RESPONSE = NoResponse()
