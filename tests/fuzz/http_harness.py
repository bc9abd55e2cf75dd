"""The fuzzer's HTTP mode: mutated schema registry requests (tests/fuzz/http_mutate.py, from
the corpus in registry_corpus.py) sent as raw bytes to a real broker's registry listener,
one request a connection, `plan.connections` at once, in batches.

Every answer is checked: a 5xx must carry Confluent's error body (`{"error_code",
"message"}`), and anything the registry answers as its own content type must be JSON. A
request that does not lie about its framing must be answered. After each batch the broker
must still answer a Kafka ApiVersions and `GET /subjects`, and the global compatibility and
mode are reset (a mutated PUT may have made the registry read-only, which would leave the
rest of the run nothing to register). The broker log is scanned for unhandled exceptions
(the registry's catch-all logs one with its traceback when a handler raised something it did
not expect); its RSS is read from /proc."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import socket
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from e2e_harness import HOST, BrokerProcess, api_versions_roundtrip

from tests.fuzz.harness import BROKER_ENV, rss_mib, scan_log
from tests.fuzz.http_mutate import HttpMutator, RawRequest
from tests.fuzz.registry_corpus import CONTENT_TYPE, HttpSeed, seeds, setup_requests

MAX_ANSWER = 4 * 1024 * 1024
EXAMPLES = 10


@dataclass(frozen=True)
class HttpPlan:
    requests: int = 2_000
    connections: int = 8
    batch: int = 250
    seed: int = 1
    max_seconds: float = 300.0
    read_timeout_s: float = 20.0
    progress_every_s: float = 0.0


@dataclass
class HttpResult:
    delivered: int = 0
    seconds: float = 0.0
    statuses: collections.Counter[int] = field(default_factory=collections.Counter)
    bad_answers: list[str] = field(default_factory=list)
    unanswered: list[str] = field(default_factory=list)
    lies_unanswered: int = 0
    unhealthy: list[str] = field(default_factory=list)
    crashed: bool = False
    unhandled: int = 0
    unhandled_kinds: dict[str, int] = field(default_factory=dict)
    rss_start_mib: float = 0.0
    rss_end_mib: float = 0.0
    setup_errors: list[str] = field(default_factory=list)

    def report(self) -> str:
        statuses = ", ".join(f"{s}: {n}" for s, n in sorted(self.statuses.items()))
        lines = [
            f"registry HTTP fuzz: {self.delivered} requests in {self.seconds:.0f} s "
            f"({self.delivered / max(self.seconds, 1e-9):.0f}/s)",
            f"  statuses: {statuses}",
            f"  framing lies closed without an answer: {self.lies_unanswered}",
            f"  bad answers: {len(self.bad_answers)}; unanswered: {len(self.unanswered)}; "
            f"unhealthy checks: {len(self.unhealthy)}; crashed: {self.crashed}",
            f"  unhandled exceptions: {self.unhandled} {self.unhandled_kinds}",
            f"  RSS {self.rss_start_mib:.0f} -> {self.rss_end_mib:.0f} MiB",
        ]
        for title, items in (
            ("setup", self.setup_errors),
            ("bad", self.bad_answers),
            ("unanswered", self.unanswered),
            ("unhealthy", self.unhealthy),
        ):
            lines += [f"  {title}: {item}" for item in items[:EXAMPLES]]
        return "\n".join(lines)


def parse_answer(raw: bytes) -> tuple[int, dict[str, str], bytes] | None:
    """(status, headers, body) of the final answer in `raw` (1xx answers skipped)."""
    while raw:
        head, sep, rest = raw.partition(b"\r\n\r\n")
        if not sep:
            return None
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[1].isdigit():
            return None
        status = int(parts[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if 100 <= status < 200:
            raw = rest
            continue
        return status, headers, rest
    return None


def problem_with(status: int, headers: dict[str, str], body: bytes) -> str | None:
    """Why an answer breaks the registry's promises (None: it keeps them)."""
    if "chunked" in headers.get("transfer-encoding", ""):
        return None  # not produced by the registry's app; nothing to check
    ours = headers.get("content-type", "").startswith(CONTENT_TYPE)
    if status >= 500 or (ours and status >= 400):
        try:
            parsed = json.loads(body)
        except ValueError:
            return f"{status} without Confluent's error body: {body[:200]!r}"
        if not (
            isinstance(parsed, dict)
            and isinstance(parsed.get("error_code"), int)
            and isinstance(parsed.get("message"), str)
        ):
            return f"{status} without Confluent's error body: {body[:200]!r}"
    elif ours and body:
        try:
            json.loads(body)
        except ValueError:
            # GET .../schema answers the schema's own text, which need not be JSON (Protobuf).
            return None if status == 200 else f"{status} answer is not JSON: {body[:200]!r}"
    return None


