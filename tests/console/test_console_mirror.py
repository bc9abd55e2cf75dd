"""The mirror pages against a real mirror: a second Lakelog cluster copies a topic, and the
console on the destination shows the mirror, its partitions' states and lag, and charts
its lag and mirrored bytes."""

from __future__ import annotations

import datetime
import re
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from console_support import cells, http_status, save_screenshot, start_console, stop_process
from e2e_fixtures import BrokerFactory
from e2e_harness import wait_until
from mirror_support import mirror_cli, two_clusters, wait_caught_up
from selenium.webdriver.common.by import By

TOPIC = "events"
PARTITIONS = 2


def test_mirror_pages_show_state_lag_and_charts(
    broker_factory: BrokerFactory, browser, tmp_path: Path
) -> None:
    clusters = two_clusters(broker_factory)
    source = clusters.source.bootstrap
    admin = AdminClient({"bootstrap.servers": source})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(timeout=60)
    producer = Producer({"bootstrap.servers": source})
    for i in range(60):
        producer.produce(TOPIC, value=f"event-{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(60) == 0
    mirror_cli(clusters.dest, "create", "dr", "--source", source, "--topic", TOPIC)
    wait_caught_up(clusters.source, clusters.dest, TOPIC, PARTITIONS)

    proc, url = start_console(clusters.dest.bootstrap, tmp_path / "console.log")
    try:
        code, body = http_status(url + "/mirrors")
        assert code == 200, body[:2000]
        assert 'data-mirror="dr"' in body and source in body and TOPIC in body
        # Trickle more records in, so the charts have mirrored bytes to draw.
        for i in range(60, 90):
            producer.produce(TOPIC, value=f"event-{i}".encode(), partition=i % PARTITIONS)
            producer.flush(30)

        code, body = http_status(url + "/mirrors/dr")
        assert code == 200, body[:3000]
        # created.at reads as ISO-8601 UTC; the epoch milliseconds are its tooltip.
        created = re.search(
            r'<tr data-setting="created.at"><th>created.at</th><td><time datetime="([^"]+)" '
            r'title="(\d+)">([^<]+)</time></td></tr>',
            body,
        )
        assert created is not None, body[:5000]
        shown, raw = created.group(3), int(created.group(2))
        assert created.group(1) == shown
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", shown), shown
        moment = datetime.datetime.fromisoformat(shown.replace("Z", "+00:00"))
        assert int(moment.timestamp() * 1000) == raw
        assert abs(raw / 1000 - time.time()) < 3600
        browser.get(url + "/mirrors/dr")
        rows = cells(browser, "#mirror-partition-table tbody tr")
        assert sorted((c[0], c[1]) for c in rows) == [(TOPIC, "0"), (TOPIC, "1")]
        assert all(c[2] == "MIRRORING" for c in rows), rows

        def charted() -> bool:
            svg = browser.find_element(By.ID, "chart-mirror-bytes")
            lag = browser.find_element(By.ID, "chart-mirror-lag")
            return (
                int(svg.get_attribute("data-points") or 0) >= 3
                and float(svg.get_attribute("data-max") or 0) > 0
                and int(lag.get_attribute("data-points") or 0) >= 3
            )

        wait_until(charted, 90, "the mirror's charts to fill", interval=1.0)
        for chart in ("chart-mirror-bytes", "chart-mirror-lag"):
            ticks = [t.text for t in browser.find_elements(By.CSS_SELECTOR, f"#{chart} text.tick")]
            assert len(ticks) >= 2 and len(set(ticks)) == len(ticks), (chart, ticks)
        lag_ticks = browser.find_elements(By.CSS_SELECTOR, "#chart-mirror-lag text.tick")
        assert all("." not in t.text for t in lag_ticks), "records are whole"
        save_screenshot(browser, "mirror")
    finally:
        stop_process(proc)
