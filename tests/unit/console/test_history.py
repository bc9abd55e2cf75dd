"""The console's chart history stays bounded however many samples and series arrive."""

from __future__ import annotations

import pytest

from lakelog.cli.console.history import History


def test_each_series_keeps_only_its_last_points() -> None:
    history = History(max_points=3, max_series=10)
    for t in range(10):
        history.add("lag", float(t), float(t * 2))
    assert history.points("lag") == [(7.0, 14.0), (8.0, 16.0), (9.0, 18.0)]
    assert history.last("lag") == 18.0


def test_the_series_touched_longest_ago_is_dropped_first() -> None:
    history = History(max_points=2, max_series=2)
    history.add("a", 1, 1)
    history.add("b", 1, 1)
    history.add("a", 2, 2)  # a is now the most recent
    history.add("c", 1, 1)
    assert history.keys() == ["a", "c"]
    assert history.points("b") == []
    assert len(history) == 2


def test_endless_new_series_never_grow_past_the_bound() -> None:
    history = History(max_points=5, max_series=100)
    for i in range(10_000):
        history.add(f"group.lag/g{i}", float(i), 1.0)
    assert len(history) == 100
    assert history.keys("group.lag/")[0] == "group.lag/g9900"


def test_unknown_series_are_empty() -> None:
    history = History(max_points=2, max_series=1)
    assert history.points("nope") == [] and history.last("nope") is None


@pytest.mark.parametrize(("points", "series"), [(1, 5), (5, 0)])
def test_a_history_needs_room(points: int, series: int) -> None:
    with pytest.raises(ValueError):
        History(points, series)
