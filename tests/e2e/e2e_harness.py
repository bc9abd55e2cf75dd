"""A real Lakelog broker process for end-to-end tests, plus the helpers every e2e test needs.

Tests talk to the broker only as clients do (TCP on 127.0.0.1) and inspect its data
directory directly; nothing here imports broker internals, so a crash or hang in the broker
shows up as a test failure with its log, never as a hung test run.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sqlite3
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from e2e_backends import SCALE_OUT, Backend, backend_for

from tests.support.ports import free_port

HOST = "127.0.0.1"
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0
LOG_TAIL_LINES = 200

T = TypeVar("T")

LIVE_BROKERS: list[BrokerProcess] = []
"""Brokers started and not yet cleaned up; their logs are attached to failing reports."""


class BrokerError(RuntimeError):
    """The broker did not start, did not answer, or did not stop."""


class BrokerLogWarning(UserWarning):
    """The broker logged a traceback during a test that otherwise passed."""


def wait_until(predicate: Callable[[], T], timeout: float, what: str, interval: float = 0.1) -> T:
    """Poll `predicate` until it returns something truthy; fail after `timeout` seconds.

    Every loop in the e2e suite goes through here so none can spin forever."""
    deadline = time.monotonic() + timeout
    last_exc: BaseException | None = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except Exception as exc:  # the condition may be unreachable for a while
            last_exc = exc
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_exc!r})" if last_exc else ""
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}{detail}")
        time.sleep(interval)


def api_versions_roundtrip(port: int, timeout: float = 2.0) -> bytes:
    """Send ApiVersions v0 on a fresh connection and return the response body.

    The cheapest proof that the broker accepts connections and answers requests."""
    correlation_id = 0x5A5A
    client_id = b"e2e-probe"
    body = struct.pack(">hhih", 18, 0, correlation_id, len(client_id)) + client_id
    with socket.create_connection((HOST, port), timeout=timeout) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", recv_exact(sock, 4))[0]
        frame = recv_exact(sock, size)
    (got,) = struct.unpack_from(">i", frame)
    if got != correlation_id:
        raise BrokerError(f"ApiVersions answered with correlation id {got}")
    return frame[4:]


def recv_exact(sock: socket.socket, size: int) -> bytes:
    chunks: list[bytes] = []
    remaining = size
    while remaining:
        chunk = sock.recv(min(remaining, 1 << 20))
        if not chunk:
            raise ConnectionError(f"connection closed with {remaining} of {size} bytes unread")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _child_env(overrides: Mapping[str, object]) -> dict[str, str]:
    """The test runner's environment without its LAKELOG_* settings, plus `overrides`
    (keys with or without the LAKELOG_ prefix), so each broker gets exactly what the test
    asked for."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKELOG_")}
    env["PYTHONUNBUFFERED"] = "1"
    for key, value in overrides.items():
        name = key.upper()
        if not name.startswith("LAKELOG_"):
            name = "LAKELOG_" + name
        env[name] = str(value).lower() if isinstance(value, bool) else str(value)
    return env


