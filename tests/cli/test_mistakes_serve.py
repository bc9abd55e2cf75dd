"""`lakelog serve` and `lakelog pipeline` as a user runs them (real processes): every common
mistake ends with one `error:` line on stderr, a non-zero exit and nothing left on disk;
`--rack a,b,c` spreads zones over `--brokers 3`; a pipeline job with nothing to do starts
no Spark session; a second broker as an id already running, or on a coordinator schema newer
than the build, is refused without disturbing the running one's clients."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from serve_support import HOST, LAKELOG, clean_env, free_port, free_ports, serving

from lakelog.pipeline.session import check_master

pytestmark = pytest.mark.timeout(180)


def lakelog(
    args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [LAKELOG, *args],
        cwd=cwd,
        env=env or clean_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@dataclass
class Scene:
    """What a case may set up before the snapshot of the scratch dir."""

    tmp: Path
    busy_port: int
    env: dict[str, str] = field(default_factory=clean_env)

    def free(self) -> str:
        return f"{HOST}:{free_port()}"

    def data(self) -> list[str]:
        return ["--data-dir", str(self.tmp / "data")]


def unwritable_dir(scene: Scene) -> str:
    if os.geteuid() == 0:  # root writes anywhere a permission bit forbids: use /proc
        return "/proc/lakelog-no-such-dir/data"
    ro = scene.tmp / "read-only"
    ro.mkdir()
    ro.chmod(0o500)
    return str(ro / "data")


def toml(text: str) -> Callable[[Scene], list[str]]:
    def setup(scene: Scene) -> list[str]:
        (scene.tmp / "lakelog.toml").write_text(text)
        return ["serve", "--listen", scene.free(), *scene.data()]

    return setup


def env_var(name: str, value: str) -> Callable[[Scene], list[str]]:
    def setup(scene: Scene) -> list[str]:
        scene.env[name] = value
        return ["serve", "--listen", scene.free(), *scene.data()]

    return setup


PG_DOWN = "postgresql://x@127.0.0.1:1/db"

# (case id, arguments built in the scene, a fragment the error line must contain)
MISTAKES: list[tuple[str, Callable[[Scene], list[str]], str]] = [
    (
        "busy-port",
        lambda s: ["serve", "--listen", f"{HOST}:{s.busy_port}", *s.data()],
        "in use",
    ),
    (
        "busy-metrics-port",
        lambda s: [
            "serve",
            "--listen",
            s.free(),
            "--metrics-listen",
            f"{HOST}:{s.busy_port}",
            *s.data(),
        ],
        "--metrics-listen",
    ),
    (
        "unwritable-data-dir",
        lambda s: ["serve", "--listen", s.free(), "--data-dir", unwritable_dir(s)],
        "--data-dir",
    ),
    (
        "bad-storage-scheme",
        lambda s: ["serve", "--listen", s.free(), "--storage-url", "ftp://x/y", *s.data()],
        "storage URL",
    ),
    (
        "bad-coordinator-scheme",
        lambda s: ["serve", "--listen", s.free(), "--coordinator-url", "mysql://x/db", *s.data()],
        "coordinator URL",
    ),
    (
        "postgres-not-running",
        lambda s: ["serve", "--listen", s.free(), "--coordinator-url", PG_DOWN, *s.data()],
        "cannot reach the coordinator",
    ),
    ("listen-not-a-port", lambda s: ["serve", "--listen", "notaport", *s.data()], "HOST:PORT"),
    ("bad-toml-value", toml('num_partitions = "many"\n'), "(from lakelog.toml)"),
    ("misspelt-toml-key", toml("num_partitons = 3\n"), "did you mean 'num_partitions'"),
    ("not-toml", toml("num_partitions = \n"), "lakelog.toml"),
    ("bad-env-value", env_var("LAKELOG_NUM_PARTITIONS", "many"), "LAKELOG_NUM_PARTITIONS"),
    ("bad-env-address", env_var("LAKELOG_METRICS_LISTEN", "nowhere"), "LAKELOG_METRICS_LISTEN"),
    (
        "loud-log-level",
        lambda s: ["serve", "--listen", s.free(), "--log-level", "LOUD", *s.data()],
        "DEBUG",
    ),
    ("zero-brokers", lambda s: ["serve", "--brokers", "0", *s.data()], "--brokers"),
    (
        "rack-list-one-broker",
        lambda s: ["serve", "--listen", s.free(), "--rack", "zone-a,zone-b", *s.data()],
        "--rack",
    ),
    (
        "rack-list-wrong-length",
        lambda s: [
            "serve",
            "--brokers",
            "3",
            "--listen",
            f"{HOST}:{free_ports(3)}",
            "--rack",
            "zone-a,zone-b",
            *s.data(),
        ],
        "--rack",
    ),
    ("gc-typo-dir", lambda s: ["pipeline", "gc", "--data-dir", "./typo", "--dry-run"], "typo"),
    ("merge-typo-dir", lambda s: ["pipeline", "merge", "--data-dir", "./typo"], "typo"),
    ("retention-typo-dir", lambda s: ["pipeline", "retention", "--data-dir", "./typo"], "typo"),
    ("compact-typo-dir", lambda s: ["pipeline", "compact", "--data-dir", "./typo"], "typo"),
    (
        "export-typo-dir",
        lambda s: ["pipeline", "export", "t", "--output", "./out", "--data-dir", "./typo"],
        "typo",
    ),
    (
        "pipeline-bad-master",
        lambda s: ["pipeline", "gc", "--master", "bogus://x", *s.data()],
        "Spark master",
    ),
    (
        "pipeline-postgres-not-running",
        lambda s: ["pipeline", "gc", "--coordinator-url", PG_DOWN, "--storage-url", "memory://"],
        "cannot reach the coordinator",
    ),
    (
        "pipeline-bad-storage-scheme",
        lambda s: [
            "pipeline",
            "retention",
            "--coordinator-url",
            "sqlite:///nowhere/c.sqlite3",
            "--storage-url",
            "ftp://x",
        ],
        "storage URL",
    ),
    (
        "pipeline-bad-env-value",
        lambda s: s.env.update(LAKELOG_GC_ORPHAN_GRACE_MS="soon") or ["pipeline", "gc", *s.data()],
        "LAKELOG_GC_ORPHAN_GRACE_MS",
    ),
]


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        sock.listen()
        yield int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("setup", "expected"), [m[1:] for m in MISTAKES], ids=[m[0] for m in MISTAKES]
)
def test_mistake_is_one_line_and_leaves_nothing(
    tmp_path: Path, busy_port: int, setup: Callable[[Scene], list[str]], expected: str
) -> None:
    scene = Scene(tmp_path, busy_port)
    args = setup(scene)
    before = tree(tmp_path)
    done = lakelog(args, tmp_path, scene.env, timeout=30)
    lines = done.stderr.splitlines()
    assert done.returncode != 0, (args, done.stdout, done.stderr)
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert len(lines[0]) > len("error: ")
    assert "Traceback" not in done.stderr + done.stdout
    assert expected in lines[0], lines[0]
    assert tree(tmp_path) == before, "the command left something behind"


@pytest.mark.parametrize(
    "master",
    ["local", "local[4]", "local[*]", "local[2,3]", "local[*, 2]", "spark://h:7077",
     "spark://a:7077,b:7077", "yarn", "k8s://https://h:6443", "mesos://h:5050", None],
)  # fmt: skip
def test_spark_masters_spark_accepts(master: str | None) -> None:
    check_master(master)


@pytest.mark.parametrize("master", ["bogus://x", "local[0]", "local[x]", "spark:/h", "", "yarn2"])
def test_spark_masters_refused(master: str) -> None:
    with pytest.raises(ValueError, match="Spark master"):
        check_master(master)


def cluster_status(bootstrap: str, cwd: Path, brokers: int, log: Path) -> list[dict[str, object]]:
    deadline = time.monotonic() + 60
    last = ""
    while time.monotonic() < deadline:
        done = lakelog(["cluster", "status", "--json", "-b", bootstrap], cwd, timeout=30)
        last = done.stderr
        if done.returncode == 0:
            found = json.loads(done.stdout)
            if len(found) == brokers:
                return list(found)
        time.sleep(0.5)
    raise AssertionError(f"{brokers} brokers never showed up: {last}\n{log.read_text()[-3000:]}")


def test_rack_list_gives_broker_i_the_ith_zone(tmp_path: Path) -> None:
    port = free_ports(3)
    log = tmp_path / "serve.log"
    args = ["--brokers", "3", "--listen", f"{HOST}:{port}", "--data-dir", str(tmp_path / "d")]
    with serving([*args, "--rack", "zone-a,zone-b,zone-c"], tmp_path, log):
        brokers = cluster_status(f"{HOST}:{port}", tmp_path, 3, log)
    racks = {b["endpoint"]: b["rack"] for b in brokers}
    assert racks == {
        f"{HOST}:{port}": "zone-a",
        f"{HOST}:{port + 1}": "zone-b",
        f"{HOST}:{port + 2}": "zone-c",
    }


def test_pipeline_with_nothing_to_do_starts_no_spark(tmp_path: Path) -> None:
    """On a cluster with an empty topic: gc, merge, compact and export each plan from the
    coordinator (gc lists the local store on the driver), find no work, and say so
    without starting Spark; retention never needs Spark."""
    from kafka.admin import KafkaAdminClient, NewTopic

    port = free_port()
    data = tmp_path / "d"
    log = tmp_path / "serve.log"
    with serving(["--listen", f"{HOST}:{port}", "--data-dir", str(data)], tmp_path, log):
        cluster_status(f"{HOST}:{port}", tmp_path, 1, log)
        admin = KafkaAdminClient(bootstrap_servers=f"{HOST}:{port}")
        try:
            admin.create_topics([NewTopic("quiet", 2, 1)])
        finally:
            admin.close()
    flags = ["--data-dir", str(data), "--json"]
    jobs = {
        "gc": ["gc", *flags],
        "merge": ["merge", "--min-age-ms", "0", *flags],
        "compact": ["compact", *flags],
        "retention": ["retention", *flags],
        "export": ["export", "quiet", "--output", str(tmp_path / "out"), *flags],
    }
    for job, args in jobs.items():
        done = lakelog(["pipeline", *args], tmp_path, timeout=120)
        assert done.returncode == 0, (job, done.stderr)
        summary = json.loads(done.stdout)
        assert summary["job"] == job
        if job != "retention":  # retention is the coordinator's work: never on Spark
            assert summary["nothing_to_do"] is True, (job, summary)
        assert summary["spark_started"] is False, (job, summary)
        assert summary["figures"]["Spark start-up"] == "not started"

    plain = lakelog(["pipeline", "gc", "--data-dir", str(data)], tmp_path, timeout=120)
    assert plain.returncode == 0, plain.stderr
    assert "nothing to do, Spark not started" in plain.stdout


@dataclass
class WatchedProducer:
    """A confluent-kafka producer sending steadily in a thread; every error librdkafka
    reports (a disconnect included) and every failed delivery is kept."""

    bootstrap: str
    topic: str
    errors: list[str] = field(default_factory=list)
    acked: int = 0
    stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        from confluent_kafka import Producer

        def delivered(err: object, _msg: object) -> None:
            if err is None:
                self.acked += 1
            else:
                self.errors.append(f"delivery: {err}")

        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "linger.ms": 5,
                "error_cb": lambda err: self.errors.append(f"client: {err}"),
            }
        )
        while not self.stop.is_set():
            producer.produce(self.topic, b"steady", on_delivery=delivered)
            producer.poll(0.02)
        if producer.flush(30):
            self.errors.append("unflushed records")

    def acked_more(self, than: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while self.acked <= than and time.monotonic() < deadline:
            time.sleep(0.1)
        assert self.acked > than, f"no records acknowledged ({self.errors})"


def _create_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)


def _second_is_refused(first: list[str], second: list[str], tmp_path: Path, expected: str) -> None:
    """With `serve first` up and a producer sending to it, `serve second` exits non-zero
    with one error line, and the producer sees nothing: no disconnect, no failed send,
    also a few heartbeats later (a second registration would fence the first)."""
    port = int(first[first.index("--listen") + 1].rsplit(":", 1)[1])
    bootstrap = f"{HOST}:{port}"
    log = tmp_path / "first.log"
    with serving(first, tmp_path, log) as proc:
        cluster_status(bootstrap, tmp_path, 1, log)
        _create_topic(bootstrap, "steady")
        producer = WatchedProducer(bootstrap, "steady")
        producer.thread.start()
        try:
            producer.acked_more(0)
            done = lakelog(["serve", *second], tmp_path, timeout=90)
            lines = done.stderr.splitlines()
            assert done.returncode != 0, (done.stdout, done.stderr)
            assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
            assert expected in lines[0] and "--broker-id" in lines[0], lines[0]
            acked = producer.acked
            time.sleep(5)  # two heartbeats: a registered twin would have fenced us by now
            producer.acked_more(acked)
        finally:
            producer.stop.set()
            producer.thread.join(60)
        assert proc.poll() is None, log.read_text()[-3000:]
    assert producer.errors == [], producer.errors
    assert "fenced" not in log.read_text(), log.read_text()[-3000:]


def test_second_serve_on_the_same_data_dir_is_refused(tmp_path: Path) -> None:
    data = ["--data-dir", str(tmp_path / "d")]
    first = ["--listen", f"{HOST}:{free_port()}", *data]
    second = ["--listen", f"{HOST}:{free_port()}", *data]
    _second_is_refused(first, second, tmp_path, "broker 0 already runs on")
    # The lock file names the first broker's process.
    assert (tmp_path / "d" / ".lock-broker-0").read_text().strip().isdigit()


def _new_database(admin_url: str) -> str:
    import psycopg

    name = f"lakelog_mistakes_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{admin_url.rpartition('/')[0]}/{name}"


def test_second_serve_with_the_same_id_on_postgres_is_refused(
    tmp_path: Path, postgres_url: str
) -> None:
    """Different data dirs (different hosts, say), one PostgreSQL coordinator and one
    store: only the registration's heartbeat tells the id is taken."""
    shared = [
        "--coordinator-url",
        _new_database(postgres_url),
        "--storage-url",
        (tmp_path / "store").as_uri(),
    ]
    first = ["--listen", f"{HOST}:{free_port()}", "--data-dir", str(tmp_path / "a"), *shared]
    second = ["--listen", f"{HOST}:{free_port()}", "--data-dir", str(tmp_path / "b"), *shared]
    _second_is_refused(first, second, tmp_path, "broker 0 is already running, advertised at")


