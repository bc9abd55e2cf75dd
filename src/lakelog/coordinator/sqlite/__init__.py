"""The SQLite batch coordinator (the embedded default)."""

from lakelog.coordinator.sqlite.coordinator import SqliteBatchCoordinator

__all__ = ["SqliteBatchCoordinator"]
