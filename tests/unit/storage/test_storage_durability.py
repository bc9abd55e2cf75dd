"""Puts are idempotent under retries, and durable on file:// before they return (issue 11).

The lost-response case itself (S3 stored the object, the client saw a 5xx) runs through
the fault proxy in `test_s3_fault_proxy.py`; here the recovery rule is checked directly,
since a second put of the same key is exactly what obstore's retry sends.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from lakelog.log.storage.store import ObjectExistsError, ObjectStorage, StorageError
from lakelog.util import metrics


def _recovered() -> float:
    return metrics.REGISTRY.get_sample_value("lakelog_object_put_recovered_total") or 0.0


def _put_errors() -> float:
    return metrics.REGISTRY.get_sample_value("lakelog_object_errors_total", {"op": "put"}) or 0.0


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Every os.fsync from now on, as (path of the fd, thread name); still really fsyncs."""
    seen: list[tuple[str, str]] = []
    real: Callable[[int], None] = os.fsync

    def counting(fd: int) -> None:
        seen.append((os.readlink(f"/proc/self/fd/{fd}"), threading.current_thread().name))
        real(fd)

    monkeypatch.setattr(os, "fsync", counting)
    return seen


# --- B: a retry that finds our own earlier attempt is a success ------------------------------


async def test_same_key_same_bytes_is_a_success(
    storage: ObjectStorage, caplog: pytest.LogCaptureFixture
) -> None:
    parts = [b"first part, ", bytearray(b"second part"), memoryview(b"..end")[1:]]
    await storage.put("wal/k", parts)
    before = _recovered()
    with caplog.at_level(logging.INFO, logger="lakelog.log.storage.store"):
        await storage.put("wal/k", parts)  # what obstore's retry sends after a lost answer
    assert _recovered() == before + 1
    assert any(
        "wal/k" in r.getMessage() and "counted as success" in r.getMessage() for r in caplog.records
    )
    assert bytes(await storage.get("wal/k")) == b"first part, second part.end"
    assert [info.key for info in await storage.list()] == ["wal/k"]


async def test_same_size_other_bytes_is_still_a_conflict(storage: ObjectStorage) -> None:
    await storage.put("wal/k", [b"aaaa"])
    before, errors = _recovered(), _put_errors()
    with pytest.raises(ObjectExistsError):
        await storage.put("wal/k", [b"aaab"])
    with pytest.raises(ObjectExistsError):
        await storage.put("wal/k", [b"aaaaa"])  # other size: no GET needed to tell
    assert _recovered() == before
    assert _put_errors() == errors + 2
    assert bytes(await storage.get("wal/k")) == b"aaaa"


async def test_empty_object_put_twice(storage: ObjectStorage) -> None:
    await storage.put("wal/empty", [])
    await storage.put("wal/empty", [])
    assert (await storage.head("wal/empty")).size == 0


# --- C: file:// puts are fsynced before they return ----------------------------------------


async def test_file_put_fsyncs_file_directory_and_new_directories(
    tmp_path: Path, fsyncs: list[tuple[str, str]]
) -> None:
    root = tmp_path / "objects"
    storage = ObjectStorage.from_url(f"file://{root}")
    assert storage.fsyncs
    await storage.put("wal/a", [b"x" * 100])
    # The file, its directory (link + unlink of the staging name), then once: the parents
    # of the directories this process had not seen (wal/ is new; so is the root).
    assert [path for path, _ in fsyncs] == [
        str(root / "wal" / "a"),
        str(root / "wal"),
        str(root),
        str(tmp_path),
    ]
    assert all(thread != threading.main_thread().name for _, thread in fsyncs)  # off the loop

    fsyncs.clear()
    await storage.put("wal/b", [b"y"])
    assert [path for path, _ in fsyncs] == [str(root / "wal" / "b"), str(root / "wal")]

    fsyncs.clear()
    await storage.put("seg/t/0/c", [b"z"])  # two new directories below the root
    assert [path for path, _ in fsyncs] == [
        str(root / "seg" / "t" / "0" / "c"),
        str(root / "seg" / "t" / "0"),
        str(root / "seg" / "t"),
        str(root / "seg"),
        str(root),
    ]

    fsyncs.clear()
    await storage.put("top", [b"t"])  # directly in the root
    assert [path for path, _ in fsyncs] == [str(root / "top"), str(root)]


async def test_recovered_put_is_fsynced_too(tmp_path: Path, fsyncs: list[tuple[str, str]]) -> None:
    storage = ObjectStorage.from_url(f"file://{tmp_path}")
    await storage.put("wal/a", [b"same"])
    fsyncs.clear()
    await storage.put("wal/a", [b"same"])
    assert [path for path, _ in fsyncs] == [str(tmp_path / "wal" / "a"), str(tmp_path / "wal")]


async def test_fsync_can_be_turned_off(tmp_path: Path, fsyncs: list[tuple[str, str]]) -> None:
    plain = ObjectStorage.from_url(f"file://{tmp_path}")
    storage = ObjectStorage(plain.store, plain.url, fsync=False)
    assert not storage.fsyncs
    await storage.put("wal/a", [b"x"])
    assert fsyncs == []
    assert bytes(await storage.get("wal/a")) == b"x"


async def test_only_file_fsyncs(storage: ObjectStorage, fsyncs: list[tuple[str, str]]) -> None:
    local = storage.url.startswith("file://")
    assert storage.fsyncs == local
    await storage.put("wal/a", [b"x" * 1000])
    await storage.put("wal/a", [b"x" * 1000])
    assert bool(fsyncs) == local


async def test_failed_fsync_fails_the_put(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    storage = ObjectStorage.from_url(f"file://{tmp_path}")

    def broken(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken)
    errors = _put_errors()
    with pytest.raises(StorageError, match="fsync failed"):
        await storage.put("wal/a", [b"x"])
    assert _put_errors() == errors + 1
    # The caller's best-effort clean-up (the WAL writer deletes after a failed upload).
    await storage.delete("wal/a")
    await storage.delete("wal/a")
    assert await storage.list() == []


async def test_delete_of_a_missing_key_is_fine(storage: ObjectStorage) -> None:
    """What the WAL writer relies on after a failed upload, on every backend."""
    await storage.delete("wal/never-written")
    await storage.put("wal/x", [b"x"])
    await storage.delete("wal/x")
    await storage.delete("wal/x")
    assert await storage.list() == []
