"""Broker settings: flags > env `LAKELOG_*` > `lakelog.toml` > defaults.

Kept whole past 600 lines: it is the one list of every setting, each with the docstring that
`docs/configuration.md` is generated from (`lakelog.cli.config_reference`), and one place to
read them all is the point; the parsing helpers below the class are small."""

from __future__ import annotations

import difflib
import math
import os
import socket
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

MiB = 1024 * 1024
TOML_FILE = "lakelog.toml"
STORAGE_SCHEMES = ("file", "memory", "s3", "s3a", "gs", "az", "abfs", "abfss", "azure")
COORDINATOR_SCHEMES = ("sqlite", "postgresql", "postgres")


class SettingsError(ValueError):
    """A setting that cannot be used, named with where it came from (one line)."""


def split_host_port(value: str, default_port: int = 9092) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep:
        return value, default_port
    return host.strip("[]"), int(port)


def check_host_port(value: str) -> str:
    """`value` if it is HOST:PORT with a port in 0..65535 (HOST may be empty: every
    interface), else ValueError."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{value!r} is not HOST:PORT (a port is a number 0-65535)")
    if host.startswith("[") != host.endswith("]"):
        raise ValueError(f"{value!r} is not HOST:PORT (unbalanced brackets)")
    return value


def redacted(url: str) -> str:
    """`url` without its query string and with any password masked, for messages."""
    base = url.split("?", 1)[0]
    scheme, sep, rest = base.partition("://")
    userinfo, at, host = rest.partition("@")
    if sep and at and ":" in userinfo:
        return f"{scheme}://{userinfo.split(':', 1)[0]}:***@{host}"
    return base


def check_storage_url(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in STORAGE_SCHEMES:
        raise ValueError(
            f"unsupported storage URL {redacted(url)!r}: use file:///abs/dir, memory://, "
            "s3://bucket/prefix, gs://... or az://..."
        )
    if scheme.lower() == "file":
        path = rest.split("?", 1)[0]
        if path.startswith("localhost/"):
            path = path[len("localhost") :]
        if not path.startswith("/") or not path.strip("/"):
            raise ValueError(
                f"file:// storage URL must name an absolute directory: {redacted(url)!r}"
            )
    return url


def check_coordinator_url(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in COORDINATOR_SCHEMES:
        raise ValueError(
            f"unsupported coordinator URL {redacted(url)!r}: use sqlite:///abs/path.sqlite3 or "
            "postgresql://user@host:port/db"
        )
    if scheme == "sqlite" and (not rest.startswith("/") or not rest.strip("/")):
        raise ValueError(f"sqlite coordinator URL must name an absolute file: {redacted(url)!r}")
    return url


def parse_ip_overrides(value: str) -> dict[str, int]:
    """`ip:count,ip:count` (IPv6 literals may be bracketed) into {ip: count}."""
    overrides: dict[str, int] = {}
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        ip, sep, count = item.rpartition(":")
        if not sep or not ip:
            raise ValueError(f"max_connections_per_ip_overrides: {item!r} is not ip:count")
        overrides[ip.strip().strip("[]")] = int(count)
    return overrides


def ipv4_of(host: str) -> str:
    """An IPv4 literal for `host`: librdkafka may resolve `localhost` to ::1."""
    if host in ("", "0.0.0.0", "::"):
        return "127.0.0.1"
    try:
        return socket.gethostbyname(host)
    except OSError:
        return host


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="LAKELOG_", toml_file="lakelog.toml", extra="ignore"
    )

    # broker
    listen: str = "127.0.0.1:9092"
    """HOST:PORT the Kafka listener binds (an empty HOST: every interface)."""
    advertised: str | None = None
    """HOST:PORT this broker gives clients in Metadata; default: `listen` (a host name is
    turned into its IPv4 address)."""
    data_dir: Path = Path("./lakelog-data")
    """Directory of the embedded coordinator (SQLite) and object store, used when
    `coordinator_url` / `storage_url` are not set."""
    broker_id: int = 0
    """This broker's id (0 or more), unique in the cluster."""
    rack: str | None = None
    """broker.rack: the availability zone of this broker, for zone-aware routing of clients
    that give theirs (client.rack)."""
    storage_url: str | None = None
    """Where the objects live: `file:///abs/dir`, `memory://`, `s3://bucket/prefix`, `gs://...`
    or `az://...`. Default: `file://<data_dir>/objects`."""
    coordinator_url: str | None = None
    """The batch coordinator's database: `sqlite:///abs/path.sqlite3` or
    `postgresql://user@host:port/db`. Default: `sqlite:///<data_dir>/coordinator.sqlite3`."""
    coordinator_pool_timeout_ms: int = 5_000
    """PostgreSQL: the longest a request waits for a pooled database connection. During a
    database outage each request waits this long, then is answered with a retriable
    error: keep it well under clients' request.timeout.ms (30 s)."""
    metrics_listen: str | None = None
    """HOST:PORT for the Prometheus `/metrics` endpoint. Unset: 127.0.0.1 at the listener's
    port + 1000 (10092 for 9092), or any free port when that one is taken (a warning says
    which); the address is logged at start and reported to `lakelog console` and `lakelog
    cost`. Empty (`--metrics-listen ""`): no endpoint."""
    schema_registry_listen: str | None = None
    """HOST:PORT for the built-in schema registry (Confluent Schema Registry's REST API,
    stored in the coordinator, so every broker answers the same). Unset: 127.0.0.1 at the
    listener's port + 1001 (10093 for 9092), or any free port when that one is taken (a
    warning says which); the URL is logged at start. Empty (`--schema-registry-listen ""`):
    no registry."""
    schema_registry_tls: bool = False
    """Serve the schema registry over HTTPS with the listener's certificate and key
    (`ssl_certificate_location`, `ssl_key_location`, `ssl_key_password`)."""
    schema_registry_auth: str = "none"
    """`basic`: every registry request needs HTTP basic auth as a SCRAM user stored in the
    coordinator (`lakelog configs --entity-type users` or Kafka's AlterUserScramCredentials
    create them), and when
    `authorizer_enabled` the ACLs decide what it may do (see docs/schema-registry.md).
    `none`: no login, and no ACL checks either."""
    schema_registry_max_schema_bytes: int = 1_048_576
    """The largest schema text the registry accepts (42209 beyond it); a request body may be
    twice this plus 64 KiB (JSON escaping), and a larger one is refused unread (413)."""
    schema_registry_max_subjects: int = 10_000
    """Subjects the registry holds at most; registering under a new one beyond is refused."""
    schema_registry_max_versions: int = 1_000
    """Versions (live and soft-deleted) one subject holds at most."""
    console_listen: str | None = None
    """HOST:PORT for the read-only web console inside this broker (`lakelog console`)."""
    console_command_config: Path | None = None
    """Client properties (as `--command-config`) the in-broker console connects to this
    broker's listener with: needed when the listener asks for TLS or a login."""
    console_user: str | None = None
    """HTTP basic auth user for the in-broker console (with `console_password_file`)."""
    console_password_file: Path | None = None
    """A file whose first line is `console_user`'s password: HTTP basic auth for the in-broker
    console (as `lakelog console --console-user --console-password-file`)."""
    cluster_id: str = "lakelog-cluster-0000000"
    """The cluster id told to clients (Metadata, DescribeCluster)."""

    # topics
    auto_create_topics_enable: bool = True
    """auto.create.topics.enable: a Metadata request naming a missing topic (and allowing
    auto-creation) creates it."""
    num_partitions: int = 1
    """num.partitions: partitions of an auto-created topic, and of a CreateTopics that leaves
    the count to the broker (-1)."""
    default_replication_factor: int = 1
    """default.replication.factor: the replication factor recorded and reported for topics
    created without one (the object store keeps the copies, not the brokers)."""
    message_max_bytes: int = 1 * MiB + 12
    """message.max.bytes: the default max.message.bytes of topics (largest record batch
    accepted)."""
    log_retention_ms: int = 7 * 24 * 3600 * 1000
    """log.retention.ms: the default retention.ms of topics; older records are deleted
    (-1: kept forever)."""
    log_retention_bytes: int = -1
    """log.retention.bytes: the default retention.bytes of topics; a partition larger than
    this loses its oldest records (-1: no limit)."""
    max_partitions_per_topic: int = 5_000
    """A topic may have at most this many partitions (CreateTopics, CreatePartitions,
    auto-creation): more get POLICY_VIOLATION. Kafka has no such cap; ours keeps one topic
    from costing every Metadata answer and every broker's caches a fortune."""
    max_partitions_per_request: int = 10_000
    """New partitions one CreateTopics or CreatePartitions request may create, all topics
    together: more and the whole request gets POLICY_VIOLATION ("Excessively large number
    of partitions per request."), as Kafka's KRaft controller answers above its fixed
    10,000 (KAFKA-17870)."""
    max_partitions: int = 50_000
    """Partitions in the whole cluster (the name KIP-578 proposed for Kafka): a topic whose
    partitions would go past it gets POLICY_VIOLATION. Checked against the topics this
    broker sees, so concurrent creations on several brokers may pass it by a request."""

    # network
    socket_request_max_bytes: int = 100 * MiB
    """socket.request.max.bytes: a request frame announced larger than this closes its
    connection with a log line."""
    non_produce_request_max_bytes: int = 8 * MiB
    """Requests other than Produce larger than this get INVALID_REQUEST without being
    decoded (no Kafka equivalent): a body of millions of tiny entries costs seconds of the
    event loop to check and decode, and no client needs that much outside Produce (8 MiB
    is a Fetch or OffsetCommit of some 250,000 partitions)."""
    max_connections: int = 10_000
    """max.connections: connections the broker holds at once; further ones are refused."""
    max_connections_per_ip: int = 1_000
    """max.connections.per.ip (Kafka: 2147483647, i.e. none): further connections from one
    address are refused with a log line. A tenth of `max_connections`, so one host (or a
    scanner) cannot take every slot, while hundreds of clients behind one NAT still fit."""
    max_connections_per_ip_overrides: str = ""
    """max.connections.per.ip.overrides: `ip:count,ip:count` (IP literals, not names)."""
    connections_max_idle_ms: int = 600_000
    """connections.max.idle.ms (Kafka's default, 10 min): a connection with no request
    and nothing in progress for this long is closed; clients reconnect when they need to."""
    queued_max_request_bytes: int = 256 * MiB
    """queued.max.request.bytes: bytes held in partly read requests, all connections
    together; a frame that must grow past it stops reading until others complete (should
    all holders wait, the oldest goes ahead, so it is exceeded by at most one request).
    Kafka's default is -1 (no bound), as here with -1; Kafka counts whole queued requests,
    we count partly read ones (dispatched ones are bounded per connection by
    max_inflight_bytes_per_connection)."""
    request_read_timeout_ms: int = 30_000
    """A request whose first bytes arrived but which is not complete this long after closes
    its connection with one log line (stops clients that announce a big frame and trickle
    it). Kafka has no such setting (its idle timeout counts any byte as activity); 30 s is
    clients' request.timeout.ms, after which they give up on the request anyway."""
    max_inflight_requests_per_connection: int = 1000
    """Requests of one connection in progress at once (pipelined); reading waits for room."""
    max_inflight_bytes_per_connection: int = 64 * MiB
    """Bytes of requests of one connection in progress at once; reading waits for room."""
    max_inflight_offset_commits_per_connection: int = 32
    """OffsetCommit and TxnOffsetCommit requests of one connection in progress at once;
    reading waits for room. Commits are written in batches, so a client that commits every
    record still fills a batch, and the rest wait in its socket (Kafka reads one request of
    a connection at a time) rather than in the broker's queue."""

    # listener security (off by default; see lakelog.security.listener)
    listener_security_protocol: str = "PLAINTEXT"
    """listener.security.protocol: PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL."""
    ssl_certificate_location: Path | None = None
    """The listener's PEM certificate chain (SSL, SASL_SSL)."""
    ssl_key_location: Path | None = None
    """The listener's PEM private key (SSL, SASL_SSL)."""
    ssl_key_password: str | None = None
    """Password of `ssl_key_location`, when the key is encrypted."""
    ssl_client_auth: str = "none"
    """ssl.client.auth: none | requested | required (client certificates)."""
    ssl_ca_location: Path | None = None
    """PEM CA bundle that signs client certificates (with ssl.client.auth)."""
    sasl_enabled_mechanisms: str = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
    """sasl.enabled.mechanisms: the SASL mechanisms offered, comma separated (PLAIN,
    SCRAM-SHA-256, SCRAM-SHA-512)."""
    sasl_users: Path | None = None
    """A file of `user:password` lines (PLAIN and SCRAM; SCRAM credentials are derived at
    start-up). Optional with a SCRAM mechanism: SCRAM users may live in the coordinator
    only (AlterUserScramCredentials, `lakelog configs --entity-type users`)."""
    connections_max_reauth_ms: int = 0
    """connections.max.reauth.ms (KIP-368; Kafka's default 0: off): a SASL session lasts
    this long; clients are told so and re-authenticate, and a connection still on an
    expired session is closed at its next request."""
    ssl_principal_mapping_rules: str = "DEFAULT"
    """ssl.principal.mapping.rules: how a client certificate's subject DN (RFC 2253)
    becomes the principal's name (`RULE:pattern/replacement/[LU],...,DEFAULT`)."""

    # authorization (off by default; see lakelog.security.authorizer)
    authorizer_enabled: bool = False
    """Check every request against the ACLs (Kafka's StandardAuthorizer rules). Off: no
    check at all, and the ACL APIs answer SECURITY_DISABLED."""
    super_users: str = ""
    """super.users: principals allowed everything, separated by semicolons
    (`User:admin;User:ops`)."""
    allow_everyone_if_no_acl_found: bool = False
    """allow.everyone.if.no.acl.found: a resource no ACL names is open to everyone
    (false: denied to all but super users)."""
    acl_refresh_interval_ms: int = 250
    """How often each broker checks the coordinator's ACL change counter (and reloads the
    ACLs when it moved), so a change made on one broker is enforced by all within a second."""
    acl_max_bindings: int = 100_000
    """ACLs the cluster may hold (CreateAcls beyond it fails): every broker keeps them all
    in memory."""

    # produce
    produce_buffer_max_bytes: int = 8 * MiB
    """A WAL object is sealed once it holds this many bytes (it passes them by at most one
    batch, so objects are full at full speed)."""
    produce_commit_interval_ms: int = 250
    """The longest a batch waits in the WAL buffer before its object is sealed."""
    produce_max_puts_per_second: float = 100.0
    """The most WAL objects a second: the hard cap of the PUT budget. A buffer is sealed
    early, as soon as no upload is in progress, one budget interval after the last seal. A
    buffer bound for the coordinator (the small-write path) costs no PUT: it is sealed as
    soon as the broker's previous commit has ended (group commit). 0: seal on size and
    interval only (`produce_commit_interval_ms`), inline buffers too."""
    produce_put_cost_fraction: float = 0.04
    """The WAL's PUT budget follows throughput: PUTs a second = this fraction x classic
    Kafka's monthly bill per byte/s (cross-zone transfer and 3 replicas on block storage
    for 7 days, priced as `lakelog cost` does with its default table, ~$310 per MiB/s) x
    the append rate / the monthly bill of one PUT a second ($12.96), between one PUT per
    `produce_commit_interval_ms` and `produce_max_puts_per_second`. 0.04 is about 1,000
    PUTs per GiB (0.96 PUTs/s per MiB/s): Lakelog's object storage itself is ~4.4% of
    Kafka's bill, so PUTs at 4% keep the total under a tenth of Kafka's from 10 MiB/s up
    while objects at 50 MiB/s are still sealed every ~21 ms. Lower it to save PUTs, raise
    it for lower latency at moderate load."""
    produce_fill_horizon_ms: int = 50
    """A WAL buffer that would reach `produce_buffer_max_bytes` within this long at the
    current append rate is not sealed early: it waits to be full. Near full speed that
    costs little latency and saves PUTs and commits (full objects at full speed); 0: the
    PUT budget alone decides."""
    produce_max_sealed_buffers: int = 4
    """Sealed WAL buffers waiting for their upload, at most; further produce waits for room."""
    produce_upload_retries: int = 3
    """Not read at present (WAL uploads are not retried by count); kept so files that set
    it stay valid."""
    produce_commit_retry_ms: int = 25_000
    """A commit that fails (coordinator outage) is retried, its outcome checked first, for
    this long before its batches fail; below clients' request.timeout.ms (30 s)."""
    produce_inline: bool = True
    """The small-write path (issue 32; on by default): while the broker's append rate is below
    `produce_inline_below_bytes_per_second`, a sealed WAL buffer of at most
    `produce_inline_max_bytes` is committed with its bytes in the coordinator (an inline
    file, as durable as the commit) instead of being PUT, and moved into an ordinary object
    later in the background. Saves almost every PUT of a lightly loaded broker."""
    produce_inline_max_bytes: int = 256 * 1024
    """The largest WAL buffer committed inline; bigger ones are PUT. Room for what gathers
    at 1-2 MiB/s while an upload or a stall of the event loop holds sealing back."""
    produce_inline_below_bytes_per_second: int = 2 * MiB
    """Buffers go inline only while the broker's append rate (last second) is below this;
    twice the 1 MiB/s up to which the path should take every write, as the one-second rate
    swings around a steady load."""
    produce_inline_broker_max_bytes: int = 64 * MiB
    """Inline bytes one broker may hold in the coordinator; past it, buffers are PUT (writes
    are never refused)."""
    produce_inline_total_max_bytes: int = 512 * MiB
    """Inline bytes the whole coordinator may hold (all brokers); past it, buffers are PUT."""
    produce_inline_move_bytes: int = 4 * MiB
    """The broker moves its inline files into one ordinary object once they add up to this
    many bytes..."""
    produce_inline_move_age_ms: int = 60_000
    """...or once the oldest is this old. Another broker's inline files are moved once they
    are twice this old (their broker is gone); `lakelog pipeline merge` moves all."""

    # fetch
    fetch_cache_max_bytes: int = 256 * MiB
    """Memory for the cache of recent batches, which tailing consumers read instead of
    object storage."""
    fetch_max_bytes: int = 55 * MiB
    """The most bytes one Fetch or ShareFetch answer carries, whatever the client asks."""
    fetch_poll_interval_ms: int = 50
    """How often a waiting Fetch (long poll) asks the coordinator for newly committed batches."""

    # consumer groups
    group_initial_rebalance_delay_ms: int = 3000
    """group.initial.rebalance.delay.ms: a new classic group waits this long for more members
    before its first rebalance."""
    group_min_session_timeout_ms: int = 6000
    """group.min.session.timeout.ms: the shortest session.timeout.ms a classic group member
    may ask for."""
    group_max_session_timeout_ms: int = 1_800_000
    """group.max.session.timeout.ms: the longest session.timeout.ms a classic group member may
    ask for."""
    offsets_retention_minutes: int = 7 * 24 * 60
    """offsets.retention.minutes: committed offsets of empty groups older than this are
    deleted."""
    offsets_retention_check_interval_ms: int = 600_000
    """offsets.retention.check.interval.ms: how often expired offsets are deleted."""
    offset_metadata_max_bytes: int = 4096
    """offset.metadata.max.bytes: the longest metadata string an offset commit may carry."""
    offset_commit_batch_max_offsets: int = 2000
    """Offset commits (OffsetCommit, TxnOffsetCommit) that arrive while the previous ones
    are being written are written together in one coordinator transaction, up to this many
    partition offsets (a larger request goes alone). At most four times as many wait; a
    commit beyond that waits for room."""
    group_lag_interval_ms: int = 10_000
    """How often each broker updates the consumer lag of the groups it coordinates (metrics)."""
    group_consumer_session_timeout_ms: int = 45_000
    """group.consumer.session.timeout.ms: a KIP-848 (group.protocol=consumer) member that
    sends no heartbeat for this long leaves the group."""
    group_consumer_heartbeat_interval_ms: int = 5_000
    """group.consumer.heartbeat.interval.ms, told to KIP-848 members in every answer."""
    group_consumer_assignors: str = "uniform,range"
    """group.consumer.assignors: the server assignors offered; the first is the default."""
    group_max_size: int = 2**31 - 1
    """group.max.size: members a classic group may have."""
    group_consumer_max_size: int = 2**31 - 1
    """group.consumer.max.size: members a KIP-848 consumer group may have."""
    group_consumer_min_session_timeout_ms: int = 45_000
    """group.consumer.min.session.timeout.ms: lower bound of a group's
    consumer.session.timeout.ms."""
    group_consumer_max_session_timeout_ms: int = 60_000
    """group.consumer.max.session.timeout.ms: upper bound of a group's
    consumer.session.timeout.ms."""
    group_consumer_min_heartbeat_interval_ms: int = 5_000
    """group.consumer.min.heartbeat.interval.ms: lower bound of a group's
    consumer.heartbeat.interval.ms."""
    group_consumer_max_heartbeat_interval_ms: int = 15_000
    """group.consumer.max.heartbeat.interval.ms: upper bound of a group's
    consumer.heartbeat.interval.ms. (These four bound the group configs, resource type 32.)"""
    group_share_session_timeout_ms: int = 45_000
    """group.share.session.timeout.ms: a share group member that sends no heartbeat for this
    long leaves the group (the default of the group config share.session.timeout.ms)."""
    group_share_min_session_timeout_ms: int = 45_000
    """group.share.min.session.timeout.ms: lower bound of a group's share.session.timeout.ms."""
    group_share_max_session_timeout_ms: int = 60_000
    """group.share.max.session.timeout.ms: upper bound of a group's share.session.timeout.ms."""
    group_share_heartbeat_interval_ms: int = 5_000
    """group.share.heartbeat.interval.ms, told to share group members (the default of the
    group config share.heartbeat.interval.ms)."""
    group_share_min_heartbeat_interval_ms: int = 5_000
    """group.share.min.heartbeat.interval.ms: lower bound of a group's
    share.heartbeat.interval.ms."""
    group_share_max_heartbeat_interval_ms: int = 15_000
    """group.share.max.heartbeat.interval.ms: upper bound of a group's
    share.heartbeat.interval.ms."""
    group_share_record_lock_duration_ms: int = 30_000
    """group.share.record.lock.duration.ms: how long a share consumer holds the records it
    acquired before they go to another consumer."""
    group_share_min_record_lock_duration_ms: int = 15_000
    """group.share.min.record.lock.duration.ms: lower bound of a group's
    share.record.lock.duration.ms."""
    group_share_max_record_lock_duration_ms: int = 60_000
    """group.share.max.record.lock.duration.ms: upper bound of a group's
    share.record.lock.duration.ms."""
    group_share_delivery_count_limit: int = 5
    """group.share.delivery.count.limit: deliveries of one record before it is archived."""
    group_share_min_delivery_count_limit: int = 2
    """group.share.min.delivery.count.limit: lower bound of a group's
    share.delivery.count.limit."""
    group_share_max_delivery_count_limit: int = 10
    """group.share.max.delivery.count.limit: upper bound of a group's
    share.delivery.count.limit."""
    group_share_partition_max_record_locks: int = 2_000
    """group.share.partition.max.record.locks: records of one partition a share group may
    hold acquired at once (the default of share.partition.max.record.locks)."""
    group_share_min_partition_max_record_locks: int = 100
    """group.share.min.partition.max.record.locks: lower bound of a group's
    share.partition.max.record.locks."""
    group_share_max_partition_max_record_locks: int = 10_000
    """group.share.max.partition.max.record.locks: upper bound of a group's
    share.partition.max.record.locks."""

    # transactions
    transaction_max_timeout_ms: int = 900_000
    """transaction.max.timeout.ms: InitProducerId with a longer transaction.timeout.ms gets
    INVALID_TRANSACTION_TIMEOUT."""
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10_000
    """How often each broker aborts transactions past their timeout (and samples the
    transaction metrics)."""

    # background
    retention_check_interval_ms: int = 30_000
    """How often each broker applies retention and deletes the objects no longer needed."""
    file_delete_grace_ms: int = 60_000
    """An object no longer referenced is deleted only this long after (reads in flight may
    still need it)."""
    table_status_interval_ms: int = 30_000
    """How often each broker refreshes its table topics' gauges (`lakelog_table_lag_records`,
    `_lag_seconds`, `_rows`, `_snapshots`) from the Iceberg catalog, the tables' metadata
    and the partitions' offsets; 0 turns them off."""
    compaction_interval_ms: int = 15_000
    """How often each broker looks for partitions of compacted topics (cleanup.policy
    `compact`) to compact itself, like Kafka's log.cleaner.backoff.ms; 0 turns the
    broker's compaction off (then only `lakelog pipeline compact` compacts)."""
    compaction_lease_ms: int = 60_000
    """A broker compacting a partition holds a lease in the coordinator this long,
    renewed as the pass goes; a dead broker's lease expires after it, and another broker
    compacts the partition."""
    compaction_max_keys_per_pass: int = 250_000
    """Keys one pass maps (about 200 bytes of broker memory each): past this, the rest of
    the partition waits for the next pass (the prefix compacted is still exact)."""
    compaction_max_bytes_per_pass: int = 256 * MiB
    """Dirty batch bytes one pass maps, as above."""
    compaction_max_bytes_per_second: int = 64 * MiB
    """log.cleaner.io.max.bytes.per.second: the batch bytes a broker's compaction reads
    per second (both passes), which caps its CPU (see bench/compaction_cpu.py for the
    CPU per GiB); 0 for no cap (the pass still yields to requests after each batch)."""
    broker_heartbeat_interval_ms: int = 2_000
    """How often each broker sends its heartbeat to the coordinator."""
    broker_session_timeout_ms: int = 30_000
    """broker.session.timeout.ms: a broker whose last heartbeat is this old is fenced."""
    broker_fenced_linger_ms: int = 60_000
    """A broker fenced for missing its session is still named in Metadata (leading no
    partition) this long, so clients keep its connection and their requests in flight
    there end by answer or timeout instead of being resent elsewhere (a duplicate when
    it had committed them). Longer than clients' request timeouts (30 s by default)."""
    broker_zone_failover_ms: int = 6_000
    """Fast failover: a broker stops leading partitions (Metadata sends clients to the other
    brokers; a zone's clients to the other zones' when their zone has none left) once its
    last heartbeat is this old, or 1.5 heartbeat intervals old while its advertised port
    refuses connections (a crashed process; checked by a connect probe, kept 1 s). It
    leads again with its next heartbeat. Only routing: fencing still waits for
    `broker_session_timeout_ms`. 0 turns it off. (Named for zones, where it came first.)"""

    # pipeline (`lakelog pipeline` jobs)
    gc_orphan_grace_ms: int = 3_600_000
    """gc.orphan.grace.ms: an object the coordinator does not know is an orphan once this
    old. Far above the longest upload-to-commit time (upload retries ~20 s, commits wait
    behind earlier ones, a broker silent for broker.session.timeout.ms is fenced)."""
    merge_min_age_ms: int = 600_000
    """Merge only WAL objects this old: tailing consumers read the fresh ones from cache."""
    merge_small_bytes: int = 4 * MiB
    """A WAL object with fewer live bytes than this is small: merge it."""
    merge_min_live_ratio: float = 0.5
    """An object whose live bytes are below this share of its size is fragmented."""
    merge_target_bytes: int = 64 * MiB
    """Target size of one merged segment object."""
    merge_row_max_bytes: int = 1 * MiB
    """Adjacent batches in a merged segment share one coordinator row up to this size (a
    fetch always returns at least one row, so keep it near max.partition.fetch.bytes)."""
    merge_max_files: int = 20_000
    """At most this many objects are merged in one run (bounds the job's memory)."""
    iceberg_catalog_uri: str = ""
    """iceberg.catalog.uri: an external Iceberg REST catalog (`https://host/path`) that
    `lakelog pipeline tables` commits table topics to. Empty: the built-in SQL catalog in
    the coordinator's own database (SQLite file or PostgreSQL), data under `tables/` in
    the object store."""
    iceberg_catalog_warehouse: str = ""
    """iceberg.catalog.warehouse: the warehouse the external REST catalog is asked for
    (its `warehouse` property); empty: the catalog's default."""
    pipeline_ship_lakelog: bool = True
    """On a Spark master that is not local (spark://, yarn, k8s://) and outside
    spark-submit, ship Lakelog and its dependencies to the executors as an archive
    (`lakelog pipeline pack`, passed as spark.archives), unless spark.archives is set in
    the environment's Spark defaults. Off: the workers must have lakelog[spark] installed."""

    # cluster mirroring (KIP-1279)
    mirror_num_fetchers: int = 2
    """mirror.num.fetchers: fetcher tasks per broker; each fetches its share of the leased
    partitions, one request per source broker at a time."""
    mirror_max_inflight_bytes: int = 64 * MiB
    """mirror.max.inflight.bytes: cap on the fetch buffers the fetchers hold at once
    (response plus upload), however many partitions wake up together."""
    mirror_fetch_max_bytes: int = 8 * MiB
    """Bytes one mirror Fetch asks for (bounded by half the in-flight cap)."""
    mirror_partition_fetch_max_bytes: int = 1 * MiB
    """Bytes per partition one mirror Fetch asks for."""
    mirror_fetch_max_wait_ms: int = 500
    """The longest a round of mirror Fetches waits at the source for data (shared among the
    round's requests)."""
    mirror_fetch_max_partitions: int = 1000
    """Partitions per mirror Fetch request (more are spread over rounds)."""
    mirror_throttle_bytes_per_sec: int = 0
    """mirror.replication.throttled.rate: mirrored bytes per second per broker; 0: none."""
    mirror_lease_ms: int = 10_000
    """How long a partition lease lasts without renewal: a dead owner's partitions move
    after this (or the broker session timeout, whichever is longer)."""
    mirror_lease_renew_ms: int = 2_000
    """How often a broker renews its mirror partition leases (well under `mirror_lease_ms`)."""
    mirror_metadata_refresh_interval_ms: int = 30_000
    """mirror.metadata.refresh.interval.ms: new source topics and partitions follow."""
    mirror_group_sync_interval_ms: int = 5_000
    """Consumer group offsets are synced this often, so after a failover a group repeats
    at most this interval's worth of records (never skips any)."""
    mirror_state_report_interval_ms: int = 5_000
    """Lag figures are written to the coordinator this often (state changes at once)."""

    # `serve --brokers N` (the supervisor)
    supervisor_restart_backoff_ms: int = 1_000
    """`serve --brokers N`: how long after a broker process died of a signal or a non-zero
    exit it is started again; doubled for each further restart within
    `supervisor_restart_interval_ms` (systemd's Restart=on-failure with RestartSec)."""
    supervisor_restart_backoff_max_ms: int = 30_000
    """The longest wait before a restart, however often the broker died."""
    supervisor_restart_limit: int = 5
    """A broker that died more than this many times within `supervisor_restart_interval_ms`
    crash-loops: it is left down (logged) and `serve` exits non-zero once stopped
    (systemd's StartLimitBurst). 0: never restart."""
    supervisor_restart_interval_ms: int = 300_000
    """The window `supervisor_restart_limit` counts restarts in (StartLimitIntervalSec)."""
    supervisor_stop_timeout_ms: int = 80_000
    """On SIGTERM/SIGINT, how long `serve --brokers N` waits for its brokers to finish their
    graceful shutdown before it SIGKILLs the rest (and exits non-zero). Under systemd's
    default TimeoutStopSec (90 s)."""

    # fault injection (tests only)
    fault_commit_delay_ms: int = 0
    """Fault injection for tests only: wait this long between upload and commit."""
    fault_inline_move_delay_ms: int = 0
    """Fault injection for tests only: the inline mover waits this long between the PUT of
    the new object and the swap of the coordinates (a window for killing it there)."""
    fault_ack_delay_ms: int = 0
    """Fault injection for tests only: a Produce waits this long after its batches are
    committed before it answers (a window for pausing a broker that holds answers)."""
    fault_produce_jitter_ms: int = 0
    """Fault injection for tests only: each Produce waits a random 0..this long before
    it validates its batches, as a slow lookup would (order must hold all the same)."""

    @field_validator("listen")
    @classmethod
    def _listen(cls, value: str) -> str:
        return check_host_port(value)

    @field_validator("advertised", "console_listen")
    @classmethod
    def _optional_address(cls, value: str | None) -> str | None:
        return None if value is None else check_host_port(value)

    @field_validator("metrics_listen", "schema_registry_listen")
    @classmethod
    def _metrics_address(cls, value: str | None) -> str | None:
        """Empty turns the endpoint off, so it is not an address to check."""
        return value if not value else check_host_port(value)

    @field_validator("schema_registry_auth")
    @classmethod
    def _registry_auth(cls, value: str) -> str:
        if value not in ("none", "basic"):
            raise ValueError("none or basic")
        return value

    @field_validator(
        "schema_registry_max_schema_bytes",
        "schema_registry_max_subjects",
        "schema_registry_max_versions",
    )
    @classmethod
    def _registry_cap(cls, value: int) -> int:
        if not 1 <= value <= 1 << 30:
            raise ValueError("between 1 and 2^30")
        return value

    @field_validator(
        "supervisor_restart_backoff_ms",
        "supervisor_restart_backoff_max_ms",
        "supervisor_restart_limit",
        "supervisor_restart_interval_ms",
        "supervisor_stop_timeout_ms",
        "compaction_interval_ms",
        "table_status_interval_ms",
        "compaction_lease_ms",
        "compaction_max_keys_per_pass",
        "compaction_max_bytes_per_pass",
        "compaction_max_bytes_per_second",
    )
    @classmethod
    def _not_negative(cls, value: int) -> int:
        if value < 0:
            raise ValueError("0 or more")
        return value

    @field_validator("produce_max_puts_per_second", "produce_put_cost_fraction")
    @classmethod
    def _put_budget(cls, value: float) -> float:
        if not math.isfinite(value) or value < 0:
            raise ValueError("a finite number, 0 or more")
        return value

    @field_validator(
        "produce_inline_max_bytes",
        "produce_inline_below_bytes_per_second",
        "produce_inline_broker_max_bytes",
        "produce_inline_total_max_bytes",
        "produce_inline_move_bytes",
        "produce_inline_move_age_ms",
    )
    @classmethod
    def _inline_sizes(cls, value: int) -> int:
        if value < 1:
            raise ValueError("1 or more")
        return value

    @field_validator("storage_url")
    @classmethod
    def _storage_url(cls, value: str | None) -> str | None:
        return None if value is None else check_storage_url(value)

    @field_validator("coordinator_url")
    @classmethod
    def _coordinator_url(cls, value: str | None) -> str | None:
        return None if value is None else check_coordinator_url(value)

    @field_validator("coordinator_pool_timeout_ms")
    @classmethod
    def _pool_timeout(cls, value: int) -> int:
        if not 100 <= value <= 60_000:
            raise ValueError("between 100 and 60000 ms")
        return value

    @field_validator(
        "offset_commit_batch_max_offsets", "max_inflight_offset_commits_per_connection"
    )
    @classmethod
    def _offset_batch(cls, value: int) -> int:
        if value < 1:
            raise ValueError("1 or more")
        return value

    @field_validator("broker_id")
    @classmethod
    def _broker_id(cls, value: int) -> int:
        if value < 0:
            raise ValueError("a broker id is 0 or more")
        return value

    @field_validator("max_connections_per_ip_overrides")
    @classmethod
    def _overrides(cls, value: str) -> str:
        parse_ip_overrides(value)
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, TomlConfigSettingsSource(settings_cls))

    @property
    def connections_per_ip_overrides(self) -> dict[str, int]:
        """`max_connections_per_ip_overrides` parsed: {ip: count}."""
        return parse_ip_overrides(self.max_connections_per_ip_overrides)

    @property
    def listen_host_port(self) -> tuple[str, int]:
        return split_host_port(self.listen)

    @property
    def advertised_host_port(self) -> tuple[str, int]:
        if self.advertised:
            host, port = split_host_port(self.advertised)
            return ipv4_of(host), port
        host, port = self.listen_host_port
        return ipv4_of(host), port

    @property
    def resolved_storage_url(self) -> str:
        if self.storage_url:
            return self.storage_url
        return (self.data_dir.resolve() / "objects").as_uri()

    @property
    def resolved_coordinator_url(self) -> str:
        if self.coordinator_url:
            return self.coordinator_url
        return "sqlite:///" + str(self.data_dir.resolve() / "coordinator.sqlite3")


