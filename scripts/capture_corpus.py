"""Capture the fuzz corpus: real requests from kafka-python, confluent-kafka and aiokafka
(and Lakelog's own admin client, for the share-group admin APIs no library sends yet).

    .venv/bin/python scripts/capture_corpus.py [--out tests/fuzz/corpus] [--per-version 3]
        [--client kafka-python|confluent-kafka|aiokafka|lakelog] [--keep DIR]

Starts a Lakelog broker (embedded defaults) on PLAINTEXT and another on SASL_PLAINTEXT,
each behind a recording TCP proxy on 127.0.0.1 (the brokers advertise the proxy's port, so
every connection a client opens goes through it). Each client then runs a broad workload:
admin (create/describe/delete topics, configs, create partitions, groups, offsets, delete
records, ACLs, SCRAM users), producers (plain, idempotent, transactional), consumer groups
with commits (classic and KIP-848), share consumers, and logs in with SASL PLAIN and SCRAM. The
workloads are in `corpus_workloads.py`.
The client->broker byte stream of every connection is split into frames; up to
`--per-version` distinct frames per (client, API, version) are kept (different bodies once
the correlation id is blanked, preferring different sizes),
Produce record payloads are kept small by the workload itself, and frames over 64 KiB are
dropped. Files: `<out>/<client>/<api>-v<version>-<n>.bin` (the frame without its 4-byte
size prefix), plus `<out>/index.json` (client -> api -> versions). Old files of a captured
client are replaced.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import shutil
import socket
import struct
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
for extra in (REPO, REPO / "tests" / "e2e"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from corpus_workloads import PASSWORD, USER, WORKLOADS, kafka_python_workload, sasl_settings  # noqa: E402
from e2e_harness import HOST, BrokerProcess, free_port  # noqa: E402

from tests.fuzz.corpus_io import API_NAMES, write_corpus  # noqa: E402

MAX_FRAME = 64 * 1024
CLIENTS = ("kafka-python", "confluent-kafka", "aiokafka", "lakelog")
OLDER_KAFKA_PYTHON = ((1, 1, 0), (2, 1, 0), (2, 5, 0), (3, 0, 0))


# --------------------------------------------------------------------------- the proxy


class RecordingProxy:
    """127.0.0.1:port -> the broker; every client->broker frame is appended to `frames`
    as (label, frame bytes without the size prefix). `label` is whatever the workload set
    last (the client under test)."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = free_port()
        self.label = "unlabelled"
        self.frames: list[tuple[str, bytes]] = []
        self._lock = threading.Lock()
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((HOST, self.port))
        self._sock.listen(128)
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._sock.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection((HOST, self.upstream_port), timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            label = self.label
            threading.Thread(target=self._up, args=(client, upstream, label), daemon=True).start()
            threading.Thread(target=self._down, args=(upstream, client), daemon=True).start()

    def _up(self, client: socket.socket, upstream: socket.socket, label: str) -> None:
        pending = b""
        try:
            while True:
                data = client.recv(1 << 16)
                if not data:
                    break
                upstream.sendall(data)
                pending += data
                while len(pending) >= 4:
                    (size,) = struct.unpack_from(">i", pending)
                    if len(pending) < 4 + size:
                        break
                    frame, pending = pending[4 : 4 + size], pending[4 + size :]
                    with self._lock:
                        self.frames.append((label, frame))
        except OSError:
            pass
        finally:
            for sock in (client, upstream):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    @staticmethod
    def _down(upstream: socket.socket, client: socket.socket) -> None:
        try:
            while True:
                data = upstream.recv(1 << 16)
                if not data:
                    break
                client.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (client, upstream):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._closed = True
        self._sock.close()


# --------------------------------------------------------------------------- main


def start_broker(
    root: Path, name: str, env: dict[str, object]
) -> tuple[BrokerProcess, RecordingProxy]:
    broker = BrokerProcess(root / name, env={"PRODUCE_COMMIT_INTERVAL_MS": 20, **env}, name=name)
    proxy = RecordingProxy(broker.port)
    broker.env["ADVERTISED"] = f"{HOST}:{proxy.port}"
    broker.start()
    return broker, proxy


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "tests" / "fuzz" / "corpus")
    parser.add_argument("--per-version", type=int, default=3)
    parser.add_argument("--client", choices=CLIENTS, action="append")
    parser.add_argument("--keep", type=Path, help="keep broker data dirs and logs here")
    args = parser.parse_args()
    clients = args.client or list(CLIENTS)

    root = args.keep or Path(tempfile.mkdtemp(prefix="lakelog-capture."))
    users = root / "users.txt"
    root.mkdir(parents=True, exist_ok=True)
    users.write_text(f"{USER}:{PASSWORD}\n")
    # The authorizer on, everyone a super user: ACL admin calls succeed (and so get as far
    # as DescribeAcls and DeleteAcls) while every other call is allowed.
    plain, plain_proxy = start_broker(
        root, "plain", {"AUTHORIZER_ENABLED": "true", "SUPER_USERS": "User:ANONYMOUS"}
    )
    sasl, sasl_proxy = start_broker(
        root, "sasl", {"LISTENER_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "SASL_USERS": users}
    )
    failures: list[str] = []
    try:
        for client in clients:
            tag = uuid.uuid4().hex[:8]
            print(f"== {client} on PLAINTEXT", flush=True)
            plain_proxy.label = client
            WORKLOADS[client](f"{HOST}:{plain_proxy.port}", tag, failures)
            if client == "kafka-python":
                # Older protocol versions: kafka-python pinned to older brokers' versions.
                for pinned in OLDER_KAFKA_PYTHON:
                    print(f"== kafka-python pinned to api_version {pinned}", flush=True)
                    kafka_python_workload(
                        f"{HOST}:{plain_proxy.port}",
                        f"{tag}-{'-'.join(map(str, pinned))}",
                        failures,
                        extra={"api_version": pinned},
                    )
            time.sleep(1.0)  # late frames (heartbeats, closes) still count for this client
            for mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
                print(f"== {client} on SASL_PLAINTEXT ({mechanism})", flush=True)
                sasl_proxy.label = client
                WORKLOADS[client](
                    f"{HOST}:{sasl_proxy.port}",
                    f"{tag}-{mechanism.lower()}",
                    failures,
                    sasl_settings(client, mechanism),
                )
            time.sleep(1.0)
        frames = plain_proxy.frames + sasl_proxy.frames
    finally:
        plain_proxy.label = sasl_proxy.label = "after"
        for broker in (plain, sasl):
            broker.close()
        plain_proxy.close()
        sasl_proxy.close()
        tracebacks = plain.tracebacks() + sasl.tracebacks()
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)

    by_client: dict[str, list[bytes]] = {c: [] for c in clients}
    for label, frame in frames:
        if label in by_client and len(frame) <= MAX_FRAME:
            by_client[label].append(frame)
    stats = write_corpus(args.out, by_client, args.per_version)
    for client, apis in stats.items():
        listed = ", ".join(
            f"{API_NAMES.get(int(k), k)} v{','.join(map(str, v))}" for k, v in apis.items()
        )
        print(f"{client}: {len(apis)} APIs: {listed}")
    total = sum(p.stat().st_size for p in args.out.rglob("*.bin"))
    print(f"corpus: {sum(1 for _ in args.out.rglob('*.bin'))} frames, {total} bytes")
    if tracebacks:
        print(f"the brokers logged {len(tracebacks)} tracebacks during capture")
    if failures:
        print("workload steps that failed (their frames are still captured):")
        print("  " + "\n  ".join(failures))
    digest = hashlib.sha256()
    for path in sorted(args.out.rglob("*.bin")):
        digest.update(path.read_bytes())
    print(f"corpus digest {digest.hexdigest()[:16]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
