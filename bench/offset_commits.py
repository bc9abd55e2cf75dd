"""Offset commits at Kafka's pace (issue 36): OffsetCommit latency from the broker's own
histogram, and commits per second, on SQLite and on PostgreSQL.

Two phases per engine, each on a fresh broker:
- per-message: one confluent-kafka consumer (subscribed, one group) reads `--records`
  small records and commits each one asynchronously (`commit(message, asynchronous=True)`),
  as stream frameworks do. commits/s = acknowledged commits / time from the first commit
  to the last acknowledgement.
- groups: `--consumers` consumers in `--groups` groups on one topic, each committing its
  position asynchronously every `--interval-ms` while a producer paced at `--rate`
  records/s keeps them busy, for `--seconds`. commits/s = OffsetCommit requests the
  broker answered / seconds.

OffsetCommit p50/p99 are read from `lakelog_request_latency_seconds{api="offset_commit"}`
on the broker's /metrics (the difference over the phase), interpolated inside a bucket
as Prometheus' histogram_quantile does; the bucket bounds are printed too. PostgreSQL is a
throwaway durable server (`scripts/postgres.sh`, fsync and synchronous_commit on); objects
stay on the local disk, as the coordinator is what this measures. Usage:

    .venv/bin/python bench/offset_commits.py [--records 20000] [--engines sqlite,postgres]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer

from broker_proc import Broker
from clients import common_conf, create_topic
from common import BenchError, log
from pg_server import PgServer, available

REQUEST = ("lakelog_request_latency_seconds", 'api="offset_commit"')
WRITE = ("lakelog_coordinator_latency_seconds", 'method="commit_offset_batch"')
BATCH = ("lakelog_offset_commit_batch_requests", "")


def buckets(broker: Broker, which: tuple[str, str] = REQUEST) -> dict[float, float]:
    """A histogram on the broker's /metrics: {upper bound: cumulative count}, and under
    key -1 its sum."""
    url = f"http://127.0.0.1:{broker.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    name, label = which
    out: dict[float, float] = {}
    for line in text.splitlines():
        if label not in line:
            continue
        if line.startswith(name + "_bucket{"):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            out[float(le)] = float(line.rsplit(" ", 1)[1])
        elif line.startswith(name + "_sum"):
            out[-1.0] = float(line.rsplit(" ", 1)[1])
    return out


class Snapshot:
    """The three histograms at one moment: requests, batch writes, batch sizes."""

    def __init__(self, broker: Broker) -> None:
        self.request = buckets(broker, REQUEST)
        self.write = buckets(broker, WRITE)
        self.batch = buckets(broker, BATCH)

    def since(self, before: Snapshot) -> dict[str, Any]:
        out = quantiles(before.request, self.request)
        write = quantiles(before.write, self.write)
        out["writes"] = write["requests"]
        out["write_p50_ms"] = write["p50_ms"]
        out["write_p99_ms"] = write["p99_ms"]
        batches = self.batch.get(float("inf"), 0) - before.batch.get(float("inf"), 0)
        summed = self.batch.get(-1.0, 0) - before.batch.get(-1.0, 0)
        out["requests_per_write"] = round(summed / batches, 1) if batches else None
        return out


def quantiles(before: dict[float, float], after: dict[float, float]) -> dict[str, Any]:
    """p50/p99 (ms) of the requests between two snapshots, histogram_quantile style."""
    bounds = sorted(b for b in after if b >= 0)
    counts = [after[b] - before.get(b, 0.0) for b in bounds]
    total = counts[-1] if counts else 0.0
    out: dict[str, Any] = {"requests": int(total)}
    for name, q in (("p50_ms", 0.5), ("p99_ms", 0.99)):
        if total <= 0:
            out[name] = None
            continue
        rank = q * total
        lower, below = 0.0, 0.0
        for bound, cumulative in zip(bounds, counts, strict=True):
            if cumulative >= rank:
                if bound == float("inf"):
                    value = lower
                else:
                    inside = cumulative - below
                    value = lower + (bound - lower) * ((rank - below) / inside if inside else 1)
                out[name] = round(value * 1000, 2)
                out[name.replace("_ms", "_bucket_ms")] = (
                    f"{lower * 1000:g}-{bound * 1000:g}" if bound != float("inf") else "inf"
                )
                break
            lower, below = bound, cumulative
    return out


def produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({**common_conf(bootstrap), "linger.ms": 5, "acks": "all"})
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value=b"%08d" % i)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(60) != 0:
        raise BenchError("produce did not finish")


def per_message(broker: Broker, records: int) -> dict[str, Any]:
    topic = f"per-message-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, records)
    acked = 0
    failed = 0
    last_ack = 0.0

    def on_commit(err: Any, partitions: Any) -> None:
        nonlocal acked, failed, last_ack
        if err is None and all(p.error is None for p in partitions):
            acked += 1
            last_ack = time.perf_counter()
        else:
            failed += 1

    consumer = Consumer(
        {
            **common_conf(broker.bootstrap),
            "group.id": f"g-{topic}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "on_commit": on_commit,
        }
    )
    consumer.subscribe([topic])
    before = Snapshot(broker)
    consumed = 0
    first = 0.0
    deadline = time.monotonic() + 300
    try:
        while consumed < records and time.monotonic() < deadline:
            message = consumer.poll(0.1)
            if message is None or message.error() is not None:
                continue
            if not first:
                first = time.perf_counter()
            consumed += 1
            consumer.commit(message=message, asynchronous=True)
        consumed_at = time.perf_counter()
        while acked + failed < consumed and time.monotonic() < deadline:
            consumer.poll(0.05)
    finally:
        consumer.close()
    if consumed < records:
        raise BenchError(f"consumed {consumed} of {records} records")
    after = Snapshot(broker)
    return {
        "records": records,
        "consume_s": round(consumed_at - first, 2),
        "commits_acked": acked,
        "commits_failed": failed,
        "commits_per_s": round(acked / (last_ack - first)) if last_ack > first else None,
        **after.since(before),
    }


def groups(
    broker: Broker, consumers: int, group_count: int, interval_ms: int, rate: int, seconds: float
) -> dict[str, Any]:
    topic = f"groups-{uuid.uuid4().hex[:8]}"
    partitions = max(1, consumers // group_count) * 2
    create_topic(broker.bootstrap, topic, partitions)
    stop = threading.Event()
    measuring = threading.Event()
    assigned = [0] * consumers
    commits = [0] * consumers
    errors: list[str] = []

    def run(i: int) -> None:
        def on_assign(_c: Any, parts: Any) -> None:
            assigned[i] = len(parts)

        def on_commit(err: Any, _parts: Any) -> None:
            if err is not None and err.code() != -168:  # _NO_OFFSET: nothing new
                errors.append(str(err))

        c = Consumer(
            {
                **common_conf(broker.bootstrap),
                "group.id": f"g{i % group_count}-{topic}",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "on_commit": on_commit,
            }
        )
        c.subscribe([topic], on_assign=on_assign)
        next_commit = time.monotonic()
        try:
            while not stop.is_set():
                c.poll(0.002)
                now = time.monotonic()
                if now >= next_commit:
                    next_commit = now + interval_ms / 1000
                    try:
                        c.commit(asynchronous=True)
                        if measuring.is_set():
                            commits[i] += 1
                    except Exception:  # nothing consumed yet: no offsets to commit
                        pass
        finally:
            c.close()

    producer_done = threading.Event()

    def pace() -> None:
        producer = Producer({**common_conf(broker.bootstrap), "linger.ms": 5})
        sent = 0
        start = time.monotonic()
        while not stop.is_set():
            due = int((time.monotonic() - start) * rate)
            while sent < due:
                try:
                    producer.produce(topic, value=b"%08d" % sent)
                    sent += 1
                except BufferError:
                    break
            producer.poll(0.005)
        producer.flush(10)
        producer_done.set()

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(consumers)]
    threads.append(threading.Thread(target=pace, daemon=True))
    for t in threads:
        t.start()
    try:
        deadline = time.monotonic() + 90
        while sum(1 for a in assigned if a) < min(consumers, partitions * group_count):
            if time.monotonic() > deadline:
                raise BenchError(f"groups not assigned in 90 s: {assigned}")
            time.sleep(0.2)
        time.sleep(2)  # settle: every group stable and committing
        before = Snapshot(broker)
        offsets_before = broker.counter("lakelog_offset_commits_total")
        measuring.set()
        start = time.perf_counter()
        time.sleep(seconds)
        after = Snapshot(broker)
        elapsed = time.perf_counter() - start
        offsets_after = broker.counter("lakelog_offset_commits_total")
        measuring.clear()
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    figures = after.since(before)
    return {
        "consumers": consumers,
        "groups": group_count,
        "interval_ms": interval_ms,
        "rate": rate,
        "seconds": round(elapsed, 1),
        "commit_calls_per_s": round(sum(commits) / elapsed),
        "commits_per_s": round(figures["requests"] / elapsed),
        "offsets_per_s": round((offsets_after - offsets_before) / elapsed),
        "commit_errors": len(errors),
        **figures,
    }


@contextmanager
def engine(name: str, root: Path) -> Iterator[dict[str, str]]:
    """The environment a broker on this engine needs."""
    if name == "sqlite":
        yield {}
        return
    why = available()
    if why:
        raise BenchError(f"PostgreSQL not available: {why}")
    server = PgServer()
    try:
        server.start()
        server.restart(durable=True)
        server.recycle_wal(64)
        yield {"LAKELOG_COORDINATOR_URL": server.new_database(f"bench_{root.name}")}
    finally:
        server.stop()


def run_engine(name: str, args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {"engine": name}
    with tempfile.TemporaryDirectory(prefix="lakelog-bench-offsets-") as tmp:
        root = Path(tmp)
        with engine(name, root) as env:
            saved = dict(os.environ)
            os.environ.update(env)
            os.environ["LAKELOG_GROUP_INITIAL_REBALANCE_DELAY_MS"] = "300"
            try:
                for phase in args.phases.split(","):
                    broker = Broker(root, name=f"{name}-{phase}", data_dir=root / phase,
                                    metrics=True)  # fmt: skip
                    broker.start()
                    try:
                        log(f"{name}: {phase}")
                        if phase == "per_message":
                            result[phase] = per_message(broker, args.records)
                        else:
                            result[phase] = groups(
                                broker,
                                args.consumers,
                                args.groups,
                                args.interval_ms,
                                args.rate,
                                args.seconds,
                            )
                    except BenchError:
                        log(broker.log_tail())
                        raise
                    finally:
                        broker.stop()
            finally:
                os.environ.clear()
                os.environ.update(saved)
    return result


def table(results: list[dict[str, Any]]) -> str:
    rows = [
        "| engine | phase | commits/s | OffsetCommit p50 ms | p99 ms (bucket) | requests"
        " | writes | commits/write | write p50 / p99 ms |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        for phase in ("per_message", "groups"):
            f = r.get(phase)
            if not f:
                continue
            rows.append(
                f"| {r['engine']} | {phase} | {f['commits_per_s']} | {f['p50_ms']}"
                f" | {f['p99_ms']} ({f.get('p99_bucket_ms')}) | {f['requests']}"
                f" | {f['writes']} | {f['requests_per_write']}"
                f" | {f['write_p50_ms']} / {f['write_p99_ms']} |"
            )
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--consumers", type=int, default=20)
    ap.add_argument("--groups", type=int, default=4)
    ap.add_argument("--interval-ms", type=int, default=10)
    ap.add_argument("--rate", type=int, default=2000, help="records/s in the groups phase")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--engines", default="sqlite,postgres")
    ap.add_argument("--phases", default="per_message,groups")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    results: list[dict[str, Any]] = []
    failed = False
    for name in args.engines.split(","):
        try:
            results.append(run_engine(name, args))
        except BenchError as exc:
            log(f"{name}: {exc}")
            failed = True
    print(table(results))
    for r in results:
        print(json.dumps(r))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
