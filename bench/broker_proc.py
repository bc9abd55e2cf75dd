"""Broker child processes for the benchmarks, and the CPU/memory bookkeeping from /proc.

A bench must never leave a broker behind and must say whose CPU it measured: the broker's,
its own (librdkafka threads and helper children), kernel threads', or someone else's.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from common import BenchError, log

CLK_TCK = os.sysconf("SC_CLK_TCK")
# glibc keeps big buffers in the heap and does not trim it: halves broker CPU (notes/facts.md).
BROKER_ENV = {"MALLOC_MMAP_THRESHOLD_": "1073741824", "MALLOC_TRIM_THRESHOLD_": "4294967296"}


def free_port() -> int:
    """An ephemeral port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def die_with_parent() -> None:
    """In the child: get SIGKILL if the bench dies, so no broker outlives it."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def client_cpu() -> float:
    """The bench's CPU seconds: librdkafka threads and reaped helper children included."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def machine_busy_cpu() -> float:
    """CPU seconds the whole machine was busy (user+nice+system+irq+softirq).

    irq/softirq stay in: loopback traffic is softirq time in /proc/stat but is charged
    to the sending process's own times (measured), so leaving it out goes negative.
    """
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in fields[:7])
    return (user + nice + system + irq + softirq) / CLK_TCK


def kernel_threads_cpu() -> float:
    """CPU seconds of kernel threads (children of kthreadd): page-cache writeback of the
    bench's own data runs there, so it must not count as foreign load."""
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited meanwhile
        if fields[1] == "2" or entry.name == "2":  # ppid 2 = kthreadd's children
            total += int(fields[11]) + int(fields[12])
    return total / CLK_TCK


class Broker:
    """One broker child process; `stop()` is idempotent and always ends it.

    Several may share one data dir (one SQLite coordinator and object store): give each
    its own `name` (log file), `broker_id` and, to pin clients to it, `rack`.
    """

    def __init__(
        self,
        root: Path,
        *,
        name: str = "broker",
        data_dir: Path | None = None,
        broker_id: int | None = None,
        rack: str | None = None,
        metrics: bool = False,
        registry: bool = False,
        env: dict[str, str] | None = None,
    ) -> None:
        self.root = root
        self.env = env or {}
        """Settings for this broker alone (`LAKELOG_...`), over the process environment."""
        self.name = name
        self.data_dir = data_dir if data_dir is not None else root / "broker-data"
        self.log_path = root / f"{name}.log"
        self.broker_id = broker_id
        self.rack = rack
        self.metrics = metrics
        self.port = 0
        self.metrics_port = 0
        self.registry = registry
        self.registry_port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def launch(self) -> None:
        """Start `lakelog serve` without waiting (see `wait_ready`)."""
        self.port = free_port()
        cmd = [
            sys.executable, "-m", "lakelog", "serve",
            "--listen", self.bootstrap,
            "--data-dir", str(self.data_dir),
            "--log-level", "WARNING",
        ]  # fmt: skip
        if self.broker_id is not None:
            cmd += ["--broker-id", str(self.broker_id)]
        if self.rack is not None:
            cmd += ["--rack", self.rack]
        if self.metrics:
            self.metrics_port = free_port()
            cmd += ["--metrics-listen", f"127.0.0.1:{self.metrics_port}"]
        if self.registry:
            self.registry_port = free_port()
            cmd += ["--schema-registry-listen", f"127.0.0.1:{self.registry_port}"]
        with open(self.log_path, "ab") as logf:
            self.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=logf,
                stderr=subprocess.STDOUT,
                env=os.environ | BROKER_ENV | self.env,
                preexec_fn=die_with_parent,
            )

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Wait until the port accepts connections; fail if the process exits first."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BenchError(f"{self.name} exited with {self.proc.returncode} at start")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        raise BenchError(f"{self.name} did not accept on {self.bootstrap} within {timeout:.0f} s")

    def start(self, timeout: float = 30.0) -> None:
        """Start `lakelog serve` and wait until its port accepts connections."""
        self.launch()
        self.wait_ready(timeout)

    def metric(self, name: str) -> float:
        """One unlabelled sample from the broker's `/metrics` (started with `metrics=True`)."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        body = urllib.request.urlopen(url, timeout=5).read().decode()
        for line in body.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        raise BenchError(f"{name} not exported by {self.name}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 10 s."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            log(f"{self.name} {proc.pid} ignored SIGTERM for 10 s: SIGKILL")
            proc.kill()
            proc.wait(10)

    def _proc_file(self, name: str) -> str:
        assert self.proc is not None
        return Path(f"/proc/{self.proc.pid}/{name}").read_text()

    def cpu_seconds(self) -> float:
        """utime + stime of the broker (all its threads), from /proc/<pid>/stat."""
        return sum(self.cpu_user_sys())

    def cpu_user_sys(self) -> tuple[float, float]:
        """utime and stime apart: system time is mostly page faults and copies."""
        fields = self._proc_file("stat").rsplit(")", 1)[1].split()
        return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK  # fields 14, 15 of stat

    def memory_mib(self) -> dict[str, float]:
        """VmHWM (peak RSS) and VmRSS, MiB."""
        out: dict[str, float] = {}
        for line in self._proc_file("status").splitlines():
            key, _, rest = line.partition(":")
            if key in ("VmHWM", "VmRSS"):
                out[key] = round(int(rest.split()[0]) / 1024.0, 1)
        return out

    def reset_peak_rss(self) -> bool:
        """Reset VmHWM (clear_refs 5) so a warm run reports its own peak."""
        assert self.proc is not None
        try:
            Path(f"/proc/{self.proc.pid}/clear_refs").write_text("5")
            return True
        except OSError:
            return False

    def counter(self, name: str) -> float:
        """A counter from the broker's /metrics (0 if absent): what it really received."""
        if not self.metrics_port:
            raise BenchError(f"{self.name} was started without metrics")
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as resp:
            text = resp.read().decode()
        total = 0.0
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == name or key.startswith(name + "{"):
                total += float(value)
        return total

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


@contextmanager
def cpu_account(brokers: Broker | Sequence[Broker], into: dict[str, Any]) -> Iterator[None]:
    """Record broker, bench and other processes' CPU seconds spent inside the block.

    Other processes (e.g. a test suite) share the 2 cores: their CPU share says whether a
    phase's figures are trustworthy. Kernel threads are counted apart. With several
    brokers, `broker_cpu_s` is their sum and `broker_cpu_s_each` lists them.
    """
    group = [brokers] if isinstance(brokers, Broker) else list(brokers)
    b0 = [b.cpu_seconds() for b in group]
    c0, m0, k0 = client_cpu(), machine_busy_cpu(), kernel_threads_cpu()
    t0 = time.monotonic()
    try:
        yield
    finally:
        wall = time.monotonic() - t0
        client = client_cpu() - c0
        into["wall_s"] = round(wall, 3)
        into["client_cpu_s"] = round(client, 3)
        if all(b.alive() for b in group):
            each = [b.cpu_seconds() - start for b, start in zip(group, b0, strict=True)]
            b = sum(each)
            k = kernel_threads_cpu() - k0
            into["broker_cpu_s"] = round(b, 3)
            if len(group) > 1:
                into["broker_cpu_s_each"] = [round(x, 3) for x in each]
            into["kernel_threads_cpu_s"] = round(k, 3)
            other = max(0.0, machine_busy_cpu() - m0 - b - client - k)
            into["other_cpu_s"] = round(other, 3)
            into["other_cpu_pct"] = round(100.0 * other / wall, 1) if wall > 0 else None
