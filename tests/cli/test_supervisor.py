"""`lakelog serve` as an operator runs it (real processes, the real CLI): `--brokers N`
restarts a broker that died (logged with how it died), gives up on one that crash-loops,
and exits 0 on SIGTERM/SIGINT when its brokers stopped cleanly; a plain `serve` has
/metrics by default at the URL it logs, and a taken default port never stops it."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from e2e_harness import api_versions_roundtrip, wait_until
from serve_support import HOST, STOP_S, free_ports, serving

pytestmark = pytest.mark.timeout(240)

START_S = 60.0
"""Generous: three Python brokers starting at once on a busy machine."""
BACKOFF_MS = 500
SLACK_S = 60.0

STARTED = re.compile(r"started broker (\d+) \(pid (\d+)\)")


def answering(port: int) -> bool:
    try:
        api_versions_roundtrip(port, timeout=2.0)
        return True
    except OSError:
        return False


def wait_answering(ports: list[int], proc: subprocess.Popen, log: Path) -> None:
    def up() -> bool:
        assert proc.poll() is None, f"serve exited {proc.returncode}:\n{log.read_text()[-3000:]}"
        return all(answering(p) for p in ports)

    wait_until(up, START_S, f"brokers on {ports} to answer", interval=0.3)


def pids_of(log: Path) -> dict[int, int]:
    """broker id -> pid of its latest start, from the supervisor's log."""
    return {int(b): int(p) for b, p in STARTED.findall(log.read_text())}


def stop(proc: subprocess.Popen, signum: int, log: Path) -> int:
    """Signal `serve` alone (as `kill -TERM <pid>` does) and wait for its exit code."""
    proc.send_signal(signum)
    try:
        return proc.wait(timeout=STOP_S + 30)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"serve still running:\n{log.read_text()[-3000:]}") from None


def reaped(pid: int) -> bool:
    """Gone from the process table (a zombie would still be listed)."""
    return not Path(f"/proc/{pid}").exists()


def test_a_sigkilled_broker_is_logged_restarted_and_sigterm_exits_0(tmp_path: Path) -> None:
    port = free_ports(3)
    ports = [port, port + 1, port + 2]
    log = tmp_path / "serve.log"
    args = ["--brokers", "3", "--listen", f"{HOST}:{port}", "--data-dir", str(tmp_path / "d")]
    env = {"LAKELOG_SUPERVISOR_RESTART_BACKOFF_MS": str(BACKOFF_MS)}
    with serving(args, tmp_path, log, **env) as proc:
        wait_answering(ports, proc, log)
        victim = pids_of(log)[1]
        os.kill(victim, signal.SIGKILL)
        died = f"broker 1 (pid {victim}) was killed by SIGKILL"
        deadline_s = BACKOFF_MS / 1000 + SLACK_S
        wait_until(lambda: died in log.read_text(), deadline_s, "the death to be logged")
        assert len([line for line in log.read_text().splitlines() if died in line]) == 1
        wait_until(lambda: reaped(victim), 10, f"pid {victim} to be reaped")
        wait_until(
            lambda: pids_of(log)[1] != victim and answering(port + 1),
            deadline_s,
            "broker 1 to be back on its port",
            interval=0.3,
        )
        assert all(answering(p) for p in ports)
        code = stop(proc, signal.SIGTERM, log)
    assert code == 0, log.read_text()[-3000:]
    assert "all brokers stopped" in log.read_text()


def test_sigint_stops_serve_brokers_with_exit_0(tmp_path: Path) -> None:
    port = free_ports(2)
    log = tmp_path / "serve.log"
    args = ["--brokers", "2", "--listen", f"{HOST}:{port}", "--data-dir", str(tmp_path / "d")]
    with serving(args, tmp_path, log) as proc:
        wait_answering([port, port + 1], proc, log)
        pids = pids_of(log)
        code = stop(proc, signal.SIGINT, log)
    assert code == 0, log.read_text()[-3000:]
    assert all(reaped(pid) for pid in pids.values())


def test_a_crash_looping_broker_is_given_up_on_and_serve_exits_non_zero(tmp_path: Path) -> None:
    port = free_ports(2)
    log = tmp_path / "serve.log"
    args = ["--brokers", "2", "--listen", f"{HOST}:{port}", "--data-dir", str(tmp_path / "d")]
    env = {
        "LAKELOG_SUPERVISOR_RESTART_BACKOFF_MS": "100",
        "LAKELOG_SUPERVISOR_RESTART_LIMIT": "1",
    }
    with serving(args, tmp_path, log, **env) as proc:
        wait_answering([port, port + 1], proc, log)
        first = pids_of(log)[1]
        os.kill(first, signal.SIGKILL)
        wait_until(lambda: pids_of(log)[1] != first, SLACK_S, "the one restart")
        os.kill(pids_of(log)[1], signal.SIGKILL)
        wait_until(lambda: "giving up on it" in log.read_text(), SLACK_S, "the give-up line")
        time.sleep(1.0)
        assert pids_of(log)[1] != first and not answering(port + 1)  # left down
        assert answering(port), "the other broker must keep serving"
        code = stop(proc, signal.SIGTERM, log)
    assert code == 1, log.read_text()[-3000:]


def metrics_url_in(log: Path) -> str | None:
    found = re.search(
        r"metrics at (http://\S+/metrics); web console: lakelog console -b", log.read_text()
    )
    return found.group(1) if found else None


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return str(response.read().decode())


def test_serve_has_metrics_by_default_at_the_logged_url(tmp_path: Path) -> None:
    port = free_ports(1, also=1000)
    log = tmp_path / "serve.log"
    with serving(
        ["--listen", f"{HOST}:{port}", "--data-dir", str(tmp_path / "d")], tmp_path, log
    ) as proc:
        wait_answering([port], proc, log)
        url = wait_until(lambda: metrics_url_in(log), 30, "the metrics line")
        assert url == f"http://{HOST}:{port + 1000}/metrics"
        assert "lakelog_" in scrape(url)
        assert f"lakelog console -b {HOST}:{port}" in log.read_text()


def test_a_taken_default_metrics_port_does_not_stop_the_broker(tmp_path: Path) -> None:
    port = free_ports(1, also=1000)
    log = tmp_path / "serve.log"
    with socket.socket() as squatter:
        squatter.bind((HOST, port + 1000))
        squatter.listen()
        args = ["--listen", f"{HOST}:{port}", "--data-dir", str(tmp_path / "d")]
        with serving(args, tmp_path, log) as proc:
            wait_answering([port], proc, log)
            url = wait_until(lambda: metrics_url_in(log), 30, "the metrics line")
            assert url != f"http://{HOST}:{port + 1000}/metrics"
            assert "lakelog_" in scrape(url)
            assert f"cannot serve /metrics on {HOST}:{port + 1000}" in log.read_text()


def test_empty_metrics_listen_turns_the_endpoint_off(tmp_path: Path) -> None:
    port = free_ports(1, also=1000)
    log = tmp_path / "serve.log"
    args = ["--listen", f"{HOST}:{port}", "--data-dir", str(tmp_path / "d"), "--metrics-listen", ""]
    with serving(args, tmp_path, log) as proc:
        wait_answering([port], proc, log)
        wait_until(lambda: "no /metrics endpoint" in log.read_text(), 30, "the no-metrics line")
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((HOST, port + 1000), timeout=5).close()
