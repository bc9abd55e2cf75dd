"""What a Lakelog cluster costs per month, projected from its brokers' own counters.

People choose diskless Kafka to cut cost, so they need to see the bill; this module is
the pure model behind `lakelog cost` (text in, dollars out, no I/O): parse `/metrics`,
turn counter deltas into per-second rates, price a 30-day month, and price what classic
Kafka (replication factor 3 over 3 zones) would pay for the same workload: its cross-zone
traffic and its three replicas on block storage, so the two totals compare like with like.
Scraping and printing live in `cli/cost.py`.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

MONTH_DAYS = 30
MONTH_SECONDS = MONTH_DAYS * 86_400
GB = 1 << 30
"""AWS prices storage and transfer per GB of 2**30 bytes."""
DEFAULT_RETENTION_DAYS = 7.0

PUT_CLASS_OPS = ("put", "list")
"""Priced as S3 PUT/COPY/POST/LIST requests."""
GET_CLASS_OPS = ("get", "get_range", "get_ranges", "head")
"""Priced as S3 GET/SELECT and all other requests (HEAD included)."""
DELETE_OPS = ("delete",)
"""S3 does not charge for DELETE; priced separately so other stores can."""

GET_RANGES_COUNTING = "per_call"
"""`lakelog_object_requests_total{op="get_ranges"}` counts calls, not the ranges nor the
HTTP GETs obstore issues for them (one per coalesced group of ranges): a lower bound."""


@dataclass(frozen=True, slots=True)
class Prices:
    """USD list prices; defaults are AWS S3 Standard and EC2 inter-AZ, us-east-1."""

    put_list_per_1000_requests: float = 0.005
    get_per_1000_requests: float = 0.0004
    delete_per_1000_requests: float = 0.0
    storage_per_gb_month: float = 0.023
    inter_az_per_gb_each_direction: float = 0.01
    block_storage_per_gb_month: float = 0.08
    """AWS EBS gp3, where classic Kafka keeps its replicas."""

    @property
    def cross_zone_per_gb(self) -> float:
        """Both sides of an inter-AZ transfer pay, so a GB crossing costs twice the rate."""
        return 2 * self.inter_az_per_gb_each_direction


PRICE_KEYS: dict[str, str] = {
    "put_list_per_1000_requests": "USD per 1,000 PUT/COPY/POST/LIST requests",
    "get_per_1000_requests": "USD per 1,000 GET/SELECT/HEAD (ranged GETs included) requests",
    "delete_per_1000_requests": "USD per 1,000 DELETE requests (free on S3)",
    "storage_per_gb_month": "USD per GB-month stored (GB = 2**30 bytes)",
    "inter_az_per_gb_each_direction": (
        "USD per GB, charged on each side of a cross-zone transfer (a GB crossing pays 2x)"
    ),
    "block_storage_per_gb_month": (
        "USD per GB-month of block storage (classic Kafka's disks; default AWS EBS gp3)"
    ),
}
KAFKA_REPLICAS = 3
"""Classic Kafka's replication factor in the comparison: three copies on three disks."""


def prices_from_toml(text: str) -> Prices:
    """Prices from a TOML document of top-level `key = number` lines; missing keys keep
    their defaults, unknown keys are an error (a typo must not silently price at default)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"not valid TOML: {exc}") from exc
    unknown = sorted(set(data) - set(PRICE_KEYS))
    if unknown:
        raise ValueError(f"unknown price keys {unknown}; known: {sorted(PRICE_KEYS)}")
    for key, value in data.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{key} must be a number, got {value!r}")
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"{key} must be a finite number >= 0, got {value!r}")
    return Prices(**{key: float(value) for key, value in data.items()})


def prices_to_toml(prices: Prices | None = None) -> str:
    """The price table as TOML that `prices_from_toml` reads back, one commented key a line."""
    prices = prices or Prices()
    lines = [
        "# lakelog cost price table (USD). Defaults: AWS S3 Standard, EC2 inter-AZ transfer "
        "and EBS gp3, us-east-1."
    ]
    for key, doc in PRICE_KEYS.items():
        lines += [f"# {doc}", f"{key} = {getattr(prices, key)!r}"]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------- counters

SeriesKey = tuple[str, tuple[tuple[str, str], ...]]
Series = dict[SeriesKey, float]
"""Counter samples by (name, sorted labels), e.g. ("lakelog_bytes_in_total", ())."""

_STARTED_AT = "lakelog_bytes_in_created"
"""An unlabeled counter's creation time: set when the broker process imports its metrics."""


