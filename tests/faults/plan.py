"""How long a fault run lasts and which faults it injects: the short form (make test) and
the long one (make faults)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Plan:
    """What one run does. Counts are targets spread evenly (with jitter) over the load
    phase; a kill is skipped while PostgreSQL is down (a restart cannot register then)."""

    duration_s: float
    kills: int
    stops: int
    pg_stops: int = 1
    pg_stop_s: float = 10.0
    s3_fault_s: float = 60.0
    s3_fault_probability: float = 0.10
    latency_spikes: int = 2
    brokers: int = 3
    partitions: int = 4
    idempotent_producers: int = 2
    plain_producers: int = 2
    rate_per_producer: float = 40.0
    big_every: int = 25
    """Every n-th record of a producer is big (~500 KB); the others are 1 KiB."""
    big_size: int = 500_000
    small_size: int = 1024
    stop_s: tuple[float, float] = (2.0, 8.0)
    """How long a SIGSTOPped broker sleeps: below and above the 3 s session timeout."""
    message_timeout_ms: int = 180_000
    flush_timeout_s: float = 200.0
    seed: int = 0
    gc_after: bool = False
    """Run `lakelog pipeline gc` (orphan grace 0) once the brokers are stopped: what a
    SIGKILL between upload and commit left behind is GC's to remove, and must be gone."""


SHORT_PLAN = Plan(
    duration_s=40, kills=3, stops=2, pg_stop_s=5, s3_fault_s=15, latency_spikes=1, seed=11
)
LONG_PLAN = Plan(
    duration_s=600,
    kills=60,
    stops=12,
    pg_stops=1,
    pg_stop_s=10,
    s3_fault_s=60,
    latency_spikes=4,
    rate_per_producer=30,
    big_every=40,
    seed=1150,
    gc_after=True,
)


# ------------------------------------------------------------------- servers
