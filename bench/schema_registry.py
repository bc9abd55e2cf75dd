#!/usr/bin/env python3
"""The built-in schema registry on one broker: register requests per second and their
latency (each a new Avro schema under a subject of its own, so each is a coordinator
write), then lookups by id (`GET /schemas/ids/{id}`, what every deserializer asks once per
id) from several keep-alive connections at once.

Run: `.venv/bin/python bench/schema_registry.py [--schemas 500] [--lookups-seconds 10]
[--connections 4] [--json out.json]`.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from broker_proc import Broker
from common import BenchError, lat_summary, log

HEADERS = {"Content-Type": "application/vnd.schemaregistry.v1+json"}


def request(conn: http.client.HTTPConnection, method: str, path: str, body: Any = None) -> Any:
    raw = None if body is None else json.dumps(body)
    conn.request(method, path, raw, HEADERS)
    response = conn.getresponse()
    data = response.read()
    if response.status != 200:
        raise BenchError(f"{method} {path}: {response.status} {data[:200]!r}")
    return json.loads(data)


def schema(i: int) -> str:
    fields = [{"name": f"f{j}", "type": "string"} for j in range(8)]
    return json.dumps({"type": "record", "name": f"Bench{i}", "namespace": "b", "fields": fields})


def wait_for_registry(port: int, timeout: float = 30.0) -> None:
    """The registry starts just after the broker's listener: wait until it answers."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            request(conn, "GET", "/schemas/types")
            conn.close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise BenchError(f"the registry on port {port} never answered") from None
            time.sleep(0.1)


def register_phase(port: int, count: int) -> tuple[dict[str, Any], list[int]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    seconds: list[float] = []
    ids: list[int] = []
    started = time.perf_counter()
    for i in range(count):
        t0 = time.perf_counter()
        answer = request(conn, "POST", f"/subjects/bench-{i}/versions", {"schema": schema(i)})
        seconds.append(time.perf_counter() - t0)
        ids.append(answer["id"])
    elapsed = time.perf_counter() - started
    conn.close()
    return {"requests_per_s": round(count / elapsed, 1), **lat_summary(seconds)}, ids


def lookup_phase(port: int, ids: list[int], seconds: float, connections: int) -> dict[str, Any]:
    latencies: list[list[float]] = [[] for _ in range(connections)]
    deadline = time.perf_counter() + seconds
    errors: list[BaseException] = []

    def worker(index: int) -> None:
        rng = random.Random(index)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            while time.perf_counter() < deadline:
                t0 = time.perf_counter()
                request(conn, "GET", f"/schemas/ids/{rng.choice(ids)}")
                latencies[index].append(time.perf_counter() - t0)
        except BaseException as exc:
            errors.append(exc)
        finally:
            conn.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(connections)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise BenchError(f"lookup failed: {errors[0]}")
    elapsed = time.perf_counter() - started
    every = [s for per in latencies for s in per]
    return {"requests_per_s": round(len(every) / elapsed, 1), **lat_summary(every)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schemas", type=int, default=500)
    parser.add_argument("--lookups-seconds", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lakelog-bench-sr-") as tmp:
        broker = Broker(Path(tmp), registry=True)
        try:
            broker.start()
            wait_for_registry(broker.registry_port)
            log(f"registering {args.schemas} schemas")
            registered, ids = register_phase(broker.registry_port, args.schemas)
            log(f"looking up by id for {args.lookups_seconds:.0f} s")
            lookups = lookup_phase(
                broker.registry_port, ids, args.lookups_seconds, args.connections
            )
        except BenchError as exc:
            log(f"failed: {exc}\n{broker.log_tail()}")
            return 1
        finally:
            broker.stop()
    result = {"register": registered, "lookup_by_id": lookups}
    print(f"{'phase':<14} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for name, row in result.items():
        print(
            f"{name:<14} {row['requests_per_s']:>9} {row['p50_ms']:>8} {row['p99_ms']:>8}"
            f" {row['max_ms']:>8}"
        )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
