"""The cost model: known rates give known dollars; price files load strictly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter, generate_latest
from typer.testing import CliRunner

from lakelog.cli import cost_model as cost
from lakelog.cli.common import run_cli
from lakelog.cli.cost import cost_app, metrics_url
from lakelog.cli.cost_model import GB, MONTH_SECONDS, Prices, Usage

EXACT = {"rel": 1e-12, "abs": 1e-12}


def _item(items: tuple[cost.LineItem, ...], key: str) -> cost.LineItem:
    return next(item for item in items if item.key == key)


def test_projection_of_known_rates_in_exact_dollars() -> None:
    # Per month: 1,000,000 PUT/LIST, 10,000,000 GET, 30 GB crossing zones, 30 GB in, 60 out.
    per_month = 1 / MONTH_SECONDS
    usage = Usage(
        put_class_requests=1_000_000 * per_month,
        get_class_requests=10_000_000 * per_month,
        delete_requests=500 * per_month,
        object_put_bytes=30 * GB * per_month,
        bytes_in=30 * GB * per_month,
        bytes_out=60 * GB * per_month,
        cross_zone_bytes=30 * GB * per_month,
    )
    projection = cost.project(usage, Prices(), retention_days=7)
    got = {item.key: item.usd for item in projection.lakelog}
    assert got["put_list_requests"] == pytest.approx(5.0, **EXACT)  # 1000 x $0.005
    assert got["get_requests"] == pytest.approx(4.0, **EXACT)  # 10000 x $0.0004
    assert got["delete_requests"] == 0
    # 30 GB written per month, 7 of 30 days kept: 7 GB-month at $0.023.
    assert _item(projection.lakelog, "storage").quantity == pytest.approx(7.0, **EXACT)
    assert got["storage"] == pytest.approx(0.161, **EXACT)
    assert got["cross_zone"] == pytest.approx(0.6, **EXACT)  # 30 GB x $0.02
    assert projection.lakelog_usd == pytest.approx(9.761, **EXACT)
    classic = {item.key: item.usd for item in projection.classic}
    assert classic["replication"] == pytest.approx(1.2, **EXACT)  # 2 x 30 GB x $0.02
    assert classic["produce_cross_zone"] == pytest.approx(0.4, **EXACT)  # 20 GB x $0.02
    assert classic["consume_cross_zone"] == pytest.approx(0.8, **EXACT)  # 40 GB x $0.02
    # 30 GB produced a month, 7 of 30 days kept, on 3 replicas: 21 GB-month of gp3 at $0.08.
    assert _item(projection.classic, "replica_storage").quantity == pytest.approx(21, **EXACT)
    assert classic["replica_storage"] == pytest.approx(1.68, **EXACT)
    assert projection.classic_usd == pytest.approx(4.08, **EXACT)


def test_storage_is_steady_state_and_not_capped_at_one_month() -> None:
    one_gb_per_day = GB / 86_400
    assert cost.stored_gb_month(one_gb_per_day, 7) == pytest.approx(7, **EXACT)
    assert cost.stored_gb_month(one_gb_per_day, 90) == pytest.approx(90, **EXACT)
    for bad in (0, -1, float("inf"), float("nan")):
        with pytest.raises(ValueError):
            cost.stored_gb_month(one_gb_per_day, bad)


def test_custom_prices_change_every_line() -> None:
    usage = Usage(
        put_class_requests=1,
        get_class_requests=1,
        delete_requests=1,
        object_put_bytes=GB,
        cross_zone_bytes=GB,
        bytes_in=GB,
        bytes_out=GB,
    )
    doubled = Prices(
        put_list_per_1000_requests=0.01,
        get_per_1000_requests=0.0008,
        delete_per_1000_requests=0.001,
        storage_per_gb_month=0.046,
        inter_az_per_gb_each_direction=0.02,
        block_storage_per_gb_month=0.16,
    )
    base, high = cost.project(usage, Prices()), cost.project(usage, doubled)
    for a, b in zip(base.lakelog, high.lakelog, strict=True):
        if a.key != "delete_requests":
            assert b.usd == pytest.approx(2 * a.usd, **EXACT)
    assert _item(high.lakelog, "delete_requests").usd == pytest.approx(
        MONTH_SECONDS / 1000 * 0.001, **EXACT
    )
    assert high.classic_usd == pytest.approx(2 * base.classic_usd, **EXACT)


def _exposition(
    put: int,
    get_ranges: int,
    head: int,
    delete: int,
    put_bytes: int,
    bytes_in: int,
    cross: int,
    unknown: int,
) -> str:
    """A /metrics page shaped like the broker's (same names and labels)."""
    registry = CollectorRegistry()
    requests = Counter("lakelog_object_requests", "", ["op"], registry=registry)
    obj_bytes = Counter("lakelog_object_bytes", "", ["op"], registry=registry)
    zone = Counter(
        "lakelog_zone_bytes", "", ["direction", "client_zone", "broker_zone"], registry=registry
    )
    cross_zone = Counter("lakelog_cross_zone_bytes", "", ["direction"], registry=registry)
    Counter("lakelog_bytes_in", "", registry=registry).inc(bytes_in)
    Counter("lakelog_bytes_out", "", registry=registry).inc(2 * bytes_in)
    requests.labels("put").inc(put)
    requests.labels("list").inc(1)
    requests.labels("get_ranges").inc(get_ranges)
    requests.labels("head").inc(head)
    requests.labels("delete").inc(delete)
    obj_bytes.labels("put").inc(put_bytes)
    obj_bytes.labels("get_ranges").inc(10 * put_bytes)  # never priced as storage
    zone.labels("in", "a", "b").inc(cross)
    zone.labels("in", "unknown", "a").inc(unknown)
    zone.labels("out", "a", "unknown").inc(unknown)
    zone.labels("out", "unknown", "unknown").inc(unknown)
    cross_zone.labels("in").inc(cross)
    Counter("lakelog_wal_objects", "", registry=registry).inc(99)
    return generate_latest(registry).decode()


