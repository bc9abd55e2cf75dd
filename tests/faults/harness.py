"""The fault harness: a cluster of broker processes under producers while faults hit it.

Two backends: `sqlite-files` (brokers share one data dir's SQLite file and local objects,
as several brokers on one host do) and `postgres-s3` (a PostgreSQL server this harness
starts itself, so it can stop and start it, and moto's S3 server behind the S3 fault proxy
of `tests/support/s3_fault_proxy.py`). Faults: brokers SIGKILLed and restarted, brokers
SIGSTOPped and SIGCONTed (a zombie waking up), the PostgreSQL server stopped and started,
S3 errors before and after forwarding, dropped responses and latency spikes.

Clients are confluent-kafka producers in threads, idempotent and plain (retries 0), with 5
requests in flight and records of 1 KiB and ~500 KB mixed; their delivery callbacks are
the ground truth that `history.check` compares with the whole log read back afterwards.
The broker logs give the connections closed for a failed request, and the coordinator's
`files` table against a direct listing of the store gives the orphan objects.

Used by the short test (`test_fault_harness.py`, in `make test`) and the long run
(`scripts/faults.py`, `make faults`). Every loop is bounded in count and time and
everything started here is stopped in `FaultRun.close()`, also after a failure.
"""

from __future__ import annotations

import contextlib
import functools
import heapq
import random
import re
import sqlite3
import subprocess
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2e_backends import Backend
from e2e_harness import BrokerError, create_topic

from tests.faults.clients import FaultProducer, TailingConsumer, read_back
from tests.faults.history import (
    Verdict,
    check,
)
from tests.faults.plan import LONG_PLAN, SHORT_PLAN, Plan  # noqa: F401 (re-exported)
from tests.faults.servers import (
    FaultBroker,
    Postgres,
    S3WithFaults,
    latency_spike_rules,
    s3_fault_rules,
)

BACKENDS = ("sqlite-files", "postgres-s3")
DROPPED_RE = re.compile(r"closing (\S+): (?:SASL )?request failed")
BROKER_ENV: dict[str, object] = {
    "BROKER_SESSION_TIMEOUT_MS": 3000,
    "BROKER_HEARTBEAT_INTERVAL_MS": 500,
    "PRODUCE_COMMIT_INTERVAL_MS": 100,
}
"""A low session timeout, so a killed or paused broker is declared dead (and fenced)
within seconds and clients move to the others."""


