"""ObjectStorage behaviour, the same on memory://, file:// and s3:// (moto over HTTP)."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from lakelog.log.storage.keys import new_wal_key
from lakelog.log.storage.store import (
    ObjectExistsError,
    ObjectNotFoundError,
    ObjectStorage,
    StorageError,
)
from lakelog.log.storage.wal import build_wal, read_footer_from_store
from lakelog.util import metrics


def _sample(name: str, op: str) -> float:
    return metrics.REGISTRY.get_sample_value(name, {"op": op}) or 0.0


async def test_put_parts_then_get(storage: ObjectStorage) -> None:
    parts = [b"hello ", bytearray(b"big "), memoryview(b"xxworld")[2:]]
    await storage.put("wal/a", parts)
    assert bytes(await storage.get("wal/a")) == b"hello big world"
    info = await storage.head("wal/a")
    assert (info.key, info.size) == ("wal/a", 15)
    assert abs(info.last_modified_ms - time.time() * 1000) < 120_000


async def test_put_single_buffer_and_empty_object(storage: ObjectStorage) -> None:
    await storage.put("one", b"abc")  # type: ignore[arg-type]
    await storage.put("empty", [])
    assert bytes(await storage.get("one")) == b"abc"
    assert (await storage.head("empty")).size == 0


async def test_put_never_overwrites(storage: ObjectStorage) -> None:
    await storage.put("wal/a", [b"first"])
    with pytest.raises(ObjectExistsError) as info:
        await storage.put("wal/a", [b"second"])
    assert isinstance(info.value, FileExistsError)
    assert bytes(await storage.get("wal/a")) == b"first"
    assert [info.key for info in await storage.list()] == ["wal/a"]  # no leftovers


async def test_concurrent_creates_have_one_winner(storage: ObjectStorage) -> None:
    results = await asyncio.gather(
        *(storage.put("wal/race", [bytes([n]) * 1000]) for n in range(6)),
        return_exceptions=True,
    )
    winners = [n for n, result in enumerate(results) if result is None]
    assert len(winners) == 1
    assert all(isinstance(r, ObjectExistsError) for r in results if r is not None)
    assert bytes(await storage.get("wal/race")) == bytes([winners[0]]) * 1000


async def test_missing_objects(storage: ObjectStorage) -> None:
    for call in (storage.get("nope"), storage.head("nope"), storage.get_range("nope", 0, 4)):
        with pytest.raises(ObjectNotFoundError) as info:
            await call
        assert isinstance(info.value, FileNotFoundError)
        assert isinstance(info.value, StorageError)


async def test_ranges(storage: ObjectStorage) -> None:
    data = bytes(range(256)) * 16
    await storage.put("obj", [data[:1000], data[1000:]])
    assert bytes(await storage.get_range("obj", 10, 20)) == data[10:20]
    assert bytes(await storage.get_range("obj", 4000, 9999)) == data[4000:]  # clipped
    assert await storage.get_range("obj", 5, 5) == b""
    with pytest.raises(ValueError):
        await storage.get_range("obj", 5, 4)
    starts = [3000, 0, 7, 100, 4090]
    ends = [3100, 5, 7, 2000, 4096]
    got = await storage.get_ranges("obj", starts, ends)
    assert [bytes(g) for g in got] == [data[s:e] for s, e in zip(starts, ends, strict=True)]
    got = await storage.get_ranges("obj", starts, ends, coalesce=0)
    assert [bytes(g) for g in got] == [data[s:e] for s, e in zip(starts, ends, strict=True)]
    assert await storage.get_ranges("obj", [1], [1]) == [b""]
    with pytest.raises(ValueError):
        await storage.get_ranges("obj", [1, 2], [3])


async def test_tail(storage: ObjectStorage) -> None:
    await storage.put("obj", [b"0123456789"])
    tail, size = await storage.get_tail("obj", 3)
    assert (bytes(tail), size) == (b"789", 10)
    tail, size = await storage.get_tail("obj", 1000)
    assert (bytes(tail), size) == (b"0123456789", 10)


async def test_list_by_segment_prefix(storage: ObjectStorage) -> None:
    wal_keys = [new_wal_key() for _ in range(3)]
    for key in reversed(wal_keys):
        await storage.put(key, [b"w" * 7])
    await storage.put("seg/t/0/a", [b"s"])
    await storage.put("seg/t/1/b", [b"ss"])
    await storage.put("segment-not-under-seg", [b"x"])

    listed = await storage.list("wal")
    assert [info.key for info in listed] == wal_keys
    assert all(info.size == 7 for info in listed)
    assert [i.key for i in await storage.list("seg/")] == ["seg/t/0/a", "seg/t/1/b"]
    assert [i.key for i in await storage.list("seg/t/1")] == ["seg/t/1/b"]
    assert await storage.list("nothing") == []
    assert len(await storage.list()) == 6


async def test_delete_is_idempotent(storage: ObjectStorage) -> None:
    keys = [f"wal/{n}" for n in range(5)]
    for key in keys:
        await storage.put(key, [b"x"])
    await storage.delete("wal/0")
    await storage.delete("wal/0")
    await storage.delete("never-existed")
    await storage.delete_many(["wal/1", "missing-a", "wal/2", "missing-b"])
    await storage.delete_many([])
    assert [info.key for info in await storage.list("wal")] == ["wal/3", "wal/4"]
    await storage.delete_many(["wal/3", "wal/4"])
    assert await storage.list("wal") == []


async def test_big_wal_object_round_trip(storage: ObjectStorage) -> None:
    """8 MiB from many buffers, as the produce path writes it."""
    topic = uuid.uuid4()
    batches = [os.urandom(size) for size in (1024, 300_000, 1 << 20, 77, 5_000) * 6]
    wal = build_wal([(topic, i % 3, b, 1, -1, -1, -1) for i, b in enumerate(batches)])
    key = new_wal_key()
    await storage.put(key, wal.parts)
    footer = await read_footer_from_store(storage, key)
    assert len(footer) == len(batches)
    offsets, sizes = zip(*wal.placements, strict=True)
    ends = [o + s for o, s in wal.placements]
    got = await storage.get_ranges(key, list(offsets), ends)
    assert [bytes(g) for g in got] == batches
    assert (await storage.head(key)).size == wal.size == sum(sizes) + len(wal.parts[-1])


async def test_metrics_are_recorded(storage: ObjectStorage) -> None:
    puts = _sample("lakelog_object_requests_total", "put")
    put_bytes = _sample("lakelog_object_bytes_total", "put")
    get_bytes = _sample("lakelog_object_bytes_total", "get")
    errors = _sample("lakelog_object_errors_total", "get")
    latency_count = _sample("lakelog_object_latency_seconds_count", "put")
    await storage.put("m", [b"12345", b"678"])
    await storage.get("m")
    with pytest.raises(ObjectNotFoundError):
        await storage.get("missing")
    assert _sample("lakelog_object_requests_total", "put") == puts + 1
    assert _sample("lakelog_object_bytes_total", "put") == put_bytes + 8
    assert _sample("lakelog_object_bytes_total", "get") == get_bytes + 8
    assert _sample("lakelog_object_errors_total", "get") == errors + 1
    assert _sample("lakelog_object_latency_seconds_count", "put") == latency_count + 1


# --- backend-specific construction -------------------------------------------------------


async def test_file_url_creates_directory_and_writes_plain_files(tmp_path: Path) -> None:
    root = tmp_path / "deep" / "data"
    storage = ObjectStorage.from_url(f"file://{root}")
    assert root.is_dir()
    await storage.put("wal/k", [b"on ", b"disk"])
    assert (root / "wal" / "k").read_bytes() == b"on disk"
    assert [i.key for i in await storage.list()] == ["wal/k"]


@pytest.mark.parametrize("url", ["file://relative/dir", "file:///", "ftp://host/x"])
def test_rejects_bad_urls(url: str) -> None:
    with pytest.raises(ValueError):
        ObjectStorage.from_url(url)


def test_rejects_unknown_or_misplaced_options(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="endpnt"):
        ObjectStorage.from_url("s3://bucket", endpnt="http://x")
    with pytest.raises(ValueError):
        ObjectStorage.from_url(f"file://{tmp_path}", region="us-east-1")
    with pytest.raises(ValueError):
        ObjectStorage.from_url("s3://bucket?path_style=maybe")
    with pytest.raises(ValueError):
        ObjectStorage.from_url("s3:///no-bucket")


def test_gcs_url_takes_only_http_options() -> None:
    assert repr(ObjectStorage.from_url("gs://bucket/p", max_retries=2)) == (
        "ObjectStorage('gs://bucket/p')"
    )
    with pytest.raises(ValueError):
        ObjectStorage.from_url("gs://bucket/p", region="us-east-1")


def test_incomplete_credentials_are_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
    with pytest.raises(ValueError, match="cannot open storage"):
        ObjectStorage.from_url("s3://b?endpoint=http://127.0.0.1:1&secret_access_key=x")


def test_repr_hides_secrets() -> None:
    storage = ObjectStorage.from_url(
        "s3://b/p?endpoint=http://127.0.0.1:1&access_key_id=me&secret_access_key=hunter2"
        "&region=eu-west-1"
    )
    assert "hunter2" not in repr(storage)
    assert "secret_access_key=***" in repr(storage)
    assert "region=eu-west-1" in repr(storage)


@pytest.mark.s3
async def test_s3_prefix_scopes_keys(s3_bucket: str, s3_opts: dict[str, Any]) -> None:
    scoped = ObjectStorage.from_url(f"s3://{s3_bucket}/cluster-a/data", **s3_opts)
    whole = ObjectStorage.from_url(f"s3://{s3_bucket}", **s3_opts)
    await scoped.put("wal/x", [b"scoped"])
    assert [i.key for i in await scoped.list()] == ["wal/x"]
    assert [i.key for i in await whole.list()] == ["cluster-a/data/wal/x"]
    assert bytes(await whole.get("cluster-a/data/wal/x")) == b"scoped"


@pytest.mark.s3
async def test_s3_settings_from_query_string(
    s3_endpoint: str, s3_bucket: str, s3_credentials: tuple[str, str]
) -> None:
    access_key, secret_key = s3_credentials
    url = (
        f"s3://{s3_bucket}/q?endpoint={s3_endpoint}&region=us-east-1&path_style=true"
        f"&access_key_id={access_key}&secret_access_key={secret_key}&max_retries=2"
    )
    storage = ObjectStorage.from_url(url)
    await storage.put("k", [b"via query"])
    assert bytes(await storage.get("k")) == b"via query"


@pytest.mark.s3
async def test_s3_settings_from_environment(
    s3_endpoint: str,
    s3_bucket: str,
    s3_credentials: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bucket = s3_bucket
    monkeypatch.setenv("LAKELOG_S3_ENDPOINT", s3_endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_credentials[0])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_credentials[1])
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    storage = ObjectStorage.from_url(f"s3://{bucket}")
    await storage.put("k", [b"via env"])
    assert bytes(await storage.get("k")) == b"via env"
    # An explicit option beats the environment.
    monkeypatch.setenv("LAKELOG_S3_ENDPOINT", "http://127.0.0.1:9")
    storage = ObjectStorage.from_url(f"s3://{bucket}", endpoint=s3_endpoint)
    assert bytes(await storage.get("k")) == b"via env"