def _sqlite_writable(path: Path, wait_s: float = 1.0) -> bool:
    """Whether a write transaction on the SQLite file starts within `wait_s` (a running
    broker's transactions end within it; a stopped one's never do)."""
    conn = sqlite3.connect(path, timeout=wait_s, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        conn.close()


class BrokerProcess:
    """`python -m lakelog serve` on a private data dir and a fixed port.

    The port and data dir survive `kill()`/`restart()`, so clients and tests can reconnect
    to "the same broker" after a crash."""

    def __init__(
        self,
        data_dir: Path,
        *,
        env: Mapping[str, object] | None = None,
        port: int | None = None,
        metrics: bool = False,
        registry: bool = False,
        name: str = "broker",
    ) -> None:
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.metrics_port = free_port() if metrics else None
        self.registry_port = free_port() if registry else None
        self.name = name
        self.env = dict(env or {})
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}-{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.exit_codes: list[int | None] = []
        """Exit code of each stopped run (negative: killed by that signal)."""
        self.needed_sigkill = False
        """True once a SIGTERM did not stop the broker within the timeout."""

    # -- addresses
    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def objects_dir(self) -> Path:
        return self.data_dir / "objects"

    @property
    def wal_dir(self) -> Path:
        return self.objects_dir / "wal"

    @property
    def sqlite_path(self) -> Path:
        return self.data_dir / "coordinator.sqlite3"

    @property
    def backend(self) -> Backend:
        """Where this broker's coordinator and objects live (embedded or scale-out)."""
        return backend_for(self.data_dir)

    def command(self) -> list[str]:
        cmd = [
            sys.executable,
            "-m",
            "lakelog",
            "serve",
            "--listen",
            f"{HOST}:{self.port}",
            "--data-dir",
            str(self.data_dir),
        ]
        # Without metrics=True no endpoint at all: the default one (the port + 1000) could
        # take a port another test just picked as free for its own broker.
        metrics = "" if self.metrics_port is None else f"{HOST}:{self.metrics_port}"
        cmd += ["--metrics-listen", metrics]
        registry = "" if self.registry_port is None else f"{HOST}:{self.registry_port}"
        cmd += ["--schema-registry-listen", registry]
        return cmd

    @property
    def registry_url(self) -> str:
        """The schema registry's URL (a broker started with registry=True)."""
        return f"http://{HOST}:{self.registry_port}"

    # -- lifecycle
    def start(self, ready_timeout: float = READY_TIMEOUT_S) -> BrokerProcess:
        if self.alive():
            raise BrokerError(f"{self.name} is already running")
        self.starts += 1
        if self not in LIVE_BROKERS:
            LIVE_BROKERS.append(self)
        with self.log_path.open("ab") as log:
            log.write(f"\n===== start #{self.starts}: {' '.join(self.command())}\n".encode())
            log.flush()
            # cwd: a scratch dir, so no stray lakelog.toml changes the settings.
            self.proc = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=_child_env({**self.backend.env, **self.env}),
                cwd=self.data_dir.parent,
                start_new_session=True,
            )
        self.wait_ready(ready_timeout)
        return self

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        last: BaseException | None = None
        while time.monotonic() < deadline:
            if not self.alive():
                code = self.proc.returncode if self.proc else None
                raise BrokerError(
                    f"{self.name} exited with {code} before answering\n{self.log_tail()}"
                )
            try:
                api_versions_roundtrip(self.port, timeout=1.0)
                if self.registry_port is not None:
                    # The registry starts just after the Kafka listener.
                    socket.create_connection((HOST, self.registry_port), timeout=1.0).close()
                return
            except (OSError, BrokerError) as exc:
                last = exc
            time.sleep(0.1)
        self.kill()
        raise BrokerError(
            f"{self.name} did not answer ApiVersions within {timeout:.0f}s ({last!r})\n"
            f"{self.log_tail()}"
        )

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: a crash with no chance to flush or commit anything."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=STOP_TIMEOUT_S)
        self._stopped()

    def pause(self, attempts: int = 50) -> None:
        """SIGSTOP, at a moment the broker holds no write transaction of the embedded
        coordinator. Stopped inside one (a heartbeat, a commit), it would stop every broker
        of the data dir, all waiting for SQLite's one write lock; no broker pause does that
        to a cluster on PostgreSQL, and a test of what the others do meanwhile would find
        them doing nothing. So: stop, check the lock is free, else wake it and try again."""
        assert self.proc is not None and self.proc.poll() is None
        for attempt in range(attempts):
            os.kill(self.proc.pid, signal.SIGSTOP)
            if SCALE_OUT or not self.sqlite_path.exists() or _sqlite_writable(self.sqlite_path):
                return
            os.kill(self.proc.pid, signal.SIGCONT)
            time.sleep(0.01 + 0.02 * (attempt % 3))
        raise AssertionError(f"{self.name} held the coordinator's write lock at every pause")

    def resume(self) -> None:
        """SIGCONT after `pause()`."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)

    def terminate(self, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM (graceful shutdown); SIGKILL if it has not exited after `timeout`.
        Returns the exit code of the run."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.needed_sigkill = True
                with self.log_path.open("ab") as log:
                    log.write(f"\n===== no exit {timeout:.0f}s after SIGTERM: SIGKILL\n".encode())
                self.kill()
                return self.proc.returncode
        code = self.proc.returncode
        self._stopped()
        # Children of a gracefully stopped broker must not outlive it.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        return code

    def restart(self, ready_timeout: float = READY_TIMEOUT_S) -> BrokerProcess:
        """Stop (gracefully if running) and start again on the same port and data dir."""
        if self.alive():
            self.terminate()
        return self.start(ready_timeout)

    def _stopped(self) -> None:
        assert self.proc is not None
        if len(self.exit_codes) < self.starts:
            self.exit_codes.append(self.proc.returncode)
            with self.log_path.open("ab") as log:
                log.write(f"\n===== exited with {self.proc.returncode}\n".encode())

    def close(self) -> None:
        """Fixture teardown: stop whatever runs and forget the broker."""
        try:
            self.terminate()
        finally:
            if self in LIVE_BROKERS:
                LIVE_BROKERS.remove(self)

    # -- diagnostics
    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return f"(no log at {self.log_path})"
        tail = text.splitlines()[-lines:]
        return f"--- {self.log_path} (last {len(tail)} lines) ---\n" + "\n".join(tail)

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def tracebacks(self) -> list[str]:
        """Each Python traceback in the log with the line before it: a broker that logs one
        has a bug even when every client request succeeded."""
        lines = self.log_text().splitlines()
        out: list[str] = []
        for i, line in enumerate(lines):
            if line.startswith("Traceback (most recent call last)"):
                end = i + 1
                while end < len(lines) and (lines[end].startswith(" ") or not lines[end]):
                    end += 1
                out.append("\n".join(lines[max(0, i - 1) : end + 1]))
        return out

    def wal_objects(self) -> set[str]:
        """Object keys (`wal/<name>`) present in the object store right now."""
        if not SCALE_OUT:
            if not self.wal_dir.is_dir():
                return set()
            return {
                "wal/" + p.name for p in self.wal_dir.iterdir() if p.is_file() and not _is_temp(p)
            }
        return self.backend.list_keys("wal")


def _is_temp(path: Path) -> bool:
    """obstore's LocalStore writes `<key>#<n>` staging files before renaming."""
    return "#" in path.name or path.name.startswith(".")


