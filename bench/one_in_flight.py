#!/usr/bin/env python3
"""Produce latency with one request in flight: the synchronous producer (send, wait for the
acknowledgement, send the next), which transactional producers and request/response
services are. Its throughput is 1 / latency, so here the WAL's commit interval is paid in
full unless the broker seals early (`produce_max_puts_per_second`).

One broker process on the local store; a confluent-kafka producer (acks=all,
max.in.flight=1, linger 0) sends `--records` records of `--record-bytes`, each flushed
before the next. Prints p50/p99/max acknowledgement latency, records per second, and the
broker's WAL objects (PUTs) per record. `--max-puts 0` measures sealing by interval only.

Run: `.venv/bin/python bench/one_in_flight.py [--records 500] [--max-puts 100]`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer

from broker_proc import Broker
from clients import create_topic
from common import BenchError, lat_summary, log
from report import fmt, render


def run(records: int, record_bytes: int, max_puts: float) -> dict[str, object]:
    root = Path(tempfile.mkdtemp(prefix="lakelog-bench-oif-"))
    os.environ["LAKELOG_PRODUCE_MAX_PUTS_PER_SECOND"] = str(max_puts)
    broker = Broker(root, metrics=True)
    try:
        broker.start()
        create_topic(broker.bootstrap, "oif", 1)
        producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap,
                "acks": "all",
                "linger.ms": 0,
                "max.in.flight.requests.per.connection": 1,
                "enable.idempotence": False,
            }
        )
        value = b"x" * record_bytes
        for _ in range(10):  # warm-up: metadata, connections
            producer.produce("oif", value)
            producer.flush(30)
        objects_before = broker.metric("lakelog_wal_objects_total")
        lat: list[float] = []
        started = time.perf_counter()
        for _ in range(records):
            t0 = time.perf_counter()
            errors: list[object] = []
            producer.produce("oif", value, on_delivery=lambda err, _m, out=errors: out.append(err))
            if producer.flush(30) != 0 or errors != [None]:
                raise BenchError(f"produce failed: {errors}")
            lat.append(time.perf_counter() - t0)
        elapsed = time.perf_counter() - started
        objects = broker.metric("lakelog_wal_objects_total") - objects_before
    finally:
        broker.stop()
        shutil.rmtree(root, ignore_errors=True)
    out: dict[str, object] = {"max_puts_per_s": max_puts, **lat_summary(lat)}
    out["records_per_s"] = round(records / elapsed, 1)
    out["puts_per_record"] = round(objects / records, 2)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=500, help="records, one at a time (500)")
    ap.add_argument("--record-bytes", type=int, default=1024, help="record value size (1024)")
    ap.add_argument(
        "--max-puts", type=float, action="append", help="produce_max_puts_per_second (100, 0)"
    )
    args = ap.parse_args()
    rows = []
    for max_puts in args.max_puts or [100.0, 0.0]:
        log(f"one request in flight, produce_max_puts_per_second={max_puts:g}")
        rows.append(run(args.records, args.record_bytes, max_puts))
    keys = list(rows[0])
    print("\n".join(render(keys, [[fmt(row[k]) for k in keys] for row in rows])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
