"""The S3 fault proxy (tests/support/s3_fault_proxy.py) in front of moto, seen from obstore.

Each fault kind is observed from a real obstore client, the control API is driven over
HTTP (as the fault harness does from another process), and the lost-response case shows
that `ObjectStorage.put` turns obstore's 412 on retry into a success with nothing left over.
"""

from __future__ import annotations

import asyncio
import http.client
import io
import json
import subprocess
import sys
import time
import urllib.error
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import obstore
import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from obstore.exceptions import AlreadyExistsError

from lakelog.log.storage.store import ObjectStorage, StorageError
from lakelog.util import metrics
from tests.support import s3_fault_proxy as fp
from tests.support.s3 import ACCESS_KEY, REGION, SECRET_KEY, s3_client
from tests.support.s3_fault_proxy import S3FaultProxy

pytestmark = pytest.mark.s3

PROXY_SCRIPT = Path(__file__).resolve().parents[2] / "support" / "s3_fault_proxy.py"


@pytest.fixture
async def proxy(s3_endpoint: str) -> AsyncIterator[S3FaultProxy]:
    """A fault proxy in front of the test S3 server, on the test's event loop."""
    async with S3FaultProxy(s3_endpoint, seed=7) as running:
        yield running


def _through(proxy: S3FaultProxy, bucket: str, opts: dict[str, Any], **extra: Any) -> ObjectStorage:
    return ObjectStorage.from_url(f"s3://{bucket}", **{**opts, "endpoint": proxy.url, **extra})


def _seen(proxy: S3FaultProxy, method: str) -> list[tuple[int | None, str | None]]:
    return [(e["status"], e["fault"]) for e in proxy.events() if e["method"] == method]


def _bucket_keys(endpoint: str, bucket: str) -> list[str]:
    listing = s3_client(endpoint).list_objects_v2(Bucket=bucket)  # type: ignore[attr-defined]
    return [item["Key"] for item in listing.get("Contents", [])]


async def test_lost_put_response_is_a_success_and_leaves_nothing_behind(
    proxy: S3FaultProxy, s3_endpoint: str, s3_bucket: str, s3_opts: dict[str, Any]
) -> None:
    """S3 stores the first PUT but the client gets a 503; obstore's retry gets 412."""
    storage = _through(proxy, s3_bucket, s3_opts, max_retries=3)
    proxy.set_rules([{"kind": "error_after", "method": "PUT", "status": 503, "limit": 1}])
    recovered = metrics.REGISTRY.get_sample_value("lakelog_object_put_recovered_total") or 0.0
    parts = [b"a" * 70_000, b"b" * 1000, b"c"]
    await storage.put("wal/0190aaaa-lost-response", parts)
    assert _seen(proxy, "PUT") == [(503, "error_after"), (412, None)]
    after = metrics.REGISTRY.get_sample_value("lakelog_object_put_recovered_total")
    assert after == recovered + 1
    assert bytes(await storage.get("wal/0190aaaa-lost-response")) == b"".join(parts)
    assert _bucket_keys(s3_endpoint, s3_bucket) == ["wal/0190aaaa-lost-response"]
    assert proxy.counters()["faults"]["error_after"] == 1


async def test_dropped_put_connection_is_a_success_too(
    proxy: S3FaultProxy, s3_endpoint: str, s3_bucket: str, s3_opts: dict[str, Any]
) -> None:
    storage = _through(proxy, s3_bucket, s3_opts, max_retries=3)
    proxy.set_rules([{"kind": "drop_after", "method": "PUT", "limit": 1}])
    await storage.put("wal/dropped", [b"payload"])
    assert _seen(proxy, "PUT") == [(None, "drop_after"), (412, None)]
    assert bytes(await storage.get("wal/dropped")) == b"payload"
    assert _bucket_keys(s3_endpoint, s3_bucket) == ["wal/dropped"]


async def test_definitive_put_failure_then_best_effort_delete(
    proxy: S3FaultProxy, s3_endpoint: str, s3_bucket: str, s3_opts: dict[str, Any]
) -> None:
    """No retries left: the put fails though S3 stored it; a delete removes the orphan."""
    storage = _through(proxy, s3_bucket, s3_opts, max_retries=0)
    proxy.set_rules([{"kind": "error_after", "method": "PUT", "status": 500}])
    with pytest.raises(StorageError):
        await storage.put("wal/failed", [b"stored anyway"])
    assert _bucket_keys(s3_endpoint, s3_bucket) == ["wal/failed"]
    await storage.delete("wal/failed")
    await storage.delete("wal/failed")  # missing now: still fine
    assert _bucket_keys(s3_endpoint, s3_bucket) == []