# ------------------------------------------------------------------- generated records


@dataclass(frozen=True, slots=True)
class Rec:
    """One record as produced; consumed records are compared against these byte for byte."""

    partition: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int


def make_records(count: int, partitions: int, base_timestamp: int, tag: str = "") -> list[Rec]:
    """Records covering the awkward cases: null keys, null values (never both: kafka-python
    refuses that), empty keys and values, binary bytes of every value, several headers with a
    repeated key, empty header values, and no headers. Timestamps ascend by 1 ms per record,
    so by-timestamp lookups have one right answer per partition."""
    out: list[Rec] = []
    for i in range(count):
        key: bytes | None = f"k-{tag}-{i}".encode()
        if i % 7 == 3:
            key = None
        elif i % 29 == 5:
            key = b""
        size = (i * 37) % 300
        value: bytes | None = bytes((i + j) % 256 for j in range(size)) + f"|{tag}|{i}".encode()
        if i % 11 == 4 and key is not None:
            value = None
        elif i % 31 == 6:
            value = b""
        headers: tuple[tuple[str, bytes], ...] = ()
        if i % 3 == 0:
            headers = (("h1", f"v{i}".encode()), ("bin", bytes([i % 256, 0, 255])))
        elif i % 3 == 1:
            headers = (("dup", b"a"), ("dup", b"b"), ("empty", b""))
        out.append(Rec(i % partitions, key, value, headers, base_timestamp + i))
    return out


def by_partition(records: list[Rec], partitions: int) -> list[list[Rec]]:
    out: list[list[Rec]] = [[] for _ in range(partitions)]
    for rec in records:
        out[rec.partition].append(rec)
    return out


def now_ms() -> int:
    return int(time.time() * 1000)


# ------------------------------------------------------------------- admin helpers


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int = 3,
    configs: Mapping[str, str] | None = None,
    timeout: float = 30.0,
) -> None:
    """CreateTopics through kafka-python's admin client, then wait until Metadata lists
    every partition with a leader."""
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(
        bootstrap_servers=bootstrap, client_id="e2e-admin", request_timeout_ms=15000
    )
    try:
        admin.create_topics(
            {
                name: {
                    "num_partitions": partitions,
                    "replication_factor": 1,
                    "configs": dict(configs or {}),
                }
            },
            timeout_ms=int(timeout * 1000),
        )
        admin.wait_for_topics([name], timeout_ms=int(timeout * 1000))
    finally:
        admin.close()


def wait_topic_known(port: int, name: str, timeout: float = 15.0) -> None:
    """Wait until the broker on `port` itself (a raw Metadata for all topics: a client
    library may ask another broker) names the topic: one created through another broker
    shows up there within its topic cache's refresh, and a raw Produce before that gets
    UNKNOWN_TOPIC_OR_PARTITION, which only clients retry."""
    from e2e_wire import WireClient, metadata_v1

    def known() -> bool:
        with WireClient(port) as client:
            response = client.request(3, 1, metadata_v1(None))
        return any(t.name == name for t in response.topics)

    wait_until(known, timeout, f"the broker on port {port} to know topic {name}")


@contextlib.contextmanager
def kafka_admin(bootstrap: str) -> Iterator[object]:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(
        bootstrap_servers=bootstrap, client_id="e2e-admin", request_timeout_ms=15000
    )
    try:
        yield admin
    finally:
        admin.close()
