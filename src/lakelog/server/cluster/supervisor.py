"""`lakelog serve --brokers N`: N broker processes on one host sharing one data dir (or one
coordinator and store), so a host uses all its cores. Broker i gets id base+i, ports base+i
and the i-th zone of a comma list of racks.

It behaves as systemd does with Restart=on-failure: a broker that dies of a signal or a
non-zero exit is reaped, logged with how it ended, and started again after a backoff that
doubles with each restart in a window; one that dies too often in that window crash-loops
and is left down (logged). SIGTERM/SIGINT are passed on to every broker; `serve` waits for
their graceful shutdown for a bounded time, SIGKILLs the rest, and exits 0 only when every
broker stopped cleanly and none was given up on."""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from lakelog.config import Settings, split_host_port

log = logging.getLogger(__name__)

POLL_S = 0.1
CLEAN_STOPS = frozenset(
    {0, -signal.SIGTERM, -signal.SIGINT, 128 + signal.SIGTERM, 128 + signal.SIGINT}
)
"""How a broker told to stop may end: its own graceful exit, or the signal itself when it
came before the broker installed its handlers (systemd counts those as clean too)."""


def _shift(address: str | None, offset: int) -> str | None:
    if not address:  # unset, or "" (turned off): the same for every broker
        return address
    host, port = split_host_port(address)
    return f"{host}:{port + offset}"


def child_args(
    index: int, flags: Mapping[str, object], racks: Sequence[str | None] | None = None
) -> list[str]:
    """The `lakelog serve` arguments of broker `index` (0-based); `racks[index]` is its
    rack when given."""
    args = [sys.executable, "-m", "lakelog", "serve"]
    shifted = {
        "listen": _shift(str(flags["listen"]), index),
        "advertised": _shift(flags.get("advertised"), index),  # type: ignore[arg-type]
        "metrics_listen": _shift(flags.get("metrics_listen"), index),  # type: ignore[arg-type]
        "console_listen": _shift(flags.get("console_listen"), index),  # type: ignore[arg-type]
        "schema_registry_listen": _shift(
            flags.get("schema_registry_listen"),  # type: ignore[arg-type]
            index,
        ),
        "broker_id": int(flags.get("broker_id") or 0) + index,  # type: ignore[call-overload]
    }
    if racks is not None:
        shifted["rack"] = racks[index]
    merged = {**flags, **shifted}
    for name, value in merged.items():
        if value is None:
            continue
        args += [f"--{name.replace('_', '-')}", str(value)]
    return args


def describe_exit(code: int) -> str:
    """`exited with status N`, or `was killed by SIGNAME` (Popen's negative codes)."""
    if code >= 0:
        return f"exited with status {code}"
    try:
        return f"was killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"was killed by signal {-code}"


@dataclass(frozen=True, slots=True)
class RestartPolicy:
    """The `supervisor_*` settings, in seconds."""

    backoff_s: float
    backoff_max_s: float
    limit: int
    interval_s: float
    stop_timeout_s: float

    @classmethod
    def from_settings(cls, settings: Settings) -> RestartPolicy:
        return cls(
            backoff_s=settings.supervisor_restart_backoff_ms / 1000,
            backoff_max_s=settings.supervisor_restart_backoff_max_ms / 1000,
            limit=settings.supervisor_restart_limit,
            interval_s=settings.supervisor_restart_interval_ms / 1000,
            stop_timeout_s=settings.supervisor_stop_timeout_ms / 1000,
        )

    def delay_s(self, recent: int) -> float:
        """The wait before the restart that follows `recent` ones within the window."""
        return float(min(self.backoff_max_s, self.backoff_s * 2**recent))


@dataclass
class Child:
    broker_id: int
    args: list[str]
    proc: subprocess.Popen[bytes] | None = None
    restart_at: float | None = None
    restarts: deque[float] = field(default_factory=deque)
    gave_up: bool = False

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pending(self) -> bool:
        """Running, or waiting for its restart."""
        return self.proc is not None or self.restart_at is not None

    def start(self) -> None:
        self.restart_at = None
        self.proc = subprocess.Popen(self.args)
        log.info("started broker %d (pid %d)", self.broker_id, self.proc.pid)