async def test_error_before_is_retried_and_never_reaches_s3(
    proxy: S3FaultProxy, s3_bucket: str, s3_opts: dict[str, Any]
) -> None:
    storage = _through(proxy, s3_bucket, s3_opts, max_retries=3)
    proxy.set_rules([{"kind": "error_before", "method": "PUT", "status": 500, "limit": 2}])
    forwarded = proxy.counters()["forwarded"]
    await storage.put("wal/k", [b"kept"])
    assert _seen(proxy, "PUT") == [(500, "error_before"), (500, "error_before"), (200, None)]
    counters = proxy.counters()
    assert counters["forwarded"] == forwarded + 1  # only the attempt that got through
    assert counters["faults"]["error_before"] == counters["faults_total"] == 2
    assert proxy.rules()[0]["fired"] == 2


async def test_error_after_seen_by_a_bare_obstore_client(
    proxy: S3FaultProxy, s3_bucket: str, s3_opts: dict[str, Any]
) -> None:
    """What the broker got before issue 11: obstore's create-only retry raises."""
    store = _through(proxy, s3_bucket, s3_opts, max_retries=2).store
    proxy.set_rules([{"kind": "error_after", "method": "PUT", "limit": 1}])
    with pytest.raises(AlreadyExistsError):
        await obstore.put_async(store, "k", b"x", mode="create")
    # GET and HEAD answers are lost too, and retried: the caller never notices.
    proxy.set_rules(
        [
            {"kind": "error_after", "method": "GET", "limit": 1},
            {"kind": "error_after", "method": ["HEAD"], "limit": 1},
        ]
    )
    assert bytes(await (await obstore.get_async(store, "k")).bytes_async()) == b"x"
    assert (await obstore.head_async(store, "k"))["size"] == 1
    assert _seen(proxy, "GET") == [(503, "error_after"), (200, None)]
    assert _seen(proxy, "HEAD") == [(503, "error_after"), (200, None)]


async def test_drop_after_on_get_is_retried(
    proxy: S3FaultProxy, s3_bucket: str, s3_opts: dict[str, Any]
) -> None:
    storage = _through(proxy, s3_bucket, s3_opts, max_retries=2)
    await storage.put("obj", [b"0123456789"])
    connections = proxy.counters()["connections"]
    proxy.set_rules([{"kind": "drop_after", "method": "GET", "limit": 1}])
    assert bytes(await storage.get_range("obj", 2, 5)) == b"234"
    assert _seen(proxy, "GET") == [(None, "drop_after"), (206, None)]
    assert proxy.counters()["connections"] > connections  # the client had to reconnect


async def test_delay_is_a_latency_spike(
    proxy: S3FaultProxy, s3_bucket: str, s3_opts: dict[str, Any]
) -> None:
    storage = _through(proxy, s3_bucket, s3_opts, max_retries=0, timeout_s=0.2)
    await storage.put("obj", [b"x"])
    proxy.set_rules([{"kind": "delay", "seconds": 0.3, "method": "HEAD", "limit": 1}])
    with pytest.raises(StorageError):
        await storage.head("obj")  # the client's timeout is shorter than the spike
    proxy.set_rules([{"kind": "delay", "seconds": 0.1, "method": "HEAD"}])
    started = time.perf_counter()
    assert (await storage.head("obj")).size == 1
    assert time.perf_counter() - started >= 0.1
    assert proxy.counters()["faults"]["delay"] == 2


async def test_filters_and_probability(
    proxy: S3FaultProxy, s3_bucket: str, s3_opts: dict[str, Any]
) -> None:
    storage = _through(proxy, s3_bucket, s3_opts, max_retries=0)
    proxy.set_rules([{"kind": "error_before", "method": "PUT", "key": "/wal/"}])
    await storage.put("seg/x", [b"not under wal"])  # key filter: passes
    await storage.get("seg/x")
    with pytest.raises(StorageError):
        await storage.put("wal/x", [b"faulted"])

    proxy.set_rules([{"kind": "error_before", "method": "HEAD", "probability": 0.5}], seed=3)
    outcomes = []
    for _ in range(40):
        try:
            await storage.head("seg/x")
            outcomes.append(True)
        except StorageError:
            outcomes.append(False)
    failed = outcomes.count(False)
    assert 5 < failed < 35
    assert proxy.rules()[0]["fired"] == failed

    proxy.set_rules([{"kind": "error_before", "probability": 0.0}])
    for _ in range(5):
        await storage.head("seg/x")
    assert proxy.rules()[0]["fired"] == 0


