"""Broker settings: flags > env `LAKELOG_*` > `lakelog.toml` > defaults."""

from __future__ import annotations

import socket
from pathlib import Path

from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

MiB = 1024 * 1024


def split_host_port(value: str, default_port: int = 9092) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep:
        return value, default_port
    return host.strip("[]"), int(port)


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

    listen: str = "127.0.0.1:9092"
    advertised: str | None = None
    data_dir: Path = Path("./lakelog-data")
    broker_id: int = 0
    rack: str | None = None
    storage_url: str | None = None
    """Default: file://<data_dir>/objects."""
    coordinator_url: str | None = None
    """Default: sqlite:///<data_dir>/coordinator.sqlite3."""
    metrics_listen: str | None = None
    cluster_id: str = "lakelog-cluster-0000000"

    # topics
    auto_create_topics_enable: bool = True
    num_partitions: int = 1
    default_replication_factor: int = 1
    message_max_bytes: int = 1 * MiB + 12
    log_retention_ms: int = 7 * 24 * 3600 * 1000
    log_retention_bytes: int = -1

    # network
    socket_request_max_bytes: int = 100 * MiB
    max_connections: int = 10_000
    max_inflight_requests_per_connection: int = 1000
    max_inflight_bytes_per_connection: int = 64 * MiB

    # produce
    produce_buffer_max_bytes: int = 8 * MiB
    produce_commit_interval_ms: int = 250
    produce_max_sealed_buffers: int = 4
    produce_upload_retries: int = 3

    # fetch
    fetch_cache_max_bytes: int = 256 * MiB
    fetch_max_bytes: int = 55 * MiB
    fetch_poll_interval_ms: int = 50

    # consumer groups
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    offsets_retention_minutes: int = 7 * 24 * 60
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096
    group_lag_interval_ms: int = 10_000

    # background
    retention_check_interval_ms: int = 30_000
    file_delete_grace_ms: int = 60_000
    broker_heartbeat_interval_ms: int = 2_000
    broker_session_timeout_ms: int = 30_000

    fault_commit_delay_ms: int = 0
    """Fault injection for tests only: wait this long between upload and commit."""

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
