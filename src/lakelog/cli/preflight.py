"""Checks `lakelog serve` and `lakelog pipeline` make before they touch the disk or the
network for real, so a mistake ends with one line and leaves nothing behind: ports free,
data directories creatable, the coordinator there (and reachable)."""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import tempfile
from pathlib import Path

from lakelog.cli.common import UserError, describe, waiting
from lakelog.config import Settings, redacted, split_host_port

POSTGRES_CONNECT_TIMEOUT_S = 5


def shifted(address: str, offset: int) -> str:
    host, port = split_host_port(address)
    return f"{host}:{port + offset}" if port else address


def check_port_free(address: str, what: str) -> None:
    """UserError unless HOST:PORT can be listened on now (port 0: any, always fine).
    Bound as the broker binds (SO_REUSEADDR), on every address HOST resolves to."""
    host, port = split_host_port(address)
    if port == 0:
        return
    try:
        infos = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except OSError as exc:
        raise UserError(f"cannot listen on {address} ({what}): {describe(exc)}") from exc
    for family, kind, proto, _, sockaddr in infos:
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(sockaddr)
            except OSError as exc:
                reason = "the port is in use" if exc.errno == errno.EADDRINUSE else describe(exc)
                raise UserError(f"cannot listen on {address} ({what}): {reason}") from exc


def check_ports(settings: Settings, count: int = 1) -> None:
    """The client, /metrics, console and schema registry ports of `count` brokers (ports
    counted up) are free and distinct."""
    wanted: dict[str, str] = {}
    for index in range(count):
        addresses = [(shifted(settings.listen, index), "--listen")]
        if settings.metrics_listen:
            addresses.append((shifted(settings.metrics_listen, index), "--metrics-listen"))
        if settings.console_listen:
            addresses.append((shifted(settings.console_listen, index), "--console-listen"))
        if settings.schema_registry_listen:
            addresses.append(
                (shifted(settings.schema_registry_listen, index), "--schema-registry-listen")
            )
        for address, what in addresses:
            if split_host_port(address)[1] == 0:
                continue
            if address in wanted:
                raise UserError(f"{address} is wanted by {wanted[address]} and by {what}")
            wanted[address] = what
            check_port_free(address, what)


def check_creatable_dir(path: Path, what: str) -> None:
    """UserError unless `path` is a writable directory or could be created as one: its
    nearest existing ancestor is a directory we can create entries in (tried for real,
    with a probe directory removed at once). Creates nothing that stays."""
    path = path.absolute()
    existing = path
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if not existing.is_dir():
        kind = "is not a directory" if existing == path else f"is under {existing}, a file"
        raise UserError(f"cannot use {what} {path}: it {kind}")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UserError(f"cannot use {what} {path}: {existing} is not writable")
    try:
        probe = tempfile.mkdtemp(prefix=".lakelog-probe-", dir=existing)
    except OSError as exc:
        reason = exc.strerror or describe(exc)
        raise UserError(
            f"cannot use {what} {path}: cannot create anything in {existing} ({reason})"
        ) from exc
    os.rmdir(probe)


def check_local_paths(settings: Settings) -> None:
    """The directories serve will create: the data dir (when a default URL lives there),
    a file:// store's root and a SQLite coordinator's directory."""
    if not settings.storage_url or not settings.coordinator_url:
        check_creatable_dir(settings.data_dir, "--data-dir")
    store = local_store_root(settings.resolved_storage_url)
    if store is not None:
        check_creatable_dir(store, "the object store")
    sqlite = sqlite_file(settings.resolved_coordinator_url)
    if sqlite is not None:
        if sqlite.is_dir():
            raise UserError(f"cannot use coordinator file {sqlite}: it is a directory")
        check_creatable_dir(sqlite.parent, "the coordinator's directory")


def local_store_root(storage_url: str) -> Path | None:
    if not storage_url.lower().startswith("file://"):
        return None
    path = storage_url[len("file://") :].split("?", 1)[0]
    return Path(path.removeprefix("localhost"))


def sqlite_file(coordinator_url: str) -> Path | None:
    if not coordinator_url.startswith("sqlite://"):
        return None
    from lakelog.coordinator import sqlite_path

    return sqlite_path(coordinator_url)


def check_postgres(coordinator_url: str) -> None:
    """UserError unless a PostgreSQL coordinator URL answers a connection now."""
    if not coordinator_url.startswith(("postgresql://", "postgres://")):
        return
    import psycopg

    with waiting(f"connecting to {redacted(coordinator_url)}"):
        try:
            conn = psycopg.connect(coordinator_url, connect_timeout=POSTGRES_CONNECT_TIMEOUT_S)
        except (psycopg.Error, OSError) as exc:
            reason = " ".join(describe(exc).split())
            raise UserError(
                f"cannot reach the coordinator {redacted(coordinator_url)}: {reason}"
            ) from exc
        with contextlib.suppress(psycopg.Error):
            conn.close()


def check_broker_ids(settings: Settings, count: int = 1) -> None:
    """UserError if a process on this host already runs one of the `count` broker ids
    (counted up from `--broker-id`) on the embedded coordinator: its id lock is held."""
    from lakelog.server.cluster.identity import BrokerIdInUseError, check_lock_free, lock_path

    for index in range(count):
        one = settings.model_copy(update={"broker_id": settings.broker_id + index})
        path = lock_path(one)
        if path is None:
            return
        try:
            check_lock_free(path, one.broker_id)
        except BrokerIdInUseError as exc:
            raise UserError(str(exc)) from exc


def check_existing_cluster(settings: Settings) -> None:
    """For jobs that read an existing cluster (`lakelog pipeline`): its embedded
    coordinator file and local store must already be there (never created here)."""
    sqlite = sqlite_file(settings.resolved_coordinator_url)
    if sqlite is not None and not sqlite.is_file():
        where = (
            f"--data-dir {settings.data_dir}"
            if not settings.coordinator_url
            else f"--coordinator-url {settings.coordinator_url}"
        )
        raise UserError(
            f"no coordinator at {sqlite}: is {where} right? (a broker creates it on first start)"
        )
    store = local_store_root(settings.resolved_storage_url)
    if store is not None and not store.is_dir():
        raise UserError(f"no object store at {store}: is the storage URL or --data-dir right?")
    check_postgres(settings.resolved_coordinator_url)