async def test_control_api_over_http(proxy: S3FaultProxy) -> None:
    """The harness drives a proxy in another process this way (blocking calls: threads)."""
    state = await asyncio.to_thread(
        fp.remote_set_rules,
        proxy.url,
        [{"kind": "delay", "seconds": 0.01}, fp.FaultRule("error_after", status=500, limit=1)],
        seed=1,
        reset_counters=True,
    )
    assert [r["kind"] for r in state["rules"]] == ["delay", "error_after"]
    assert state["rules"][1]["status"] == 500
    assert state["counters"]["requests"] == 0
    assert [r["kind"] for r in proxy.rules()] == ["delay", "error_after"]

    with pytest.raises(urllib.error.HTTPError) as bad:
        await asyncio.to_thread(fp.remote_set_rules, proxy.url, [{"kind": "explode"}])
    assert bad.value.code == 400
    assert "kind" in json.loads(bad.value.read())["error"]
    assert len(proxy.rules()) == 2  # a bad request changes nothing

    state = await asyncio.to_thread(fp.remote_clear, proxy.url)
    assert state["rules"] == []
    state = await asyncio.to_thread(fp.remote_reset, proxy.url)
    assert state["counters"]["faults_total"] == 0
    state = await asyncio.to_thread(fp.remote_state, proxy.url)
    assert set(state) == {"rules", "counters", "events"}
    assert state["counters"]["requests"] == 0  # control requests are not counted


async def test_http_framing_keep_alive_chunked_head_expect(
    proxy: S3FaultProxy, s3_endpoint: str, s3_bucket: str
) -> None:
    """One kept-alive connection: a chunked PUT, a HEAD (length, no body), a GET."""

    def signed(method: str) -> dict[str, str]:
        request = AWSRequest(method, f"{proxy.url}/{s3_bucket}/framed")
        request.headers["x-amz-content-sha256"] = "UNSIGNED-PAYLOAD"
        S3SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), "s3", REGION).add_auth(request)
        return dict(request.headers.items())

    def talk() -> tuple[int, int, str | None, bytes, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
        try:
            body = iter([b"chunk-one|", b"chunk-two"])
            conn.request("PUT", f"/{s3_bucket}/framed", body, signed("PUT"), encode_chunked=True)
            put = conn.getresponse()
            put.read()
            conn.request("HEAD", f"/{s3_bucket}/framed", headers=signed("HEAD"))
            head = conn.getresponse()
            head_body = head.read()
            conn.request("GET", f"/{s3_bucket}/framed", headers=signed("GET"))
            got = conn.getresponse().read()
            return put.status, head.status, head.getheader("Content-Length"), head_body, got
        finally:
            conn.close()

    put, head, length, head_body, got = await asyncio.to_thread(talk)
    assert (put, head, length, head_body, got) == (200, 200, "19", b"", b"chunk-one|chunk-two")
    assert proxy.counters()["connections"] == 1

    def boto_put() -> bytes:  # boto3 sends `Expect: 100-continue` with put_object
        client = s3_client(proxy.url)
        client.put_object(Bucket=s3_bucket, Key="boto", Body=io.BytesIO(b"via boto"))  # type: ignore[attr-defined]
        answer = client.get_object(Bucket=s3_bucket, Key="boto")  # type: ignore[attr-defined]
        return bytes(answer["Body"].read())

    assert await asyncio.to_thread(boto_put) == b"via boto"


async def test_standalone_process(
    s3_endpoint: str, s3_bucket: str, s3_opts: dict[str, Any]
) -> None:
    """`python tests/support/s3_fault_proxy.py`: first stdout line is the port."""
    proc = subprocess.Popen(
        [sys.executable, str(PROXY_SCRIPT), "--upstream", s3_endpoint, "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 30)
        url = f"http://127.0.0.1:{int(line)}"
        await asyncio.to_thread(
            fp.remote_set_rules, url, [{"kind": "error_before", "method": "PUT", "limit": 1}]
        )
        storage = ObjectStorage.from_url(
            f"s3://{s3_bucket}", **{**s3_opts, "endpoint": url, "max_retries": 2}
        )
        await storage.put("wal/via-process", [b"ok"])
        state = await asyncio.to_thread(fp.remote_state, url)
        assert state["counters"]["faults"]["error_before"] == 1
        assert [(e["method"], e["status"]) for e in state["events"]] == [
            ("PUT", 503),
            ("PUT", 200),
        ]
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0


def test_proxy_on_its_own_thread(s3_endpoint: str, s3_bucket: str) -> None:
    """For synchronous callers: the proxy runs its own loop; boto3 retries the 503."""
    proxy = S3FaultProxy(s3_endpoint).start_thread()
    try:
        proxy.set_rules([{"kind": "error_before", "method": "GET", "limit": 1}])
        client = s3_client(proxy.url)
        client.put_object(Bucket=s3_bucket, Key="t", Body=b"threaded")  # type: ignore[attr-defined]
        answer = client.get_object(Bucket=s3_bucket, Key="t")  # type: ignore[attr-defined]
        assert answer["Body"].read() == b"threaded"
        assert _seen(proxy, "GET") == [(503, "error_before"), (200, None)]
    finally:
        proxy.stop_thread()
    with pytest.raises(OSError):
        http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=2).connect()