def parse_metrics(text: str) -> Series:
    """The `lakelog_*_total` counter samples of one Prometheus text exposition."""
    out: Series = {}
    for family in text_string_to_metric_families(text):
        if family.type != "counter" or not family.name.startswith("lakelog_"):
            continue
        for sample in family.samples:
            if sample.name.endswith("_total"):
                out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def started_at(text: str) -> float | None:
    """The broker's start as a Unix time, from `lakelog_bytes_in_created`, if exposed."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == _STARTED_AT:
                return float(sample.value)
    return None


def counter_delta(before: Series, after: Series) -> Series:
    """`after - before` per series; a series that went down was reset by a broker restart,
    so its whole new value is the increase (Prometheus' `increase()` rule)."""
    out: Series = {}
    for key, value in after.items():
        old = before.get(key, 0.0)
        out[key] = value - old if value >= old else value
    return out


@dataclass(frozen=True, slots=True)
class Usage:
    """Cluster-wide per-second rates, the only input of the price model."""

    put_class_requests: float = 0.0
    get_class_requests: float = 0.0
    delete_requests: float = 0.0
    object_put_bytes: float = 0.0
    bytes_in: float = 0.0
    bytes_out: float = 0.0
    cross_zone_bytes: float = 0.0
    unknown_zone_bytes: float = 0.0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            **{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)}
        )

    def as_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def usage_from_series(delta: Series, seconds: float) -> Usage:
    """One broker's rates from the counter increase it showed over `seconds`."""
    if seconds <= 0:
        raise ValueError(f"observation time must be positive, got {seconds}")

    def total(name: str, **match: Iterable[str]) -> float:
        found = 0.0
        for (series, labels), value in delta.items():
            have = dict(labels)
            if series == name and all(have.get(k) in allowed for k, allowed in match.items()):
                found += value
        return found / seconds

    requests, zone = "lakelog_object_requests_total", "lakelog_zone_bytes_total"
    return Usage(
        put_class_requests=total(requests, op=PUT_CLASS_OPS),
        get_class_requests=total(requests, op=GET_CLASS_OPS),
        delete_requests=total(requests, op=DELETE_OPS),
        object_put_bytes=total("lakelog_object_bytes_total", op=("put",)),
        bytes_in=total("lakelog_bytes_in_total"),
        bytes_out=total("lakelog_bytes_out_total"),
        cross_zone_bytes=total("lakelog_cross_zone_bytes_total"),
        unknown_zone_bytes=total(zone, client_zone=("unknown",))
        + total(zone, broker_zone=("unknown",))
        - total(zone, client_zone=("unknown",), broker_zone=("unknown",)),
    )


def sum_usage(usages: Iterable[Usage]) -> Usage:
    out = Usage()
    for usage in usages:
        out = out + usage
    return out


# ----------------------------------------------------------------------- projection


@dataclass(frozen=True, slots=True)
class LineItem:
    """One row of the monthly bill: `usd = quantity / per * unit_price`."""

    key: str
    item: str
    quantity: float
    unit: str
    unit_price: float
    per: float
    usd: float

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _item(
    key: str, item: str, quantity: float, unit: str, price: float, per: float = 1.0
) -> LineItem:
    return LineItem(key, item, quantity, unit, price, per, quantity / per * price)


@dataclass(frozen=True, slots=True)
class Projection:
    """A 30-day month of Lakelog costs, and classic Kafka's bill (cross-zone transfer and
    replicated disks) for the same workload beside it."""

    lakelog: tuple[LineItem, ...]
    classic: tuple[LineItem, ...]
    notes: tuple[str, ...]

    @property
    def lakelog_usd(self) -> float:
        return sum(item.usd for item in self.lakelog)

    @property
    def classic_usd(self) -> float:
        return sum(item.usd for item in self.classic)


def stored_gb_month(put_bytes_per_s: float, retention_days: float) -> float:
    """Steady-state storage: once the cluster has run longer than the retention, the store
    holds `retention` worth of writes all month long, i.e. a month's writes times
    `retention_days / 30` (more than one month's writes when retention exceeds 30 days)."""
    if not math.isfinite(retention_days) or retention_days <= 0:
        raise ValueError(f"retention must be a finite number of days > 0, got {retention_days}")
    return put_bytes_per_s * retention_days * 86_400 / GB


def project(
    usage: Usage,
    prices: Prices,
    retention_days: float = DEFAULT_RETENTION_DAYS,
) -> Projection:
    """Price a 30-day month at the observed rates."""
    month = MONTH_SECONDS
    cross = prices.cross_zone_per_gb
    lakelog = (
        _item(
            "put_list_requests",
            "Object PUT + LIST",
            usage.put_class_requests * month,
            "requests",
            prices.put_list_per_1000_requests,
            1000,
        ),
        _item(
            "get_requests",
            "Object GET + HEAD",
            usage.get_class_requests * month,
            "requests",
            prices.get_per_1000_requests,
            1000,
        ),
        _item(
            "delete_requests",
            "Object DELETE",
            usage.delete_requests * month,
            "requests",
            prices.delete_per_1000_requests,
            1000,
        ),
        _item(
            "storage",
            f"Storage ({retention_days:g} days kept)",
            stored_gb_month(usage.object_put_bytes, retention_days),
            "GB-month",
            prices.storage_per_gb_month,
        ),
        _item(
            "cross_zone",
            "Cross-zone client traffic",
            usage.cross_zone_bytes * month / GB,
            "GB",
            cross,
        ),
    )
    classic = classic_kafka_items(usage.bytes_in, usage.bytes_out, prices, retention_days)
    return Projection(lakelog, classic, tuple(_notes(usage, prices, retention_days)))