def load_settings(
    given: Mapping[str, Any], flag_names: Mapping[str, str] | None = None
) -> Settings:
    """Settings from `given` (the flags that were given), env LAKELOG_* and lakelog.toml.

    A misspelt key in lakelog.toml, a file that is not TOML, or a value that does not
    validate raises `SettingsError` with one line naming the setting and where it came
    from (`lakelog.toml`, `LAKELOG_X` or the flag in `flag_names`, default `--name`)."""
    _check_toml_keys(Path(TOML_FILE))
    try:
        return Settings(**given)
    except ValidationError as exc:
        raise SettingsError(_describe_validation(exc, given, flag_names or {})) from exc


def _check_toml_keys(path: Path) -> None:
    if not path.is_file():
        return
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise SettingsError(f"cannot read {path}: {exc}") from exc
    known = list(Settings.model_fields)
    for key in data:
        if key not in Settings.model_fields:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise SettingsError(f"unknown setting {key!r} in {path}{hint}")


def _describe_validation(
    exc: ValidationError, given: Mapping[str, Any], flag_names: Mapping[str, str]
) -> str:
    error = exc.errors()[0]
    name = str(error["loc"][0]) if error["loc"] else "?"
    reason = str(error["msg"]).removeprefix("Value error, ")
    value = error.get("input")
    secret = name in ("storage_url", "coordinator_url") or "password" in name
    shown = repr(str(value))
    if value is not None and not isinstance(value, dict) and not secret and shown not in reason:
        reason += f" (got {shown})"
    return f"invalid setting {name} (from {_source_of(name, given, flag_names)}): {reason}"


def _source_of(name: str, given: Mapping[str, Any], flag_names: Mapping[str, str]) -> str:
    if name in given:
        return flag_names.get(name, "--" + name.replace("_", "-"))
    env_name = f"LAKELOG_{name}".upper()
    if any(key.upper() == env_name for key in os.environ):
        return env_name
    if Path(TOML_FILE).is_file():
        return TOML_FILE
    return "defaults"
