"""A PostgreSQL server of a test's own (scripts/postgres.sh), stoppable and restartable on
the same data directory and port, so brokers see an outage and then a recovery. (The
suite's shared server, LAKELOG_TEST_POSTGRES_URL, must never be stopped.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

from tests.support.ports import free_port as _free_port

HOST = "127.0.0.1"
PG_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "postgres.sh"


class PostgresUnavailable(RuntimeError):
    """scripts/postgres.sh could not start a server here."""


class RestartablePostgres:
    def __init__(self, prefix: str = "lakelog-test-pg.") -> None:
        # Not under pytest's tmp dirs: their 0700 parents keep the server user out.
        self.dir = Path(tempfile.mkdtemp(prefix=prefix))
        self.port = _free_port()
        self.url = ""
        self.running = False

    def start(self) -> str:
        out = subprocess.run(
            ["bash", str(PG_SCRIPT), "start", str(self.dir), str(self.port)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if out.returncode != 0:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise PostgresUnavailable(f"postgres.sh start failed: {out.stderr.strip()[-300:]}")
        self.url = out.stdout.strip().splitlines()[-1]
        self.running = True
        return self.url

    def _pg_ctl(self, *args: str) -> None:
        found = max(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"), default=None)
        pg_ctl = str(found) if found else (shutil.which("pg_ctl") or "pg_ctl")
        cmd = [pg_ctl, "-D", str(self.dir / "data"), *args]
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        subprocess.run(cmd, capture_output=True, timeout=90, check=True)

    def stop_server(self) -> None:
        """A fast shutdown: open connections are terminated, new ones refused."""
        self._pg_ctl("-m", "fast", "-w", "-t", "60", "stop")
        self.running = False

    def start_server(self) -> None:
        # The options of scripts/postgres.sh: same port and socket dir.
        opts = (
            f"-c listen_addresses={HOST} -p {self.port} -k {self.dir}/sock -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=300 "
            "-c shared_buffers=64MB"
        )
        self._pg_ctl("-l", str(self.dir / "server.log"), "-w", "-t", "60", "start", "-o", opts)
        self.running = True

    def new_database(self) -> str:
        import psycopg

        name = f"test_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url.rpartition("/")[0] + "/" + name

    def close(self) -> None:
        subprocess.run(
            ["bash", str(PG_SCRIPT), "stop", str(self.dir)],
            capture_output=True,
            timeout=120,
            check=False,
        )
        self.running = False
        shutil.rmtree(self.dir, ignore_errors=True)
