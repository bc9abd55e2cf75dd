"""Bytes the batch coordinator holds, read from its database beside the broker: what the
latency sweep turns into "coordinator bytes written per GiB" (issue 32's small-write path
moves produce bytes from the object store into the coordinator, so its growth is part of
the trade).

`row_bytes()` is the database's live size minus the inline files' payload: what rows
(files, batches, producer state, ...) take. Inline bytes come and go (the mover deletes
them once they are in an object), so the sweep adds the broker's own count of bytes it
committed inline to the growth of `row_bytes()`. SQLite: pages in use (page count minus
free pages) x page size. PostgreSQL: `pg_database_size`, which keeps dead row versions
until vacuum, so it counts rows rewritten too (closer to "written" than "held")."""

from __future__ import annotations

import sqlite3
from pathlib import Path

INLINE_PAYLOAD = "SELECT coalesce(sum(length(data)), 0) FROM inline_files"


class CoordinatorMeter:
    def __init__(self, url: str) -> None:
        self.url = url

    def row_bytes(self) -> int:
        if self.url.startswith("sqlite:"):
            return self._sqlite()
        return self._postgres()

    def _sqlite(self) -> int:
        path = Path(self.url.removeprefix("sqlite:///"))
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
        try:
            pages = conn.execute("PRAGMA page_count").fetchone()[0]
            free = conn.execute("PRAGMA freelist_count").fetchone()[0]
            size = conn.execute("PRAGMA page_size").fetchone()[0]
            inline = conn.execute(INLINE_PAYLOAD).fetchone()[0]
        finally:
            conn.close()
        return (pages - free) * size - int(inline)

    def _postgres(self) -> int:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            row = conn.execute(
                f"SELECT pg_database_size(current_database()), ({INLINE_PAYLOAD})"
            ).fetchone()
        assert row is not None
        return int(row[0]) - int(row[1])
