"""The sampler adds its brokers up: one point per cluster series, never one per broker."""

from __future__ import annotations

from lakelog.cli.console.connection import ClusterAccess
from lakelog.cli.console.history import History
from lakelog.cli.console.sampler import Sampler, TickTotals, gauges

C = "lakelog_cache_hits_total"


def _delta(hits: float, misses: float, mirrored: float, puts: float) -> dict:
    return {
        (C, ()): hits,
        ("lakelog_cache_misses_total", ()): misses,
        ("lakelog_mirror_bytes_total", (("mirror", "dr"),)): mirrored,
        ("lakelog_object_requests_total", (("op", "put"),)): puts,
        ("lakelog_retention_deleted_batches_total", ()): 2,
    }


def test_two_brokers_make_one_point_per_series() -> None:
    totals = TickTotals()
    totals.add_delta(_delta(30, 10, 100, 10), 10.0)
    totals.add_delta(_delta(10, 30, 300, 20), 5.0)
    assert totals.mirror_bytes_per_s == {"dr": 100 / 10 + 300 / 5}
    assert (totals.cache_hits, totals.cache_misses) == (40, 40)
    assert totals.background_per_hour["lakelog_retention_deleted_batches_total"] == (
        2 * 3600 / 10 + 2 * 3600 / 5
    )
    history = History(10, 100)
    sampler = Sampler(ClusterAccess("127.0.0.1:9"), history, interval_s=5.0)
    sampler._record(1000.0, totals)
    assert history.points("mirror.bytes_per_s/dr") == [(1000.0, 70.0)]
    assert history.points("cluster.cache_hit_ratio") == [(1000.0, 50.0)]
    assert history.points("cluster.puts_per_hour") == [(1000.0, (1.0 + 4.0) * 3600)]


def test_gauges_keep_only_what_the_console_charts() -> None:
    text = (
        "# TYPE lakelog_connections gauge\nlakelog_connections 3.0\n"
        "# TYPE lakelog_wal_buffer_bytes gauge\nlakelog_wal_buffer_bytes 9.0\n"
        "# TYPE lakelog_mirror_lag_records gauge\n"
        'lakelog_mirror_lag_records{mirror="dr",topic="t",partition="0"} 5.0\n'
    )
    found = gauges(text)
    assert found[("lakelog_connections", ())] == 3.0
    assert ("lakelog_wal_buffer_bytes", ()) not in found
    assert sum(v for (n, _), v in found.items() if n == "lakelog_mirror_lag_records") == 5.0
