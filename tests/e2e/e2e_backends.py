"""Where test brokers keep their state: embedded (SQLite + local files under the data dir,
the default) or scale-out (PostgreSQL + S3 on moto), chosen by LAKELOG_TEST_BACKEND.

In scale-out mode every data dir gets its own bucket and database, remembered in a small
file inside it, so brokers started on one data dir form one cluster exactly as they do
in embedded mode."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

from lakelog.log.storage.store import ObjectStorage

SCALE_OUT = os.environ.get("LAKELOG_TEST_BACKEND", "embedded") == "scaleout"
_STATE_FILE = "scaleout-backend.json"


@dataclass(frozen=True)
class Backend:
    storage_url: str
    coordinator_url: str

    @property
    def env(self) -> dict[str, str]:
        return {"STORAGE_URL": self.storage_url, "COORDINATOR_URL": self.coordinator_url}

    def list_keys(self, prefix: str) -> set[str]:
        storage = ObjectStorage.from_url(self.storage_url)
        return {o.key for o in asyncio.run(storage.list(prefix))}

    def read(self, key: str) -> bytes:
        storage = ObjectStorage.from_url(self.storage_url)
        return bytes(asyncio.run(storage.get(key)))


def embedded(data_dir: Path) -> Backend:
    objects = (data_dir / "objects").resolve()
    objects.mkdir(parents=True, exist_ok=True)
    return Backend(
        objects.as_uri(), "sqlite:///" + str((data_dir / "coordinator.sqlite3").resolve())
    )


def _new_database(admin_url: str) -> str:
    import psycopg

    name = f"lakelog_e2e_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base, _, _ = admin_url.rpartition("/")
    return f"{base}/{name}"


def scale_out(data_dir: Path) -> Backend:
    state = data_dir / _STATE_FILE
    if state.exists():
        saved = json.loads(state.read_text())
        return Backend(saved["storage_url"], saved["coordinator_url"])
    from tests.support.s3 import ACCESS_KEY, SECRET_KEY, make_bucket

    endpoint = os.environ["LAKELOG_TEST_S3_ENDPOINT"]
    bucket = make_bucket(endpoint)
    backend = Backend(
        f"s3://{bucket}/lakelog?endpoint={endpoint}&region=us-east-1"
        f"&access_key_id={ACCESS_KEY}&secret_access_key={SECRET_KEY}",
        _new_database(os.environ["LAKELOG_TEST_POSTGRES_URL"]),
    )
    data_dir.mkdir(parents=True, exist_ok=True)
    state.write_text(
        json.dumps({"storage_url": backend.storage_url, "coordinator_url": backend.coordinator_url})
    )
    return backend


def backend_for(data_dir: Path) -> Backend:
    """The pass's backend; a data dir a test set up with `scale_out` keeps PostgreSQL + S3
    whichever pass runs it (the Spark cluster tests need both)."""
    if SCALE_OUT or (data_dir / _STATE_FILE).exists():
        return scale_out(data_dir)
    return embedded(data_dir)
