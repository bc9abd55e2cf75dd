"""`lakelog topics|groups|mirror|cost` as an operator runs them: child processes of the
installed `lakelog` against real brokers, stdout piped (so never a terminal).

- `-b` is accepted before and after the subcommand, and the bootstrap list is walked;
- every client-side mistake exits non-zero with exactly one `error:` line on stderr and no
  traceback, and leaves nothing behind in the working directory;
- tables piped to another program are plain, complete lines (a 100+ character name whole);
- `topics describe`'s ReplicationFactor counts the replicas it lists;
- `mirror add-topics` takes literal topics and patterns in one go, or changes nothing;
- console-producer/consumer fail in one line within --timeout-ms when no broker answers;
- `--help` lists commands in a useful order; `console` warns when the cluster is silent.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_fixtures import FAST_COMMITS, warn_tracebacks
from e2e_harness import BrokerProcess, create_topic, free_port, wait_until

pytestmark = pytest.mark.e2e

LAKELOG = Path(sys.executable).with_name("lakelog")
DEAD = "127.0.0.1:1"
"""Nothing listens on port 1."""


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """The cluster most commands talk to; with /metrics, for `cost`."""
    proc = BrokerProcess(
        tmp_path_factory.mktemp("cli-source") / "data",
        env=FAST_COMMITS,
        metrics=True,
        name="source",
    )
    proc.start()
    try:
        yield proc
    finally:
        proc.close()
        warn_tracebacks(proc)


@pytest.fixture(scope="module")
def dest(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A second cluster, the destination of mirrors of `source`."""
    proc = BrokerProcess(
        tmp_path_factory.mktemp("cli-dest") / "data", env=FAST_COMMITS, name="dest"
    )
    proc.start()
    try:
        yield proc
    finally:
        proc.close()
        warn_tracebacks(proc)


