"""Altering BROKER config resources: what Lakelog answers for the keys it does not apply
at runtime (the ones it does are `dynamic_broker_configs.DYNAMIC_KEYS`).

Lakelog's other broker settings are static (flags > `LAKELOG_*` env > lakelog.toml >
defaults). Each key is answered by what it is, so the message tells the user what to do:

- a key Kafka lets you change dynamically: refused, saying to set it statically;
- a key Kafka itself cannot change dynamically: refused with Kafka's words;
- DELETE (reset to the static value) of any key: accepted, a no-op: there is no dynamic
  value to remove, so the key already has its static value.
"""

from __future__ import annotations

from collections.abc import Sequence

from lakelog.server.cluster.dynamic_broker_configs import DYNAMIC_KEYS
from lakelog.util.errors import ErrorCode

DELETE = 1

KAFKA_DYNAMIC_BROKER_KEYS = frozenset(
    {
        "advertised.listeners",
        "background.threads",
        "compression.type",
        "follower.replication.throttled.rate",
        "leader.replication.throttled.rate",
        "listeners",
        "log.cleaner.backoff.ms",
        "log.cleaner.dedupe.buffer.size",
        "log.cleaner.delete.retention.ms",
        "log.cleaner.io.buffer.load.factor",
        "log.cleaner.io.buffer.size",
        "log.cleaner.io.max.bytes.per.second",
        "log.cleaner.max.compaction.lag.ms",
        "log.cleaner.min.cleanable.ratio",
        "log.cleaner.min.compaction.lag.ms",
        "log.cleaner.threads",
        "log.cleanup.policy",
        "log.flush.interval.messages",
        "log.flush.interval.ms",
        "log.index.interval.bytes",
        "log.index.size.max.bytes",
        "log.message.timestamp.after.max.ms",
        "log.message.timestamp.before.max.ms",
        "log.message.timestamp.type",
        "log.preallocate",
        "log.retention.bytes",
        "log.retention.ms",
        "log.roll.jitter.ms",
        "log.roll.ms",
        "log.segment.bytes",
        "log.segment.delete.delay.ms",
        "max.connection.creation.rate",
        "max.connections",
        "max.connections.per.ip",
        "max.connections.per.ip.overrides",
        "message.max.bytes",
        "metric.reporters",
        "min.insync.replicas",
        "num.io.threads",
        "num.network.threads",
        "num.recovery.threads.per.data.dir",
        "num.replica.fetchers",
        "producer.id.expiration.ms",
        "remote.log.manager.copy.max.bytes.per.second",
        "remote.log.manager.fetch.max.bytes.per.second",
        "replica.alter.log.dirs.io.max.bytes.per.second",
        "sasl.enabled.mechanisms",
        "sasl.jaas.config",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.truststore.location",
        "transaction.partition.verification.enable",
        "unclean.leader.election.enable",
    }
)
"""Kafka's dynamically updatable broker configs (per broker or cluster-wide default) that
tools commonly set; sasl/ssl listener-prefixed forms count too (see `_kafka_dynamic`)."""


def _kafka_dynamic(name: str) -> bool:
    if name in KAFKA_DYNAMIC_BROKER_KEYS:
        return True
    # listener.name.<listener>.<ssl or sasl config>
    return name.startswith("listener.name.")


def broker_alter_problem(ops: Sequence[tuple[str, int]]) -> tuple[ErrorCode, str] | None:
    """Why altering these (name, operation) pairs on a BROKER resource is refused, or
    None when every one is a reset (DELETE), which is a no-op here."""
    changed = [name for name, op in ops if op != DELETE]
    if not changed:
        return None
    dynamic = sorted(n for n in changed if _kafka_dynamic(n))
    static = sorted(n for n in changed if not _kafka_dynamic(n))
    parts = []
    if dynamic:
        parts.append(
            f"Lakelog applies only {sorted(DYNAMIC_KEYS)} at runtime, so these cannot be "
            f"updated dynamically: {dynamic}; set them with flags, LAKELOG_* environment "
            "variables or lakelog.toml and restart the broker"
        )
    if static:
        parts.append(f"Cannot update these configs dynamically: {static}")
    return ErrorCode.invalid_request, ". ".join(parts) + "."
