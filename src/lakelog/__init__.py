"""Lakelog: a diskless, leaderless, Kafka-wire-compatible streaming log."""

__version__ = "0.1.0"
