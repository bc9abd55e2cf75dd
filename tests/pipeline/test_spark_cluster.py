"""The pipeline and the Spark source on a real Spark standalone cluster: a master and two
workers as separate JVMs, objects on S3 (moto), the coordinator on PostgreSQL, every job run
as users run it (`lakelog pipeline ... --master spark://...`, client deploy mode).

The executors run the system's `python3`, which has no lakelog: every job passing here
shipped Lakelog to them (`lakelog.pipeline.pack_env`), and with shipping off the job ends
in one line. A worker killed with SIGKILL mid-job costs a retry on the other, never a record.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_backends import scale_out
from e2e_fixtures import BrokerFactory
from e2e_harness import BrokerProcess, Rec, create_topic, make_records, now_ms, wait_until
from pipeline_clients import Row, as_produced, consume, produce

from pipeline_jobs import known_files, stored_objects
from tests.support.spark_cluster import SparkCluster, spark_cluster

pytestmark = pytest.mark.timeout(1800)

LAKELOG = str(Path(sys.executable).parent / "lakelog")
JOB_S = 900.0
"""A job's whole run, Spark application and executors' start-up included, on a busy machine."""
WORKER_PYTHON = shutil.which("python3", path="/usr/bin:/bin") or "python3"
"""The executors' interpreter: the system's, without lakelog, so only shipping can help."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    with spark_cluster(tmp_path_factory.mktemp("spark-cluster")) as running:
        yield running


def cluster_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKELOG_")}
    env.pop("PYSPARK_PYTHON", None)
    if "LAKELOG_SPARK_CACHE" in os.environ:  # this run's start-up files, not the user's
        env["LAKELOG_SPARK_CACHE"] = os.environ["LAKELOG_SPARK_CACHE"]
    return {**env, "PYSPARK_PYTHON": WORKER_PYTHON, "SPARK_LOCAL_IP": "127.0.0.1", **extra}


def flags(broker: BrokerProcess) -> list[str]:
    backend = broker.backend
    return ["--storage-url", backend.storage_url, "--coordinator-url", backend.coordinator_url]


def run_pipeline(
    broker: BrokerProcess, cluster: SparkCluster, *args: str, debug: bool = True, **env: str
) -> subprocess.CompletedProcess[str]:
    """`lakelog pipeline ARGS --master <cluster>`; with `debug`, a failure shows the
    executors' tracebacks (Spark's logs go to stderr, the JSON summary to stdout)."""
    command = [LAKELOG, *(["--debug"] if debug else []), "pipeline", *args]
    return subprocess.run(
        [*command, *flags(broker), "--master", cluster.master, "--json"],
        capture_output=True,
        text=True,
        timeout=JOB_S,
        env=cluster_env(**env),
        check=False,
    )


def figures(done: subprocess.CompletedProcess[str], spark: bool = True) -> dict[str, Any]:
    """The job's figures; with `spark`, the job must have run Spark (retention is
    coordinator work only, gc starts Spark only when there is something to delete)."""
    assert done.returncode == 0, "\n".join(
        line for line in done.stderr.splitlines() if not line.startswith("\tat ")
    )[-6000:]
    report = json.loads(done.stdout)
    assert report["spark_started"] or not spark, report
    return dict(report["figures"])


def count(value: str) -> int:
    return int(str(value).replace(",", ""))


@pytest.fixture
def s3_pg_broker(broker_factory: BrokerFactory, tmp_path: Path) -> BrokerProcess:
    data = tmp_path / "cluster-data"
    scale_out(data)  # PostgreSQL + S3 whichever pass runs this
    # The broker's own compaction and retention out of the way: the Spark jobs do both here.
    # Small writes go to WAL objects (the jobs' input here): with the small-write path the
    # broker's mover would move inline files while a job runs, and a compaction planned on
    # batches that moved meanwhile is dropped for the next pass (test_inline_pipeline.py
    # runs the jobs over inline batches).
    return broker_factory(
        {
            "COMPACTION_INTERVAL_MS": 0,
            "RETENTION_CHECK_INTERVAL_MS": 3_600_000,
            "PRODUCE_INLINE": False,
        },
        data_dir=data,
    )


