"""Fixtures shared by every test folder; folder-specific ones live in their own conftest."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterator

import pytest


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """An S3 endpoint URL: `LAKELOG_TEST_S3_ENDPOINT` if set, else moto's server on loopback.

    Any credentials work with moto (tests use "testing"); buckets are the tests' business.
    """
    external = os.environ.get("LAKELOG_TEST_S3_ENDPOINT")
    if external:
        yield external.rstrip("/")
        return
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()
