"""Kafka 4.1 version parity: what a Kafka 4.1 broker serves to clients, what Lakelog
serves, and the documented list of what it does not (docs/clients.md, "Kafka API
versions"). Shared by the unit test of the handler table and the end-to-end test of a
broker's ApiVersions answer."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from kio.schema.index import api_key_map, schema_name_map

DOC = Path(__file__).resolve().parents[2] / "docs" / "clients.md"
SECTION = "## Kafka API versions"

KAFKA_41_BROKER_APIS = frozenset(
    {0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26}
    | {27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47}
    | {48, 49, 50, 51, 55, 57, 60, 61, 64, 65, 66, 68, 69, 71, 72, 74, 75, 76, 77, 78, 79}
    | {80, 81, 83, 84, 85, 86, 87, 90, 91, 92}
)
"""The API keys of Kafka 4.1's protocol guide (kafka.apache.org/41, "Api Keys"): the
APIs whose spec lists the "broker" listener. Controller-only APIs (Vote, BrokerHeartbeat,
...) and the streams group APIs (unstable in 4.1) are not among them."""

KAFKA_41_MAX = {2: 10, 8: 9, 9: 9, 22: 5, 27: 1, 35: 4, 78: 1, 79: 1, 80: 0, 85: 0, 87: 0, 90: 0}
"""The baseline is Kafka 4.1. kio's schemas (0.6.5) follow Kafka's trunk and go past 4.1
for these APIs; the value is the newest version a Kafka 4.1 broker's ApiVersions offers
(as kafka-python records it to tell broker versions apart). The newer versions come with
Kafka 4.2 and 4.3: ListOffsets v11 (KIP-1023), OffsetCommit/OffsetFetch v10 (topic ids),
InitProducerId v6 (KIP-939), DescribeLogDirs v5 (KIP-1066), ShareFetch/ShareAcknowledge
v2 and the share state v1s, AddRaftVoter v1, DescribeShareGroupOffsets v1."""


def kio_range(api_key: int) -> tuple[int, int]:
    versions = sorted(schema_name_map[api_key_map[api_key]])
    return versions[0], versions[-1]


def baseline() -> dict[int, tuple[int, int]]:
    """{api key: (min, max)} a Kafka 4.1 broker serves, in kio's schemas."""
    ranges = {}
    for key in sorted(KAFKA_41_BROKER_APIS):
        low, high = kio_range(key)
        cap = KAFKA_41_MAX.get(key, high)
        assert cap <= high, f"kio has no schema for API {key} v{cap}"
        ranges[key] = (low, cap)
    return ranges


def versions(ranges: Mapping[int, tuple[int, int]]) -> set[tuple[int, int]]:
    return {(k, v) for k, (low, high) in ranges.items() for v in range(low, high + 1)}


@dataclass(frozen=True)
class Entry:
    keys: tuple[int, ...]
    name: str
    versions: tuple[int, ...] | None
    """None: every version a Kafka 4.1 broker serves."""
    reason: str

    def pairs(self) -> set[tuple[int, int]]:
        out = set()
        for key in self.keys:
            low, high = baseline().get(key, kio_range(key))
            wanted = self.versions or tuple(range(low, high + 1))
            out |= {(key, v) for v in wanted}
        return out


_LINE = re.compile(r"^(\d+)(?:-(\d+))? (.+?) (all|v(\d+)(?:-(\d+))?): (\S.*)$")


def allow_list(text: str | None = None) -> list[Entry]:
    """The entries of the fenced list under "Kafka API versions" in docs/clients.md."""
    text = DOC.read_text() if text is None else text
    section = text.split(SECTION, 1)[1]
    block = section.split("```text\n", 1)[1].split("```", 1)[0]
    entries = []
    for line in block.splitlines():
        match = _LINE.match(line)
        assert match, f"allow-list line not understood: {line!r}"
        first, last, name, spec, v_low, v_high, reason = match.groups()
        keys = tuple(range(int(first), int(last or first) + 1))
        vs = None if spec == "all" else tuple(range(int(v_low), int(v_high or v_low) + 1))
        entries.append(Entry(keys, name, vs, reason))
    return entries


def allowed_pairs(entries: Iterable[Entry]) -> set[tuple[int, int]]:
    return set().union(*(e.pairs() for e in entries))


def gaps(served: Mapping[int, tuple[int, int]]) -> set[tuple[int, int]]:
    """(api key, version) pairs a Kafka 4.1 broker serves and `served` does not."""
    return versions(baseline()) - versions(served)
