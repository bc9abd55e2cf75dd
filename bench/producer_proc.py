"""Producers in their own processes, started together: one Python process per producer, so
several producers are not serialised on one GIL, which would cap the figure before the
brokers do.

Parent: `ProducerProc(spec).spawn()`, `wait_ready()`, `go()`, `result()`.
Child (`python bench/producer_proc.py SPEC_JSON`): warm up, print "ready", wait for a line
on stdin, produce, print the phase's JSON (with monotonic start/end and its own CPU).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from typing import Any

from broker_proc import die_with_parent
from clients import phase_produce
from common import STALL_S, BenchError


class ProducerProc:
    """One producer child. `spec`: bootstrap, topic, records, record_bytes, queue_mib and
    client_id (which may name a zone: `lakelog_az=<rack>`)."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.proc: subprocess.Popen[str] | None = None

    def spawn(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, json.dumps(self.spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            preexec_fn=die_with_parent,
        )

    def _line(self, timeout: float) -> str:
        assert self.proc is not None and self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            raise BenchError(f"producer {self.spec['client_id']}: no answer in {timeout:.0f} s")
        line = self.proc.stdout.readline()
        if not line:
            raise BenchError(f"producer {self.spec['client_id']} exited ({self.proc.wait()})")
        return line.strip()

    def wait_ready(self) -> None:
        """Until the child's warm-up record is delivered (connections and metadata done)."""
        line = self._line(2 * STALL_S)
        if line != "ready":
            raise BenchError(f"producer {self.spec['client_id']}: {line}")

    def go(self) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def result(self, timeout: float) -> dict[str, Any]:
        """The child's phase result; BenchError with its message if it failed."""
        out = json.loads(self._line(timeout))
        assert self.proc is not None
        self.proc.wait(10)
        if "error" in out:
            raise BenchError(f"producer {self.spec['client_id']}: {out['error']}")
        return dict(out)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def child(spec: dict[str, Any]) -> int:
    """Produce as told; every outcome is one JSON line on stdout."""
    marks: dict[str, float] = {}

    def ready() -> None:
        print("ready", flush=True)
        sys.stdin.readline()
        t = os.times()
        marks["cpu0"] = t.user + t.system
        marks["started"] = time.monotonic()

    try:
        res = phase_produce(
            spec["bootstrap"],
            spec["topic"],
            spec["records"],
            os.urandom(spec["record_bytes"]),
            spec["queue_mib"],
            extra_conf={"client.id": spec["client_id"]},
            ready=ready,
        )
    except Exception as exc:  # reported to the parent, which decides
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
        return 1
    t = os.times()
    res["started"] = marks["started"]
    res["ended"] = marks["started"] + res["seconds"]  # the last delivery, not the teardown
    res["cpu_s"] = round(t.user + t.system - marks["cpu0"], 3)
    print(json.dumps(res), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(child(json.loads(sys.argv[1])))