NEWER = 9999


def _newer_sqlite(data: Path) -> None:
    from lakelog.coordinator.migrate import apply_sqlite
    from lakelog.coordinator.sqlite.coordinator import connect

    conn = connect(data / "coordinator.sqlite3")
    try:
        apply_sqlite(conn)
        conn.execute(
            "INSERT INTO schema_version VALUES (?, '9999_from_the_future.sql', 0)", (NEWER,)
        )
    finally:
        conn.close()


def test_newer_schema_is_refused_on_sqlite(tmp_path: Path) -> None:
    data = tmp_path / "d"
    _newer_sqlite(data)
    done = lakelog(
        ["serve", "--listen", f"{HOST}:{free_port()}", "--data-dir", str(data)], tmp_path
    )
    lines = done.stderr.splitlines()
    assert done.returncode != 0, done.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert f"schema version {NEWER}" in lines[0] and "newer" in lines[0], lines[0]


def test_newer_schema_is_refused_on_postgres(tmp_path: Path, postgres_url: str) -> None:
    import psycopg

    url = _new_database(postgres_url)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
            " applied_at BIGINT NOT NULL)"
        )
        conn.execute("INSERT INTO schema_version VALUES (%s, 'from_the_future', 0)", (NEWER,))
    args = ["--listen", f"{HOST}:{free_port()}", "--data-dir", str(tmp_path / "d")]
    done = lakelog(
        ["serve", *args, "--coordinator-url", url, "--storage-url", (tmp_path / "s").as_uri()],
        tmp_path,
    )
    lines = done.stderr.splitlines()
    assert done.returncode != 0, done.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert f"schema version {NEWER}" in lines[0] and "newer" in lines[0], lines[0]
    with psycopg.connect(url) as conn:  # nothing was migrated or written
        assert conn.execute("SELECT to_regclass('brokers')").fetchone() == (None,)
