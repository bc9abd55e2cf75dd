"""The broker's WAL PUT budget from its settings: the seal policy stays pure (numbers
in, times out) and knows nothing of prices; this module prices a PUT against classic
Kafka with the same model and price table `lakelog cost` uses, so the two never disagree."""

from __future__ import annotations

from lakelog.cli.cost_model import DEFAULT_RETENTION_DAYS, Prices, puts_per_byte_at_fraction
from lakelog.config import Settings
from lakelog.log.produce.seal_policy import PutBudget


def put_budget(settings: Settings, prices: Prices | None = None) -> PutBudget:
    """`produce_put_cost_fraction` of Kafka's bill (7 days retained, default prices) in
    PUTs per byte, floored at one PUT per commit interval (the interval timer seals that
    often anyway) and capped at `produce_max_puts_per_second`."""
    interval_s = settings.produce_commit_interval_ms / 1000
    return PutBudget(
        max_per_second=settings.produce_max_puts_per_second,
        min_per_second=1.0 / interval_s if interval_s > 0 else 0.0,
        puts_per_byte=puts_per_byte_at_fraction(
            settings.produce_put_cost_fraction, prices or Prices(), DEFAULT_RETENTION_DAYS
        ),
    )
