"""The console's HTTP side without a browser: bad input gets a 4xx page (never a crash or
a raw echo of the input), nothing changes state, basic auth guards every URL, and
`serve --console-listen` serves the same console from inside a broker."""

from __future__ import annotations

import base64
import socket
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest
from console_support import (
    TOPIC,
    Scenario,
    http_status,
    start_console,
    stop_process,
)
from e2e_fixtures import BrokerFactory
from e2e_harness import HOST, free_port, wait_until
from security_support import USERS, SecureFactory

HOSTILE = '<script>alert("x")</script>'


@pytest.mark.parametrize(
    ("query", "status", "says"),
    [
        ("partition=0&offset=99999999999999999999999", 400, "offset must be between"),
        ("partition=0&offset=-5", 400, "offset must be between"),
        ("partition=0&offset=1e9", 400, "offset must be a whole number"),
        ("partition=0&offset=5000000", 416, "past the log end"),
        ("partition=7&offset=0", 404, "has no partition 7"),
        ("partition=0&time=yesterday", 400, "ISO 8601"),
        ("partition=0&offset=1&time=2026-01-01T00:00:00", 400, "not both"),
        ("partition=0", 400, "give an offset or a time"),
        ("partition=0&offset=0&limit=100000", 400, "limit must be between"),
        ("partition=0&offset=" + "9" * 400, 400, "longer than"),
        ("partition=0&offset=" + urllib.parse.quote(HOSTILE), 400, "whole number"),
    ],
)
def test_bad_message_browser_input_gets_a_4xx_page(
    scenario: Scenario, query: str, status: int, says: str
) -> None:
    code, body = http_status(f"{scenario.console_url}/topics/{TOPIC}/messages?{query}")
    assert code == status, body[:2000]
    assert says in body
    assert HOSTILE not in body


@pytest.mark.parametrize(
    "path",
    [
        "/topics/no-such-topic",
        "/topics/no-such-topic/messages?partition=0&offset=0",
        "/groups/no-such-group",
        "/groups/" + urllib.parse.quote(HOSTILE, safe=""),
        "/transactions/no-such-txn",
        "/transactions/",
        "/groups/",
        "/mirrors/no-such-mirror",
        "/no/such/page",
    ],
)
def test_unknown_things_get_a_404_page_with_the_name_escaped(scenario: Scenario, path: str) -> None:
    code, body = http_status(scenario.console_url + path)
    assert code == 404, body[:2000]
    assert "Lakelog console" in body
    assert HOSTILE not in body


def test_topic_names_that_kafka_forbids_are_a_4xx(scenario: Scenario) -> None:
    code, body = http_status(f"{scenario.console_url}/topics/{urllib.parse.quote(HOSTILE)}")
    assert 400 <= code < 500, body[:2000]
    assert HOSTILE not in body


def test_nothing_but_get_is_served(scenario: Scenario) -> None:
    import urllib.request

    for path in ("/cluster", f"/topics/{TOPIC}", "/groups/billing", "/api/series"):
        request = urllib.request.Request(scenario.console_url + path, data=b"x", method="POST")
        try:
            urllib.request.urlopen(request, timeout=30)
        except urllib.error.HTTPError as exc:
            assert exc.code == 405, path
        else:
            raise AssertionError(f"POST {path} was accepted")


def test_pages_carry_browser_security_headers(scenario: Scenario) -> None:
    import urllib.request

    for path in ("/cluster", "/static/console.js", "/no/such/page"):
        try:
            response = urllib.request.urlopen(scenario.console_url + path, timeout=30)
        except urllib.error.HTTPError as exc:
            response = exc
        headers = response.headers
        assert headers["Content-Security-Policy"] == "default-src 'self'; frame-ancestors 'none'"
        assert headers["X-Frame-Options"] == "DENY"
        assert headers["X-Content-Type-Options"] == "nosniff"


def test_series_api_bounds_its_input(scenario: Scenario) -> None:
    keys = "&".join(f"key=k{i}" for i in range(65))
    code, body = http_status(f"{scenario.console_url}/api/series?{keys}")
    assert code == 400 and "at most 64" in body
    code, body = http_status(f"{scenario.console_url}/api/series?key=nothing-like-this")
    assert code == 200 and '"nothing-like-this":[]' in body


def test_basic_auth_guards_every_url(scenario: Scenario, tmp_path: Path) -> None:
    password_file = tmp_path / "console-password"
    password_file.write_text("s3cret pass\n")
    proc, url = start_console(
        scenario.bootstrap,
        tmp_path / "console-auth.log",
        "--console-user",
        "ops",
        "--console-password-file",
        str(password_file),
    )
    try:
        good = "Basic " + base64.b64encode(b"ops:s3cret pass").decode()
        bad = "Basic " + base64.b64encode(b"ops:guess").decode()
        for path in ("/cluster", f"/topics/{TOPIC}", "/api/series?key=x", "/static/console.js"):
            assert http_status(url + path)[0] == 401, path
            assert http_status(url + path, {"Authorization": bad})[0] == 401, path
            assert http_status(url + path, {"Authorization": "Basic !!!"})[0] == 401, path
            code, body = http_status(url + path, {"Authorization": good})
            assert code == 200, (path, body[:500])
    finally:
        stop_process(proc)


def test_serve_console_listen_runs_the_console_inside_the_broker(
    broker_factory: BrokerFactory,
) -> None:
    port = free_port()
    broker = broker_factory({"CONSOLE_LISTEN": f"{HOST}:{port}"}, metrics=True)
    url = f"http://{HOST}:{port}"

    def cluster_page() -> str | None:
        code, body = http_status(url + "/cluster")
        return body if code == 200 else None

    body = wait_until(cluster_page, 60, "the broker's console to answer", interval=0.5)
    assert broker.bootstrap in body and "answering" in body
    wait_until(
        lambda: (
            '"cluster.connections":[['
            in http_status(url + "/api/series?key=cluster.connections")[1]
        ),
        60,
        "the embedded console to sample the broker's own /metrics",
        interval=0.5,
    )
    assert broker.terminate() == 0, "the broker did not stop cleanly with its console"


