"""SIGKILL a consumer that commits every record asynchronously, then the broker, at random
points while its commits fly (issue 36): offset commits are batched, so many wait for one
coordinator write, and none may be acknowledged before it is durable.

After every kill the committed offsets are read back. For each partition the committed
offset must be one the client sent, at least the highest one the broker acknowledged (no
acknowledged commit lost), and never below the one read back before (the client only
commits forward: each run starts at the committed offsets). Rounds: LAKELOG_OFFSET_KILL_ROUNDS
(default 2; `make offset-kills` runs more), seeded by LAKELOG_OFFSET_KILL_SEED for replay.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from e2e_fixtures import BrokerFactory
from e2e_harness import BrokerProcess, create_topic, kafka_admin, wait_until
from group_clients import produce, unique

PARTITIONS = 3
RECORDS_PER_ROUND = 6000
ROUNDS = int(os.environ.get("LAKELOG_OFFSET_KILL_ROUNDS", "2"))
SEED = int(os.environ.get("LAKELOG_OFFSET_KILL_SEED", str(random.randrange(1 << 30))))
COMMITTER = Path(__file__).with_name("offset_committer.py")

pytestmark = pytest.mark.timeout(120 + 90 * ROUNDS)


@dataclass
class Ledger:
    """What the consumers sent and saw acknowledged, per partition, over all runs."""

    sent: defaultdict[int, set[int]] = field(default_factory=lambda: defaultdict(set))
    acked: defaultdict[int, int] = field(default_factory=lambda: defaultdict(lambda: -1))
    read_back: dict[int, int] = field(default_factory=dict)
    commits_seen: int = 0

    def absorb(self, log_path: Path) -> None:
        failed: set[tuple[int, int]] = set()
        sent: list[tuple[int, int]] = []
        for line in log_path.read_text().splitlines():
            kind, *rest = line.split()
            if kind == "R" or len(rest) != 2:
                continue  # a line cut by the kill has fewer fields
            p, o = int(rest[0]), int(rest[1])
            if kind == "S":
                sent.append((p, o))
            elif kind == "F":
                failed.add((p, o))
            elif kind == "A":
                self.acked[p] = max(self.acked[p], o)
        for p, o in sent:
            if (p, o) not in failed:
                self.sent[p].add(o)
                self.commits_seen += 1

    def check(self, committed: dict[int, int], when: str) -> None:
        for p in range(PARTITIONS):
            c = committed.get(p, -1)
            where = f"{when}, partition {p}, seed {SEED}"
            if c >= 0:
                assert c in self.sent[p], f"{where}: committed {c} was never sent"
            assert c >= self.acked[p], f"{where}: acknowledged {self.acked[p]} lost ({c})"
            assert c >= self.read_back.get(p, -1), (
                f"{where}: went back from {self.read_back[p]} to {c}"
            )
            self.read_back[p] = c


def committed_offsets(bootstrap: str, topic: str, group: str) -> dict[int, int]:
    def read() -> dict[int, int]:
        with kafka_admin(bootstrap) as admin:
            a: Any = admin
            found = a.list_group_offsets(group)[group].items()
            return {tp.partition: om.offset for tp, om in found if tp.topic == topic}

    def settled() -> dict[int, int] | None:
        # The killed client's last commits may still be on their way through the broker:
        # wait until two reads agree, so the next run starts where they ended.
        first = _or_none(read)
        time.sleep(0.3)
        return first if first is not None and first == _or_none(read) else None

    return wait_until(settled, 60, "the committed offsets after a kill", interval=0.2)


def _or_none(read: Any) -> Any:
    try:
        return read()
    except Exception:  # the broker still starting: asked again
        return None


class Committer:
    def __init__(self, broker: BrokerProcess, topic: str, group: str, log_path: Path) -> None:
        self.log_path = log_path
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(COMMITTER),
                broker.bootstrap,
                topic,
                str(PARTITIONS),
                group,
                str(log_path),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def started_committing(self) -> bool:
        assert self.proc.poll() is None, f"the committer exited: {self.proc.returncode}"
        return self.log_path.exists() and "\nS " in self.log_path.read_text()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=30)


def test_kills_lose_no_acknowledged_commit(
    broker_factory: BrokerFactory, topic_name: str, tmp_path: Path
) -> None:
    rng = random.Random(SEED)
    broker = broker_factory()
    create_topic(broker.bootstrap, topic_name, PARTITIONS)
    group = unique("commit-kills")
    ledger = Ledger()
    committers: list[Committer] = []
    try:
        for round_ in range(ROUNDS):
            produce(broker.bootstrap, topic_name, PARTITIONS, RECORDS_PER_ROUND, f"r{round_}")
            for victim in ("consumer", "broker"):
                log_path = tmp_path / f"commits-{round_}-{victim}.log"
                committer = Committer(broker, topic_name, group, log_path)
                committers.append(committer)
                wait_until(committer.started_committing, 60, "the committer's first commit")
                time.sleep(rng.uniform(0.05, 1.0))
                if victim == "broker":
                    broker.kill()
                committer.kill()
                ledger.absorb(log_path)
                if victim == "broker":
                    broker.start()
                committed = committed_offsets(broker.bootstrap, topic_name, group)
                ledger.check(committed, f"round {round_} after killing the {victim}")
    finally:
        for committer in committers:
            if committer.proc.poll() is None:
                committer.kill()
    # The checks above had something to check: commits were acknowledged and read back.
    assert max(ledger.acked.values(), default=-1) > 0, "no commit was acknowledged"
    assert ledger.commits_seen > 100 * ROUNDS, ledger.commits_seen
