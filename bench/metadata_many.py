#!/usr/bin/env python3
"""Metadata for very many partitions: one broker, N partitions created (as T topics of
N/T partitions each), then Metadata v12 for all topics, a few times.

Prints, per layout: time to create, the first Metadata's time (it encodes every topic
entry; later ones reuse them), then the answer time (median, max), answer size,
broker RSS before and peak RSS during the Metadata requests, and the time of an
ApiVersions sent on another connection while a Metadata answer is being built (how long
one such request holds up everybody else on the broker's single event loop).

Run: `.venv/bin/python bench/metadata_many.py [--partitions 20000] [--repeat 5]`
(the partition caps are raised for the run; ~1 min for the default layouts).
"""

from __future__ import annotations

import argparse
import datetime
import io
import os
import socket
import statistics
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from broker_proc import Broker
from common import log
from report import render

MAX_TOPICS_PER_REQUEST = 1000
MAX_PARTITIONS_PER_REQUEST = 10_000


def _module(api_key: int, version: int) -> Any:
    import inspect

    return inspect.getmodule(load_request_schema(api_key, version))


class Wire:
    """One connection, one request at a time (header v2: the versions used are flexible)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=300)
        self.next_id = 1

    def close(self) -> None:
        self.sock.close()

    def _recv(self, size: int) -> bytes:
        buf = bytearray(size)
        view = memoryview(buf)
        got = 0
        while got < size:
            n = self.sock.recv_into(view[got:])
            if not n:
                raise ConnectionError("closed by the broker")
            got += n
        return bytes(buf)

    def request(self, api_key: int, version: int, body: Any) -> tuple[Any, int]:
        cls = load_request_schema(api_key, version)
        out = io.BytesIO()
        out.write(struct.pack(">hhih", api_key, version, self.next_id, 5) + b"bench")
        if cls.__flexible__:
            out.write(b"\x00")
        entity_writer(cls)(out, body)
        payload = out.getvalue()
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        self.next_id += 1
        (size,) = struct.unpack(">i", self._recv(4))
        frame = self._recv(size)
        rcls = load_response_schema(api_key, version)
        start = 5 if rcls.__flexible__ and api_key != 18 else 4
        obj, _ = entity_reader(rcls)(memoryview(frame).toreadonly(), start)
        return obj, size


def create(port: int, topics: int, per_topic: int) -> float:
    m = _module(19, 5)
    wire = Wire(port)
    started = time.perf_counter()
    batch = max(1, min(MAX_TOPICS_PER_REQUEST, MAX_PARTITIONS_PER_REQUEST // per_topic))
    try:
        for first in range(0, topics, batch):
            names = [f"t{i:06d}" for i in range(first, min(topics, first + batch))]
            body = m.CreateTopicsRequest(
                topics=tuple(
                    m.CreatableTopic(
                        name=n,
                        num_partitions=per_topic,
                        replication_factor=1,
                        assignments=(),
                        configs=(),
                    )
                    for n in names
                ),
                timeout=datetime.timedelta(seconds=60),
                validate_only=False,
            )
            response, _ = wire.request(19, 5, body)
            bad = [t for t in response.topics if int(t.error_code) != 0]
            if bad:
                raise SystemExit(f"CreateTopics failed: {bad[0]}")
    finally:
        wire.close()
    return time.perf_counter() - started


def metadata_all(port: int) -> tuple[float, int, int]:
    """(seconds, answer bytes, partitions) of one Metadata v12 for all topics."""
    m = _module(3, 12)
    wire = Wire(port)
    try:
        started = time.perf_counter()
        response, size = wire.request(
            3,
            12,
            m.MetadataRequest(
                topics=None,
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            ),
        )
        took = time.perf_counter() - started
    finally:
        wire.close()
    return took, size, sum(len(t.partitions) for t in response.topics)


def api_versions_during(port: int, stop: threading.Event, worst: list[float]) -> None:
    m = _module(18, 3)
    wire = Wire(port)
    body = m.ApiVersionsRequest(client_software_name="bench", client_software_version="1")
    try:
        while not stop.is_set():
            started = time.perf_counter()
            wire.request(18, 3, body)
            worst.append(time.perf_counter() - started)
            time.sleep(0.01)
    finally:
        wire.close()


def run_layout(root: Path, partitions: int, per_topic: int, repeat: int) -> dict[str, Any]:
    topics = partitions // per_topic
    home = root / f"p{partitions}-t{topics}"
    home.mkdir(parents=True)
    broker = Broker(home, name="broker")
    broker.start()
    try:
        log(f"{topics} topics x {per_topic} partitions: creating")
        created_s = create(broker.port, topics, per_topic)
        first_s, _, _ = metadata_all(broker.port)  # the first builds what later ones reuse
        rss_before = broker.memory_mib()["VmRSS"]
        broker.reset_peak_rss()
        times, sizes = [], []
        stop = threading.Event()
        waits: list[float] = []
        prober = threading.Thread(target=api_versions_during, args=(broker.port, stop, waits))
        prober.start()
        try:
            for _ in range(repeat):
                took, size, count = metadata_all(broker.port)
                if count != partitions:
                    raise SystemExit(f"Metadata listed {count} partitions, not {partitions}")
                times.append(took)
                sizes.append(size)
        finally:
            stop.set()
            prober.join()
        memory = broker.memory_mib()
        return {
            "layout": f"{topics} x {per_topic}",
            "create_s": created_s,
            "first_ms": first_s * 1000,
            "metadata_p50_ms": statistics.median(times) * 1000,
            "metadata_max_ms": max(times) * 1000,
            "answer_mib": sizes[0] / 2**20,
            "rss_mib": rss_before,
            "peak_rss_growth_mib": memory["VmHWM"] - rss_before,
            "other_request_max_ms": max(waits) * 1000 if waits else float("nan"),
        }
    finally:
        broker.stop()


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--partitions", type=int, default=20_000)
    ap.add_argument("--per-topic", type=int, nargs="+", default=[1, 100])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    # The caps must not stop the layouts being measured.
    os.environ["LAKELOG_MAX_PARTITIONS"] = str(max(args.partitions, 50_000))
    os.environ["LAKELOG_MAX_PARTITIONS_PER_TOPIC"] = str(max(args.per_topic))
    rows = []
    with tempfile.TemporaryDirectory(prefix="lakelog-meta-") as tmp:
        for per_topic in args.per_topic:
            rows.append(run_layout(Path(tmp), args.partitions, per_topic, args.repeat))
    header = [
        "topics x partitions",
        "create s",
        "first Metadata ms",
        "then p50 ms",
        "max ms",
        "answer MiB",
        "RSS MiB",
        "peak RSS growth MiB",
        "ApiVersions meanwhile max ms",
    ]
    body = [
        [
            r["layout"],
            f"{r['create_s']:.1f}",
            f"{r['first_ms']:.0f}",
            f"{r['metadata_p50_ms']:.0f}",
            f"{r['metadata_max_ms']:.0f}",
            f"{r['answer_mib']:.2f}",
            f"{r['rss_mib']:.0f}",
            f"{r['peak_rss_growth_mib']:.0f}",
            f"{r['other_request_max_ms']:.0f}",
        ]
        for r in rows
    ]
    print("\n".join(render(header, body)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
