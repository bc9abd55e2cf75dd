"""Every console page in headless Chromium against a live two-zone cluster with real data:
the page loads and shows that data, charts fill from the brokers' metrics, the lag chart
shows the lagging group, and the message browser finds records by offset and by time."""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
from typing import Any

import pytest
from console_support import (
    BASE_TS,
    BROWSED,
    KIP848_GROUP,
    LAGGING_GROUP,
    LIVE_GROUP,
    TOPIC,
    TRANSACTIONAL_ID,
    Scenario,
    cells,
    save_screenshot,
    table,
    text_of,
)
from e2e_harness import wait_until
from selenium.webdriver.common.by import By
from selenium.webdriver.support.expected_conditions import staleness_of
from selenium.webdriver.support.ui import WebDriverWait

PAGE_TIMEOUT_S = 90.0


def shot(driver: Any, name: str) -> None:
    assert save_screenshot(driver, name).stat().st_size > 0


def open_page(driver: Any, scenario: Scenario, path: str) -> None:
    driver.get(scenario.console_url + path)
    assert "Lakelog console" in driver.title, driver.page_source[:2000]
    assert not driver.find_elements(By.ID, "error-message"), driver.find_element(
        By.ID, "error-message"
    ).text


def chart_filled(driver: Any, chart_id: str, points: int = 2) -> dict[str, str]:
    """Wait until the chart has drawn at least `points` samples; its data attributes."""

    def drawn() -> dict[str, str] | None:
        svg = driver.find_element(By.ID, chart_id)
        if int(svg.get_attribute("data-points") or 0) < points:
            return None
        assert svg.find_elements(By.TAG_NAME, "polyline"), f"{chart_id} has no line"
        return {k: svg.get_attribute(f"data-{k}") or "" for k in ("points", "last", "max")}

    return wait_until(drawn, PAGE_TIMEOUT_S, f"chart {chart_id} to draw {points} samples", 0.5)


def test_cluster_page_shows_both_brokers_their_zones_and_traffic(browser, scenario) -> None:
    open_page(browser, scenario, "/cluster")
    rows = {r[0]: r for r in cells(browser, "#broker-table tbody tr")}
    assert set(rows) == {"1", "2"}
    assert rows["1"][2] == "az-a" and rows["2"][2] == "az-b"
    assert all(r[6] == "answering" for r in rows.values())
    assert all(r[3].isdigit() and int(r[3]) >= 1 for r in rows.values()), rows
    chart = chart_filled(browser, "chart-bytes", 3)
    assert float(chart["max"]) > 0, "the trickle producer's bytes never showed"
    # The seed producer named its zone (client.id lakelog_az=az-a): its bytes are counted
    # by client zone and broker zone.
    wait_until(
        lambda: (
            open_page(browser, scenario, "/cluster") is None
            and ["in", "az-a", "az-a"] in [r[:3] for r in cells(browser, "#zone-table tbody tr")]
        ),
        PAGE_TIMEOUT_S,
        "the zone table to show az-a's produce traffic",
        interval=1.0,
    )
    shot(browser, "cluster")


def test_topics_page_lists_topics_with_records_and_bytes(browser, scenario) -> None:
    open_page(browser, scenario, "/topics")
    rows = {r[0]: r for r in cells(browser, "#topic-table tbody tr")}
    assert TOPIC in rows and "payments" in rows
    assert rows[TOPIC][1] == "3"
    assert int(rows[TOPIC][2].replace(",", "")) >= BROWSED + 200
    assert rows[TOPIC][3].endswith("iB") or rows[TOPIC][3].endswith(" B")

    def rates_shown() -> bool:
        open_page(browser, scenario, "/topics")
        row = {r[0]: r for r in cells(browser, "#topic-table tbody tr")}[TOPIC]
        return row[4] != "-" and row[5].endswith("/s")

    wait_until(rates_shown, PAGE_TIMEOUT_S, "the topic's rates", interval=1.0)
    shot(browser, "topics")


