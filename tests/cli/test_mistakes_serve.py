"""`lakelog serve` and `lakelog pipeline` as a user runs them (real processes): every common
mistake ends with one `error:` line on stderr, a non-zero exit and nothing left on disk;
`--rack a,b,c` spreads zones over `--brokers 3`; a pipeline job with nothing to do starts
no Spark session."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from lakelog.pipeline.session import check_master

pytestmark = pytest.mark.timeout(180)

LAKELOG = str(Path(sys.executable).parent / "lakelog")
HOST = "127.0.0.1"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def free_ports(count: int) -> int:
    """A first port of `count` consecutive free ones."""
    for _ in range(200):
        first = free_port()
        if first + count > 65535:
            continue
        try:
            with contextlib.ExitStack() as stack:
                for port in range(first, first + count):
                    sock = stack.enter_context(socket.socket())
                    sock.bind((HOST, port))
            return first
        except OSError:
            continue
    raise RuntimeError(f"no {count} consecutive free ports")


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKELOG_")}
    return {**env, **extra}


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


@contextlib.contextmanager
def serving(args: list[str], cwd: Path, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`lakelog serve ...` in its own session, stopped with SIGTERM (SIGKILL if stuck)."""
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [LAKELOG, "serve", *args],
            cwd=cwd,
            env=clean_env(),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


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
