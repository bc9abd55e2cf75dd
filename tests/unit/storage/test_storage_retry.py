"""Transient S3 failures are retried with backoff by obstore, bounded by `max_retries`.

A proxy in front of moto answers 503 to chosen requests (fault injection); everything else
reaches the real server.
"""

from __future__ import annotations

from typing import Any

import pytest

from lakelog.log.storage.store import ObjectStorage, StorageError
from lakelog.util import metrics

pytestmark = pytest.mark.s3


def _through(proxy: Any, bucket: str, opts: dict[str, Any], **extra: Any) -> ObjectStorage:
    return ObjectStorage.from_url(f"s3://{bucket}", **{**opts, "endpoint": proxy.url, **extra})


async def test_put_and_get_survive_503s(
    faulty_proxy: Any, s3_bucket: str, s3_opts: dict[str, Any]
) -> None:
    storage = _through(faulty_proxy, s3_bucket, s3_opts, max_retries=3)
    faulty_proxy.fail_next("PUT", 2)
    await storage.put("wal/k", [b"retried ", b"write"])
    assert faulty_proxy.statuses("PUT") == [503, 503, 200]

    faulty_proxy.fail_next("GET", 3)
    assert bytes(await storage.get_range("wal/k", 0, 7)) == b"retried"
    assert faulty_proxy.statuses("GET") == [503, 503, 503, 206]


async def test_retries_are_bounded(
    faulty_proxy: Any, s3_bucket: str, s3_opts: dict[str, Any]
) -> None:
    storage = _through(faulty_proxy, s3_bucket, s3_opts, max_retries=1)
    errors = metrics.REGISTRY.get_sample_value("lakelog_object_errors_total", {"op": "put"})
    faulty_proxy.fail_next("PUT", 2)
    with pytest.raises(StorageError):
        await storage.put("wal/k", [b"lost"])
    assert faulty_proxy.statuses("PUT") == [503, 503]
    after = metrics.REGISTRY.get_sample_value("lakelog_object_errors_total", {"op": "put"})
    assert after == (errors or 0.0) + 1

    # The next attempt by the caller goes through, and create-only still holds.
    await storage.put("wal/k", [b"kept"])
    assert bytes(await storage.get("wal/k")) == b"kept"


async def test_retries_can_be_disabled(
    faulty_proxy: Any, s3_bucket: str, s3_opts: dict[str, Any]
) -> None:
    storage = _through(faulty_proxy, s3_bucket, s3_opts, max_retries=0)
    faulty_proxy.fail_next("HEAD", 1)
    with pytest.raises(StorageError):
        await storage.head("anything")
    assert faulty_proxy.statuses("HEAD") == [503]
