"""One notion of "a backend is unavailable": the coordinator database (PostgreSQL or SQLite)
or object storage failed in a way that retrying later can fix.

Request paths answer such failures with Kafka's retriable error for the API (see
`lakelog.server.api.outage`) instead of letting them close the client's connection; background
loops log them briefly and try again. Everything else (a bug, a constraint violation, a
missing object) is not an outage and keeps its usual handling.
"""

from __future__ import annotations

import logging
import sqlite3
import sys
import time

import psycopg
from psycopg import errors as pg_errors

from lakelog.log.storage.store import ObjectExistsError, ObjectNotFoundError, StorageError

# SQLite primary result codes that mean "not now" rather than "wrong": busy or locked by
# another process, out of memory, I/O error, disk full, cannot open, lock protocol error.
_SQLITE_TRANSIENT = frozenset({5, 6, 7, 10, 13, 14, 15})


def is_outage(exc: BaseException) -> bool:
    """True when `exc` (or what it was raised from) says a backend is unavailable."""
    seen = 0
    current: BaseException | None = exc
    while current is not None and seen < 8:
        if _is_outage_one(current):
            return True
        current = current.__cause__
        seen += 1
    return False


def _is_outage_one(exc: BaseException) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return all(is_outage(e) for e in exc.exceptions)
    if isinstance(exc, StorageError):
        # A missing or already present key is an answer, not an outage.
        return not isinstance(exc, ObjectNotFoundError | ObjectExistsError)
    # Connection lost or refused, pool timeout (psycopg_pool.PoolTimeout subclasses it),
    # admin shutdown, server starting up, out of resources, I/O errors, retries exhausted.
    if isinstance(exc, psycopg.OperationalError):
        return True
    # A read-only server: a standby answering while failover is in progress.
    if isinstance(exc, pg_errors.ReadOnlySqlTransaction):
        return True
    if isinstance(exc, sqlite3.OperationalError):
        code = getattr(exc, "sqlite_errorcode", None)
        if code is not None:
            return code & 0xFF in _SQLITE_TRANSIENT
        text = str(exc).lower()
        return any(s in text for s in ("locked", "busy", "disk i/o", "unable to open"))
    return False


class RateLimitedLog:
    """At most one warning per `interval_s`, saying how many were held back, so a long
    outage writes a few lines instead of one per request."""

    def __init__(self, logger: logging.Logger, interval_s: float = 10.0) -> None:
        self._log = logger
        self._interval_s = interval_s
        self._last = -interval_s
        self._held = 0

    def warning(self, msg: str, *args: object) -> None:
        now = time.monotonic()
        if now - self._last < self._interval_s:
            self._held += 1
            return
        held, self._held, self._last = self._held, 0, now
        if held:
            self._log.warning(msg + " (%d similar held back)", *args, held)
        else:
            self._log.warning(msg, *args)


_BACKGROUND: dict[tuple[str, str], RateLimitedLog] = {}


def log_failure(logger: logging.Logger, msg: str, *args: object) -> None:
    """For background loops, inside `except`: an outage is one short rate-limited warning
    per message (the loop retries on its own), anything else a full traceback."""
    exc = sys.exc_info()[1]
    if exc is None or not is_outage(exc):
        logger.exception(msg, *args)
        return
    limited = _BACKGROUND.get((logger.name, msg))
    if limited is None:
        limited = _BACKGROUND[(logger.name, msg)] = RateLimitedLog(logger)
    limited.warning(msg + " (backend unavailable, will retry): %r", *args, exc)