def _lakelog(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lakelog", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def test_console_mistakes_are_one_line_errors(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind((HOST, 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _lakelog("console", "--listen", f"{HOST}:{port}")
        assert result.returncode == 1 and f"cannot listen on {HOST}:{port}" in result.stderr
        data = tmp_path / "data"
        result = _lakelog("serve", "--data-dir", str(data), "--console-listen", f"{HOST}:{port}")
        assert result.returncode == 1 and "--console-listen" in result.stderr, result.stderr
    result = _lakelog("console", "--console-user", "ops")
    assert result.returncode == 1 and "go together" in result.stderr
    props = tmp_path / "client.properties"
    props.write_text("security.protocol=SASL_SSL\nsasl.password=hunter2\n")
    result = _lakelog("console", "--command-config", str(props))
    assert result.returncode == 1 and "--command-config" in result.stderr
    assert "hunter2" not in result.stderr


def test_an_unreachable_cluster_is_a_502_page_and_the_console_stays_up(tmp_path: Path) -> None:
    nowhere = f"{HOST}:{free_port()}"
    proc, url = start_console(nowhere, tmp_path / "console-nowhere.log")
    try:
        for path in ("/cluster", "/topics", f"/topics/{TOPIC}", "/groups", "/transactions"):
            code, body = http_status(url + path)
            assert code == 502 and f"cannot reach {nowhere}" in body, (path, body[:1000])
        code, body = http_status(url + "/storage")
        assert code == 200 and "Waiting for two scrapes" in body
        wait_until(
            lambda: "Sampler problems" in http_status(url + "/storage")[1],
            30,
            "the sampler to report the unreachable cluster",
            interval=0.5,
        )
        assert proc.poll() is None
    finally:
        stop_process(proc)


def test_a_share_group_has_its_own_page(scenario: Scenario) -> None:
    """A share group (KIP-932) is listed and described with its members and share offsets
    (ShareGroupDescribe and DescribeShareGroupOffsets, not DescribeGroups)."""
    from confluent_kafka import ShareConsumer

    group = "console-sharers"
    consumer = ShareConsumer({"bootstrap.servers": scenario.bootstrap, "group.id": group})
    try:
        consumer.subscribe([TOPIC])

        def page_shows_it() -> bool:
            consumer.poll(0.5)
            code, body = http_status(f"{scenario.console_url}/groups/{group}")
            return code == 200 and "Share group (KIP-932)" in body and TOPIC in body

        wait_until(page_shows_it, 60, "the share group's page with its member")
        code, listed = http_status(f"{scenario.console_url}/groups")
        assert code == 200 and group in listed
    finally:
        consumer.close()


def test_serve_console_listen_on_a_secured_listener(
    secure_broker: SecureFactory, tmp_path: Path
) -> None:
    """The in-broker console logs in to its own SASL_SSL listener with
    LAKELOG_CONSOLE_COMMAND_CONFIG and asks browsers for LAKELOG_CONSOLE_USER's password."""
    port = free_port()
    password_file = tmp_path / "console-password"
    password_file.write_text("s3cret\n")
    props = tmp_path / "console.properties"
    props.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
        f"sasl.username=alice\nsasl.password={USERS['alice']}\n"
        f"ssl.ca.location={tmp_path / 'pki' / 'ca.pem'}\n"
    )
    broker, _, _ = secure_broker(
        "SASL_SSL",
        CONSOLE_LISTEN=f"{HOST}:{port}",
        CONSOLE_COMMAND_CONFIG=props,
        CONSOLE_USER="ops",
        CONSOLE_PASSWORD_FILE=password_file,
    )
    url = f"http://{HOST}:{port}"
    good = {"Authorization": "Basic " + base64.b64encode(b"ops:s3cret").decode()}

    def cluster_page() -> str | None:
        code, body = http_status(url + "/cluster", good)
        return body if code == 200 else None

    body = wait_until(cluster_page, 60, "the secured broker's console to answer", interval=0.5)
    assert broker.bootstrap in body and "as alice" in body
    assert http_status(url + "/cluster")[0] == 401


def _pipeline(scenario: Scenario, *args: str) -> subprocess.CompletedProcess[str]:
    data_dir = str(scenario.brokers[0].data_dir)
    return subprocess.run(
        [sys.executable, "-m", "lakelog", "pipeline", *args, "--data-dir", data_dir],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_pipeline_page_shows_figures_in_a_table_and_errors_a_user_can_act_on(
    scenario: Scenario, tmp_path: Path
) -> None:
    # A run with figures (retention: nothing due, so no Spark) and a failed one.
    ok = _pipeline(scenario, "retention")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    failed = _pipeline(scenario, "export", "no-such-topic", "--output", str(tmp_path / "out"))
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "error: unknown topics: no-such-topic" in failed.stderr
    assert "ValueError" not in failed.stderr

    code, body = http_status(scenario.console_url + "/pipeline")
    assert code == 200, body[:2000]
    assert '<p class="error run-error">unknown topics: no-such-topic</p>' in body, body
    assert "ValueError" not in body and "Error:" not in body
    assert '<table class="grid figures">' in body
    assert "<tr><th>dry run</th><td>no</td></tr>" in body
    assert "<tr><th>objects listed</th><td>" in body
    assert "dry_run" not in body and "objects listed: " not in body
