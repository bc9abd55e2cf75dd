"""Helpers and fixtures for the console tests: the web console against a live two-zone
cluster with real data, driven by headless Chromium. One scenario per module (brokers,
data, groups, console) and one browser per module, because each costs seconds to build;
every test only reads them. Not per session: its brokers, producer and consumers would
keep running through the rest of the suite.

Screenshots go to `$LAKELOG_CONSOLE_SCREENSHOTS` (default: test-artifacts/console/ in the
repository, which git ignores); each saved path is printed."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

_E2E = str(Path(__file__).resolve().parent.parent / "e2e")
if _E2E not in sys.path:
    sys.path.insert(0, _E2E)

from e2e_fixtures import FAST_COMMITS, warn_tracebacks  # noqa: E402
from e2e_harness import HOST, BrokerProcess, free_port, wait_until  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS_ENV = "LAKELOG_CONSOLE_SCREENSHOTS"
TOPIC = "orders"
TXN_TOPIC = "payments"
LAGGING_GROUP = "billing"
LIVE_GROUP = "live-readers"
KIP848_GROUP = "kip848-readers"
TRANSACTIONAL_ID = "console-txn"
BROWSED = 120
"""Records produced to partition 0 of TOPIC with known offsets and timestamps."""
BASE_TS = 1_767_225_600_000
"""2026-01-01T00:00:00Z: record i of partition 0 has timestamp BASE_TS + i seconds."""
CLUSTER_ENV: dict[str, object] = {
    "BROKER_SESSION_TIMEOUT_MS": 3000,
    "BROKER_HEARTBEAT_INTERVAL_MS": 500,
    # The Storage page's request charts are checked to show PUTs while records flow: the
    # small-write path (on by default) would keep this light traffic in the coordinator.
    "PRODUCE_INLINE": False,
}


SAVED_SCREENSHOTS: list[Path] = []
"""Every screenshot this session saved, listed at the end of the run."""


def screenshot_dir() -> Path:
    path = Path(os.environ.get(SCREENSHOTS_ENV) or REPO / "test-artifacts" / "console")
    path.mkdir(parents=True, exist_ok=True)
    return path


def save_screenshot(driver: Any, name: str) -> Path:
    path = screenshot_dir() / f"{name}.png"
    assert driver.save_screenshot(str(path)), f"Chromium saved no screenshot to {path}"
    SAVED_SCREENSHOTS.append(path)
    print(f"screenshot: {path}")
    return path


@dataclass
class Scenario:
    brokers: list[BrokerProcess]
    console_url: str
    console_log: Path
    stop: threading.Event = field(default_factory=threading.Event)

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)


def http_status(url: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


# Pages swap their live tables in place every few seconds, so a WebElement found a moment
# ago may be gone: tables and texts are read in one script call, atomic for the page.
_ROWS = """
return Array.from(document.querySelectorAll(arguments[0])).map((row) => ({
  cells: Array.from(row.querySelectorAll("td")).map((td) => td.innerText.trim()),
  data: Object.assign({}, row.dataset),
}));
"""


def table(driver: Any, row_css: str) -> list[dict[str, Any]]:
    """Each row matching `row_css`: its cells' text and its data-* attributes."""
    return list(driver.execute_script(_ROWS, row_css))


def cells(driver: Any, row_css: str) -> list[list[str]]:
    return [row["cells"] for row in table(driver, row_css)]


def text_of(driver: Any, element_id: str) -> str:
    text = driver.execute_script(
        "const e = document.getElementById(arguments[0]); return e ? e.innerText : null;",
        element_id,
    )
    assert text is not None, f"no #{element_id} on {driver.current_url}"
    return str(text)


def _start_brokers(data_dir: Path) -> list[BrokerProcess]:
    brokers = []
    for index, zone in enumerate(("az-a", "az-b")):
        proc = BrokerProcess(
            data_dir,
            env={**FAST_COMMITS, **CLUSTER_ENV, "BROKER_ID": index + 1, "RACK": zone},
            metrics=True,
            name=f"console-broker{index + 1}",
        )
        brokers.append(proc.start())
    return brokers