class Supervisor:
    def __init__(self, children: list[Child], policy: RestartPolicy) -> None:
        self.children = children
        self.policy = policy
        self.stop_signal: int | None = None

    def _on_signal(self, signum: int, _frame: object) -> None:
        if self.stop_signal is not None:  # a second one: pass it on at once
            self._signal_all(signum)
        self.stop_signal = signum

    def _signal_all(self, signum: int) -> None:
        for child in self.children:
            if child.running:
                assert child.proc is not None
                child.proc.send_signal(signum)

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        try:
            for child in self.children:
                child.start()
            while self.stop_signal is None and any(c.pending for c in self.children):
                self._tick(time.monotonic())
                time.sleep(POLL_S)
            return self._stop(self.stop_signal or signal.SIGTERM)
        finally:
            for child in self.children:  # only after an unexpected error
                if child.running:
                    assert child.proc is not None
                    child.proc.kill()
                    child.proc.wait()

    def _tick(self, now: float) -> None:
        for child in self.children:
            if child.proc is not None and child.proc.poll() is not None:
                self._died(child, child.proc.returncode, now)
            if child.restart_at is not None and now >= child.restart_at:
                child.start()

    def _died(self, child: Child, code: int, now: float) -> None:
        """Reap, log, and plan the restart (or give up on a crash loop)."""
        assert child.proc is not None
        pid, child.proc = child.proc.pid, None
        what = f"broker {child.broker_id} (pid {pid}) {describe_exit(code)}"
        if code == 0:
            log.warning("%s: a clean exit, not restarted (Restart=on-failure)", what)
            return
        policy = self.policy
        while child.restarts and now - child.restarts[0] > policy.interval_s:
            child.restarts.popleft()
        recent = len(child.restarts)
        if recent >= policy.limit:
            child.gave_up = True
            log.error(
                "%s: it died %d times within %.0f s, giving up on it "
                "(supervisor_restart_limit, supervisor_restart_interval_ms)",
                what,
                recent + 1,
                policy.interval_s,
            )
            return
        delay = policy.delay_s(recent)
        child.restart_at = now + delay
        child.restarts.append(now)
        log.warning(
            "%s; restarting it in %.1f s (restart %d of at most %d within %.0f s)",
            what,
            delay,
            recent + 1,
            policy.limit,
            policy.interval_s,
        )

    def _stop(self, signum: int) -> int:
        """Pass `signum` on, wait for every broker within the stop timeout, SIGKILL the
        rest. 0 when all stopped cleanly and none crash-looped."""
        failed = any(c.gave_up for c in self.children)
        for child in self.children:
            child.restart_at = None
        self._signal_all(signum)
        deadline = time.monotonic() + self.policy.stop_timeout_s
        for child in self.children:
            if child.proc is None:
                continue
            proc = child.proc
            try:
                code = proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.error(
                    "broker %d (pid %d) did not stop within %.0f s: SIGKILL "
                    "(supervisor_stop_timeout_ms)",
                    child.broker_id,
                    proc.pid,
                    self.policy.stop_timeout_s,
                )
                proc.kill()
                proc.wait()
                failed = True
                continue
            if code not in CLEAN_STOPS:
                log.error(
                    "broker %d (pid %d) %s while stopping",
                    child.broker_id,
                    proc.pid,
                    describe_exit(code),
                )
                failed = True
        log.info("all brokers stopped%s", "; some did not stop cleanly" if failed else "")
        return 1 if failed else 0


def run_brokers(
    count: int,
    flags: Mapping[str, object],
    racks: Sequence[str | None] | None = None,
    settings: Settings | None = None,
) -> int:
    """Run `count` brokers until SIGTERM/SIGINT (or until none is left); the exit code."""
    base_id = int(flags.get("broker_id") or 0)  # type: ignore[call-overload]
    children = [
        Child(broker_id=base_id + i, args=child_args(i, flags, racks)) for i in range(count)
    ]
    return Supervisor(children, RestartPolicy.from_settings(settings or Settings())).run()
