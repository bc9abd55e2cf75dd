"""Version parity with Apache Kafka 4.1: every API version a 4.1 broker serves to clients
is in the handler table (what ApiVersions advertises) or in the documented allow-list in
docs/clients.md, and every version not served gets a typed error answer, never a closed
connection."""

from __future__ import annotations

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.index import api_key_map, schema_name_map
from kio.serial import entity_reader

import lakelog.server.api  # noqa: F401  (registers every handler)
from lakelog.log.protocol.frames import api_schema, encode_response
from lakelog.server.api.registry import HANDLERS
from lakelog.server.api.unserved import unserved_code, unserved_response
from lakelog.server.sasl import SASL_VERSIONS
from tests.support.api_parity import (
    KAFKA_41_BROKER_APIS,
    allow_list,
    allowed_pairs,
    baseline,
    gaps,
    kio_range,
)
from tests.support.request_samples import sample
from tests.support.responses import error_codes

SERVED = {k: (s.min_version, s.max_version) for k, s in HANDLERS.items()} | SASL_VERSIONS
"""What ApiVersions advertises: the handler table, plus the SASL APIs where SASL runs
(`lakelog.server.api.api_versions`)."""


def test_every_kafka_41_version_is_served_or_allow_listed() -> None:
    missing = sorted(gaps(SERVED) - allowed_pairs(allow_list()))
    assert missing == [], f"not served and not in docs/clients.md's list: {missing}"


def test_the_allow_list_names_only_versions_not_served() -> None:
    for entry in allow_list():
        stale = sorted(entry.pairs() - gaps(SERVED))
        assert stale == [], f"{entry.name}: listed but served (or not in Kafka 4.1): {stale}"
        assert entry.reason.strip(), entry


def test_the_allow_list_is_short_and_names_apis_by_their_keys() -> None:
    entries = allow_list()
    assert len(entries) <= 12
    for entry in entries:
        assert set(entry.keys) <= KAFKA_41_BROKER_APIS, entry


def test_nothing_served_goes_past_kio_or_below_kafka() -> None:
    for key, (low, high) in SERVED.items():
        kio_low, kio_high = kio_range(key)
        assert kio_low <= low <= high <= kio_high, (key, low, high)
        if key in baseline():
            assert low <= baseline()[key][0], f"API {key}: Kafka 4.1 serves from v{kio_low}"


def test_the_allow_list_parser_reads_ranges() -> None:
    text = "## Kafka API versions\n\n```text\n38-39 tokens all: why\n26 EndTxn v5: why too\n```\n"
    first, second = allow_list(text)
    assert first.keys == (38, 39) and first.versions is None and first.reason == "why"
    assert (38, 1) in first.pairs() and (39, 2) in first.pairs()
    assert second.pairs() == {(26, 5)}


UNSERVED = sorted(
    (key, version)
    for key, name in api_key_map.items()
    for version in schema_name_map[name]
    if not (key in SERVED and SERVED[key][0] <= version <= SERVED[key][1])
)


@pytest.mark.parametrize(("api_key", "version"), sorted(allowed_pairs(allow_list())))
def test_every_allow_listed_version_answers_a_typed_error(api_key: int, version: int) -> None:
    assert _answer_codes(api_key, version) is not None


def test_every_version_kio_knows_and_we_do_not_serve_is_answered() -> None:
    """Past Kafka 4.1, and the controller-only APIs too: a request kio can decode gets an
    answer with an error in it, not a closed connection."""
    for count, null in ((1, False), (2, False), (1, True)):
        closed = [(k, v) for k, v in UNSERVED if _answer_codes(k, v, count, null) is None]
        assert closed == [], (count, null)


def _answer_codes(
    api_key: int, version: int, count: int = 1, null: bool = False
) -> list[int] | None:
    request = sample(load_request_schema(api_key, version), count=count, null=null)
    response = unserved_response(api_key, version, request, "cluster-1")
    if response is None:
        return None
    schema = api_schema(api_key, version)
    assert schema is not None
    frame = encode_response(schema, 1, response, header_flexible=False)
    decoded, _ = entity_reader(load_response_schema(api_key, version))(frame, 8)
    codes = error_codes(decoded)
    assert unserved_code(api_key) in codes, (api_key, version, codes)
    return codes
