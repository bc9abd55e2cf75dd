"""Fixtures shared by every test folder; folder-specific ones live in their own conftest."""

from __future__ import annotations

import glob
import logging
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import reaper
from tests.support.ports import free_port as _free_port

reaper.install()

POSTGRES_SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "postgres.sh"


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


def _postgres_missing() -> str | None:
    """Why this machine cannot run a throwaway PostgreSQL server, or None if it can."""
    if not glob.glob("/usr/lib/postgresql/*/bin/initdb") and not shutil.which("initdb"):
        return "no PostgreSQL server binaries (apt-get install postgresql, or `make test`)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root needs the postgres user to run the server as"
    return None


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A PostgreSQL URL whose role may CREATE DATABASE: `LAKELOG_TEST_POSTGRES_URL` if set
    (`make test` sets it), else a throwaway server started by scripts/postgres.sh for this
    session. Skips only when neither is possible."""
    external = os.environ.get("LAKELOG_TEST_POSTGRES_URL")
    if external:
        yield external
        return
    missing = _postgres_missing()
    if missing:
        pytest.skip(f"PostgreSQL tests skipped: LAKELOG_TEST_POSTGRES_URL unset and {missing}")
    # Not under pytest's tmp dirs: their 0700 parents would keep the server user out.
    workdir = tempfile.mkdtemp(prefix="lakelog-pg.")
    try:
        started = subprocess.run(
            ["bash", str(POSTGRES_SCRIPT), "start", workdir], capture_output=True, text=True
        )
        if started.returncode != 0:
            raise RuntimeError(f"scripts/postgres.sh start failed:\n{started.stderr}")
        yield started.stdout.strip().splitlines()[-1]
    finally:
        subprocess.run(["bash", str(POSTGRES_SCRIPT), "stop", workdir], check=False)
