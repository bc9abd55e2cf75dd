"""Bounded in-memory time series for the console's live charts.

Each series keeps its last `max_points` samples, and at most `max_series` series exist:
the one touched longest ago is dropped first, so a cluster with endless short-lived groups
cannot grow the console's memory."""

from __future__ import annotations

from collections import OrderedDict, deque

Point = tuple[float, float]
"""(Unix time in seconds, value)."""


class History:
    def __init__(self, max_points: int, max_series: int) -> None:
        if max_points < 2 or max_series < 1:
            raise ValueError("a history needs at least 2 points and 1 series")
        self.max_points = max_points
        self.max_series = max_series
        self._series: OrderedDict[str, deque[Point]] = OrderedDict()

    def add(self, key: str, at: float, value: float) -> None:
        points = self._series.get(key)
        if points is None:
            points = self._series[key] = deque(maxlen=self.max_points)
            while len(self._series) > self.max_series:
                self._series.popitem(last=False)
        else:
            self._series.move_to_end(key)
        points.append((at, value))

    def points(self, key: str) -> list[Point]:
        return list(self._series.get(key, ()))

    def last(self, key: str) -> float | None:
        points = self._series.get(key)
        return points[-1][1] if points else None

    def keys(self, prefix: str = "") -> list[str]:
        return sorted(k for k in self._series if k.startswith(prefix))

    def __len__(self) -> int:
        return len(self._series)
