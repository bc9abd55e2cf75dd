"""Zombie-broker fencing (KIP-1164 review): a broker paused between upload and commit is
declared dead by the others; when it wakes, its commit is refused, its producer gets a
retriable error, and the retried batch lands exactly once."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from e2e_harness import BrokerProcess, create_topic, free_port, wait_topic_known, wait_until
from e2e_wire import WireClient, produce_errors, produce_v7

from lakelog.log.protocol.records import read_header, split_batches
from tests.support.batches import build_batch

KAFKA_STORAGE_ERROR = 56
CLUSTER = {
    "BROKER_SESSION_TIMEOUT_MS": 2000,
    "BROKER_HEARTBEAT_INTERVAL_MS": 200,
    "PRODUCE_COMMIT_INTERVAL_MS": 50,
    "FETCH_POLL_INTERVAL_MS": 20,
    # The object path: the test waits for the zombie's upload before its late commit.
    "PRODUCE_INLINE": False,
}


def _fetch_all(port: int, topic: str) -> list[tuple[int, bytes]]:
    """(base offset, batch bytes) of every batch in partition 0, via a raw Fetch v4."""
    from e2e_wire import fetch_v4

    with WireClient(port) as client:
        response = client.request(1, 4, fetch_v4(topic, 0, 0))
    records = response.responses[0].partitions[0].records
    if not records:
        return []
    return [(read_header(b).base_offset, bytes(b)) for b in split_batches(records)]


def test_paused_broker_is_fenced_and_its_late_commit_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    healthy = BrokerProcess(
        data, env={**CLUSTER, "BROKER_ID": 0}, port=free_port(), name="healthy"
    ).start()
    zombie = BrokerProcess(
        data,
        env={**CLUSTER, "BROKER_ID": 1, "FAULT_COMMIT_DELAY_MS": 3000},
        port=free_port(),
        name="zombie",
    ).start()
    try:
        create_topic(healthy.bootstrap, "fenced", 1)
        wait_topic_known(zombie.port, "fenced")
        batch = build_batch(
            [(b"k", b"only-once")], producer_id=4242, producer_epoch=0, base_sequence=0
        )
        answer: dict[str, object] = {}

        def produce_to_zombie() -> None:
            with WireClient(zombie.port, timeout=30) as client:
                answer["zombie"] = produce_errors(
                    client.request(0, 7, produce_v7({"fenced": {0: batch}}))
                )

        before = set(zombie.wal_objects())
        sender = threading.Thread(target=produce_to_zombie)
        sender.start()
        # The object is uploaded; the commit waits out the injected delay: pause it now.
        wait_until(lambda: set(zombie.wal_objects()) - before, 30, "the zombie's upload")
        zombie.pause()
        try:
            wait_until(
                lambda: "fenced broker 1" in healthy.log_text(),
                15,
                "the healthy broker to fence the paused one",
            )
        finally:
            zombie.resume()
        sender.join(30)
        assert answer["zombie"] == {("fenced", 0): (KAFKA_STORAGE_ERROR, -1)}
        assert _fetch_all(healthy.port, "fenced") == []  # nothing unacknowledged appeared

        # The producer retries (here: on the healthy broker) and lands exactly once.
        with WireClient(healthy.port) as client:
            retried = produce_errors(client.request(0, 7, produce_v7({"fenced": {0: batch}})))
        assert retried == {("fenced", 0): (0, 0)}
        batches = _fetch_all(healthy.port, "fenced")
        assert [offset for offset, _ in batches] == [0]
        wait_until(
            lambda: "re-registered with epoch" in zombie.log_text(),
            15,
            "the zombie to take a new epoch",
        )
        # Back with a new epoch, the former zombie serves produce again.
        second = build_batch(
            [(b"k", b"after")], producer_id=4242, producer_epoch=0, base_sequence=1
        )
        with WireClient(zombie.port, timeout=30) as client:
            again = produce_errors(client.request(0, 7, produce_v7({"fenced": {0: second}})))
        assert again == {("fenced", 0): (0, 1)}
        time.sleep(0.1)
    finally:
        zombie.close()
        healthy.close()