def classic_kafka_items(
    bytes_in: float, bytes_out: float, prices: Prices, retention_days: float
) -> tuple[LineItem, ...]:
    """Classic Kafka's month (RF=3 over 3 zones, clients not zone-aware) at `bytes_in`
    produced and `bytes_out` consumed per second: cross-zone transfer and replicated disks."""
    month, cross = MONTH_SECONDS, prices.cross_zone_per_gb
    ingest_gb, egress_gb = bytes_in * month / GB, bytes_out * month / GB
    return (
        _item("replication", "Replication (2 copies cross)", 2 * ingest_gb, "GB", cross),
        _item("produce_cross_zone", "Produce (2/3 crosses)", ingest_gb * 2 / 3, "GB", cross),
        _item("consume_cross_zone", "Consume (2/3 crosses)", egress_gb * 2 / 3, "GB", cross),
        _item(
            "replica_storage",
            f"Disks ({KAFKA_REPLICAS} replicas, {retention_days:g} days kept)",
            KAFKA_REPLICAS * stored_gb_month(bytes_in, retention_days),
            "GB-month",
            prices.block_storage_per_gb_month,
        ),
    )


def classic_kafka_usd_per_byte_per_second(
    prices: Prices, retention_days: float = DEFAULT_RETENTION_DAYS
) -> float:
    """Classic Kafka's monthly bill per byte per second produced and consumed once (about
    $310 per MiB/s at the default prices and 7 days: $169 of transfer, $142 of disks)."""
    return sum(item.usd for item in classic_kafka_items(1.0, 1.0, prices, retention_days))


def put_usd_per_put_per_second(prices: Prices) -> float:
    """The monthly bill of one PUT per second ($12.96 at S3's $0.005 per 1,000)."""
    return MONTH_SECONDS / 1000 * prices.put_list_per_1000_requests


def puts_per_byte_at_fraction(
    fraction: float, prices: Prices, retention_days: float = DEFAULT_RETENTION_DAYS
) -> float:
    """PUTs per byte produced whose bill is `fraction` of classic Kafka's for the same
    bytes (the WAL's PUT budget per byte/s: `produce_put_cost_fraction`). Free PUTs: inf."""
    put_usd = put_usd_per_put_per_second(prices)
    wanted = fraction * classic_kafka_usd_per_byte_per_second(prices, retention_days)
    if put_usd <= 0:
        return math.inf if wanted > 0 else 0.0
    return wanted / put_usd


def _notes(usage: Usage, prices: Prices, retention_days: float) -> list[str]:
    notes = [
        "Month = 30 days at the observed rates; GB = 2**30 bytes.",
        "get_ranges requests are counted once per call (the metric counts calls; obstore "
        "may issue several HTTP GETs per call), so GET requests are a lower bound; LIST "
        "is counted per call too (one request per 1,000 keys listed).",
        f"Storage is the steady state: bytes PUT per second x {retention_days:g} days "
        "retention, held all month (no cap at one month of writes: longer retention "
        "stores more). Objects go only when all their batches expire and GC runs, so "
        "expect somewhat more.",
        "Only broker traffic is seen: pipeline jobs (merge, GC, compaction, export) and "
        "object-store egress to other regions are not included.",
        "Classic Kafka: RF=3 over 3 zones, clients not zone-aware; cross-zone transfer "
        f"and {KAFKA_REPLICAS} replicas of {retention_days:g} days on block storage at "
        "100% disk use (real clusters keep headroom, so pay more); broker instances of "
        "either system are not included.",
    ]
    if usage.unknown_zone_bytes > 0:
        gb = usage.unknown_zone_bytes * MONTH_SECONDS / GB
        usd = gb * 2 / 3 * prices.cross_zone_per_gb
        notes.append(
            f"{gb:,.3f} GB/month of client traffic had no known zone (client.id without "
            "lakelog_az=<zone>, or a broker without --rack) and is not counted as "
            f"cross-zone; if 2/3 of it crosses zones, add ${usd:,.4f}."
        )
    return notes


def projection_dict(projection: Projection) -> dict[str, Any]:
    """The JSON-ready form of a projection."""
    return {
        "lakelog": {
            "items": [i.as_dict() for i in projection.lakelog],
            "total_usd": projection.lakelog_usd,
        },
        "classic_kafka_rf3": {
            "items": [i.as_dict() for i in projection.classic],
            "total_usd": projection.classic_usd,
        },
        "notes": list(projection.notes),
    }


def prices_dict(prices: Prices) -> Mapping[str, float]:
    return {key: getattr(prices, key) for key in PRICE_KEYS}
