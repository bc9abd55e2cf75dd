"""Outage answers: every API the broker serves (but ApiVersions) answers a backend outage
with a response that encodes, carries the API's retriable code, and echoes the request."""

from __future__ import annotations

import dataclasses
import datetime
import sqlite3
import typing
import uuid
from types import SimpleNamespace
from typing import Any

import psycopg
import psycopg_pool
import pytest
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader

import lakelog.server.api  # noqa: F401  (registers every handler)
from lakelog.coordinator.topic_types import BrokerInfo
from lakelog.log.protocol.frames import api_schema, encode_response
from lakelog.log.storage.store import ObjectExistsError, ObjectNotFoundError, StorageError
from lakelog.server.api.context import RequestContext
from lakelog.server.api.outage import BUILDERS, PLANS, answer_outage
from lakelog.server.api.raw import NoResponse
from lakelog.server.api.registry import HANDLERS
from lakelog.server.cluster.outage import is_outage
from lakelog.util.errors import ErrorCode
from tests.support.responses import error_codes

API_VERSIONS = 18
OUTAGE = psycopg_pool.PoolTimeout("couldn't get a connection after 5.00 sec")


def _value(kind: str | None, name: str) -> Any:
    """A plausible request value of kio kafka_type `kind`."""
    if kind == "string":
        return f"x-{name}"
    if kind in ("int8", "int16", "int32", "int64"):
        return 1
    if kind == "bool":
        return False
    if kind == "uuid":
        return uuid.UUID(int=7)
    if kind in ("bytes", "records"):
        return b""
    if kind == "timedelta_i32":
        return datetime.timedelta(seconds=1)
    if kind == "timedelta_i64":
        return datetime.timedelta(seconds=1)
    raise AssertionError(f"no sample for {kind} ({name})")


def sample(cls: type) -> Any:
    """A request of kio class `cls` with one entry in every list, recursively."""
    values = {}
    for f in dataclasses.fields(cls):
        hint, args = f.type, typing.get_args(f.type)
        listed = next((a for a in (hint, *args) if typing.get_origin(a) is tuple), None)
        if listed is not None:
            item = typing.get_args(listed)[0]
            one = sample(item) if dataclasses.is_dataclass(item) else None
            values[f.name] = (one if one is not None else _value(f.metadata["kafka_type"], f.name),)
        elif dataclasses.is_dataclass(hint):
            values[f.name] = sample(hint)  # type: ignore[arg-type]
        elif any(dataclasses.is_dataclass(a) for a in args):  # optional struct: a cursor
            struct = next(a for a in args if dataclasses.is_dataclass(a))
            values[f.name] = sample(struct)
        else:
            values[f.name] = _value(f.metadata.get("kafka_type"), f.name)
    return cls(**values)


def _context(api_key: int, version: int) -> RequestContext:
    me = BrokerInfo(3, 1, None, "127.0.0.1", 9092, 0)
    broker = SimpleNamespace(cluster_id="c-1", self_info=lambda: me)
    return RequestContext(api_key, version, 1, "test", broker, "peer")  # type: ignore[arg-type]


CASES = [
    (key, version)
    for key, spec in sorted(HANDLERS.items())
    if key != API_VERSIONS
    for version in range(spec.min_version, spec.max_version + 1)
]


def test_every_api_but_api_versions_has_an_outage_answer() -> None:
    missing = [k for k in HANDLERS if k != API_VERSIONS and k not in PLANS and k not in BUILDERS]
    assert missing == []


@pytest.mark.parametrize(("api_key", "version"), CASES)
def test_outage_answer_encodes_and_carries_the_retriable_code(api_key: int, version: int) -> None:
    request = sample(load_request_schema(api_key, version))
    if api_key == 0:
        request = dataclasses.replace(request, acks=-1)
    response = answer_outage(_context(api_key, version), request, OUTAGE)
    assert response is not None
    schema = api_schema(api_key, version)
    assert schema is not None
    frame = encode_response(schema, 1, response, header_flexible=False)
    decoded, _ = entity_reader(load_response_schema(api_key, version))(frame, 8)
    codes = error_codes(decoded)
    expected = ErrorCode.leader_not_available if api_key == 3 else PLANS[api_key].code
    assert expected in codes, (api_key, version, codes)
    assert expected.retriable


def test_produce_and_fetch_echo_every_partition() -> None:
    request = sample(load_request_schema(0, 9))
    request = dataclasses.replace(request, acks=-1)
    response = answer_outage(_context(0, 9), request, OUTAGE)
    (topic,) = response.responses
    assert topic.name == "x-name"
    (part,) = topic.partition_responses
    assert (part.index, part.error_code, part.base_offset) == (1, ErrorCode.kafka_storage_error, -1)

    request = sample(load_request_schema(1, 12))
    response = answer_outage(_context(1, 12), request, OUTAGE)
    assert response.error_code == ErrorCode.none  # a top-level error means a session problem
    assert response.session_id == 0
    (topic,) = response.responses
    (part,) = topic.partitions
    assert (topic.topic, part.partition_index) == ("x-topic", 1)
    assert part.error_code == ErrorCode.kafka_storage_error
    assert part.high_watermark == -1 and part.preferred_read_replica == -1


def test_acks_zero_produce_gets_no_answer() -> None:
    request = dataclasses.replace(sample(load_request_schema(0, 9)), acks=0)
    assert isinstance(answer_outage(_context(0, 9), request, OUTAGE), NoResponse)


def test_metadata_names_this_broker_and_asks_clients_to_wait() -> None:
    request = sample(load_request_schema(3, 12))
    response = answer_outage(_context(3, 12), request, OUTAGE)
    assert [(b.node_id, b.host, b.port) for b in response.brokers] == [(3, "127.0.0.1", 9092)]
    assert response.controller_id == 3 and response.cluster_id == "c-1"
    (topic,) = response.topics
    assert topic.name == "x-name" and topic.error_code == ErrorCode.leader_not_available


def test_other_errors_are_not_answered() -> None:
    request = sample(load_request_schema(11, 5))
    assert answer_outage(_context(11, 5), request, ValueError("bug")) is None


@pytest.mark.parametrize(
    ("exc", "outage"),
    [
        (psycopg.OperationalError("server closed the connection unexpectedly"), True),
        (OUTAGE, True),
        (psycopg.errors.AdminShutdown("terminating connection"), True),
        (psycopg.errors.UniqueViolation("duplicate key"), False),
        (sqlite3.OperationalError("database is locked"), True),
        (sqlite3.OperationalError("disk I/O error"), True),
        (sqlite3.OperationalError("no such table: topics"), False),
        (StorageError("get wal/x: 503"), True),
        (ObjectNotFoundError("get wal/x: not found"), False),
        (ObjectExistsError("put wal/x: exists"), False),
        (RuntimeError("wrapped"), False),
        (ExceptionGroup("both", [OUTAGE, StorageError("503")]), True),
        (ExceptionGroup("mixed", [OUTAGE, ValueError("bug")]), False),
    ],
)
def test_is_outage(exc: BaseException, outage: bool) -> None:
    assert is_outage(exc) is outage


def test_is_outage_follows_the_cause() -> None:
    try:
        try:
            raise OUTAGE
        except psycopg.OperationalError as inner:
            raise RuntimeError("coordinator call failed") from inner
    except RuntimeError as outer:
        assert is_outage(outer)