def produce_in_rounds(broker: BrokerProcess, topic: str, rounds: int, per_round: int) -> list[Row]:
    """Several small WAL objects (one or more per round), as produced."""
    rows: list[Row] = []
    for round_no in range(rounds):
        records = make_records(per_round, 2, now_ms(), f"r{round_no}")
        offsets = produce(broker.bootstrap, topic, records)
        rows += as_produced(records, offsets)
    return sorted(rows, key=lambda r: (r.partition, r.offset))


def test_every_job_and_the_source_run_on_the_cluster(
    s3_pg_broker: BrokerProcess, cluster: SparkCluster, tmp_path: Path
) -> None:
    broker = s3_pg_broker
    create_topic(broker.bootstrap, "events", 2)
    produced = produce_in_rounds(broker, "events", 4, 60)
    create_topic(broker.bootstrap, "changelog", 1, {"cleanup.policy": "compact"})
    latest: dict[bytes | None, bytes | None] = {}
    for round_no in range(3):
        keyed = [
            Rec(0, f"key-{k}".encode(), f"v{round_no}-{k}".encode(), (), now_ms())
            for k in range(13)
        ]
        produce(broker.bootstrap, "changelog", keyed)
        latest.update((r.key, r.value) for r in keyed)
    produce(broker.bootstrap, "changelog", [Rec(0, b"end", b"end", (), now_ms())])
    latest[b"end"] = b"end"  # the partition's last batch, which compaction leaves alone
    create_topic(broker.bootstrap, "aged", 2, {"retention.ms": "60000"})
    produce(broker.bootstrap, "aged", make_records(40, 2, now_ms() - 3_600_000, "old"))

    # Compaction first: merge joins a partition's rows into one, and the last row is
    # never compacted.
    compacted = figures(run_pipeline(broker, cluster, "compact", "changelog"))
    assert count(compacted["partitions"]) == 1
    left = consume(broker.bootstrap, "changelog", 1, len(latest))
    assert {r.key: r.value for r in left} == latest and len(left) == len(latest)

    merged = figures(run_pipeline(broker, cluster, "merge", "--min-age-ms", "0"))
    assert count(merged["objects written"]) >= 1
    assert consume(broker.bootstrap, "events", 2, len(produced)) == produced

    kept = figures(run_pipeline(broker, cluster, "retention"), spark=False)
    assert count(kept["batches dropped"]) >= 1

    out = tmp_path / "export"
    exported = figures(run_pipeline(broker, cluster, "export", "events", "--output", str(out)))
    assert count(exported["records exported"]) == len(produced)

    figures(run_pipeline(broker, cluster, "gc"), spark=False)

    assert read_with_the_source(broker, cluster, "events") == [
        (r.partition, r.offset, r.value) for r in produced
    ]


SOURCE_SCRIPT = """
import json, sys
from lakelog.pipeline.session import build_session
from lakelog.spark import register
spark = build_session(sys.argv[1])
register(spark)
rows = (spark.read.format("lakelog")
        .option("lakelog.storage.url", sys.argv[2])
        .option("lakelog.coordinator.url", sys.argv[3])
        .option("subscribe", sys.argv[4]).load()
        .select("partition", "offset", "value").collect())
where = (spark.sparkContext.parallelize([0], 1)
         .map(lambda _: __import__("lakelog").__file__).collect()[0])
spark.stop()
print(json.dumps({"rows": [[r[0], r[1], None if r[2] is None else r[2].hex()] for r in rows],
                  "executor_lakelog": where}))
"""