@dataclass
class Result:
    backend: str
    plan: Plan
    kills: int = 0
    stops: int = 0
    pg_stops: int = 0
    s3_faults: int = 0
    """S3 requests answered with a 5xx or a dropped connection by the proxy."""
    s3_delays: int = 0
    s3_counters: dict[str, Any] = field(default_factory=dict)
    verdict: Verdict = field(default_factory=Verdict)
    dropped: int = 0
    dropped_examples: list[str] = field(default_factory=list)
    orphans_after_run: int = 0
    orphans_after_cleanup: int = 0
    orphans_after_gc: int | None = None
    """Unknown objects left after `lakelog pipeline gc` (None: GC not run)."""
    orphan_causes: dict[str, int] = field(default_factory=dict)
    orphan_examples: list[str] = field(default_factory=list)
    tracebacks: int = 0
    committed_by: list[str] = field(default_factory=list)
    """For the offsets of out-of-order and duplicate findings: the batch, the broker and
    epoch whose commit stored it, and when (from the coordinator's tables)."""
    restart_failures: list[str] = field(default_factory=list)
    harness_errors: list[str] = field(default_factory=list)
    consumer_records: int = 0
    consumer_errors: int = 0
    seconds: float = 0.0
    events: list[str] = field(default_factory=list)

    @property
    def orphans_unexplained(self) -> int:
        """Orphans left after the cleanup that no SIGKILL between upload and commit
        explains: the ones the broker should never leave behind."""
        return self.orphans_after_cleanup - self.orphan_causes.get("sigkill", 0)

    def broken(self, *, plain_duplicates: bool = True) -> list[str]:
        """The invariants this run broke (empty: all held).

        `plain_duplicates=False` leaves out plain producers' (no idempotence, retries=0)
        duplicates: librdkafka resends what was in flight on a connection it drops without
        counting a retry, and nothing can tell such a copy from new records. The short run
        in `make test` reports them (`plain_findings`); the long run asserts them. Plain
        producers' order is asserted by both: a broker commits their batches only under
        its claim on the partition (`coordinator/ops/plain_owners.py`)."""
        v = self.verdict
        out = [
            f"{name}: {n}"
            for name, n in (
                ("lost", v.lost),
                ("duplicated", v.duplicated - (0 if plain_duplicates else v.duplicated_plain)),
                ("out of order", v.out_of_order),
                ("gaps", v.gaps),
                ("fatal", v.fatal),
                ("dropped connections", self.dropped),
            )
            if n
        ]
        if v.acked == 0:
            out.append("nothing was acknowledged")
        if self.orphans_after_gc:
            out.append(f"orphans left after GC: {self.orphans_after_gc}")
        out += [f"harness: {e}" for e in self.harness_errors]
        return out

    def plain_findings(self) -> list[str]:
        """The plain producers' duplicates (see `broken`)."""
        v = self.verdict
        return [f"plain duplicated: {v.duplicated_plain}"] if v.duplicated_plain else []

    def report(self) -> str:
        v = self.verdict
        lines = [
            f"== {self.backend}: {self.seconds:.0f}s, seed {self.plan.seed}",
            f"faults: {self.kills} kills, {self.stops} stops, {self.pg_stops} pg stops, "
            f"{self.s3_faults} S3 errors/drops and {self.s3_delays} delays injected "
            f"(proxy counters {self.s3_counters})",
            f"history: {v.summary()}",
            f"tailing consumer: {self.consumer_records} records, {self.consumer_errors} errors",
            f"dropped connections: {self.dropped}",
            *(f"  {e}" for e in self.dropped_examples),
            f"orphans: {self.orphans_after_run} right after the run, "
            f"{self.orphans_after_cleanup} after the brokers' own cleanup, "
            f"{'-' if self.orphans_after_gc is None else self.orphans_after_gc} after GC; "
            "causes "
            f"{self.orphan_causes}",
            *(f"  {e}" for e in self.orphan_examples),
            f"broker tracebacks: {self.tracebacks}",
        ]
        if self.committed_by:
            lines.append("who committed the records of those findings:")
            lines += [f"  {c}" for c in self.committed_by]
        if self.restart_failures:
            lines.append(f"restart failures: {self.restart_failures[:5]}")
        if self.harness_errors:
            lines.append(f"harness errors: {self.harness_errors}")
        return "\n".join(lines)