def test_usage_from_two_scrapes() -> None:
    before = cost.parse_metrics(_exposition(10, 5, 1, 0, 1000, 900, 100, 10))
    after = cost.parse_metrics(_exposition(30, 45, 11, 4, 3000, 2900, 300, 30))
    usage = cost.usage_from_series(cost.counter_delta(before, after), seconds=2.0)
    assert usage == Usage(
        put_class_requests=10.0,  # 20 puts (list unchanged) in 2 s
        get_class_requests=25.0,  # 40 get_ranges calls + 10 heads
        delete_requests=2.0,
        object_put_bytes=1000.0,
        bytes_in=1000.0,
        bytes_out=2000.0,
        cross_zone_bytes=100.0,
        unknown_zone_bytes=30.0,  # three series with an unknown zone, each +20
    )
    assert cost.sum_usage([usage, usage]).bytes_in == 2000.0


def test_counter_reset_counts_the_new_value() -> None:
    key: cost.SeriesKey = ("lakelog_bytes_in_total", ())
    assert cost.counter_delta({key: 500.0}, {key: 120.0}) == {key: 120.0}
    assert cost.counter_delta({}, {key: 7.0}) == {key: 7.0}


def test_started_at_reads_the_created_sample() -> None:
    text = _exposition(1, 1, 1, 1, 1, 1, 1, 1)
    assert cost.started_at(text) is not None
    assert cost.started_at("lakelog_bytes_in_total 3\n") is None


def test_unknown_zone_traffic_is_noted() -> None:
    notes = cost.project(Usage(unknown_zone_bytes=GB / MONTH_SECONDS), Prices()).notes
    assert any("1.000 GB/month" in note and "$0.0133" in note for note in notes)
    assert any("once per call" in note for note in notes)


