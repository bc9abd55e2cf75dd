"""The scale-out backends for a benchmark: a throwaway PostgreSQL server (durable: fsync
and synchronous_commit on) and moto's S3 server over HTTP, both on loopback, with a
bucket. `with scale_out() as (storage_url, coordinator_url):` starts both and stops them.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from broker_proc import free_port
from common import BenchError
from pg_server import PgServer, available

MOTO = Path(__file__).resolve().parent.parent / "scripts" / "moto_server.py"


@contextmanager
def moto_s3() -> Iterator[str]:
    """moto's S3 server on a free loopback port; yields its endpoint URL."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(MOTO), "127.0.0.1", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise BenchError("moto's S3 server did not start") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def make_bucket(endpoint: str) -> str:
    import boto3

    name = f"lakelog-bench-{uuid.uuid4().hex[:12]}"
    boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    ).create_bucket(Bucket=name)
    return name


@contextmanager
def scale_out() -> Iterator[tuple[str, str]]:
    """(storage URL, coordinator URL) of a fresh bucket on moto and a fresh durable
    PostgreSQL database."""
    why = available()
    if why:
        raise BenchError(f"PostgreSQL not available: {why}")
    server = PgServer()
    try:
        server.start()
        server.restart(durable=True)
        database = server.new_database("bench_sweep")
        with moto_s3() as endpoint:
            bucket = make_bucket(endpoint)
            storage = f"s3://{bucket}/lakelog?endpoint={endpoint}&region=us-east-1"
            yield storage + "&access_key_id=testing&secret_access_key=testing", database
    finally:
        server.stop()
