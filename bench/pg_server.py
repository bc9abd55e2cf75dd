"""A throwaway PostgreSQL server for the benchmarks, through `scripts/postgres.sh`.

The script starts its server with fsync and synchronous_commit off (right for tests, not
for a latency figure), so `restart(durable=True)` restarts it with PostgreSQL's defaults:
a commit then waits for its WAL flush, as on a production server.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from broker_proc import CLK_TCK

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "postgres.sh"


def available() -> str | None:
    """Why PostgreSQL cannot be measured here, or None when it can."""
    if not SCRIPT.exists():
        return f"{SCRIPT} does not exist"
    try:
        import psycopg  # noqa: F401

        from lakelog.coordinator import open_coordinator

        open_coordinator("postgresql://nobody@127.0.0.1:1/none")  # nothing connects yet
    except (ImportError, ValueError) as exc:
        return f"no postgresql:// coordinator: {exc}"
    return None


class PgServer:
    """`start()` gives the URL of database "lakelog"; `stop()` removes everything."""

    def __init__(self) -> None:
        # Its own dir right under /tmp: the server user must reach it through its parents.
        self.dir = Path(tempfile.mkdtemp(prefix="lakelog-bench-pg-"))
        self.url = ""
        self.port = 0

    def start(self) -> str:
        done = subprocess.run(
            ["bash", str(SCRIPT), "start", str(self.dir)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0:
            raise RuntimeError(f"postgres.sh start failed: {done.stderr.strip()[-500:]}")
        self.url = done.stdout.strip().splitlines()[-1]
        match = re.search(r":(\d+)/", self.url)
        if match is None:
            raise RuntimeError(f"postgres.sh printed no URL: {done.stdout!r}")
        self.port = int(match.group(1))
        return self.url

    def restart(self, durable: bool) -> None:
        """Restart with the script's settings, or (durable) with fsync and
        synchronous_commit at PostgreSQL's defaults (on)."""
        opts = (
            f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.dir}/sock "
            "-c max_connections=300 -c shared_buffers=64MB"
        )
        if not durable:
            opts += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        pg_ctl = _bindir() / "pg_ctl"
        cmd = [str(pg_ctl), "-D", f"{self.dir}/data", "-l", f"{self.dir}/server.log", "-w",
               "-t", "30", "restart", "-m", "fast", "-o", opts]  # fmt: skip
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)

    def settings(self) -> dict[str, Any]:
        """The durability settings the server actually runs with."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            out = {"version": conn.execute("SHOW server_version").fetchone()[0]}  # type: ignore[index]
            for name in ("fsync", "synchronous_commit", "full_page_writes"):
                out[name] = conn.execute(f"SHOW {name}").fetchone()[0]  # type: ignore[index]
        return out

    def cpu_seconds(self) -> float:
        """CPU seconds of the postmaster and all its children (backends, WAL writer...)."""
        pid = int((self.dir / "data" / "postmaster.pid").read_text().split()[0])
        total = 0
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue  # exited meanwhile
            if entry.name == str(pid) or fields[1] == str(pid):
                total += int(fields[11]) + int(fields[12])
        return total / CLK_TCK

    def new_database(self, name: str) -> str:
        """A fresh empty database (the role may create them); its URL."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url.rsplit("/", 1)[0] + "/" + name

    def recycle_wal(self, mib: int) -> None:
        """Write `mib` MiB of WAL, then checkpoint twice, so the segments it filled are
        recycled for the timed run, as on a server that has been running for a while.

        A fresh server has no recycled segments: every 16 MiB of WAL it creates and
        zero-fills a new segment file and fsyncs it, and the commit that crosses the
        boundary waits for that (8-15 ms more here, once per ~20 commits of 8 MiB
        objects, i.e. the p99). A running server renames the segments a checkpoint frees
        into future ones (`wal_recycle`, on by default), so it pays that only in its first
        minutes."""
        import psycopg

        superuser = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        with psycopg.connect(superuser, autocommit=True) as conn:
            conn.execute("CREATE TABLE bench_wal_pad (x text)")
            for _ in range(max(1, mib // 16)):  # ~16 MiB of WAL per statement
                conn.execute(
                    "INSERT INTO bench_wal_pad"
                    " SELECT repeat('x', 1000) FROM generate_series(1, 14000)"
                )
                conn.execute("TRUNCATE bench_wal_pad")
            conn.execute("DROP TABLE bench_wal_pad")
            conn.execute("CHECKPOINT")
            conn.execute("CHECKPOINT")

    def stop(self) -> None:
        subprocess.run(
            ["bash", str(SCRIPT), "stop", str(self.dir)], capture_output=True, timeout=120
        )
        shutil.rmtree(self.dir, ignore_errors=True)


def _bindir() -> Path:
    """The newest installed PostgreSQL's binaries (as the script picks them)."""
    dirs = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name))
    for d in reversed(dirs):
        if (d / "pg_ctl").exists():
            return d
    raise RuntimeError("no pg_ctl under /usr/lib/postgresql")
