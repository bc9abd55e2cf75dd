"""WAL checkpoints off the commit path.

SQLite checkpoints inside the commit that takes the WAL past `wal_autocheckpoint` pages
(1,000 by default): that commit also copies every page changed since the last checkpoint
into the database file and fsyncs it. A full WAL object's commit_file writes ~440 pages,
so every second or third commit paid that too (p99 +7 ms). Instead the coordinator's
connection checkpoints itself only as a backstop (`BACKSTOP_PAGES`), and this thread, on
its own connection, runs a PASSIVE checkpoint (it never blocks the writer or readers)
after local writes, at most one per `interval_s`."""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from pathlib import Path

log = logging.getLogger(__name__)

BACKSTOP_PAGES = 20_000
"""The committing connection's own wal_autocheckpoint (~80 MiB of WAL), should this thread
fall behind or die."""

INTERVAL_S = 0.05


class Checkpointer:
    """One thread and one connection per coordinator instance; `wrote()` is thread-safe."""

    def __init__(self, path: Path, interval_s: float = INTERVAL_S) -> None:
        self._path = path
        self._interval_s = interval_s
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(
            target=self._run, name="lakelog-sqlite-checkpoint", daemon=True
        )
        self.checkpoints = 0
        """Checkpoints run so far (for tests)."""

    def start(self) -> None:
        self._thread.start()

    def wrote(self) -> None:
        """A write transaction committed: checkpoint soon."""
        self._wake.set()

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        self._thread.join()

    def _run(self) -> None:
        conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        try:
            # FULL: the checkpoint fsyncs the WAL before copying it and the database after.
            conn.execute("PRAGMA synchronous = FULL")
            while True:
                self._wake.wait()
                if self._stopping:
                    return
                self._wake.clear()
                self._checkpoint(conn)
                # Coalesce the commits of the next interval into one checkpoint.
                time.sleep(self._interval_s)
        finally:
            conn.close()

    def _checkpoint(self, conn: sqlite3.Connection) -> None:
        try:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            self.checkpoints += 1
        except sqlite3.Error as exc:  # busy (another process checkpoints) or I/O: next time
            log.warning("SQLite WAL checkpoint failed: %s", exc)
