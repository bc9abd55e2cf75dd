"""The fuzzer's own parts, without a broker: the corpus covers what the issue asks for, and
the mutation engine is deterministic and produces the hostile shapes it promises."""

from __future__ import annotations

import struct
from collections import Counter

from tests.fuzz.corpus_io import load_corpus
from tests.fuzz.mutate import HOSTILE_VARINTS, Mutator, shape_of

LIBRARIES = {"kafka-python", "confluent-kafka", "aiokafka"}
CLIENTS = LIBRARIES | {"lakelog"}
"""`lakelog`: Lakelog's own admin client, for the share-group admin APIs no library sends."""


def test_corpus_covers_every_client_and_the_admin_and_sasl_apis() -> None:
    seeds = load_corpus()
    assert {s.client for s in seeds} == CLIENTS
    for client in LIBRARIES:
        keys = {s.api_key for s in seeds if s.client == client}
        # Produce, Fetch, Metadata, groups, CreateTopics, CreatePartitions, SASL.
        assert {0, 1, 3, 11, 14, 19, 37, 17, 36, 18} <= keys, client
    total = sum(len(s.frame) for s in seeds)
    assert total < 1 << 20
    for seed in seeds:
        key, version, _, client_id = struct.unpack_from(">hhih", seed.frame)
        assert (key, version) == (seed.api_key, seed.api_version)
        assert 10 + max(client_id, 0) <= len(seed.frame)


def test_corpus_covers_every_api_the_broker_serves() -> None:
    """Every API handler gets real requests to mutate (new handlers came without seeds)."""
    import lakelog.server.api.dispatch  # noqa: F401  (registers the handlers)
    from lakelog.server.api.registry import HANDLERS

    seeds = load_corpus()
    missing = sorted(set(HANDLERS) - {s.api_key for s in seeds})
    assert not missing, f"no corpus frame for API keys {missing}: capture_corpus.py"


def test_mutations_are_deterministic_per_seed() -> None:
    frames = [s.frame for s in load_corpus()]
    one, two = Mutator(frames, seed=7), Mutator(frames, seed=7)
    first = [one.next() for _ in range(500)]
    assert first == [two.next() for _ in range(500)]
    assert first != [Mutator(frames, seed=8).next() for _ in range(500)]
    ops = Counter(op for _, ops in first for op in ops.split("+"))
    assert set(ops) == set(one.weights)


def test_length_injection_reaches_the_metadata_topics_varint() -> None:
    """The issue's 24-byte killer: Metadata v12 whose topics compact-array length is
    `ff ff ff ff 0f`. The length heuristics find that position in a flexible request."""
    client = b"c"
    header = struct.pack(">hhih", 3, 12, 1, len(client)) + client + b"\x00"
    body = b"\x02" + b"\x00" * 16 + b"\x02t\x00" + b"\x01\x00\x00\x00"  # one topic, flags
    frame = header + body
    shape = shape_of(frame)
    assert shape.flexible and shape.body_start == len(header)
    assert (len(header), 0) in shape.lengths
    mutator = Mutator([frame], seed=1, weights={"length": 1})
    hits = 0
    for _ in range(3000):
        mutated, _ = mutator.next()
        if mutated[len(header) :].startswith(HOSTILE_VARINTS[0]):
            hits += 1
    assert hits > 0


def test_size_lies() -> None:
    mutator = Mutator([b"\x00\x03\x00\x01\x00\x00\x00\x01\x00\x00"], seed=3, size_lie_rate=1.0)
    lies = Counter()
    for _ in range(200):
        data, lie = mutator.wire(b"x" * 10)
        (size,) = struct.unpack_from(">i", data)
        assert lie in ("bigger", "smaller")
        assert (size > 10) if lie == "bigger" else (size < 10)
        lies[lie] += 1
    assert len(lies) == 2
