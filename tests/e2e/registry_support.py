"""Helpers for the schema registry's e2e tests: produce and consume through a broker with
confluent-kafka serializers, and raw HTTP requests for answers clients never show."""

from __future__ import annotations

import importlib
import json
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.serialization import MessageField, SerializationContext

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


def http(
    url: str, method: str = "GET", body: bytes | None = None, timeout: float = 30
) -> tuple[int, Any, str]:
    """(status, JSON body, content type) of one request; errors are answers too."""
    request = urllib.request.Request(url, body, method=method)
    request.add_header("Content-Type", CONTENT_TYPE)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw = response.read()
            return response.status, json.loads(raw), response.headers["Content-Type"]
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        return exc.code, json.loads(raw), exc.headers["Content-Type"]


def post_json(url: str, value: Any, method: str = "POST") -> tuple[int, Any]:
    status, body, _ = http(url, method, json.dumps(value).encode())
    return status, body


def produce(
    bootstrap: str, topic: str, values: list[Any], serialize: Callable[[Any, Any], bytes]
) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for value in values:
        ctx = SerializationContext(topic, MessageField.VALUE)
        producer.produce(topic, value=serialize(value, ctx))
    assert producer.flush(30) == 0


def consume(
    bootstrap: str, topic: str, count: int, deserialize: Callable[[bytes, Any], Any]
) -> list[Any]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{topic}-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    found: list[Any] = []
    deadline = time.monotonic() + 60
    try:
        while len(found) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            ctx = SerializationContext(topic, MessageField.VALUE)
            found.append(deserialize(message.value(), ctx))
    finally:
        consumer.close()
    return found


def compile_proto(tmp_path: Path, name: str, text: str) -> ModuleType:
    """The Python module protoc generates for `text` (as `name`.proto), imported."""
    import grpc_tools
    from grpc_tools import protoc

    well_known = Path(grpc_tools.__file__).parent / "_proto"
    (tmp_path / f"{name}.proto").write_text(text)
    code = protoc.main(
        [
            "protoc",
            f"-I{tmp_path}",
            f"-I{well_known}",
            f"--python_out={tmp_path}",
            str(tmp_path / f"{name}.proto"),
        ]
    )
    assert code == 0
    sys.path.insert(0, str(tmp_path))
    try:
        return importlib.import_module(f"{name}_pb2")
    finally:
        sys.path.remove(str(tmp_path))
