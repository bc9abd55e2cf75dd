"""Storage fixtures: a fresh bucket per test, one storage per backend, a faulty HTTP proxy."""

from __future__ import annotations

import http.client
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from lakelog.log.storage.store import ObjectStorage
from tests.support.s3 import ACCESS_KEY, SECRET_KEY, make_bucket


def s3_options(endpoint: str, **extra: Any) -> dict[str, Any]:
    """Options that reach the test S3 endpoint over plain HTTP, fast retries."""
    return {
        "endpoint": endpoint,
        "region": "us-east-1",
        "access_key_id": ACCESS_KEY,
        "secret_access_key": SECRET_KEY,
        "init_backoff_s": 0.01,
        "max_backoff_s": 0.05,
        **extra,
    }


@pytest.fixture
def s3_bucket(s3_endpoint: str) -> str:
    """A fresh, empty bucket on the test S3 endpoint."""
    return make_bucket(s3_endpoint)


@pytest.fixture
def s3_opts(s3_endpoint: str) -> dict[str, Any]:
    """`ObjectStorage.from_url` options for the test S3 endpoint."""
    return s3_options(s3_endpoint)


@pytest.fixture
def s3_credentials() -> tuple[str, str]:
    """(access key id, secret access key) that the test S3 endpoint accepts."""
    return ACCESS_KEY, SECRET_KEY


@pytest.fixture(params=["memory", "file", pytest.param("s3", marks=pytest.mark.s3)])
async def storage(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ObjectStorage]:
    """The same ObjectStorage API over each backend the broker supports."""
    if request.param == "memory":
        yield ObjectStorage.from_url("memory://")
    elif request.param == "file":
        yield ObjectStorage.from_url(f"file://{tmp_path}/objects")
    else:
        endpoint = request.getfixturevalue("s3_endpoint")
        bucket = make_bucket(endpoint)
        yield ObjectStorage.from_url(f"s3://{bucket}/root", **s3_options(endpoint))


@dataclass
class FaultyProxy:
    """An HTTP proxy in front of the S3 server that answers 503 to chosen requests.

    Fault injection only: every request it does not fail reaches the real server.
    """

    upstream: str
    url: str = ""
    seen: list[tuple[str, int]] = field(default_factory=list)
    _failures: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def fail_next(self, method: str, count: int) -> None:
        """Answer the next `count` requests with this HTTP method with 503."""
        with self._lock:
            self._failures[method] = count

    def take_failure(self, method: str) -> bool:
        with self._lock:
            left = self._failures.get(method, 0)
            if left:
                self._failures[method] = left - 1
            return bool(left)

    def statuses(self, method: str) -> list[int]:
        with self._lock:
            return [status for seen_method, status in self.seen if seen_method == method]


def _handler(proxy: FaultyProxy) -> type[BaseHTTPRequestHandler]:
    upstream = urlsplit(proxy.upstream)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: pytest shows failures, not traffic."""

        def _relay(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            if proxy.take_failure(self.command):
                self._answer(503, [("Content-Length", "0")], b"")
                return
            conn = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=30)
            try:
                conn.request(self.command, self.path, body=body, headers=dict(self.headers))
                resp = conn.getresponse()
                data = resp.read()
                headers = [
                    (name, value)
                    for name, value in resp.getheaders()
                    if name.lower() not in ("transfer-encoding", "connection", "content-length")
                ]
                length_header = resp.getheader("Content-Length", str(len(data)))
                if self.command != "HEAD":
                    length_header = str(len(data))
                headers.append(("Content-Length", length_header))
                self._answer(resp.status, headers, data)
            finally:
                conn.close()

        def _answer(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
            with proxy._lock:
                proxy.seen.append((self.command, status))
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.end_headers()
            if body and self.command != "HEAD":
                self.wfile.write(body)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _relay

    return Handler


@pytest.fixture
def faulty_proxy(s3_endpoint: str) -> Iterator[FaultyProxy]:
    proxy = FaultyProxy(upstream=s3_endpoint)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(proxy))
    server.daemon_threads = True
    proxy.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(
        target=server.serve_forever, args=(0.05,), name="faulty-proxy", daemon=True
    )
    thread.start()
    try:
        yield proxy
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