def lakelog(
    *args: str, cwd: Path | None = None, timeout: float = 120.0
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKELOG_")}
    return subprocess.run(
        [str(LAKELOG), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env={**env, "COLUMNS": "80", "NO_COLOR": "1"},
    )


def ok(*args: str) -> subprocess.CompletedProcess[str]:
    done = lakelog(*args)
    assert done.returncode == 0, f"lakelog {' '.join(args)}\n{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr
    return done


def ok_json(*args: str) -> Any:
    return json.loads(ok(*args, "--json").stdout)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# ---------------------------------------------------------------- where the cluster is


@pytest.mark.parametrize(
    "command",
    [["topics", "list"], ["groups", "list"], ["mirror", "list"]],
    ids=lambda c: c[0],
)
def test_bootstrap_before_and_after_the_subcommand(
    source: BrokerProcess, command: list[str]
) -> None:
    group, sub = command
    before = ok(group, "--bootstrap-server", source.bootstrap, sub)
    after = ok(group, sub, "-b", source.bootstrap)
    assert before.stdout == after.stdout


def test_cost_takes_the_bootstrap_and_finds_the_metrics(source: BrokerProcess) -> None:
    report = ok_json("cost", "-b", source.bootstrap, "--since-start")
    assert report["brokers"] == [f"http://127.0.0.1:{source.metrics_port}/metrics"]
    walked = ok_json("cost", "--since-start", "--bootstrap-server", f"{DEAD},{source.bootstrap}")
    assert walked["brokers"] == report["brokers"]


@pytest.mark.parametrize(
    "command",
    [
        ["topics", "list"],
        ["topics", "describe"],
        ["groups", "list"],
        ["mirror", "list"],
        ["cluster", "status"],
    ],
    ids=" ".join,
)
def test_the_bootstrap_list_is_walked(source: BrokerProcess, command: list[str]) -> None:
    walked = ok(*command, "-b", f"{DEAD},{source.bootstrap}")
    assert walked.stdout == ok(*command, "-b", source.bootstrap).stdout


# ---------------------------------------------------------------- mistakes


MISTAKES: list[tuple[list[str], str]] = [
    (["cluster", "status", "-b", DEAD], "cannot reach"),
    (["topics", "list", "-b", "host:notaport"], "HOST:PORT"),
    (["topics", "-b", "host:notaport", "list"], "HOST:PORT"),
    (["groups", "list", "--state", "Bogus", "-b", "{source}"], "valid states are"),
    (["mirror", "-b", "{dest}", "create", "{name}", "--source", DEAD], "unreachable"),
    (["mirror", "-b", "{dest}", "create", "{name}", "--source", "nohost"], "HOST:PORT"),
    (["mirror", "-b", "{dest}", "describe", "{name}"], "RESOURCE_NOT_FOUND"),
    (["mirror", "-b", "{dest}", "add-topics", "{name}", "orders"], "no mirror named"),
    (["mirror", "-b", "{dest}", "add-topics", "{name}", "bad("], "bad topic pattern"),
    (["mirror", "-b", "{dest}", "add-topics", "{name}"], "name topics or patterns"),
    (["topics", "describe", "{name}", "-b", "{source}"], "does not exist"),
    (["topics", "delete", "{name}", "-b", "{source}"], "does not exist"),
    (["topics", "create", "{name}", "--config", "nothing", "-b", "{source}"], "NAME=VALUE"),
    (["topics", "create", "bad/name", "-b", "{source}"], "INVALID_TOPIC_EXCEPTION"),
    (["groups", "describe", "{name}", "-b", "{source}"], "does not exist"),
    (["groups", "delete", "{name}", "-b", "{source}"], "GROUP_ID_NOT_FOUND"),
    (["groups", "reset-offsets", "{name}", "--to-earliest", "-b", "{source}"], "--all-topics"),
    (["cost", "--metrics", DEAD, "--since-start", "--uptime-seconds", "5"], "cannot scrape"),
    (["cost", "-b", DEAD], "cannot reach"),
    (["topics", "lst", "-b", "{source}"], "No such command"),
]


@pytest.mark.parametrize(("args", "says"), MISTAKES, ids=lambda v: " ".join(v[:3]))
def test_a_mistake_is_one_line(
    source: BrokerProcess, dest: BrokerProcess, tmp_path: Path, args: list[str], says: str
) -> None:
    name = unique("missing")
    argv = [a.format(source=source.bootstrap, dest=dest.bootstrap, name=name) for a in args]
    done = lakelog(*argv, cwd=tmp_path)
    assert done.returncode != 0, done.stdout
    assert "Traceback" not in done.stdout + done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ") and says in lines[0], lines[0]
    assert list(tmp_path.iterdir()) == []


def test_create_with_an_unreachable_source_creates_nothing(dest: BrokerProcess) -> None:
    name = unique("nowhere")
    assert lakelog("mirror", "-b", dest.bootstrap, "create", name, "--source", DEAD).returncode
    assert name not in {m["mirror"] for m in ok_json("mirror", "list", "-b", dest.bootstrap)}


# ---------------------------------------------------------------- output


def test_piped_tables_are_whole_lines(source: BrokerProcess) -> None:
    topic = unique("t" * 120)
    group = unique("g" * 120)
    create_topic(source.bootstrap, topic, 2)
    b = source.bootstrap
    ok("groups", "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute", "-b", b)

    described = ok("groups", "describe", group, "-b", b).stdout.splitlines()
    assert described[0].split() == [
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    ]
    rows = [line.split() for line in described[1:]]
    assert [r[:6] for r in rows] == [[group, topic, str(p), "0", "0", "0"] for p in (0, 1)]
    assert all(len(r) == 9 for r in rows), rows  # '-' for nothing: awk sees every field

    listed = ok("groups", "list", "-b", b).stdout.splitlines()
    assert [group, "Empty", "-"] in [line.split() for line in listed]
    assert any(
        line.split()[0] == topic
        for line in ok("topics", "list", "-b", b).stdout.split("\n")
        if line
    )

    state = ok("groups", "describe", group, "--state", "-b", b).stdout.splitlines()
    assert state[1].split()[0] == group


def test_topics_describe_counts_the_replicas_it_lists(source: BrokerProcess) -> None:
    """ReplicationFactor is the number of replicas listed, as kafka-topics.sh counts it;
    the factor asked for at create time is in --json as requested_replication_factor."""
    topic = unique("rf")
    ok(
        "topics",
        "create",
        topic,
        "--partitions",
        "2",
        "--replication-factor",
        "3",
        "--config",
        "retention.ms=86400000",
        "-b",
        source.bootstrap,
    )
    text = ok("topics", "describe", topic, "-b", source.bootstrap).stdout.splitlines()
    rows = [line.split() for line in text[2:]]
    replicas = {len(row[2].split(",")) for row in rows}
    assert [row[0] for row in rows] == ["0", "1"] and replicas == {1}, text
    assert f"ReplicationFactor: {replicas.pop()}\t" in text[0], text[0]
    assert "Configs: retention.ms=86400000" in text[0]
    assert "lakelog.replication.factor" not in "\n".join(text)
    [described] = ok_json("topics", "describe", topic, "-b", source.bootstrap)
    assert described["replication_factor"] == len(described["partitions"][0]["replicas"]) == 1
    assert described["requested_replication_factor"] == 3
    assert described["partition_count"] == 2
    assert described["configs"] == {"retention.ms": "86400000"}
    assert [p["partition"] for p in described["partitions"]] == [0, 1]


# ---------------------------------------------------------------- mirror topics and patterns


def _definition(dest: BrokerProcess, name: str) -> tuple[list[str], list[str]]:
    settings = ok_json("mirror", "describe", name, "-b", dest.bootstrap)["settings"]
    return json.loads(settings["topics"]), json.loads(settings["topic.patterns"])


def _mirrored(dest: BrokerProcess, name: str) -> set[str]:
    partitions = ok_json("mirror", "describe", name, "-b", dest.bootstrap)["partitions"]
    return {p["topic"] for p in partitions}


def test_add_topics_takes_literals_and_patterns(source: BrokerProcess, dest: BrokerProcess) -> None:
    tag = uuid.uuid4().hex[:8]
    orders, payments = f"orders-{tag}", f"payments-{tag}.eu"
    for topic in (orders, payments):
        create_topic(source.bootstrap, topic, 1)
    name = f"dr-{tag}"
    ok(
        "mirror",
        "--bootstrap-server",
        dest.bootstrap,
        "create",
        name,
        "--source",
        f"{DEAD},{source.bootstrap}",
    )

    # A literal that is missing on the source refuses the whole command: nothing stored.
    refused = lakelog(
        "mirror",
        "-b",
        dest.bootstrap,
        "add-topics",
        name,
        orders,
        f"payments-{tag}.*",
        f"nope-{tag}",
    )
    assert refused.returncode == 1 and f"nope-{tag}" in refused.stderr, refused.stderr
    assert len(refused.stderr.splitlines()) == 1
    assert _definition(dest, name) == ([], [])

    # The README's form: a literal and a pattern in one go.
    ok(
        "mirror",
        "--bootstrap-server",
        dest.bootstrap,
        "add-topics",
        name,
        orders,
        f"payments-{tag}.*",
    )
    assert _definition(dest, name) == ([orders], [f"payments-{tag}.*"])
    wait_until(lambda: _mirrored(dest, name) == {orders, payments}, 30, "both topics mirrored")

    ok("mirror", "add-topics", name, "--pattern", f"later-{tag}.*", "-b", dest.bootstrap)
    assert _definition(dest, name) == ([orders], [f"payments-{tag}.*", f"later-{tag}.*"])
    failed_over = ok("mirror", "remove-topics", name, orders, "-b", dest.bootstrap)
    assert "failed over" in failed_over.stdout


def test_groups_manage_a_consumer_protocol_group(source: BrokerProcess) -> None:
    """A KIP-848 group (group.protocol=consumer) through `lakelog groups`: listed with its
    type, described with its member and assignment, its offsets reset only once it is
    empty, then deleted."""
    from confluent_kafka import Consumer, Producer

    topic, group, b = unique("kt"), unique("kg"), source.bootstrap
    create_topic(b, topic, 2)
    producer = Producer({"bootstrap.servers": b})
    for i in range(20):
        producer.produce(topic, value=b"%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": b,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic])
        seen: list[Any] = []

        def consumed_all() -> bool:
            seen.extend(m for m in consumer.consume(20, timeout=0.5) if not m.error())
            return len(seen) >= 20

        wait_until(consumed_all, 60, "the consumer-protocol member to consume")
        consumer.commit(asynchronous=False)
        listed = ok_json("groups", "list", "-b", b)
        mine = [g for g in listed if g.get("group") == group or g.get("group_id") == group]
        assert mine, listed
        assert "consumer" in json.dumps(mine[0]).lower()
        members = ok("groups", "describe", group, "--members", "-b", b).stdout
        assert topic in members and group in members
        offsets = ok("groups", "describe", group, "-b", b).stdout.splitlines()
        rows = [line.split() for line in offsets[1:]]
        assert sorted(r[3] for r in rows if r[1] == topic) == ["10", "10"]
        refused = lakelog(
            "groups", "reset-offsets", group, "--all-topics", "--to-earliest", "--execute", "-b", b
        )
        assert refused.returncode != 0 and "Traceback" not in refused.stderr
    finally:
        consumer.close()

    def empty() -> bool:
        state = ok("groups", "describe", group, "--state", "-b", b).stdout
        return "Empty" in state

    wait_until(empty, 60, "the group to be empty after its member left")
    ok("groups", "reset-offsets", group, "--all-topics", "--to-earliest", "--execute", "-b", b)
    rows = [line.split() for line in ok("groups", "describe", group, "-b", b).stdout.splitlines()]
    assert sorted(r[3] for r in rows[1:] if r[1] == topic) == ["0", "0"]
    ok("groups", "delete", group, "-b", b)
    gone = lakelog("groups", "describe", group, "-b", b)
    assert gone.returncode != 0 and "does not exist" in gone.stdout + gone.stderr


# ---------------------------------------------------------------- failing fast


@pytest.fixture(scope="module")
def startup_s() -> float:
    """How long `lakelog` takes to start and exit here (it imports the same modules as
    every command), so a deadline on a command measures the command, not a busy machine."""
    started = time.monotonic()
    ok("--version")
    return time.monotonic() - started


@pytest.fixture
def silent_port() -> Iterator[str]:
    """HOST:PORT of a socket that accepts connections and never answers (a hung broker)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield f"127.0.0.1:{listener.getsockname()[1]}"


CLIENT_TOOLS = {
    "console-producer": (["console-producer", "--topic", "orders"], "k:v\n"),
    "console-consumer": (["console-consumer", "--topic", "orders"], None),
}


def _timed(
    tool: str, bootstrap: str, timeout_ms: int, *extra: str
) -> tuple[subprocess.CompletedProcess[str], float]:
    args, stdin = CLIENT_TOOLS[tool]
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKELOG_")}
    started = time.monotonic()
    done = subprocess.run(
        [str(LAKELOG), *extra, *args, "-b", bootstrap, "--timeout-ms", str(timeout_ms)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    return done, time.monotonic() - started


@pytest.mark.parametrize("tool", sorted(CLIENT_TOOLS))
def test_client_tools_fail_fast_on_a_dead_port(tool: str, startup_s: float) -> None:
    """Connection refused: one line, as soon as librdkafka says every broker is down."""
    done, took = _timed(tool, DEAD, 3000)
    assert done.returncode == 1, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr  # no librdkafka FAIL lines
    assert lines[0].startswith(f"error: cannot reach {DEAD}"), lines[0]
    assert "Connection refused" in lines[0], lines[0]
    assert took < 3 + 2 + startup_s, (took, startup_s)


@pytest.mark.parametrize("tool", sorted(CLIENT_TOOLS))
def test_client_tools_give_up_after_timeout_ms_on_a_silent_broker(
    tool: str, silent_port: str, startup_s: float
) -> None:
    done, took = _timed(tool, silent_port, 2000)
    assert done.returncode == 1, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"error: cannot reach {silent_port} within 2000 ms"), lines[0]
    assert 2 <= took < 2 + 2 + startup_s, (took, startup_s)


def test_debug_shows_librdkafka_log(startup_s: float) -> None:
    done, _ = _timed("console-consumer", DEAD, 1000, "--debug")
    assert done.returncode == 1
    assert "FAIL" in done.stderr and "Connection refused" in done.stderr


def test_client_tools_walk_the_bootstrap_list_and_honour_timeout_ms(
    source: BrokerProcess,
) -> None:
    """A dead first bootstrap server is not 'every broker down': both tools go on to the
    live one, within their --timeout-ms."""
    topic, walked = unique("walk"), f"{DEAD},{source.bootstrap}"
    create_topic(source.bootstrap, topic, 1)
    for _ in range(3):  # librdkafka picks a bootstrap server at random
        produced = lakelog_in(
            "a\nb\n", "console-producer", "--topic", topic, "-b", walked, "--timeout-ms", "20000"
        )
        assert produced.returncode == 0 and produced.stderr == "", produced.stderr
    consumed = ok(
        "console-consumer", "--topic", topic, "--from-beginning", "--max-messages", "6",
        "--timeout-ms", "20000", "-b", walked,
    )  # fmt: skip
    assert consumed.stdout.split() == ["a", "b"] * 3
    assert consumed.stderr.strip() == "Processed a total of 6 messages"


def lakelog_in(stdin: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKELOG_")}
    return subprocess.run(
        [str(LAKELOG), *args], input=stdin, capture_output=True, text=True, timeout=120, env=env
    )


# ---------------------------------------------------------------- help and the web console


def test_help_lists_commands_in_a_useful_order() -> None:
    text = ok("--help").stdout
    listed = [
        line.strip("│ ").split()[0]
        for line in text[text.index("Commands") :].splitlines()[1:]
        if line.startswith("│ ") and line[2:4].strip()
    ]
    assert listed == [
        "serve",
        "topics",
        "console-producer",
        "console-consumer",
        "get-offsets",
        "delete-records",
        "groups",
        "share-groups",
        "configs",
        "acls",
        "cluster",
        "transactions",
        "mirror",
        "pipeline",
        "console",
        "cost",
        "schemas",
    ], text


def test_console_warns_when_the_cluster_does_not_answer(tmp_path: Path) -> None:
    """One warning line on stderr, and the console serves anyway (the cluster may come)."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKELOG_")}
    proc = subprocess.Popen(
        [str(LAKELOG), "console", "-b", DEAD, "--listen", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "stderr").open("wb"),
        env=env,
    )
    try:

        def serving() -> bool:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/static/console.css", timeout=5)
            except OSError:
                return False
            return True

        wait_until(serving, 60, "the console to serve")
        lines = (tmp_path / "stderr").read_text().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"warning: {DEAD} does not answer"), lines
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(30)