async def send(port: int, request: RawRequest, timeout: float) -> bytes | None:
    """The raw answer (None when the connection closed or timed out before one). Reads
    while it writes: a server may answer (413, 404) before it has read a large body and
    close, and the answer must not be lost to the reset that follows."""
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        await asyncio.wait_for(loop.sock_connect(sock, (HOST, port)), timeout)
    except (OSError, TimeoutError):
        sock.close()
        return None

    async def read() -> bytes:
        chunks: list[bytes] = []
        size = 0
        with contextlib.suppress(OSError):
            while size < MAX_ANSWER:
                chunk = await loop.sock_recv(sock, 65536)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
        return b"".join(chunks)

    reading = asyncio.ensure_future(read())
    try:
        with contextlib.suppress(OSError, TimeoutError):
            await asyncio.wait_for(loop.sock_sendall(sock, request.data), timeout)
            if request.lies:
                sock.shutdown(socket.SHUT_WR)  # a lie about the length: the end comes at once
        try:
            return await asyncio.wait_for(reading, timeout) or None
        except TimeoutError:
            return None
    finally:
        reading.cancel()
        sock.close()


def _http(url: str, method: str = "GET", body: bytes | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, body, method=method)
    request.add_header("Content-Type", CONTENT_TYPE)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _seed_request(seed: HttpSeed) -> RawRequest:
    target = seed.path + ("?" + seed.query if seed.query else "")
    lines = [f"{seed.method} {target} HTTP/1.1", "Host: registry", "Connection: close"]
    lines += [f"{n}: {v}" for n, v in seed.headers] + [f"Content-Length: {len(seed.body)}"]
    return RawRequest(("\r\n".join(lines) + "\r\n\r\n").encode() + seed.body, "seed", False)


def healthy(broker: BrokerProcess) -> str | None:
    """Why the broker is not serving (None: it answers ApiVersions and GET /subjects)."""
    if not broker.alive():
        return "the broker process exited"
    try:
        api_versions_roundtrip(broker.port, timeout=30.0)
    except Exception as exc:
        return f"no ApiVersions answer: {exc!r}"
    try:
        status, body = _http(broker.registry_url + "/subjects")
        if status != 200 or not isinstance(json.loads(body), list):
            return f"GET /subjects answered {status} {body[:200]!r}"
    except Exception as exc:
        return f"GET /subjects failed: {exc!r}"
    for path, value in (("/mode", {"mode": "READWRITE"}), ("/config", {"compatibility": "NONE"})):
        status, body = _http(broker.registry_url + path, "PUT", json.dumps(value).encode())
        if status != 200:
            return f"PUT {path} answered {status} {body[:200]!r}"
    return None


async def _batch(
    broker: BrokerProcess, mutator: HttpMutator, count: int, plan: HttpPlan, result: HttpResult
) -> None:
    queue = [mutator.next() for _ in range(count)]

    async def worker() -> None:
        while queue:
            request = queue.pop()
            raw = await send(broker.registry_port or 0, request, plan.read_timeout_s)
            result.delivered += 1
            answer = parse_answer(raw) if raw else None
            if answer is None:
                if request.lies:
                    result.lies_unanswered += 1
                else:
                    result.unanswered.append(f"{request.what}: {request.data[:300]!r}")
                continue
            status, headers, body = answer
            result.statuses[status] += 1
            head = request.data.startswith(b"HEAD ")  # an answer to HEAD has no body
            problem = None if head else problem_with(status, headers, body)
            if problem:
                result.bad_answers.append(f"{request.what}: {problem}; {request.data[:300]!r}")

    await asyncio.gather(*(worker() for _ in range(plan.connections)))


def run_registry(plan: HttpPlan, workdir: Path) -> HttpResult:
    """Start a broker serving the registry, fuzz it per `plan`, and say how it went."""
    result = HttpResult()
    broker = BrokerProcess(
        workdir / "registry-fuzzed", env=BROKER_ENV, registry=True, name="registry-fuzzed"
    )
    broker.start()
    try:
        assert broker.proc is not None
        pid = broker.proc.pid
        # Check (and teach) the corpus: every seed is valid against a fresh registry.
        for seed in setup_requests():
            status, body = _http(broker.registry_url + seed.path, seed.method, seed.body)
            if status != 200:
                result.setup_errors.append(f"{seed.path}: {status} {body[:200]!r}")
        result.rss_start_mib = rss_mib(pid)
        mutator = HttpMutator(seeds(), plan.seed)
        start = time.monotonic()
        last_progress = start
        while result.delivered < plan.requests and time.monotonic() - start < plan.max_seconds:
            count = min(plan.batch, plan.requests - result.delivered)
            asyncio.run(_batch(broker, mutator, count, plan, result))
            problem = healthy(broker)
            if problem is not None:
                result.unhealthy.append(f"after {result.delivered} requests: {problem}")
                result.crashed = not broker.alive()
                break
            now = time.monotonic()
            if plan.progress_every_s and now - last_progress >= plan.progress_every_s:
                print(f"  ... {result.delivered} requests, {dict(result.statuses)}", flush=True)
                last_progress = now
        result.seconds = time.monotonic() - start
        if broker.alive():
            result.rss_end_mib = rss_mib(pid)
    finally:
        broker.close()
        result.unhandled, result.unhandled_kinds = scan_log(
            broker.log_path.read_text("utf-8", "replace")
        )
    return result
