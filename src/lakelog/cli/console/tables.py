"""Table topics in the console: the figures every broker publishes as gauges
(`lakelog_table_rows`, `_snapshots`, `_lag_records`, `_lag_seconds`, by topic; see
`server.background.table_status`), read from the /metrics scrapes the sampler makes
anyway. Not from the Iceberg REST catalog: that would need the registry's address and
logins, and give rows and snapshots but not the lag, which needs the partitions' offsets
and the rule the broker already applies.

Every broker publishes the same figures, computed a moment apart: the console keeps, per
topic and figure, the largest (the most lag any broker saw on its last pass)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from lakelog.tables.catalog import NAMESPACE
from lakelog.tables.table_config import MODE

FIGURES = {
    "lakelog_table_rows": "rows",
    "lakelog_table_snapshots": "snapshots",
    "lakelog_table_lag_records": "lag_records",
    "lakelog_table_lag_seconds": "lag_seconds",
}


@dataclass(frozen=True, slots=True)
class TableView:
    """What the topic page's Table section shows; a figure no broker published is None."""

    topic: str
    mode: str
    rows: float | None = None
    snapshots: float | None = None
    lag_records: float | None = None
    lag_seconds: float | None = None

    @property
    def table(self) -> str:
        return f"{NAMESPACE}.{self.topic}"


def table_figures(text: str) -> dict[str, dict[str, float]]:
    """topic -> {figure: value} from one broker's /metrics text."""
    out: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        figure = FIGURES.get(family.name)
        if figure is None:
            continue
        for sample in family.samples:
            topic = sample.labels.get("topic")
            if topic is not None:
                out.setdefault(topic, {})[figure] = sample.value
    return out


def merge(scrapes: Iterable[Mapping[str, Mapping[str, float]]]) -> dict[str, dict[str, float]]:
    """The brokers' figures together: the largest of each."""
    out: dict[str, dict[str, float]] = {}
    for scrape in scrapes:
        for topic, figures in scrape.items():
            merged = out.setdefault(topic, {})
            for figure, value in figures.items():
                merged[figure] = max(value, merged.get(figure, value))
    return out


def table_mode(configs: Iterable[object]) -> str | None:
    """The topic's `lakelog.iceberg.mode` from its described configs; None when it is not a
    table topic (unset or `disabled`)."""
    for config in configs:
        if getattr(config, "name", None) == MODE:
            mode = str(getattr(config, "value", "") or "").strip()
            return None if mode in ("", "disabled") else mode
    return None


def table_view(topic: str, mode: str, figures: Mapping[str, float] | None) -> TableView:
    figures = figures or {}
    return TableView(
        topic,
        mode,
        figures.get("rows"),
        figures.get("snapshots"),
        figures.get("lag_records"),
        figures.get("lag_seconds"),
    )
