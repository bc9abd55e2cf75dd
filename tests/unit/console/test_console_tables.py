"""The console's table figures: read from the brokers' /metrics text, merged over brokers,
and which topics are table topics."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import uuid4

from lakelog.cli.console.tables import merge, table_figures, table_mode, table_view
from lakelog.coordinator.topic_types import TopicInfo
from lakelog.server.background.table_status import table_topics

TEXT = """\
# HELP lakelog_table_rows Rows
# TYPE lakelog_table_rows gauge
lakelog_table_rows{topic="clicks"} 40.0
# HELP lakelog_table_lag_records Lag
# TYPE lakelog_table_lag_records gauge
lakelog_table_lag_records{topic="clicks"} 3.0
lakelog_table_lag_records{topic="orders"} 9.0
# HELP lakelog_connections Connections
# TYPE lakelog_connections gauge
lakelog_connections 2.0
"""


@dataclass
class Config:
    name: str
    value: str | None


def test_figures_by_topic_from_metrics_text() -> None:
    assert table_figures(TEXT) == {
        "clicks": {"rows": 40.0, "lag_records": 3.0},
        "orders": {"lag_records": 9.0},
    }


def test_brokers_figures_merge_to_the_largest() -> None:
    a = {"clicks": {"rows": 40.0, "lag_records": 3.0}}
    b = {"clicks": {"rows": 40.0, "lag_records": 5.0, "lag_seconds": 2.0}, "x": {"rows": 1.0}}
    assert merge([a, b]) == {
        "clicks": {"rows": 40.0, "lag_records": 5.0, "lag_seconds": 2.0},
        "x": {"rows": 1.0},
    }


def test_table_mode_and_view() -> None:
    assert table_mode([Config("lakelog.iceberg.mode", "key_value")]) == "key_value"
    assert table_mode([Config("lakelog.iceberg.mode", "disabled")]) is None
    assert table_mode([Config("retention.ms", "1")]) is None
    view = table_view("clicks", "key_value", {"rows": 40.0})
    assert (view.table, view.rows, view.lag_seconds) == ("lakelog.clicks", 40.0, None)


def test_the_broker_picks_table_topics_by_their_mode() -> None:
    def topic(name: str, **configs: str) -> TopicInfo:
        return TopicInfo(uuid4(), name, 1, 1, configs)

    chosen = table_topics(
        [
            topic("b", **{"lakelog.iceberg.mode": "value_schema"}),
            topic("plain"),
            topic("off", **{"lakelog.iceberg.mode": "disabled"}),
            topic("a", **{"lakelog.iceberg.mode": "key_value"}),
        ]
    )
    assert [t.name for t in chosen] == ["a", "b"]