def test_topic_page_shows_partitions_configs_and_rates(browser, scenario) -> None:
    open_page(browser, scenario, f"/topics/{TOPIC}")
    rows = {r[0]: r for r in cells(browser, "#partition-table tbody tr")}
    assert set(rows) == {"0", "1", "2"}
    assert rows["0"][3] == f"{BROWSED:,}"
    assert cells(browser, "#configs tbody tr"), "no configs shown"
    chart = chart_filled(browser, "chart-topic-records", 3)
    assert float(chart["max"]) > 0
    shot(browser, "topic")


def _browse(driver: Any, offset: str = "", at: str = "") -> list[Any]:
    form = driver.find_element(By.ID, "browse-form")
    for field_id, value in (("browse-offset", offset), ("browse-time", at)):
        box = form.find_element(By.ID, field_id)
        box.clear()
        if value:
            box.send_keys(value)
    form.find_element(By.ID, "browse-limit").clear()
    form.find_element(By.ID, "browse-limit").send_keys("5")
    before = driver.find_element(By.TAG_NAME, "html")
    form.find_element(By.ID, "browse-submit").click()
    # The answer is a new page: wait for the old one to go, or its table would be read.
    WebDriverWait(driver, PAGE_TIMEOUT_S).until(staleness_of(before))
    wait_until(
        lambda: (
            driver.find_elements(By.ID, "record-table")
            or driver.find_elements(By.ID, "error-message")
        ),
        PAGE_TIMEOUT_S,
        "the message browser's answer",
    )
    assert not driver.find_elements(By.ID, "error-message"), driver.find_element(
        By.ID, "error-message"
    ).text
    return driver.find_elements(By.CSS_SELECTOR, "#record-table tbody tr[data-offset]")


def test_message_browser_finds_a_record_by_offset(browser, scenario) -> None:
    open_page(browser, scenario, f"/topics/{TOPIC}")
    rows = _browse(browser, offset="42")
    assert [r.get_attribute("data-offset") for r in rows] == ["42", "43", "44", "45", "46"]
    first = [td.text for td in rows[0].find_elements(By.TAG_NAME, "td")]
    assert first[0] == "42"
    assert first[1] == "2026-01-01 00:00:42.000Z"
    assert first[2] == "key-42"
    assert json.loads(first[3]) == {"order": 42, "item": "widget-42"}
    assert "trace-id: trace-42" in first[4]
    assert "raw: //4AAQ==" in first[4], "a binary header is shown as base64"
    shot(browser, "messages-by-offset")


def test_message_browser_finds_a_record_by_time(browser, scenario) -> None:
    open_page(browser, scenario, f"/topics/{TOPIC}")
    moment = datetime.datetime.fromtimestamp((BASE_TS + 77_000) / 1000, datetime.UTC)
    rows = _browse(browser, at=moment.strftime("%Y-%m-%dT%H:%M:%S"))
    assert rows, "nothing found at that time"
    assert rows[0].get_attribute("data-offset") == "77"
    assert rows[0].get_attribute("data-timestamp") == str(BASE_TS + 77_000)
    # Between two records' times: the next record.
    rows = _browse(browser, at=str(BASE_TS + 99_500))
    assert rows[0].get_attribute("data-offset") == "100"
    shot(browser, "messages-by-time")


def test_groups_page_lists_both_groups_with_lag(browser, scenario) -> None:
    open_page(browser, scenario, "/groups")
    rows = {r["data"]["group"]: r for r in table(browser, "#group-table tbody tr[data-group]")}
    assert {LAGGING_GROUP, LIVE_GROUP, KIP848_GROUP} <= set(rows)
    assert int(rows[LAGGING_GROUP]["data"]["lag"]) > 0
    billing = rows[LAGGING_GROUP]["cells"]
    assert billing[2] == "Empty", billing

    def sparkline() -> bool:
        row = browser.find_element(
            By.CSS_SELECTOR, f'#group-table tr[data-group="{LAGGING_GROUP}"]'
        )
        svg = row.find_element(By.CSS_SELECTOR, "svg.spark")
        return int(svg.get_attribute("data-points") or 0) >= 2 and bool(
            svg.find_elements(By.TAG_NAME, "polyline")
        )

    wait_until(sparkline, PAGE_TIMEOUT_S, "the lagging group's sparkline", interval=0.5)
    shot(browser, "groups")


