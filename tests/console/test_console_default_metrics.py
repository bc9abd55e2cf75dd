"""`make serve` then `lakelog console -b ...`, both with their defaults: the broker serves
/metrics without being asked, the console finds it through the broker, and the cluster
page's traffic chart fills in headless Chromium within a minute or so."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from console_support import save_screenshot, stop_process
from e2e_harness import HOST, api_versions_roundtrip, free_port, wait_until
from selenium.webdriver.common.by import By

DEADLINE_S = 90.0
TOPIC = "clicks"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKELOG_")}
    return {**env, "PYTHONUNBUFFERED": "1"}


def _spawn(args: list[str], log: Path, cwd: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "lakelog", *args],
            cwd=cwd,
            env=_env(),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


@contextlib.contextmanager
def running(proc: subprocess.Popen[bytes]) -> Iterator[subprocess.Popen[bytes]]:
    try:
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        stop_process(proc)


def _produce(bootstrap: str, stop: threading.Event) -> None:
    """A trickle of records, so the bytes chart has something to draw."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    i = 0
    while not stop.is_set():
        producer.produce(TOPIC, value=f"click-{i}".encode() * 10)
        producer.poll(0)
        i += 1
        stop.wait(0.2)
    producer.flush(30)


def _chart(driver: Any, chart_id: str) -> dict[str, str] | None:
    svg = driver.find_element(By.ID, chart_id)
    if int(svg.get_attribute("data-points") or 0) < 2:
        return None
    if not svg.find_elements(By.TAG_NAME, "polyline"):
        return None
    return {k: svg.get_attribute(f"data-{k}") or "" for k in ("points", "max")}


def test_console_charts_a_default_broker_without_flags(browser: Any, tmp_path: Path) -> None:
    port = free_port()
    bootstrap = f"{HOST}:{port}"
    serve_log, console_log = tmp_path / "serve.log", tmp_path / "console.log"
    serve_args = ["serve", "--listen", bootstrap, "--data-dir", str(tmp_path / "data")]
    stop = threading.Event()
    with running(_spawn(serve_args, serve_log, tmp_path)):
        wait_until(lambda: api_versions_roundtrip(port), 60, f"the broker on {bootstrap}")
        found = wait_until(
            lambda: re.search(r"metrics at (http://\S+/metrics)", serve_log.read_text()),
            30,
            "the serve log's metrics line",
        )
        assert found.group(1).startswith(f"http://{HOST}:")
        thread = threading.Thread(target=_produce, args=(bootstrap, stop), daemon=True)
        thread.start()
        console_port = free_port()
        console_args = ["console", "-b", bootstrap, "--listen", f"{HOST}:{console_port}"]
        try:
            with running(_spawn(console_args, console_log, tmp_path)):
                url = f"http://{HOST}:{console_port}/cluster"

                def filled() -> dict[str, str] | None:
                    browser.get(url)
                    chart = _chart(browser, "chart-bytes")
                    drawn = chart is not None and int(chart["points"]) >= 3
                    return chart if drawn and float(chart["max"]) > 0 else None

                wait_until(filled, DEADLINE_S, "the producer's bytes on the chart", 3.0)
                save_screenshot(browser, "default-metrics-cluster")
                assert f"Scraped: {found.group(1)} (up)" in browser.page_source
        finally:
            stop.set()
            thread.join(30)


pytestmark = pytest.mark.timeout(300)
