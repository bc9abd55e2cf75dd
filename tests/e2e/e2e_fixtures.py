"""Fixtures that start real broker processes (shared with tests/chaos via this module).

- `broker`: a fresh broker per test (own data dir and port).
- `broker_factory`: start brokers with chosen `LAKELOG_*` settings, e.g.
  `broker_factory(env={"RETENTION_CHECK_INTERVAL_MS": 200})`.
- `shared_broker`: one broker for the whole session, for tests that only need topics of
  their own (each uses a unique topic name); restarted if an earlier test left it dead.

A failing test's report carries the tail of every live broker's log.
"""

from __future__ import annotations

import contextlib
import uuid
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Protocol

import pytest
from e2e_harness import LIVE_BROKERS, BrokerLogWarning, BrokerProcess

FAST_COMMITS = {"PRODUCE_COMMIT_INTERVAL_MS": 20}
"""Short commit interval: acks come back within tens of ms, so tests stay fast."""


class BrokerFactory(Protocol):
    def __call__(
        self,
        env: Mapping[str, object] | None = None,
        *,
        metrics: bool = False,
        registry: bool = False,
        data_dir: Path | None = None,
        start: bool = True,
    ) -> BrokerProcess: ...


def pytest_configure(config: pytest.Config) -> None:
    # kafka-python 3.0.12 loads its protocol schemas with deprecated importlib APIs: noise.
    for module in ("kafka.protocol.schemas.load_json", "importlib.resources._legacy"):
        config.addinivalue_line("filterwarnings", f"ignore::DeprecationWarning:{module}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Attach broker logs to failing reports: the evidence for broker bugs."""
    report = yield
    if report.failed:
        for broker in LIVE_BROKERS:
            report.sections.append((f"broker log: {broker.name}", broker.log_tail()))
    return report


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/e2e/" in str(item.path) or "/chaos/" in str(item.path):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[BrokerFactory]:
    started: list[BrokerProcess] = []

    def make(
        env: Mapping[str, object] | None = None,
        *,
        metrics: bool = False,
        registry: bool = False,
        data_dir: Path | None = None,
        start: bool = True,
    ) -> BrokerProcess:
        index = len(started)
        proc = BrokerProcess(
            data_dir or tmp_path / f"data{index}",
            env={**FAST_COMMITS, **(env or {})},
            metrics=metrics,
            registry=registry,
            name=f"broker{index}",
        )
        started.append(proc)
        if start:
            proc.start()
        return proc

    yield make
    close_all(started)


def close_all(started: Sequence[BrokerProcess]) -> None:
    """A factory fixture's teardown: stop its brokers, newest first, and warn about any
    traceback in their logs."""
    for proc in reversed(started):
        proc.close()
        warn_tracebacks(proc)


def warn_tracebacks(proc: BrokerProcess) -> None:
    for block in proc.tracebacks():
        warnings.warn(BrokerLogWarning(f"{proc.log_path}:\n{block}"), stacklevel=1)


@contextlib.contextmanager
def running_broker(data_dir: Path, env: Mapping[str, object], name: str) -> Iterator[BrokerProcess]:
    """A broker started with FAST_COMMITS and `env`, for a module's own fixture; closed on
    the way out, with a warning for each traceback in its log."""
    proc = BrokerProcess(data_dir, env={**FAST_COMMITS, **env}, name=name)
    proc.start()
    try:
        yield proc
    finally:
        proc.close()
        warn_tracebacks(proc)


@pytest.fixture
def broker(broker_factory: BrokerFactory) -> BrokerProcess:
    return broker_factory()


@pytest.fixture(scope="session")
def shared_broker_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(
        tmp_path_factory.mktemp("shared") / "data", env=FAST_COMMITS, name="shared"
    )
    proc.start()
    yield proc
    proc.close()
    warn_tracebacks(proc)


@pytest.fixture
def shared_broker(shared_broker_process: BrokerProcess) -> BrokerProcess:
    proc = shared_broker_process
    if not proc.alive():
        warnings.warn(
            f"the shared broker had died (exit codes {proc.exit_codes}); restarting it",
            stacklevel=1,
        )
        proc.kill()
        proc.start()
    return proc


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic name unique to this test (legal characters only)."""
    base = "".join(c if c.isalnum() or c in "-_." else "-" for c in request.node.name)
    return f"{base[:150]}-{uuid.uuid4().hex[:8]}"
