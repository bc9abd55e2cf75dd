"""kcat (librdkafka 2.0.2, older protocol versions than the Python clients) end to end:
metadata listing, keyed produce from stdin, and reading everything back."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from e2e_harness import BrokerProcess, create_topic

KCAT = shutil.which("kcat")
pytestmark = pytest.mark.skipif(KCAT is None, reason="kcat is not installed")
TIMEOUT_S = 60


def kcat(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    assert KCAT is not None
    return subprocess.run(
        [KCAT, *args], input=stdin, capture_output=True, timeout=TIMEOUT_S, check=False
    )


def test_kcat_metadata_lists_broker_and_topic(
    shared_broker: BrokerProcess, topic_name: str
) -> None:
    create_topic(shared_broker.bootstrap, topic_name, partitions=2)
    done = kcat("-b", shared_broker.bootstrap, "-L", "-J", "-t", topic_name)
    assert done.returncode == 0, done.stderr.decode()
    meta = json.loads(done.stdout)
    brokers = {(b["name"]) for b in meta["brokers"]}
    assert any(name.endswith(f":{shared_broker.port}") for name in brokers), meta["brokers"]
    topics = {t["topic"]: t for t in meta["topics"]}
    assert topic_name in topics, meta
    topic = topics[topic_name]
    assert "error" not in topic, topic
    assert sorted(p["partition"] for p in topic["partitions"]) == [0, 1]
    broker_ids = {b["id"] for b in meta["brokers"]}
    for p in topic["partitions"]:
        assert p["leader"] in broker_ids, p

    # The plain-text listing names the topic too (what people read).
    done = kcat("-b", shared_broker.bootstrap, "-L")
    assert done.returncode == 0, done.stderr.decode()
    assert f'topic "{topic_name}" with 2 partitions' in done.stdout.decode()


def test_kcat_produce_and_consume(shared_broker: BrokerProcess, topic_name: str) -> None:
    create_topic(shared_broker.bootstrap, topic_name, partitions=1)
    lines = [(f"key-{i}", f"value {i} " + "x" * (i % 50)) for i in range(200)]
    stdin = "".join(f"{k}\t{v}\n" for k, v in lines).encode()
    done = kcat(
        "-b",
        shared_broker.bootstrap,
        "-P",
        "-t",
        topic_name,
        "-p",
        "0",
        "-K",
        "\t",
        "-X",
        "acks=all",
        stdin=stdin,
    )
    assert done.returncode == 0, done.stderr.decode()

    # A fixed key for every line with -k, and compression, after the first run.
    fixed = [f"fixed {i}" for i in range(50)]
    done = kcat(
        "-b",
        shared_broker.bootstrap,
        "-P",
        "-t",
        topic_name,
        "-p",
        "0",
        "-k",
        "the-key",
        "-z",
        "gzip",
        stdin="".join(f"{v}\n" for v in fixed).encode(),
    )
    assert done.returncode == 0, done.stderr.decode()

    done = kcat(
        "-b",
        shared_broker.bootstrap,
        "-C",
        "-t",
        topic_name,
        "-e",
        "-o",
        "beginning",
        "-f",
        "%p|%o|%k|%s\\n",
    )
    assert done.returncode == 0, done.stderr.decode()
    got = done.stdout.decode().splitlines()
    want = [f"0|{i}|{k}|{v}" for i, (k, v) in enumerate(lines)]
    want += [f"0|{len(lines) + i}|the-key|{v}" for i, v in enumerate(fixed)]
    assert got == want
