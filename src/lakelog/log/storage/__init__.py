"""Object storage: the store behind a URL, the object key layout, the WAL object format."""

from lakelog.log.storage.keys import KeyKind, new_wal_key, parse_key, segment_key
from lakelog.log.storage.store import (
    ObjectExistsError,
    ObjectInfo,
    ObjectNotFoundError,
    ObjectStorage,
    StorageError,
)
from lakelog.log.storage.wal import WalEntry, WalEntryInfo, WalObject, build_wal, read_footer

__all__ = [
    "KeyKind",
    "ObjectExistsError",
    "ObjectInfo",
    "ObjectNotFoundError",
    "ObjectStorage",
    "StorageError",
    "WalEntry",
    "WalEntryInfo",
    "WalObject",
    "build_wal",
    "new_wal_key",
    "parse_key",
    "read_footer",
    "segment_key",
]
