"""The PostgreSQL batch coordinator: one database shared by brokers on many hosts."""

from lakelog.coordinator.postgres.coordinator import PostgresBatchCoordinator

__all__ = ["PostgresBatchCoordinator"]