def read_with_the_source(
    broker: BrokerProcess, cluster: SparkCluster, topic: str
) -> list[tuple[int, int, bytes | None]]:
    """`format("lakelog")` on the cluster, from a fresh Python (a new Spark application)."""
    backend = broker.backend
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(SOURCE_SCRIPT),
            cluster.master,
            backend.storage_url,
            backend.coordinator_url,
            topic,
        ],
        capture_output=True,
        text=True,
        timeout=JOB_S,
        env=cluster_env(),
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    # The executors imported the shipped copy, not this machine's installation.
    assert "/lakelog_env/lakelog/" in report["executor_lakelog"], report["executor_lakelog"]
    rows = [(p, o, None if v is None else bytes.fromhex(v)) for p, o, v in report["rows"]]
    return sorted(rows, key=lambda r: (r[0], r[1]))


def test_executors_without_lakelog_fail_the_job_in_one_line(
    s3_pg_broker: BrokerProcess, cluster: SparkCluster
) -> None:
    broker = s3_pg_broker
    create_topic(broker.bootstrap, "few", 2)
    produce_in_rounds(broker, "few", 2, 5)
    done = run_pipeline(
        broker,
        cluster,
        "merge",
        "--min-age-ms",
        "0",
        debug=False,
        LAKELOG_PIPELINE_SHIP_LAKELOG="false",
    )
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr[-4000:]
    assert lines[0].startswith("error: Spark's executors cannot import lakelog")
    assert "No module named 'lakelog'" in lines[0] and "lakelog pipeline pack" in lines[0]


@pytest.mark.parametrize("job", ["merge", "export"])
def test_a_worker_killed_mid_job_costs_a_retry_not_a_record(
    s3_pg_broker: BrokerProcess, job: str, tmp_path: Path
) -> None:
    """SIGKILL one of two workers (and its executor) while the job's tasks run: Spark
    reruns them on the other worker, and the result is exact."""
    broker = s3_pg_broker
    create_topic(broker.bootstrap, "events", 2)
    produced = produce_in_rounds(broker, "events", 6, 80)
    with spark_cluster(tmp_path / "own-cluster") as cluster:
        args = (
            ["merge", "--min-age-ms", "0"]
            if job == "merge"
            else ["export", "events", "--output", str(tmp_path / "export")]
        )
        running = subprocess.Popen(
            [LAKELOG, "pipeline", *args, *flags(broker), "--master", cluster.master, "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=cluster_env(),
        )
        try:
            # Once an executor runs a task of the job (stage 0 is the check that the
            # workers import lakelog), kill that worker.
            def worker_running_the_job() -> int | None:
                assert running.poll() is None, running.communicate()[1][-4000:]
                for index in (1, 2):
                    for log in cluster.executor_logs(index):
                        text = log.read_text(errors="replace")
                        if re.search(r"Running task \S+ in stage [1-9]", text):
                            return index
                return None

            victim = wait_until(worker_running_the_job, JOB_S, "a task of the job", 0.05)
            cluster.kill_worker(victim)
            stdout, stderr = running.communicate(timeout=JOB_S)
            # What a killed task attempt wrote (a segment object nobody committed) is an
            # orphan: gc, on the surviving worker, leaves none.
            figures(run_pipeline(broker, cluster, "gc", "--orphan-grace-ms", "0"), spark=False)
            assert stored_objects(broker) <= known_files(broker)
        finally:
            if running.poll() is None:
                running.kill()
                running.communicate()
    assert running.returncode == 0, stderr[-4000:]
    report = json.loads(stdout)["figures"]
    if job == "export":
        assert count(report["records exported"]) == len(produced)
        import pyarrow.dataset as ds

        table = ds.dataset(str(tmp_path / "export"), format="parquet").to_table(
            columns=["partition", "offset"]
        )
        keys = sorted(zip(table["partition"].to_pylist(), table["offset"].to_pylist(), strict=True))
        assert keys == [(r.partition, r.offset) for r in produced]  # none lost, none twice
    assert consume(broker.bootstrap, "events", 2, len(produced)) == produced
