"""`lakelog schemas` as an operator runs it: a child process of the installed `lakelog`
against a broker's schema registry."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_fixtures import FAST_COMMITS, warn_tracebacks
from e2e_harness import BrokerProcess

pytestmark = pytest.mark.e2e

LAKELOG = Path(sys.executable).with_name("lakelog")
V1 = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}
V2 = {
    "type": "record",
    "name": "Order",
    "fields": [{"name": "id", "type": "long"}, {"name": "note", "type": "string", "default": ""}],
}
BAD = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "string"}]}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(
        tmp_path_factory.mktemp("cli-schemas") / "data", env=FAST_COMMITS, registry=True
    )
    proc.start()
    try:
        yield proc
    finally:
        proc.close()
        warn_tracebacks(proc)


def lakelog(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LAKELOG), "schemas", *args, "--registry-url", broker.registry_url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_register_list_describe_check_delete(broker: BrokerProcess, tmp_path: Path) -> None:
    files = {}
    for name, schema in (("v1", V1), ("v2", V2), ("bad", BAD)):
        files[name] = tmp_path / f"{name}.avsc"
        files[name].write_text(json.dumps(schema))
    done = lakelog(broker, "register", "orders-value", str(files["v1"]))
    assert (done.returncode, done.stdout.strip()) == (0, "registered under orders-value: id 1")
    done = lakelog(broker, "compatibility", "orders-value", str(files["v2"]))
    assert done.returncode == 0 and "compatible with orders-value" in done.stdout
    done = lakelog(broker, "compatibility", "orders-value", str(files["bad"]))
    assert done.returncode == 1 and "incompatible" in done.stderr
    done = lakelog(broker, "register", "orders-value", str(files["bad"]))
    assert done.returncode == 1 and "(error 409)" in done.stderr
    assert lakelog(broker, "register", "orders-value", str(files["v2"])).returncode == 0
    listed = lakelog(broker, "list", "--json")
    assert json.loads(listed.stdout) == [
        {"subject": "orders-value", "version": 2, "id": 2, "type": "AVRO"}
    ]
    shown = lakelog(broker, "describe", "orders-value", "--version", "1")
    assert shown.stdout.splitlines()[0] == "subject orders-value version 1 id 1 type AVRO"
    assert json.loads("\n".join(shown.stdout.splitlines()[1:])) == V1
    done = lakelog(broker, "delete", "orders-value", "--version", "2")
    assert done.stdout.strip() == "deleted orders-value version(s) 2"
    done = lakelog(broker, "delete", "orders-value", "--permanent")
    assert done.returncode == 1 and "(error 40405)" in done.stderr
    assert lakelog(broker, "delete", "orders-value").returncode == 0
    assert lakelog(broker, "list", "--json").stdout.strip() == "[]"
    missing = lakelog(broker, "describe", "nope")
    assert missing.returncode == 1 and "Subject 'nope' not found. (error 40401)" in missing.stderr


def test_unreachable_registry(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(LAKELOG), "schemas", "list", "--registry-url", "http://127.0.0.1:1"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1 and "cannot reach the schema registry" in done.stderr