class FaultRun:
    """One run on one backend: start, load + faults, stop load, check, clean up."""

    def __init__(self, backend: str, plan: Plan, workdir: Path) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}")
        self.backend_name = backend
        self.plan = plan
        self.workdir = workdir
        self.rng = random.Random(plan.seed)
        self.data_dir = workdir / "data"
        self.pg: Postgres | None = None
        self.s3: S3WithFaults | None = None
        self.backend: Backend | None = None
        self.brokers: list[FaultBroker] = []
        self.producers: list[FaultProducer] = []
        self.tail: TailingConsumer | None = None
        self.topic = f"faults-{uuid.uuid4().hex[:8]}"
        self.result = Result(backend, plan)
        self.kill_times_ms: list[tuple[str, int]] = []
        """(broker name, wall-clock ms) of every SIGKILL."""
        self.abort = threading.Event()
        self.pg_down = False
        self._s3_window = False
        self._spike = False

    # -- setup
    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.backend_name == "sqlite-files":
            objects = (self.data_dir / "objects").resolve()
            objects.mkdir(parents=True, exist_ok=True)
            sqlite = (self.data_dir / "coordinator.sqlite3").resolve()
            self.backend = Backend(objects.as_uri(), f"sqlite:///{sqlite}")
        else:
            self.pg = Postgres()
            self.pg.start()
            self.s3 = S3WithFaults(self.workdir, self.plan.seed)
            self.s3.start()
            self.backend = Backend(self.s3.storage_url, self.pg.new_database())
        for i in range(self.plan.brokers):
            broker = FaultBroker(
                self.data_dir,
                self.backend,
                env={**BROKER_ENV, "BROKER_ID": i + 1},
                name=f"broker{i + 1}",
            )
            self.brokers.append(broker)
            broker.start()  # one by one: the first one migrates the schema
        create_topic(self.bootstrap, self.topic, self.plan.partitions)

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    # -- faults
    def _schedule(self) -> list[tuple[float, int, str, Callable[[], None]]]:
        """(time from start, tie-break, label, action) for every planned fault."""
        plan, rng = self.plan, self.rng
        events: list[tuple[float, int, str, Callable[[], None]]] = []
        span = max(1.0, plan.duration_s - 8.0)

        def spread(n: int, start: float, end: float) -> list[float]:
            step = (end - start) / max(n, 1)
            return [start + step * (i + rng.uniform(0.2, 0.8)) for i in range(n)]

        for t in spread(plan.kills, 3.0, span):
            events.append((t, len(events), "kill", self._kill_one))
        for t in spread(plan.stops, 4.0, span):
            seconds = rng.uniform(*plan.stop_s)
            events.append((t, len(events), "stop", functools.partial(self._stop_one, seconds)))
        if self.backend_name == "postgres-s3":
            for t in spread(plan.pg_stops, span * 0.3, span * 0.6):
                events.append((t, len(events), "pg stop", self._pg_stop))
            s3_start = min(span * 0.15, max(1.0, span - plan.s3_fault_s))
            events.append((s3_start, len(events), "s3 faults on", self._s3_on))
            events.append((s3_start + plan.s3_fault_s, len(events), "s3 faults off", self._s3_off))
            for t in spread(plan.latency_spikes, span * 0.6, span):
                events.append((t, len(events), "latency spike", self._spike_on))
        return events

    def _log(self, text: str) -> None:
        self.result.events.append(f"{_clock(int(time.time() * 1000))} {text}")

    def _later(self, seconds: float, label: str, action: Callable[[], None]) -> None:
        heapq.heappush(self._heap, (time.monotonic() + seconds, next(self._tie), label, action))

    def _kill_one(self) -> None:
        if self.pg_down:
            self._log("kill skipped: PostgreSQL is down")
            return
        candidates = [b for b in self.brokers if b.alive() and not b.stopped]
        if len(candidates) < 2:
            self._log("kill skipped: keep one broker up")
            return
        broker = self.rng.choice(candidates)
        self.kill_times_ms.append((broker.name, int(time.time() * 1000)))
        broker.kill()
        self.result.kills += 1
        self._log(f"SIGKILL {broker.name}")
        time.sleep(self.rng.uniform(0.2, 1.5))
        self._restart(broker, attempts=5)

    def _restart(self, broker: FaultBroker, attempts: int) -> None:
        for attempt in range(attempts):
            if self.abort.is_set():
                return
            try:
                broker.start(ready_timeout=30)
                return
            except BrokerError as exc:
                self.result.restart_failures.append(f"{broker.name} #{attempt}: {exc!s:.300}")
                broker.kill()
                time.sleep(2)

    def _stop_one(self, seconds: float) -> None:
        candidates = [b for b in self.brokers if b.alive() and not b.stopped]
        if len(candidates) < 2:
            self._log("stop skipped: keep one broker up")
            return
        broker = self.rng.choice(candidates)
        broker.sigstop()
        self.result.stops += 1
        self._log(f"SIGSTOP {broker.name} for {seconds:.1f}s")
        # On its own timer, not the heap: a restart blocks the fault thread (up to 5 tries
        # of 30 s), and a broker stopped inside a SQLite write transaction fails every
        # restart until it wakes, so a 6.7 s stop once lasted 67 s.
        waker = threading.Timer(seconds, self._cont, args=(broker,))
        waker.daemon = True
        waker.start()

    def _cont(self, broker: FaultBroker) -> None:
        if broker.stopped:
            broker.sigcont()
            self._log(f"SIGCONT {broker.name}")

    def _pg_stop(self) -> None:
        assert self.pg is not None
        self.pg_down = True
        self.pg.stop_server()
        self.result.pg_stops += 1
        self._log("PostgreSQL stopped")
        self._later(self.plan.pg_stop_s, "pg start", self._pg_start)

    def _pg_start(self) -> None:
        assert self.pg is not None
        self.pg.start_server()
        self.pg_down = False
        self._log("PostgreSQL started")

    def _push_s3_rules(self) -> None:
        assert self.s3 is not None
        rules: list[dict[str, Any]] = []
        if self._s3_window:
            rules += s3_fault_rules(self.plan.s3_fault_probability)
        if self._spike:
            rules += latency_spike_rules()
        self.s3.set_rules(rules)

    def _s3_on(self) -> None:
        self._s3_window = True
        self._push_s3_rules()
        self._log("S3 faults on")

    def _s3_off(self) -> None:
        self._s3_window = False
        self._push_s3_rules()
        self._log("S3 faults off")

    def _spike_on(self) -> None:
        self._spike = True
        self._push_s3_rules()
        self._log("S3 latency spike on")
        self._later(5.0, "spike off", self._spike_off)

    def _spike_off(self) -> None:
        self._spike = False
        self._push_s3_rules()
        self._log("S3 latency spike off")

    def _run_faults(self) -> None:
        """The fault thread: a finite heap of timed actions (each adds at most one
        follow-up), run in time order until it is empty or the run is aborted."""
        start = time.monotonic()
        self._tie = iter(range(10**9))
        self._heap: list[tuple[float, int, str, Callable[[], None]]] = []
        for t, _, label, action in self._schedule():
            heapq.heappush(self._heap, (start + t, next(self._tie), label, action))
        while self._heap and not self.abort.is_set():
            at, _, label, action = self._heap[0]
            if time.monotonic() < at:
                self.abort.wait(min(0.2, at - time.monotonic()))
                continue
            heapq.heappop(self._heap)
            try:
                action()
            except Exception as exc:
                self.result.harness_errors.append(f"{label}: {exc!r}")
                self._log(f"{label} failed: {traceback.format_exc(limit=3)}")

    def _heal(self) -> None:
        """Undo every fault still in force: wake, restart, start PostgreSQL, clear S3."""
        for broker in self.brokers:
            broker.sigcont()
        if self.pg is not None and not self.pg.running:
            with contextlib.suppress(Exception):
                self.pg.start_server()
            self.pg_down = False
        if self.s3 is not None:
            self._s3_window = self._spike = False
            with contextlib.suppress(Exception):
                self._push_s3_rules()
        for broker in self.brokers:
            if not broker.alive():
                self._restart(broker, attempts=3)

    # -- the whole run
    def run(self) -> Result:
        started = time.monotonic()
        self.start()
        plan = self.plan
        for i in range(plan.idempotent_producers):
            self.producers.append(FaultProducer(f"i{i}", True, self.bootstrap, self.topic, plan))
        for i in range(plan.plain_producers):
            self.producers.append(FaultProducer(f"p{i}", False, self.bootstrap, self.topic, plan))
        self.tail = TailingConsumer(self.bootstrap, self.topic, plan.partitions)
        for p in self.producers:
            p.thread.start()
        self.tail.thread.start()
        faults = threading.Thread(target=self._run_faults, name="faults", daemon=True)
        faults.start()
        try:
            faults.join(plan.duration_s + 600)
            if faults.is_alive():
                self.result.harness_errors.append("the fault thread did not finish")
        finally:
            self.abort.set()
            faults.join(60)
            self._heal()
        time.sleep(2)  # a few seconds of calm before the load stops
        for p in self.producers:
            p.stop.set()
        for p in self.producers:
            p.thread.join(plan.flush_timeout_s + 60)
            if p.thread.is_alive():
                self.result.harness_errors.append(f"{p.history.name} did not finish")
        self.tail.stop.set()
        self.tail.thread.join(30)
        self.result.consumer_records = self.tail.records
        self.result.consumer_errors = len(self.tail.errors)
        time.sleep(2)  # failed uploads the brokers clean up themselves
        self.result.orphans_after_run = len(self.unknown_objects())
        log, high, low = read_back(self.bootstrap, self.topic, plan.partitions, timeout=600)
        histories = []
        for p in self.producers:
            with p.lock:
                histories.append(p.history)
        self.result.verdict = check(histories, log, high, low)
        try:
            self.result.committed_by = self.committed_by(self.result.verdict.places[:40])
        except Exception as exc:
            self.result.committed_by = [f"(coordinator lookup failed: {exc!r})"]
        if self.s3 is not None:
            with contextlib.suppress(Exception):
                self.result.s3_counters = self.s3.counters()
                failures, delays = count_injected(self.result.s3_counters)
                self.result.s3_faults, self.result.s3_delays = failures, delays
        # The brokers' own cleanup: a graceful stop drains and deletes what they can.
        for broker in self.brokers:
            broker.terminate()
        orphans = self.unknown_objects()
        self.result.orphans_after_cleanup = len(orphans)
        self._classify_orphans(orphans)
        self._scan_logs()
        if plan.gc_after:
            self._collect_garbage()
        self.result.seconds = time.monotonic() - started
        return self.result

    # -- what is left behind
    def _collect_garbage(self) -> None:
        """The pipeline's GC with no grace: every broker is stopped, so every unknown
        object is an orphan now."""
        assert self.backend is not None
        command = [
            sys.executable,
            "-m",
            "lakelog",
            "pipeline",
            "gc",
            "--storage-url",
            self.backend.storage_url,
            "--coordinator-url",
            self.backend.coordinator_url,
            "--orphan-grace-ms",
            "0",
            "--master",
            "local[2]",
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            self.result.harness_errors.append(f"pipeline gc failed: {done.stderr[-2000:]}")
        self.result.orphans_after_gc = len(self.unknown_objects())

    def known_objects(self) -> set[str]:
        return {row[0] for row in self._query("SELECT object_key FROM files", ())}

    def _query(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """A read-only query on the coordinator's database (`?` placeholders)."""
        assert self.backend is not None
        url = self.backend.coordinator_url
        if url.startswith("sqlite:///"):
            conn = sqlite3.connect(f"file:{url[len('sqlite:///') :]}?mode=ro", uri=True, timeout=30)
            try:
                return list(conn.execute(sql, params))
            finally:
                conn.close()
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            return list(conn.execute(sql.replace("?", "%s"), params))  # type: ignore[arg-type]

    def committed_by(self, places: list[tuple[int, int]]) -> list[str]:
        out = []
        for partition, offset in places:
            rows = self._query(
                "SELECT b.base_offset, b.last_offset, b.producer_id, b.base_timestamp, "
                "f.object_key, f.uploader_broker_id, f.broker_epoch, f.committed_at "
                "FROM batches b JOIN files f ON f.id = b.file_id "
                "JOIN topics t ON t.id = b.topic_id "
                "WHERE t.name = ? AND b.partition = ? AND b.base_offset <= ? "
                "AND b.last_offset >= ?",
                (self.topic, partition, offset, offset),
            )
            for base, last, pid, ts, key, broker, epoch, committed in rows:
                out.append(
                    f"p{partition}@{offset}: batch {base}..{last} (producer id {pid}, first "
                    f"record {_clock(ts)}) in {key} by broker {broker} epoch {epoch}, "
                    f"committed {_clock(committed)}"
                )
        return out

    def stored_objects(self) -> set[str]:
        if self.s3 is not None:
            return self.s3.list_keys()
        root = self.data_dir / "objects"
        return {
            path.relative_to(root).as_posix()
            for path in root.rglob("*")
            if path.is_file() and "#" not in path.name and not path.name.startswith(".")
        }

    def unknown_objects(self) -> set[str]:
        # Listing first: an object committed between the two looks known, never orphaned.
        stored = self.stored_objects()
        return stored - self.known_objects()

    def _classify_orphans(self, orphans: set[str]) -> None:
        """Why each orphan exists. A broker log line that gave the key up ("failing",
        "refused", "could not delete", "leaving ... to GC") names the cause; otherwise a
        SIGKILL of a broker that logged the key (or of any broker, if none did) within
        30 s after the object's uuid7 time means a crash between upload and commit;
        anything else is unexplained (a broker left it behind without saying so)."""
        from lakelog.log.storage.uuid7 import uuid7_time_ms

        logs = {b.name: b.log_text().splitlines() for b in self.brokers}
        causes: dict[str, int] = {}
        for key in sorted(orphans):
            mentions = [
                (name, line) for name, lines in logs.items() for line in lines if key in line
            ]
            final = [
                line
                for _, line in mentions
                if any(w in line for w in ("failing", "refused", "could not delete", "to GC"))
            ]
            cause = "unexplained"
            if final:
                cause = "upload failed" if "upload" in final[-1] else "commit failed"
            else:
                brokers = {name for name, _ in mentions} or set(logs)
                with contextlib.suppress(ValueError):
                    made = uuid7_time_ms(uuid.UUID(key.rsplit("/", 1)[-1]))
                    if any(
                        name in brokers and 0 <= at - made <= 30_000
                        for name, at in self.kill_times_ms
                    ):
                        cause = "sigkill"
            causes[cause] = causes.get(cause, 0) + 1
            if len(self.result.orphan_examples) < 10 and (cause != "sigkill" or mentions):
                shown = (final or [line for _, line in mentions] or ["(in no broker log)"])[-1]
                self.result.orphan_examples.append(f"{key} [{cause}]: {shown[:300]}")
        self.result.orphan_causes = causes

    def _scan_logs(self) -> None:
        for broker in self.brokers:
            lines = broker.log_text().splitlines()
            for i, line in enumerate(lines):
                if DROPPED_RE.search(line):
                    self.result.dropped += 1
                    if len(self.result.dropped_examples) < 10:
                        why = _exception_line(lines, i)
                        self.result.dropped_examples.append(
                            f"{broker.name}: {line[:200]} -> {why[:300]}"
                        )
            self.result.tracebacks += len(broker.tracebacks())

    def close(self) -> None:
        """Stop everything this run started, whatever state it is in."""
        self.abort.set()
        for p in self.producers:
            p.stop.set()
        if self.tail is not None:
            self.tail.stop.set()
        for broker in self.brokers:
            with contextlib.suppress(Exception):
                broker.sigcont()
                broker.kill()
            with contextlib.suppress(Exception):
                broker.close()
        if self.s3 is not None:
            self.s3.close()
        if self.pg is not None:
            self.pg.close()


def _clock(ms: int) -> str:
    return time.strftime("%H:%M:%S", time.localtime(ms / 1000)) + f".{ms % 1000:03d}"


def _exception_line(lines: list[str], at: int) -> str:
    """The last line of the traceback that follows a log line: the exception itself."""
    end = at + 1
    while end < len(lines) and (
        lines[end].startswith((" ", "Traceback")) or lines[end].startswith("During")
    ):
        end += 1
    if end < len(lines) and end > at + 1:
        return lines[end]
    return lines[end - 1] if end - 1 > at else "(no traceback)"


def count_injected(counters: dict[str, Any]) -> tuple[int, int]:
    """(errors and dropped responses, delays) the proxy injected, from its counters."""
    faults = counters.get("faults", {})
    failures = sum(int(faults.get(k, 0)) for k in ("error_before", "error_after", "drop_after"))
    return failures, int(faults.get("delay", 0))


def run_backend(backend: str, plan: Plan, workdir: Path) -> Result:
    """One run with cleanup guaranteed; a harness crash is reported in the result."""
    run = FaultRun(backend, plan, workdir)
    try:
        return run.run()
    except Exception:
        run.result.harness_errors.append(traceback.format_exc(limit=8))
        return run.result
    finally:
        run.close()


TABLE_COLUMNS = (
    "backend",
    "kills",
    "stops",
    "pg stops",
    "s3 faults",
    "s3 delays",
    "sent",
    "acked",
    "lost",
    "dup (plain)",
    "out of order (plain)",
    "gaps",
    "fatal",
    "dropped conns",
    "orphans run/cleanup/gc (unexplained)",
)


def table(results: list[Result]) -> str:
    """The long form's summary, one row per backend."""
    rows = [list(TABLE_COLUMNS)]
    for r in results:
        v = r.verdict
        rows.append(
            [
                r.backend,
                str(r.kills),
                str(r.stops),
                str(r.pg_stops) if r.backend == "postgres-s3" else "-",
                str(r.s3_faults) if r.backend == "postgres-s3" else "-",
                str(r.s3_delays) if r.backend == "postgres-s3" else "-",
                str(v.sent),
                str(v.acked),
                str(v.lost),
                f"{v.duplicated} ({v.duplicated_plain})",
                f"{v.out_of_order} ({v.out_of_order_plain})",
                str(v.gaps),
                str(v.fatal),
                str(r.dropped),
                f"{r.orphans_after_run}/{r.orphans_after_cleanup}/"
                f"{'-' if r.orphans_after_gc is None else r.orphans_after_gc} "
                f"({r.orphans_unexplained})",
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(TABLE_COLUMNS))]
    out = []
    for n, row in enumerate(rows):
        out.append(" | ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))
        if n == 0:
            out.append("-+-".join("-" * w for w in widths))
    return "\n".join(out)