def _produce_data(bootstrap: str) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(TOPIC, 3, 1), NewTopic(TXN_TOPIC, 1, 1)], operation_timeout=30
    )
    for future in futures.values():
        future.result(timeout=60)
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": "seed,lakelog_az=az-a"})
    for i in range(BROWSED):
        producer.produce(
            TOPIC,
            key=f"key-{i}".encode(),
            value=f'{{"order": {i}, "item": "widget-{i}"}}'.encode(),
            partition=0,
            timestamp=BASE_TS + i * 1000,
            headers=[("trace-id", f"trace-{i}".encode()), ("raw", b"\xff\xfe\x00\x01")],
        )
    for i in range(200):
        producer.produce(TOPIC, key=f"k{i}".encode(), value=b"x" * 200, partition=1 + i % 2)
    assert producer.flush(60) == 0, "records still unsent after 60 s"

    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": TRANSACTIONAL_ID})
    txn.init_transactions(60)
    txn.begin_transaction()
    for i in range(5):
        txn.produce(TXN_TOPIC, value=f"payment-{i}".encode())
    txn.commit_transaction(60)


def _make_lagging_group(bootstrap: str) -> None:
    """`billing` reads 40 records of partition 0, commits, and leaves: it lags from then on."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": LAGGING_GROUP,
            "enable.auto.commit": "false",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(3)])
        seen = 0
        deadline = time.monotonic() + 60
        while seen < 40 and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                seen += 1
        assert seen >= 40, f"read only {seen} records"
        consumer.commit(
            offsets=[TopicPartition(TOPIC, p, 20) for p in range(3)], asynchronous=False
        )
    finally:
        consumer.close()


def _live_group(
    bootstrap: str, stop: threading.Event, group: str = LIVE_GROUP, **conf: str
) -> None:
    """A member that stays in `group` (Stable, with an assignment) until `stop`."""
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": f"{group}-member",
            "auto.offset.reset": "earliest",
            **conf,
        }
    )
    consumer.subscribe([TOPIC])
    try:
        while not stop.is_set():
            consumer.poll(0.5)
    finally:
        consumer.close()


def _keep_producing(bootstrap: str, stop: threading.Event) -> None:
    """A trickle into partitions 1 and 2, so the lagging group falls further behind."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    i = 0
    while not stop.is_set():
        producer.produce(TOPIC, value=f"tick-{i}".encode(), partition=1 + i % 2)
        producer.poll(0)
        i += 1
        stop.wait(0.25)
    producer.flush(30)


def start_console(bootstrap: str, log_path: Path, *extra: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    log = log_path.open("ab")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "lakelog",
            "console",
            "-b",
            bootstrap,
            "--listen",
            f"{HOST}:{port}",
            "--interval-seconds",
            "1",
            *extra,
        ],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log.close()
    url = f"http://{HOST}:{port}"
    wait_until(
        lambda: proc.poll() is None and _answers(url),
        60,
        f"the console on {url} (log: {log_path})",
        interval=0.3,
    )
    return proc, url


def _answers(url: str) -> bool:
    try:
        urllib.request.urlopen(url + "/static/console.css", timeout=5).close()
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False
    return True


def stop_process(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    root = tmp_path_factory.mktemp("console")
    brokers = _start_brokers(root / "data")
    threads: list[threading.Thread] = []
    console: subprocess.Popen | None = None
    stop = threading.Event()
    try:
        bootstrap = ",".join(b.bootstrap for b in brokers)
        _produce_data(bootstrap)
        _make_lagging_group(bootstrap)
        kip848 = {"group": KIP848_GROUP, "group.protocol": "consumer"}
        for target, kwargs in ((_live_group, {}), (_live_group, kip848), (_keep_producing, {})):
            thread = threading.Thread(
                target=target, args=(bootstrap, stop), kwargs=kwargs, daemon=True
            )
            thread.start()
            threads.append(thread)
        log_path = root / "console.log"
        console, url = start_console(bootstrap, log_path)
        yield Scenario(brokers, url, log_path, stop)
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
        if console is not None:
            stop_process(console)
        for proc in brokers:
            proc.close()
            warn_tracebacks(proc)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    assert binary and driver_path, (
        "the console tests need Debian's chromium and chromium-driver "
        "(scripts/run-tests.sh installs them)"
    )
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1400,1100",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=Service(driver_path))
    driver.set_page_load_timeout(120)
    try:
        yield driver
    finally:
        with contextlib.suppress(Exception):
            driver.quit()