def test_lag_chart_shows_the_lagging_group_falling_behind(browser, scenario) -> None:
    open_page(browser, scenario, f"/groups/{LAGGING_GROUP}")
    assert text_of(browser, "group-state-value") == "Empty"
    lags = {
        r["data"]["tp"]: int(r["data"]["lag"])
        for r in table(browser, "#lag-table tbody tr[data-tp]")
    }
    assert lags[f"{TOPIC}/0"] == BROWSED - 20
    assert all(lag > 0 for lag in lags.values()), lags
    first = chart_filled(browser, "chart-group-lag", 3)
    assert float(first["last"]) >= BROWSED - 20
    # The trickle producer keeps writing: the chart's last value climbs past its first.
    wait_until(
        lambda: float(chart_filled(browser, "chart-group-lag", 3)["last"]) > float(first["last"]),
        PAGE_TIMEOUT_S,
        "the lag chart to show the group falling further behind",
        interval=1.0,
    )
    partition_chart = chart_filled(browser, "chart-partition-lag", 3)
    assert float(partition_chart["max"]) > 0
    shot(browser, "group-lag")


@pytest.mark.parametrize("group", [LIVE_GROUP, KIP848_GROUP])
def test_live_group_page_shows_its_member_and_assignment(browser, scenario, group) -> None:
    """A classic group and a KIP-848 (consumer protocol) group, each with one member."""

    def assigned() -> bool:
        open_page(browser, scenario, f"/groups/{group}")
        members = text_of(browser, "group-members")
        return text_of(browser, "group-state-value") == "Stable" and f"{TOPIC}: 0,1,2" in members

    wait_until(assigned, PAGE_TIMEOUT_S, f"{group} to be Stable with all partitions", 1.0)
    assert f"{group}-member" in text_of(browser, "group-members")
    shot(browser, f"group-{group}")


def test_storage_page_projects_the_monthly_cost(browser, scenario) -> None:
    def projected() -> bool:
        open_page(browser, scenario, "/storage")
        return bool(browser.find_elements(By.ID, "cost-lakelog-total"))

    wait_until(projected, PAGE_TIMEOUT_S, "the cost projection", interval=1.0)
    assert text_of(browser, "cost-lakelog-total").startswith("$")
    assert text_of(browser, "cost-classic-total").startswith("$")
    requests = chart_filled(browser, "chart-requests", 3)
    assert float(requests["max"]) > 0, "no PUTs seen while records were produced"
    chart_filled(browser, "chart-cache", 1)
    shot(browser, "storage")


def test_transactions_pages_show_the_committed_transaction(browser, scenario) -> None:
    open_page(browser, scenario, "/transactions")
    rows = {r[0]: r for r in cells(browser, "#txn-table tbody tr")}
    assert TRANSACTIONAL_ID in rows
    shot(browser, "transactions")
    before = browser.find_element(By.TAG_NAME, "html")

    def follow_link() -> bool:  # the list is swapped in place now and then: find, click
        browser.find_element(By.LINK_TEXT, TRANSACTIONAL_ID).click()
        return True

    wait_until(follow_link, 30, f"a click on {TRANSACTIONAL_ID}")
    WebDriverWait(browser, PAGE_TIMEOUT_S).until(staleness_of(before))
    detail = text_of(browser, "txn-detail")
    assert "CompleteCommit" in detail or "Empty" in detail, detail
    shot(browser, "transaction")


