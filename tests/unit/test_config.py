"""Settings precedence: flags > env LAKELOG_* > lakelog.toml > defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakelog.config import Settings


def test_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "lakelog.toml").write_text(
        'listen = "127.0.0.1:1111"\nnum_partitions = 3\nbroker_id = 4\n'
    )
    monkeypatch.setenv("LAKELOG_NUM_PARTITIONS", "5")
    settings = Settings(broker_id=7)
    assert settings.listen == "127.0.0.1:1111"  # file
    assert settings.num_partitions == 5  # env beats file
    assert settings.broker_id == 7  # flag beats file
    assert settings.produce_commit_interval_ms == 250  # default


def test_advertised_defaults_to_ipv4_literal(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    assert Settings(listen="localhost:9092").advertised_host_port == ("127.0.0.1", 9092)
    assert Settings(listen="0.0.0.0:9093").advertised_host_port == ("127.0.0.1", 9093)
    assert Settings(advertised="10.1.2.3:9000").advertised_host_port == ("10.1.2.3", 9000)


def test_default_urls_live_in_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    settings = Settings(data_dir=tmp_path / "d")
    assert settings.resolved_storage_url == (tmp_path / "d" / "objects").as_uri()
    assert settings.resolved_coordinator_url.endswith("/d/coordinator.sqlite3")