def test_price_file_round_trip_and_partial_file() -> None:
    custom = Prices(get_per_1000_requests=0.00042, storage_per_gb_month=0.02)
    assert cost.prices_from_toml(cost.prices_to_toml(custom)) == custom
    assert cost.prices_from_toml(cost.prices_to_toml()) == Prices()
    partial = cost.prices_from_toml("storage_per_gb_month = 0.0125\n")
    assert partial == Prices(storage_per_gb_month=0.0125)
    assert cost.prices_from_toml("get_per_1000_requests = 1\n").get_per_1000_requests == 1.0


@pytest.mark.parametrize(
    "text",
    [
        "storage_per_gb = 0.02\n",  # typo
        'storage_per_gb_month = "cheap"\n',
        "storage_per_gb_month = true\n",
        "storage_per_gb_month = -0.1\n",
        "storage_per_gb_month = inf\n",
        "[prices]\nstorage_per_gb_month = 0.1\n",
        "not toml at all = = \n",
    ],
)
def test_bad_price_files_are_rejected(text: str) -> None:
    with pytest.raises(ValueError):
        cost.prices_from_toml(text)


def test_cli_prints_and_loads_prices(tmp_path: Path) -> None:
    runner = CliRunner()
    printed = runner.invoke(cost_app, ["--print-prices"])
    assert printed.exit_code == 0, printed.output
    assert cost.prices_from_toml(printed.output) == Prices()
    path = tmp_path / "prices.toml"
    path.write_text("inter_az_per_gb_each_direction = 0.02\n")
    custom = runner.invoke(cost_app, ["--print-prices", "--prices", str(path)])
    assert cost.prices_from_toml(custom.output).cross_zone_per_gb == 0.04
    path.write_text("nope = 1\n")
    bad = runner.invoke(cost_app, ["--print-prices", "--prices", str(path)])
    assert bad.exit_code == 2 and "nope" in bad.output


@pytest.mark.parametrize(
    "args",
    [
        ["--metrics", "127.0.0.1:1", "--bootstrap-server", "127.0.0.1:1"],
        ["--metrics", "127.0.0.1:1", "--since-start", "--window-seconds", "5"],
        ["--metrics", "127.0.0.1:1", "--uptime-seconds", "5"],
        ["--metrics", "127.0.0.1:1", "--window-seconds", "0"],
        ["--metrics", "127.0.0.1:1", "--retention-days", "0"],
    ],
)
def test_cli_usage_errors(args: list[str]) -> None:
    result = CliRunner().invoke(cost_app, args)
    assert result.exit_code == 2, result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--metrics", "127.0.0.1:1", "--since-start", "--uptime-seconds", "10", "--json"],
            "error: cannot scrape http://127.0.0.1:1/metrics",
        ),
        (["--bootstrap-server", "127.0.0.1:1"], "error: cannot reach 127.0.0.1:1"),
    ],
)
def test_cli_unreachable_broker_is_a_clean_error(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(cost_app, args) == 1
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1, err


def test_metrics_url_forms() -> None:
    assert metrics_url("10.0.0.1:9100") == "http://10.0.0.1:9100/metrics"
    assert metrics_url("http://h:1") == "http://h:1/metrics"
    assert metrics_url("https://h:1/custom") == "https://h:1/custom"


def test_json_report_shape() -> None:
    from lakelog.cli.cost import report_dict

    usage = Usage(bytes_in=1.0)
    report = report_dict("window", {"u": 2.0}, usage, Prices(), 7.0, cost.project(usage, Prices()))
    decoded = json.loads(json.dumps(report))
    assert decoded["get_ranges_counted"] == "per_call"
    assert {i["key"] for i in decoded["lakelog"]["items"]} == {
        "put_list_requests",
        "get_requests",
        "delete_requests",
        "storage",
        "cross_zone",
    }
    assert decoded["classic_kafka_rf3"]["total_usd"] > 0