def test_mirrors_and_pipeline_pages_load(browser, scenario) -> None:
    open_page(browser, scenario, "/mirrors")
    assert "No mirrors." in text_of(browser, "mirror-table")
    shot(browser, "mirrors")
    # A real pipeline job on the cluster's data dir (retention: nothing due, so no Spark)
    # records its run in the coordinator; the page lists it.
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "lakelog",
            "pipeline",
            "retention",
            "--data-dir",
            str(scenario.brokers[0].data_dir),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    open_page(browser, scenario, "/pipeline")
    assert "recorded itself in the coordinator" in text_of(browser, "pipeline-note")
    runs = cells(browser, "#pipeline-runs tbody tr")
    assert runs and runs[0][1:3] == ["retention", "ok"], runs
    chart_filled(browser, "chart-wal-objects", 3)
    shot(browser, "pipeline")


def test_tables_refresh_without_a_reload(browser, scenario) -> None:
    """The trickle producer keeps adding records: the lagging group's total lag on an open
    page grows by itself (the page's script swaps in fresh tables)."""
    open_page(browser, scenario, f"/groups/{LAGGING_GROUP}")
    browser.execute_script("document.body.dataset.loadedOnce = 'yes'")
    first = int(text_of(browser, "group-total-lag").replace(",", ""))
    wait_until(
        lambda: int(text_of(browser, "group-total-lag").replace(",", "")) > first,
        PAGE_TIMEOUT_S,
        "the open page's total lag to refresh",
        interval=1.0,
    )
    assert browser.execute_script("return document.body.dataset.loadedOnce") == "yes", (
        "the page was reloaded instead of refreshed in place"
    )


TICK_CASES = [
    (1.2, "B/s"),
    (0.0, "B/s"),
    (1500.0, "B/s"),
    (3.7e6, "B/s"),
    (1.0, ""),
    (3.0, ""),
    (7.0, "records"),
    (12345.0, "records"),
    (10297072.19, "/h"),
    (0.37, "%"),
    (0.003, "/s"),
]


def test_chart_axes_have_distinct_ticks_and_whole_counts(browser, scenario) -> None:
    """The page's own script draws a chart from given samples (as it does from
    /api/series): every tick label differs, the axis covers the data, and counts (records,
    connections) show no fractions on the axis or in the legend."""
    open_page(browser, scenario, "/cluster")
    for top, unit in TICK_CASES:
        drawn = browser.execute_script(
            """
            const [top, unit] = arguments;
            const svg = document.getElementById("chart-connections");
            svg.dataset.unit = unit;
            const key = JSON.parse(svg.dataset.keys)[0];
            const now = Date.now() / 1000;
            draw(svg, { [key]: [[now - 10, top / 3], [now - 5, top], [now, top / 2 + 0.4]] });
            const legend = document.getElementById(svg.id + "-legend").textContent;
            return {
              ticks: Array.from(svg.querySelectorAll("text.tick")).map((t) => t.textContent),
              vmax: ticks(top, unit).vmax,
              legend: legend,
            };
            """,
            top,
            unit,
        )
        labels = drawn["ticks"]
        assert len(labels) >= 2 and len(set(labels)) == len(labels), (top, unit, labels)
        assert drawn["vmax"] >= top, (top, unit, drawn)
        if unit in ("", "records"):
            assert all("." not in label for label in labels), (top, unit, labels)
            assert "." not in drawn["legend"], (top, unit, drawn["legend"])
    # The real charts, drawn from the brokers' samples, too.
    open_page(browser, scenario, "/cluster")
    chart_filled(browser, "chart-bytes", 2)
    for chart in ("chart-bytes", "chart-connections"):
        labels = [t.text for t in browser.find_elements(By.CSS_SELECTOR, f"#{chart} text.tick")]
        assert len(labels) >= 2 and len(set(labels)) == len(labels), (chart, labels)
