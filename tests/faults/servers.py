"""The servers a fault run starts and breaks: its own PostgreSQL, moto behind the S3 fault
proxy, and broker processes that can be SIGSTOPped."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from e2e_backends import Backend
from e2e_harness import BrokerProcess, free_port

from tests.support.postgres_server import RestartablePostgres

REPO = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"
ACCESS_KEY = "testing"
SECRET_KEY = "testing"
BUCKET_PREFIX = "lakelog"
PROXY_SCRIPT = REPO / "tests" / "support" / "s3_fault_proxy.py"


def _wait_port(port: int, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection((HOST, port), 0.3):
            return
        time.sleep(0.1)
    raise TimeoutError(f"{what} did not listen on {port} within {timeout:.0f}s")


def postgres_missing() -> str | None:
    """Why this machine cannot run the postgres-s3 backend, or None."""
    import glob
    import pwd

    if not glob.glob("/usr/lib/postgresql/*/bin/initdb") and not shutil.which("initdb"):
        return "no PostgreSQL server binaries (apt-get install postgresql)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root needs the postgres user"
    return None


class Postgres(RestartablePostgres):
    """The harness's own PostgreSQL server (see tests/support/postgres_server.py)."""

    def __init__(self) -> None:
        super().__init__(prefix="lakelog-faults-pg.")


class S3WithFaults:
    """moto's S3 server and the fault proxy in front of it; brokers talk to the proxy, the
    harness lists the bucket straight from moto."""

    def __init__(self, workdir: Path, seed: int) -> None:
        self.workdir = workdir
        self.seed = seed
        self.moto: subprocess.Popen[bytes] | None = None
        self.proxy: subprocess.Popen[bytes] | None = None
        self.moto_port = 0
        self.proxy_port = 0
        self.bucket = f"faults-{uuid.uuid4().hex[:12]}"

    def start(self) -> None:
        self.moto_port = port = free_port()
        with (self.workdir / "moto.log").open("ab") as log:
            self.moto = subprocess.Popen(
                [sys.executable, str(REPO / "scripts" / "moto_server.py"), HOST, str(port)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        _wait_port(self.moto_port, 30, "moto")
        self._client(self.upstream).create_bucket(Bucket=self.bucket)
        wait_for_proxy_script(120)
        proxy_log = (self.workdir / "s3-proxy.log").open("ab")
        self.proxy = subprocess.Popen(
            [
                sys.executable,
                str(PROXY_SCRIPT),
                "--upstream",
                self.upstream,
                "--listen",
                f"{HOST}:0",
                "--seed",
                str(self.seed),
            ],
            stdout=subprocess.PIPE,
            stderr=proxy_log,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        proxy_log.close()
        assert self.proxy.stdout is not None
        line = _readline_with_timeout(self.proxy.stdout, 30)
        self.proxy_port = int(line.strip().rsplit(b":", 1)[-1])
        _wait_port(self.proxy_port, 10, "the S3 fault proxy")
        # Keep draining the proxy's stdout so it never blocks on a full pipe.
        threading.Thread(
            target=lambda: [None for _ in self.proxy.stdout],  # type: ignore[union-attr]
            daemon=True,
        ).start()

    @property
    def upstream(self) -> str:
        return f"http://{HOST}:{self.moto_port}"

    @property
    def endpoint(self) -> str:
        return f"http://{HOST}:{self.proxy_port}"

    @property
    def storage_url(self) -> str:
        return (
            f"s3://{self.bucket}/{BUCKET_PREFIX}?endpoint={self.endpoint}&region=us-east-1"
            f"&access_key_id={ACCESS_KEY}&secret_access_key={SECRET_KEY}"
        )

    @staticmethod
    def _client(endpoint: str) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
        )

    def list_keys(self) -> set[str]:
        """Every object under the prefix, straight from moto (no faults on this path)."""
        client = self._client(self.upstream)
        keys: set[str] = set()
        token: dict[str, str] = {}
        for _ in range(100_000):
            page = client.list_objects_v2(
                Bucket=self.bucket, Prefix=BUCKET_PREFIX + "/", MaxKeys=1000, **token
            )
            keys.update(o["Key"][len(BUCKET_PREFIX) + 1 :] for o in page.get("Contents", []))
            if not page.get("IsTruncated"):
                break
            token = {"ContinuationToken": page["NextContinuationToken"]}
        return keys

    # -- the proxy's control API (tests/support/s3_fault_proxy.py)
    def _control(self, method: str, body: object | None = None) -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            f"{self.endpoint}/__faults__",
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            return dict(json.loads(resp.read().decode() or "{}"))

    def set_rules(self, rules: list[dict[str, Any]]) -> None:
        self._control("POST", {"rules": rules})

    def counters(self) -> dict[str, Any]:
        """`{"requests", "forwarded", "faults": {kind: n}, "faults_total", ...}`."""
        return dict(self._control("GET").get("counters", {}))

    def close(self) -> None:
        for proc in (self.proxy, self.moto):
            if proc is not None and proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=10)


def wait_for_proxy_script(timeout: float) -> None:
    """The proxy is written alongside this harness; wait (bounded) until it exists."""
    deadline = time.monotonic() + timeout
    while not PROXY_SCRIPT.exists():
        if time.monotonic() >= deadline:
            raise FileNotFoundError(f"{PROXY_SCRIPT} does not exist")
        time.sleep(1)


def _readline_with_timeout(stream: Any, timeout: float) -> bytes:
    box: list[bytes] = []
    reader = threading.Thread(target=lambda: box.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    if not box or not box[0]:
        raise TimeoutError("the S3 fault proxy printed no port")
    return box[0]


def s3_fault_rules(probability: float) -> list[dict[str, Any]]:
    """`probability` of all requests faulted, split over the four kinds."""
    share = probability / 4
    return [
        {"kind": "error_before", "probability": share, "status": 503},
        {"kind": "error_after", "probability": share, "status": 500},
        {"kind": "drop_after", "probability": share},
        {"kind": "delay", "probability": share, "seconds": 1.0},
    ]


def latency_spike_rules() -> list[dict[str, Any]]:
    return [{"kind": "delay", "probability": 1.0, "seconds": 2.0}]


# ------------------------------------------------------------------- brokers


class FaultBroker(BrokerProcess):
    """A broker whose storage and coordinator are the harness's, whatever
    LAKELOG_TEST_BACKEND says (the harness picks both backends itself)."""

    def __init__(self, data_dir: Path, backend: Backend, **kwargs: Any) -> None:
        self._fault_backend = backend
        super().__init__(data_dir, **kwargs)
        self.stopped = False

    @property
    def backend(self) -> Backend:
        return self._fault_backend

    def sigstop(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGSTOP)
        self.stopped = True

    def sigcont(self) -> None:
        if self.proc is not None and self.stopped:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGCONT)
        self.stopped = False


# ------------------------------------------------------------------- clients
